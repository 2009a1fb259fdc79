/**
 * The reference model of the protocol Store and its Query: the oracle of the model-based property
 * (`StoreProperty.ts`). It is plain synchronous bookkeeping over one array of rows in insertion order, and every
 * rule it applies is a call of a pure function of `@slowcall/core/Protocol` (claim and sweep verdicts, transitions,
 * the fence, the charge step, budgets, replay eligibility, staleness). What it adds is only what the Store contract
 * states about shape and order: one result per item, items applied one after another, request keys unique per
 * (queue, tenant), listing and selection orders, and which attempt row a transition ends. It also holds the one rule
 * that lives in no core module, the retention purge of the persistent adapters (`purgeTargets`), so that their SQL
 * and Lua versions of it are checked against it too.
 *
 * Store time is always the caller's `now`; the model has no clock.
 *
 * @since 0.2.0
 */

import * as Batch from "@slowcall/core/Batch"
import type { ErrorClass } from "@slowcall/core/ErrorClass"
import { StoreError } from "@slowcall/core/Errors"
import * as Fairness from "@slowcall/core/Fairness"
import { type Attempt, type Charge, isTerminal, type Job, type JobId, type JobState } from "@slowcall/core/Job"
import * as Protocol from "@slowcall/core/Protocol"
import {
  type CountOptions,
  type DeadLetterGroup,
  type DeadLetterOptions,
  type DeadLetters,
  groupJobIdsLimit,
  type ListOptions,
  type ReplayOptions,
  type ReplayResult,
  replayLimit,
  type SpendGroup,
  type StoreStats,
  type WaitingGroup
} from "@slowcall/core/Query"
import type {
  CancelItem,
  CancelResult,
  ChargeItem,
  ChargeResult,
  ClaimItem,
  ClaimNextOptions,
  ClaimResult,
  CycleOptions,
  CycleReply,
  Fenced,
  HeartbeatItem,
  HeartbeatResult,
  ReplayItemResult,
  Reply,
  SettleItem,
  SettleResult,
  SubmitOutcome,
  SweepResult
} from "@slowcall/core/Store"

/**
 * One job as the model keeps it: the record, its attempt rows (token order) and ledger rows (insertion order), and
 * the two marks outside the record (when it last became failed, when a sweep last returned it as stale).
 *
 * @since 0.2.0
 * @category models
 */
export interface ModelRow {
  job: Job
  failedAt: number | null
  republishedAt: number | null
  readonly attempts: Array<Attempt>
  readonly charges: Array<Protocol.ChargeRow>
}

/**
 * One batch as the model keeps it: the record and its items in the order they landed.
 *
 * @since 0.7.0
 * @category models
 */
export interface ModelBatch {
  batch: Batch.Batch
  readonly items: Array<JobId>
}

/**
 * The finished states a purge may delete.
 *
 * @since 0.8.0
 * @category models
 */
export type PurgeState = "succeeded" | "abandoned" | "failed"

/**
 * What a purge asks for (`PgStore.purge`, `RedisStore.purge`): the queue, the cutoff in store time (epoch ms,
 * exclusive), the finished states to delete (default all three), and how many jobs at most (default `purgeLimit`).
 *
 * @since 0.8.0
 * @category models
 */
export interface PurgeOptions {
  readonly queue: string
  readonly createdBefore: number
  readonly states?: ReadonlyArray<PurgeState> | undefined
  readonly limit?: number | undefined
}

/**
 * How many jobs one purge deletes at most when it names no `limit`.
 *
 * @since 0.8.0
 * @category models
 */
export const purgeLimit = 1_000

/**
 * The purge rule: which jobs one purge deletes, in the order it deletes and returns them. `jobs` are every job in
 * insertion order; the targets are the finished jobs (`isTerminal`) of `options.queue` in one of `options.states`
 * (default all three finished states; a queued or running job never, whatever the states say) whose `createdAt` is
 * strictly before `createdBefore`, oldest `createdAt` first across all the states asked for, insertion order
 * breaking ties, at most `limit` (default `purgeLimit`) of them.
 *
 * @since 0.8.0
 * @category models
 */
export const purgeTargets = (jobs: ReadonlyArray<Job>, options: PurgeOptions): ReadonlyArray<Job> => {
  const states: ReadonlyArray<JobState> = options.states ?? ["succeeded", "abandoned", "failed"]
  // A stable sort over jobs in insertion order: equal createdAt keep insertion order.
  return jobs
    .filter(
      (job) =>
        job.queue === options.queue &&
        isTerminal(job.state) &&
        states.includes(job.state) &&
        job.createdAt < options.createdBefore
    )
    .sort((a, b) => a.createdAt - b.createdAt)
    .slice(0, Math.max(0, options.limit ?? purgeLimit))
}

/**
 * The model: the Store's verbs and the Query's reads, synchronous, over `rows`. Each verb answers exactly what the
 * Store contract says the backend answers for the same items at the same `now`.
 *
 * @since 0.2.0
 * @category models
 */
export interface StoreModel {
  /** Every job, in insertion order. */
  readonly rows: ReadonlyArray<ModelRow>
  readonly row: (jobId: JobId) => ModelRow | undefined
  /** Throws `StoreError` (reason `Constraint`) and writes nothing when an item's id exists already. */
  readonly submit: (items: ReadonlyArray<Protocol.SubmitItem>, now: number) => Reply<SubmitOutcome>
  readonly claim: (items: ReadonlyArray<ClaimItem>, now: number) => Reply<ClaimResult>
  readonly claimNext: (
    options: {
      readonly queue: string
      readonly max: number
      readonly owner: string
      readonly leaseMs: number
      readonly types?: ReadonlyArray<Protocol.Runnable> | undefined
      /** `Fairness.pick` order; a `fair` that `Fairness.problem` rejects throws `StoreError` (`Constraint`). */
      readonly fair?: Fairness.FairOptions | undefined
      /**
       * Jobs to pass over, as a store passes over rows a concurrent writer holds (see `SkipOption`); with `fair` they
       * keep their rank in their tenant's order.
       */
      readonly skip?: SkipOption
    },
    now: number
  ) => Reply<Extract<ClaimResult, { readonly _tag: "Claimed" | "Settled" }>>
  /** Every batch, in the order they were opened. */
  readonly batches: ReadonlyArray<ModelBatch>
  /** `BatchStore.open`. */
  readonly openBatch: (spec: Batch.BatchSpec, now: number) => Batch.BatchReply<Batch.OpenResult>
  /** `BatchStore.add`; throws `StoreError` (`Constraint`) and writes nothing when an item's id exists already. */
  readonly addBatch: (
    options: {
      readonly batchId: Batch.BatchId
      readonly offset: number
      readonly items: ReadonlyArray<Protocol.SubmitItem>
    },
    now: number
  ) => Batch.BatchReply<Batch.AddResult>
  /** `BatchStore.get`: the batch, or undefined (also for another tenant's batch). */
  readonly getBatch: (batchId: Batch.BatchId, tenant?: string | undefined) => Batch.Batch | undefined
  /** `BatchStore.cancel`. */
  readonly cancelBatch: (
    options: { readonly batchId: Batch.BatchId; readonly tenant?: string | undefined },
    now: number
  ) => Batch.BatchReply<Batch.CancelBatchResult>
  /** `BatchStore.replay`. */
  readonly replayBatch: (
    options: { readonly batchId: Batch.BatchId; readonly tenant?: string | undefined },
    now: number
  ) => Batch.BatchReply<Batch.ReplayBatchResult>
  /** `BatchStore.jobs`. */
  readonly batchJobs: (options: {
    readonly batchId: Batch.BatchId
    readonly tenant?: string | undefined
    readonly state?: JobState | undefined
    readonly after?: JobId | undefined
    readonly limit?: number | undefined
  }) => ReadonlyArray<Job>
  /**
   * The retention purge of the persistent adapters: deletes the `purgeTargets` jobs as if they had never been (no
   * record, attempt or ledger rows; their request keys free again) and returns their ids in that order. A batch
   * keeps its record and its counts; its purged items are no longer among its jobs.
   */
  readonly purge: (options: PurgeOptions) => ReadonlyArray<JobId>
  /** Attained service per `JSON.stringify([queue, tenant])`, as fair claims left it. */
  readonly fairService: ReadonlyMap<string, Fairness.Service>
  readonly heartbeat: (items: ReadonlyArray<HeartbeatItem>, now: number) => Reply<HeartbeatResult>
  readonly charge: (items: ReadonlyArray<ChargeItem>, now: number) => Reply<ChargeResult>
  readonly settle: (items: ReadonlyArray<SettleItem>, now: number) => Reply<SettleResult>
  /**
   * `Store.cycle`: `settle`, `heartbeat`, `charge` and `claimNext` of this model, one after another at `now`. A
   * charge amount `Protocol.chargeProblem` rejects or a `fair` `Fairness.problem` rejects throws `StoreError`
   * (`Constraint`) before any part writes. The claim part's `skip` passes over jobs as `claimNext`'s does (a
   * store's cycle may pass over rows a concurrent writer holds, as its `claimNext` may).
   */
  readonly cycle: (
    options: Omit<CycleOptions, "now" | "claimNext"> & {
      readonly claimNext?: (ClaimNextOptions & { readonly skip?: SkipOption }) | undefined
    },
    now: number
  ) => CycleReply
  readonly cancel: (items: ReadonlyArray<CancelItem>, now: number) => Reply<CancelResult>
  readonly replay: (
    items: ReadonlyArray<{ readonly jobId: JobId }>,
    filter: Protocol.ReplayFilter | undefined,
    now: number
  ) => Reply<ReplayItemResult>
  readonly sweep: (
    options: {
      readonly queue?: string | undefined
      readonly republishAfterMs?: number | undefined
      readonly limit?: number | undefined
      /** Jobs to pass over, as a store passes over rows a concurrent writer holds (see `SkipOption`). */
      readonly skip?: SkipOption
    },
    now: number
  ) => SweepResult
  /**
   * `Query.replay`, derived the same way: the targets from `list` (or the ids), at most the limit, their estimates,
   * then `replay` (nothing in a dry run, which reads each id instead).
   */
  readonly replayWhere: (options: ReplayOptions, now: number) => ReplayResult
  /** The job, or undefined (also for another tenant's job). */
  readonly get: (jobId: JobId, tenant?: string | undefined) => Job | undefined
  readonly list: (options: ListOptions) => ReadonlyArray<Job>
  /** `Query.count`. */
  readonly count: (options: CountOptions) => number
  readonly attempts: (jobId: JobId) => ReadonlyArray<Attempt>
  readonly charges: (jobId: JobId) => ReadonlyArray<Charge>
  /** `Query.estimates`: `Protocol.fallbackEstimate` of each job's ledger, 0 for no job. */
  readonly estimates: (jobIds: ReadonlyArray<JobId>) => ReadonlyArray<number>
  readonly deadLetters: (options: DeadLetterOptions) => DeadLetters
  /** `oldestQueuedAt` and `waiting` count jobs due at `now`; `spend` is in insertion order of its first job. */
  readonly stats: (
    options: {
      readonly queue?: string | undefined
      readonly tenant?: string | undefined
      readonly failedSince: number
      readonly spendSince?: number | undefined
    },
    now: number
  ) => StoreStats
  /** `Query.countQueued`. */
  readonly countQueued: (options: {
    readonly queue: string
    readonly tenant?: string | undefined
    readonly upTo: number
  }) => number
}

/**
 * The jobs a `claimNext` or `sweep` of the model passes over as if they were not there. A store may skip the rows
 * another writer holds at that moment instead of waiting for them (the Store contract allows it for `claimNext`, and
 * a sweep does the same), so a check of concurrent commands asks the model what the pick would have been without
 * them. Sequential use leaves it out.
 *
 * @since 0.3.0
 * @category models
 */
export type SkipOption = ReadonlySet<JobId> | undefined

interface Filter {
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly state?: JobState | undefined
  readonly type?: string | undefined
  readonly errorClass?: ErrorClass | undefined
}

const matches = (job: Job, filter: Filter): boolean =>
  (filter.queue === undefined || job.queue === filter.queue) &&
  (filter.tenant === undefined || job.tenant === filter.tenant) &&
  (filter.state === undefined || job.state === filter.state) &&
  (filter.type === undefined || job.type === filter.type) &&
  (filter.errorClass === undefined || job.errorClass === filter.errorClass)

const lost = (jobId: JobId, token: number, row: ModelRow | undefined): Fenced => ({
  _tag: "LeaseLost",
  jobId,
  token,
  currentToken: row === undefined ? null : row.job.leaseToken,
  state: row === undefined ? null : row.job.state
})

/**
 * What the job writes need from the model beyond one row: the batch of an item, and the batch write that goes with
 * an item write (`Batch.afterItemWrite`, its callbacks inserted).
 */
interface Batches {
  readonly of: (jobId: JobId) => ModelBatch | undefined
  readonly written: (before: Job, after: Job) => void
}

/** Stores what a transition returns: the record, the attempt row it ends (if still running) or starts. */
const record = (row: ModelRow, now: number, transition: Protocol.Transition, batches: Batches): Job => {
  const end = transition.end
  if (end !== undefined) {
    const index = row.attempts.findIndex((attempt) => attempt.token === end.token && attempt.outcome === "running")
    if (index >= 0) {
      row.attempts[index] = {
        ...row.attempts[index]!,
        endedAt: now,
        outcome: end.outcome,
        errorClass: end.errorClass,
        evidence: end.evidence
      }
    }
  }
  if (transition.start !== undefined) {
    row.attempts.push({
      jobId: row.job.id,
      token: transition.start.token,
      worker: transition.start.worker,
      startedAt: now,
      endedAt: null,
      outcome: "running",
      errorClass: null,
      evidence: null
    })
  }
  if (transition.becameFailed) row.failedAt = now
  const before = row.job
  row.job = transition.job
  batches.written(before, row.job)
  return row.job
}

const claimRow = (row: ModelRow, now: number, item: Omit<ClaimItem, "jobId">, batches: Batches): ClaimResult => {
  const job = row.job
  const estimate = item.estimateCents ?? Protocol.fallbackEstimate(row.charges)
  const batch = batches.of(job.id)?.batch
  const verdict =
    batch === undefined ? Protocol.claimVerdict(job, now, estimate) : Batch.claimVerdict(job, batch, now, estimate)
  switch (verdict._tag) {
    case "Settled":
      return { _tag: "Settled", job }
    case "Busy":
      return { _tag: "Busy", job, until: verdict.until }
    case "NotDue":
      return { _tag: "NotDue", job, until: verdict.until }
    case "Settle":
      return { _tag: "Settled", job: record(row, now, Protocol.claimTransition(job, now, verdict, item), batches) }
    case "Claim":
      return {
        _tag: "Claimed",
        job: record(row, now, Protocol.claimTransition(job, now, verdict, item), batches),
        takeover: verdict.takeover
      }
  }
}

/** The protocol writes on one job each item: claims, heartbeats, charges, settlements and cancels. */
/** `claimNext` with `fair`: `Fairness.pick` over the due runnable jobs (skipped ones keep their rank). */
const claimNextFair = (
  rows: ReadonlyArray<ModelRow>,
  fairService: Map<string, Fairness.Service>,
  options: Parameters<StoreModel["claimNext"]>[0],
  fair: Fairness.FairOptions,
  now: number,
  batches: Batches
): Reply<Extract<ClaimResult, { _tag: "Claimed" | "Settled" }>> => {
  const problem = Fairness.problem(fair)
  if (problem !== undefined) throw new StoreError({ reason: "Constraint", operation: "claimNext", detail: problem })
  const serviceKey = (tenant: string | null) => JSON.stringify([options.queue, tenant])
  const candidates = rows.flatMap((r, seq) =>
    r.job.queue === options.queue &&
    r.job.state === "queued" &&
    Protocol.isClaimable(r.job, now) &&
    Protocol.runnableBy(r.job, options.types)
      ? [{ row: r, tenant: r.job.tenant, priority: r.job.priority, runAfter: r.job.runAfter, seq }]
      : []
  )
  const skip = options.skip
  const { picks, services } = Fairness.pick({
    candidates,
    service: (tenant) => fairService.get(serviceKey(tenant)),
    fair,
    now,
    max: options.max,
    passOver: skip === undefined ? undefined : (candidate) => skip.has(candidate.row.job.id)
  })
  for (const [tenant, service] of services) fairService.set(serviceKey(tenant), service)
  return {
    now,
    results: picks.map(
      (p) => claimRow(p.row, now, options, batches) as Extract<ClaimResult, { _tag: "Claimed" | "Settled" }>
    )
  }
}

const jobWrites = (
  rows: ReadonlyArray<ModelRow>,
  row: (jobId: JobId) => ModelRow | undefined,
  fairService: Map<string, Fairness.Service>,
  batches: Batches
): Pick<StoreModel, "claim" | "claimNext" | "heartbeat" | "charge" | "settle" | "cancel"> => ({
  claim: (items, now) => ({
    now,
    results: items.map((item): ClaimResult => {
      const r = row(item.jobId)
      return r === undefined ? { _tag: "NotFound", jobId: item.jobId } : claimRow(r, now, item, batches)
    })
  }),
  claimNext: (options, now) => {
    if (options.fair !== undefined) return claimNextFair(rows, fairService, options, options.fair, now, batches)
    const due = rows
      .flatMap((r, seq) =>
        r.job.queue === options.queue &&
        options.skip?.has(r.job.id) !== true &&
        Protocol.isClaimable(r.job, now) &&
        Protocol.runnableBy(r.job, options.types)
          ? [{ job: r.job, seq, row: r }]
          : []
      )
      .sort(Protocol.claimNextOrder)
      .slice(0, Math.max(0, options.max))
      .map((c) => c.row)
    const results = due.map(
      (r) => claimRow(r, now, options, batches) as Extract<ClaimResult, { _tag: "Claimed" | "Settled" }>
    )
    return { now, results }
  },
  heartbeat: (items, now) => ({
    now,
    results: items.map((item): HeartbeatResult => {
      const r = row(item.jobId)
      if (r === undefined || !Protocol.holds(r.job, item.token)) return lost(item.jobId, item.token, r)
      const job = record(r, now, Protocol.heartbeatTransition(r.job, now, item), batches)
      return {
        _tag: "Renewed",
        leaseUntil: job.leaseUntil!,
        cancelRequested: job.cancelRequestedAt !== null,
        costCents: job.costCents
      }
    })
  }),
  charge: (items, now) => ({
    now,
    results: items.map((item): ChargeResult => {
      const r = row(item.jobId)
      if (r === undefined) return { _tag: "NotFound", jobId: item.jobId }
      const index = r.charges.findIndex((c) => c.callId === item.callId)
      const existing = index >= 0 ? r.charges[index] : undefined
      const batch = batches.of(item.jobId)?.batch
      if (batch !== undefined && Batch.chargeVerdict(batch, existing, item) === "Refuse") {
        return {
          _tag: "BatchBudgetExceeded",
          jobId: item.jobId,
          batchId: batch.id,
          costCents: r.job.costCents,
          batchCostCents: batch.costCents,
          budgetCents: batch.budgetCents ?? 0
        }
      }
      const step = Protocol.chargeStep(existing, item, now)
      if (step !== undefined) {
        if (index >= 0) r.charges[index] = step.row
        else r.charges.push(step.row)
        const before = r.job
        r.job = Protocol.charged(r.job, step.deltaCents, now)
        batches.written(before, r.job)
      }
      return { _tag: "Charged", costCents: r.job.costCents }
    })
  }),
  settle: (items, now) => ({
    now,
    results: items.map((item): SettleResult => {
      const r = row(item.jobId)
      if (r === undefined || !Protocol.holds(r.job, item.token)) return lost(item.jobId, item.token, r)
      return { _tag: "Settled", job: record(r, now, Protocol.settleTransition(r.job, now, item.outcome), batches) }
    })
  }),
  cancel: (items, now) => ({
    now,
    results: items.map((item): CancelResult => {
      const r = row(item.jobId)
      if (r === undefined || (item.tenant !== undefined && r.job.tenant !== item.tenant)) {
        return { _tag: "NotFound", jobId: item.jobId }
      }
      const verdict = Protocol.cancelVerdict(r.job)
      if (verdict === "AlreadyTerminal") return { _tag: "AlreadyTerminal", job: r.job }
      if (verdict === "Unchanged") return { _tag: "Cancelled", job: r.job }
      return { _tag: "Cancelled", job: record(r, now, Protocol.cancelTransition(r.job, now, verdict), batches) }
    })
  })
})

/**
 * A fresh, empty model.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (): StoreModel => fromRows([], new Map(), [])

/**
 * An independent copy of a model: the same rows by value, in the same order, so that writes to either leave the
 * other as it was. A check that tries several orders of concurrent commands runs each order on its own copy.
 *
 * @since 0.3.0
 * @category constructors
 */
export const clone = (model: StoreModel): StoreModel => fromRows(model.rows, model.fairService, model.batches)

/** A model over copies of `from` (records and attempt and ledger rows are replaced on write, never changed in place). */
const fromRows = (
  from: ReadonlyArray<ModelRow>,
  services: ReadonlyMap<string, Fairness.Service>,
  fromBatches: ReadonlyArray<ModelBatch>
): StoreModel => {
  const fairService = new Map(services)
  const batchList: Array<ModelBatch> = fromBatches.map((b) => ({ batch: b.batch, items: [...b.items] }))
  const batchOf = new Map<JobId, ModelBatch>()
  for (const b of batchList) for (const jobId of b.items) batchOf.set(jobId, b)
  const batchById = (batchId: Batch.BatchId) => batchList.find((b) => b.batch.id === batchId)
  const rows: Array<ModelRow> = from.map((r) => ({ ...r, attempts: [...r.attempts], charges: [...r.charges] }))
  const byId = new Map<JobId, ModelRow>(rows.map((r) => [r.job.id, r]))
  const row = (jobId: JobId) => byId.get(jobId)
  const keyed = (queue: string, tenant: string | null, requestKey: string): ModelRow | undefined =>
    rows.find((r) => r.job.queue === queue && r.job.tenant === tenant && r.job.requestKey === requestKey)

  /** Inserts a queued job unless its request key names a job already (callbacks go through here too). */
  const insert = (item: Protocol.SubmitItem, now: number): SubmitOutcome => {
    const requestKey = item.requestKey ?? null
    const existing = requestKey === null ? undefined : keyed(item.queue, item.tenant ?? null, requestKey)
    if (existing !== undefined && requestKey !== null) {
      return Protocol.submitVerdict(existing.job, item) === "Existing"
        ? { _tag: "Existing", job: existing.job }
        : { _tag: "KeyReused", requestKey, existingJobId: existing.job.id }
    }
    const fresh: ModelRow = {
      job: Protocol.newJob(item, now),
      failedAt: null,
      republishedAt: null,
      attempts: [],
      charges: []
    }
    rows.push(fresh)
    byId.set(item.id, fresh)
    return { _tag: "Created", job: fresh.job }
  }

  const batches: Batches = {
    of: (jobId) => batchOf.get(jobId),
    written: (before, after) => {
      const b = batchOf.get(after.id)
      if (b === undefined) return
      const step = Batch.afterItemWrite(b.batch, before, after)
      b.batch = step.batch
      for (const item of step.callbacks) insert(item, step.at)
    }
  }

  const visibleBatch = (batchId: Batch.BatchId, tenant: string | undefined): ModelBatch | undefined => {
    const b = batchById(batchId)
    return b === undefined || (tenant !== undefined && b.batch.tenant !== tenant) ? undefined : b
  }

  const batchVerbs: Pick<
    StoreModel,
    "batches" | "openBatch" | "addBatch" | "getBatch" | "cancelBatch" | "replayBatch" | "batchJobs"
  > = {
    batches: batchList,
    openBatch: (spec, now) => {
      const requestKey = spec.requestKey ?? null
      const existing =
        requestKey === null
          ? undefined
          : batchList.find((b) => b.batch.requestKey === requestKey && b.batch.tenant === (spec.tenant ?? null))
      if (existing !== undefined && requestKey !== null) {
        return {
          now,
          result:
            Batch.openVerdict(existing.batch, spec) === "Existing"
              ? { _tag: "Existing", batch: existing.batch }
              : { _tag: "KeyReused", requestKey, existingBatchId: existing.batch.id }
        }
      }
      const b: ModelBatch = { batch: Batch.newBatch(spec, now), items: [] }
      batchList.push(b)
      return { now, result: { _tag: "Created", batch: b.batch } }
    },
    addBatch: (options, now) => {
      const b = batchById(options.batchId)
      if (b === undefined) return { now, result: { _tag: "NotFound", batchId: options.batchId } }
      const verdict = Batch.addVerdict(b.batch, options.offset, options.items.length)
      if (verdict._tag !== "Append") return { now, result: { _tag: verdict._tag, batch: b.batch } }
      const items = options.items.slice(verdict.skip).map((item) => Batch.itemOf(b.batch, item))
      const ids = new Set<JobId>()
      for (const item of items) {
        if (byId.has(item.id) || ids.has(item.id)) {
          throw new StoreError({ reason: "Constraint", operation: "batchAdd", detail: `job id ${item.id} exists` })
        }
        ids.add(item.id)
      }
      const jobs = items.map((item) => {
        const fresh: ModelRow = {
          job: Protocol.newJob(item, now),
          failedAt: null,
          republishedAt: null,
          attempts: [],
          charges: []
        }
        rows.push(fresh)
        byId.set(item.id, fresh)
        b.items.push(item.id)
        batchOf.set(item.id, b)
        return fresh.job
      })
      b.batch = Batch.appended(b.batch, jobs.length, now)
      return { now, result: { _tag: "Added", batch: b.batch, jobs } }
    },
    getBatch: (batchId, tenant) => visibleBatch(batchId, tenant)?.batch,
    cancelBatch: (options, now) => {
      const b = visibleBatch(options.batchId, options.tenant)
      if (b === undefined) return { now, result: { _tag: "NotFound", batchId: options.batchId } }
      const verdict = Batch.cancelVerdict(b.batch)
      if (verdict !== "Cancel") return { now, result: { _tag: verdict, batch: b.batch } }
      b.batch = Batch.cancelTransition(b.batch, now)
      const jobs: Array<Job> = []
      for (const jobId of b.items) {
        const r = byId.get(jobId)
        if (r === undefined) continue
        const itemVerdict = Protocol.cancelVerdict(r.job)
        if (itemVerdict === "Abandon" || itemVerdict === "Request") {
          jobs.push(record(r, now, Protocol.cancelTransition(r.job, now, itemVerdict), batches))
        }
      }
      const step = Batch.finish(b.batch, now)
      b.batch = step.batch
      for (const item of step.callbacks) insert(item, step.at)
      return { now, result: { _tag: "Cancelled", batch: b.batch, jobs } }
    },
    replayBatch: (options, now) => {
      const b = visibleBatch(options.batchId, options.tenant)
      if (b === undefined) return { now, result: { _tag: "NotFound", batchId: options.batchId } }
      const jobs: Array<Job> = []
      for (const jobId of b.items) {
        const r = byId.get(jobId)
        if (r !== undefined && Protocol.replayable(r.job))
          jobs.push(record(r, now, Protocol.replayTransition(r.job, now), batches))
      }
      return { now, result: { _tag: "Replayed", batch: b.batch, jobs } }
    },
    batchJobs: (options) => {
      const b = visibleBatch(options.batchId, options.tenant)
      if (b === undefined) return []
      // A purged item is no job of the batch any more: nothing follows it.
      const start = options.after === undefined ? 0 : byId.has(options.after) ? b.items.indexOf(options.after) + 1 : 0
      if (options.after !== undefined && start === 0) return []
      return b.items
        .slice(start)
        .flatMap((jobId) => {
          const r = byId.get(jobId)
          return r === undefined ? [] : [r.job]
        })
        .filter((job) => Batch.listed(job, options.state))
        .slice(0, options.limit ?? Protocol.defaults.listLimit)
    }
  }

  const submit: StoreModel["submit"] = (items, now) => {
    const ids = new Set<JobId>()
    for (const item of items) {
      if (byId.has(item.id) || ids.has(item.id)) {
        throw new StoreError({ reason: "Constraint", operation: "submit", detail: `job id ${item.id} exists` })
      }
      ids.add(item.id)
    }
    const results = items.map((item) => insert(item, now))
    return { now, results }
  }

  const list: StoreModel["list"] = (options) => {
    // Insertion order breaks ties of createdAt: a stable sort over rows kept in insertion order.
    const all = [...rows].sort((a, b) => a.job.createdAt - b.job.createdAt)
    if (options.order !== "oldest") all.reverse()
    // `after`: what follows that job in the whole listing's order, filtered like the rest.
    const start = options.after === undefined ? 0 : all.findIndex((r) => r.job.id === options.after) + 1
    if (options.after !== undefined && start === 0) return []
    const ordered = all
      .slice(start)
      .filter(
        (r) =>
          matches(r.job, options) &&
          (options.requestKey === undefined || r.job.requestKey === options.requestKey) &&
          (options.inputHash === undefined || r.job.inputHash === options.inputHash)
      )
    const limit = options.limit === null ? ordered.length : (options.limit ?? Protocol.defaults.listLimit)
    return ordered.slice(0, limit).map((r) => r.job)
  }

  const estimates: StoreModel["estimates"] = (jobIds) =>
    jobIds.map((jobId) => {
      const r = row(jobId)
      return r === undefined ? 0 : Protocol.fallbackEstimate(r.charges)
    })

  const replay: StoreModel["replay"] = (items, filter, now) => ({
    now,
    results: items.map((item): ReplayItemResult => {
      const r = row(item.jobId)
      if (r === undefined || !Protocol.replayable(r.job, filter)) {
        return { _tag: "Skipped", jobId: item.jobId, state: r?.job.state ?? null }
      }
      return { _tag: "Replayed", job: record(r, now, Protocol.replayTransition(r.job, now), batches) }
    })
  })

  const purge: StoreModel["purge"] = (options) => {
    const ids = purgeTargets(
      rows.map((r) => r.job),
      options
    ).map((job) => job.id)
    const gone = new Set(ids)
    for (let i = rows.length - 1; i >= 0; i--) if (gone.has(rows[i]!.job.id)) rows.splice(i, 1)
    for (const jobId of ids) byId.delete(jobId)
    return ids
  }

  const writes = jobWrites(rows, row, fairService, batches)

  const cycle: StoreModel["cycle"] = (options, now) => {
    const chargeProblem = Protocol.chargeProblem(options.charge ?? [])
    if (chargeProblem !== undefined) {
      throw new StoreError({ reason: "Constraint", operation: "charge", detail: chargeProblem })
    }
    const fair = options.claimNext?.fair
    const fairProblem = fair === undefined ? undefined : Fairness.problem(fair)
    if (fairProblem !== undefined) {
      throw new StoreError({ reason: "Constraint", operation: "claimNext", detail: fairProblem })
    }
    return {
      now,
      settle: writes.settle(options.settle ?? [], now).results,
      heartbeat: writes.heartbeat(options.heartbeat ?? [], now).results,
      charge: writes.charge(options.charge ?? [], now).results,
      claimNext: options.claimNext === undefined ? [] : writes.claimNext(options.claimNext, now).results
    }
  }

  return {
    rows,
    row,
    submit,
    purge,
    ...batchVerbs,
    ...writes,
    cycle,
    fairService,
    replay,
    sweep: (options, now) => sweepRows(batches, rows, options, now),
    replayWhere: (options, now) => {
      const filter: Protocol.ReplayFilter = {
        queue: options.queue,
        tenant: options.tenant,
        errorClass: options.errorClass,
        type: options.type,
        inputHash: options.inputHash
      }
      const limit = Math.max(0, Math.floor(options.limit ?? replayLimit))
      const estimateOf = (jobIds: ReadonlyArray<JobId>): number =>
        estimates(jobIds).reduce((sum, cents) => sum + cents, 0)
      if (options.jobIds !== undefined) {
        const targets = options.jobIds.slice(0, limit)
        const capped = options.jobIds.length > limit
        if (options.dryRun === true) {
          // Each id counts once, when it names a failed job of the filter (another tenant's job is not found).
          const matched = targets.filter((jobId, i) => {
            const r = row(jobId)
            const visible = r !== undefined && (filter.tenant === undefined || r.job.tenant === filter.tenant)
            return visible && targets.indexOf(jobId) === i && Protocol.replayable(r.job, filter)
          })
          const skipped = targets.filter((jobId, i) => !(matched.includes(jobId) && targets.indexOf(jobId) === i))
          return { matched: matched.length, replayed: [], skipped, estimatedCents: estimateOf(matched), capped }
        }
        const results =
          targets.length === 0
            ? []
            : replay(
                targets.map((jobId) => ({ jobId })),
                filter,
                now
              ).results
        const replayed = results.flatMap((r) => (r._tag === "Replayed" ? [r.job.id] : []))
        return {
          matched: replayed.length,
          replayed,
          skipped: results.flatMap((r) => (r._tag === "Skipped" ? [r.jobId] : [])),
          estimatedCents: estimateOf(replayed),
          capped
        }
      }
      const listed = list({ ...filter, state: "failed", order: "oldest", limit: null }).map((job) => job.id)
      const targets = listed.slice(0, limit)
      const estimatedCents = estimateOf(targets)
      const results =
        options.dryRun === true || targets.length === 0
          ? []
          : replay(
              targets.map((jobId) => ({ jobId })),
              filter,
              now
            ).results
      return {
        matched: targets.length,
        replayed: results.flatMap((r) => (r._tag === "Replayed" ? [r.job.id] : [])),
        skipped: results.flatMap((r) => (r._tag === "Skipped" ? [r.jobId] : [])),
        estimatedCents,
        capped: listed.length > limit
      }
    },
    get: (jobId, tenant) => {
      const r = row(jobId)
      return r === undefined || (tenant !== undefined && r.job.tenant !== tenant) ? undefined : r.job
    },
    list,
    attempts: (jobId) => [...(row(jobId)?.attempts ?? [])].sort((a, b) => a.token - b.token),
    charges: (jobId) => (row(jobId)?.charges ?? []).map((c): Charge => ({ jobId, ...c })),
    estimates,
    deadLetters: (options) => deadLettersOf(rows, options),
    stats: (options, now) => statsOf(rows, options, now),
    count: (options) => Math.min(Math.max(0, Math.floor(options.upTo)), list({ ...options, limit: null }).length),
    countQueued: (options) =>
      Math.min(
        Math.max(0, Math.floor(options.upTo)),
        rows.filter(
          (r) =>
            r.job.state === "queued" &&
            r.job.queue === options.queue &&
            (options.tenant === undefined || r.job.tenant === options.tenant)
        ).length
      )
  }
}

/** One sweep pass: expired leases, then overdue queued jobs (insertion order), then stale jobs, one limit for all. */
const sweepRows = (
  batches: Batches,
  rows: ReadonlyArray<ModelRow>,
  options: {
    readonly queue?: string | undefined
    readonly republishAfterMs?: number | undefined
    readonly limit?: number | undefined
    readonly skip?: SkipOption
  },
  now: number
): SweepResult => {
  let left = options.limit ?? Protocol.defaults.sweepLimit
  const inQueue = rows.filter(
    (r) => (options.queue === undefined || r.job.queue === options.queue) && options.skip?.has(r.job.id) !== true
  )
  const requeued: Array<Job> = []
  const expiredFailed: Array<JobId> = []
  const abandoned: Array<JobId> = []
  for (const phase of ["Expired", "Overdue"] as const) {
    for (const r of inQueue) {
      if (left <= 0) break
      const verdict = Protocol.sweepVerdict(r.job, now)
      if (verdict?._tag !== phase) continue
      left -= 1
      const job = record(r, now, Protocol.sweepTransition(r.job, now, verdict), batches)
      if (job.state === "queued") requeued.push(job)
      else if (job.state === "failed") expiredFailed.push(job.id)
      else abandoned.push(job.id)
    }
  }
  const republishAfterMs = options.republishAfterMs ?? Protocol.defaults.republishAfterMs
  const stale = inQueue
    .filter(
      (r) =>
        !requeued.some((job) => job.id === r.job.id) && Protocol.isStale(r.job, r.republishedAt, now, republishAfterMs)
    )
    .sort((a, b) => Protocol.lastTouched(a.job, a.republishedAt) - Protocol.lastTouched(b.job, b.republishedAt))
    .slice(0, Math.max(0, left))
  for (const r of stale) r.republishedAt = now
  return { now, requeued, expiredFailed, abandoned, stale: stale.map((r) => r.job) }
}

const deadLettersOf = (rows: ReadonlyArray<ModelRow>, options: DeadLetterOptions): DeadLetters => {
  const failed = rows.filter((r) => matches(r.job, { ...options, state: "failed" }))
  // When each became failed; a record without the mark (stored before it was kept) by its last write.
  const failedAt = (r: ModelRow): number => r.failedAt ?? r.job.updatedAt
  const groups: Array<{
    errorClass: ErrorClass | null
    inputHash: string
    count: number
    costCents: number
    lastFailedAt: number
    members: Array<ModelRow>
  }> = []
  for (const r of failed) {
    const job = r.job
    const group = groups.find((g) => g.errorClass === job.errorClass && g.inputHash === job.inputHash)
    if (group === undefined)
      groups.push({
        errorClass: job.errorClass,
        inputHash: job.inputHash,
        count: 1,
        costCents: job.costCents,
        lastFailedAt: failedAt(r),
        members: [r]
      })
    else {
      group.count += 1
      group.costCents += job.costCents
      group.lastFailedAt = Math.max(group.lastFailedAt, failedAt(r))
      group.members.push(r)
    }
  }
  const ordered: Array<DeadLetterGroup> = groups
    .map(({ members, ...group }) => ({
      ...group,
      // Most recently failed first; the later inserted first on equal times (members are in insertion order).
      jobIds: [...members]
        .reverse()
        .sort((a, b) => failedAt(b) - failedAt(a))
        .slice(0, groupJobIdsLimit)
        .map((r) => r.job.id)
    }))
    .sort(
      (a, b) =>
        b.count - a.count ||
        b.costCents - a.costCents ||
        (a.inputHash < b.inputHash ? -1 : a.inputHash > b.inputHash ? 1 : 0)
    )
  // Most recently updated first; insertion order (newest first) breaks ties.
  const jobs = [...failed]
    .reverse()
    .sort((a, b) => b.job.updatedAt - a.job.updatedAt)
    .slice(0, options.limit ?? Protocol.defaults.listLimit)
    .map((r) => r.job)
  return { jobs, groups: ordered }
}

const statsOf = (
  rows: ReadonlyArray<ModelRow>,
  options: {
    readonly queue?: string | undefined
    readonly tenant?: string | undefined
    readonly failedSince: number
    readonly spendSince?: number | undefined
  },
  now: number
): StoreStats => {
  const byState: Record<JobState, number> = { queued: 0, running: 0, succeeded: 0, failed: 0, abandoned: 0 }
  const oldestQueuedAt: Record<string, number> = {}
  const costCentsByErrorClass: Record<string, number> = {}
  const spend: Array<{ -readonly [K in keyof SpendGroup]: SpendGroup[K] }> = []
  const waiting: Array<{ -readonly [K in keyof WaitingGroup]: WaitingGroup[K] }> = []
  let failedInWindow = 0
  for (const r of rows) {
    const job = r.job
    if (!matches(job, options)) continue
    byState[job.state] += 1
    if (job.state === "queued" && job.runAfter <= now) {
      const key = String(job.priority)
      oldestQueuedAt[key] = Math.min(oldestQueuedAt[key] ?? job.runAfter, job.runAfter)
      const group = waiting.find((g) => g.type === job.type && g.version === job.version)
      if (group === undefined)
        waiting.push({ type: job.type, version: job.version, count: 1, oldestDueAt: job.runAfter })
      else {
        group.count += 1
        group.oldestDueAt = Math.min(group.oldestDueAt, job.runAfter)
      }
    }
    for (const attempt of r.attempts) {
      if (attempt.errorClass === null) continue
      const spent = r.charges.filter((c) => c.token === attempt.token).reduce((sum, c) => sum + c.amountCents, 0)
      costCentsByErrorClass[attempt.errorClass] = (costCentsByErrorClass[attempt.errorClass] ?? 0) + spent
    }
    if (job.state === "failed" && r.failedAt !== null && r.failedAt >= options.failedSince) failedInWindow += 1
    const inWindow = r.charges.filter((c) => options.spendSince === undefined || c.createdAt >= options.spendSince)
    if (inWindow.length > 0) {
      const spent = inWindow.reduce((sum, c) => sum + c.amountCents, 0)
      const group = spend.find(
        (g) => g.queue === job.queue && g.tenant === job.tenant && g.type === job.type && g.state === job.state
      )
      if (group === undefined) {
        spend.push({
          queue: job.queue,
          tenant: job.tenant,
          type: job.type,
          state: job.state,
          costCents: spent,
          jobs: 1
        })
      } else {
        group.costCents += spent
        group.jobs += 1
      }
    }
  }
  return { byState, oldestQueuedAt, costCentsByErrorClass, failedInWindow, spend, waiting }
}
