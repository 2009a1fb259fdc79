/**
 * The in-memory Store and Query: plain Maps, every item one synchronous step, so each write is atomic among fibers.
 * Every rule comes from `Protocol.ts`; this file only stores what the protocol's transitions return and keeps the
 * indexes the queries need.
 *
 * Store time comes from the Clock captured when the store is made (or an explicit `now`), never from the caller's
 * Clock: simulated workers run with skewed clocks while the store's clock stays true.
 *
 * @internal
 */
import { type Clock, Effect } from "effect"
import * as Batch from "../Batch.js"
import type { ErrorClass } from "../ErrorClass.js"
import { JobNotFound, StoreError } from "../Errors.js"
import * as Fairness from "../Fairness.js"
import type { Attempt, Charge, Job, JobId, JobState } from "../Job.js"
import * as Protocol from "../Protocol.js"
import {
  type DeadLetterGroup,
  groupJobIdsLimit,
  type Query,
  type SpendGroup,
  type StoreStats,
  type WaitingGroup
} from "../Query.js"
import type {
  CancelResult,
  ChargeItem,
  ChargeResult,
  ClaimNextOptions,
  ClaimNextResult,
  ClaimResult,
  CycleReply,
  Fenced,
  HeartbeatItem,
  HeartbeatResult,
  MemoryOptions,
  ReplayItemResult,
  Reply,
  SettleItem,
  SettleResult,
  Store,
  SubmitOutcome,
  WriteVerb
} from "../Store.js"

interface Row {
  job: Job
  /** Insertion order, the tie-break for equal `createdAt`. */
  readonly seq: number
  /** Store time at which the job last became failed, for `stats.failedInWindow`. */
  failedAt: number | null
  /** Store time at which a sweep last returned the job in `stale`; not part of the job record. */
  republishedAt: number | null
  readonly attempts: Array<Attempt>
  readonly charges: Map<string, Protocol.ChargeRow>
}

type Mutable<A> = { -readonly [K in keyof A]: A[K] }

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

const lost = (jobId: JobId, token: number, row: Row | undefined): Fenced => ({
  _tag: "LeaseLost",
  jobId,
  token,
  currentToken: row === undefined ? null : row.job.leaseToken,
  state: row === undefined ? null : row.job.state
})

/** A `charge` call the store refuses as a whole (`Protocol.chargeProblem`), before any write. */
const chargeProblem = (items: ReadonlyArray<ChargeItem>): StoreError | undefined => {
  const problem = Protocol.chargeProblem(items)
  return problem === undefined
    ? undefined
    : new StoreError({ reason: "Constraint", operation: "charge", detail: problem })
}

/** A `claimNext` call the store refuses as a whole (a `fair` that `Fairness.problem` rejects), before any write. */
const claimNextProblem = (options: ClaimNextOptions): StoreError | undefined => {
  const problem = options.fair === undefined ? undefined : Fairness.problem(options.fair)
  return problem === undefined
    ? undefined
    : new StoreError({ reason: "Constraint", operation: "claimNext", detail: problem })
}

/** @internal */
export interface Made {
  readonly store: Store["Type"]
  readonly query: Query["Type"]
  readonly batches: Batch.BatchStore["Type"]
  readonly peek: (jobId: JobId) => Job | undefined
  readonly peekBatch: (batchId: Batch.BatchId) => Batch.Batch | undefined
  readonly peekCharges: (jobId: JobId) => ReadonlyArray<Protocol.ChargeRow>
}

/** A batch and its items in the order they landed. */
interface BatchRow {
  batch: Batch.Batch
  readonly items: Array<JobId>
}

/** The store over one clock: `makeWith` reads the clock in scope. */
const build = (clock: Clock.Clock, options: MemoryOptions): Made => {
  const rows = new Map<JobId, Row>()
  const requestKeys = new Map<string, JobId>()
  /** Attained service per (queue, tenant), for fair claims (`Fairness.ts`). */
  const fairService = new Map<string, Fairness.Service>()
  const batches = new Map<Batch.BatchId, BatchRow>()
  /** Batch request keys: `JSON.stringify([tenant, requestKey])`. */
  const batchKeys = new Map<string, Batch.BatchId>()
  /** The batch each batch item belongs to. */
  const batchOf = new Map<JobId, BatchRow>()
  let seq = 0

  const storeNow = (now: number | undefined): number => now ?? clock.unsafeCurrentTimeMillis()

  const interleave = options.interleave
  /** One write: its check and its apply in one synchronous step, after the interleaving window when there is one. */
  const write: <A>(verb: WriteVerb, apply: () => A) => Effect.Effect<A> =
    interleave === undefined
      ? (_verb, apply) => Effect.sync(apply)
      : (verb, apply) =>
          Effect.suspend(() => {
            const window = interleave(verb)
            return window === undefined ? Effect.sync(apply) : Effect.zipRight(window, Effect.sync(apply))
          })

  /** Stores a transition: the new record, the attempt row it ends or starts, the failure time. */
  const apply = (row: Row, now: number, transition: Protocol.Transition): Job => {
    const end = transition.end
    if (end !== undefined) {
      const index = row.attempts.findIndex((attempt) => attempt.token === end.token)
      const attempt = row.attempts[index]
      if (attempt !== undefined && attempt.outcome === "running") {
        row.attempts[index] = {
          ...attempt,
          endedAt: now,
          outcome: end.outcome,
          errorClass: end.errorClass,
          evidence: end.evidence
        }
      }
    }
    const start = transition.start
    if (start !== undefined) {
      row.attempts.push({
        jobId: row.job.id,
        token: start.token,
        worker: start.worker,
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
    itemWritten(before, row.job)
    return transition.job
  }

  /** The batch write that goes with a write to a batch item (`Batch.afterItemWrite`), callbacks inserted. */
  const itemWritten = (before: Job, after: Job): void => {
    const batchRow = batchOf.get(after.id)
    if (batchRow === undefined) return
    const step = Batch.afterItemWrite(batchRow.batch, before, after)
    batchRow.batch = step.batch
    for (const item of step.callbacks) insert(item, step.at)
  }

  /** Inserts a queued job unless its request key names a job already (callbacks go through here too). */
  const insert = (item: Protocol.SubmitItem, now: number): SubmitOutcome => {
    const requestKey = item.requestKey ?? null
    const key = requestKey === null ? null : keyOf(item.queue, item.tenant ?? null, requestKey)
    const existingId = key === null ? undefined : requestKeys.get(key)
    const existing = existingId === undefined ? undefined : rows.get(existingId)
    if (existing !== undefined) {
      return Protocol.submitVerdict(existing.job, item) === "Existing"
        ? { _tag: "Existing", job: existing.job }
        : { _tag: "KeyReused", requestKey: requestKey!, existingJobId: existing.job.id }
    }
    const job = Protocol.newJob(item, now)
    rows.set(job.id, { job, seq: seq++, failedAt: null, republishedAt: null, attempts: [], charges: new Map() })
    if (key !== null) requestKeys.set(key, job.id)
    return { _tag: "Created", job }
  }

  /** A job id that exists already, among `items` or in the store: a caller bug. */
  const duplicateId = (items: ReadonlyArray<Protocol.SubmitItem>): JobId | undefined => {
    const fresh = new Set<JobId>()
    for (const item of items) {
      if (rows.has(item.id) || fresh.has(item.id)) return item.id
      fresh.add(item.id)
    }
    return undefined
  }

  const keyOf = (queue: string, tenant: string | null, requestKey: string): string =>
    JSON.stringify([queue, tenant, requestKey])

  const claimOne = (
    row: Row,
    now: number,
    item: { owner: string; leaseMs: number; estimateCents?: number | undefined }
  ): ClaimResult => {
    const job = row.job
    const estimate = item.estimateCents ?? Protocol.fallbackEstimate(row.charges.values())
    const batch = batchOf.get(job.id)?.batch
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
        return { _tag: "Settled", job: apply(row, now, Protocol.claimTransition(job, now, verdict, item)) }
      case "Claim":
        return {
          _tag: "Claimed",
          job: apply(row, now, Protocol.claimTransition(job, now, verdict, item)),
          takeover: verdict.takeover
        }
    }
  }

  /** Due queued jobs of a queue in delivery order: priority, then run-after, then insertion. */
  const dueInQueue = (queue: string, now: number): Array<Row> =>
    [...rows.values()]
      .filter((row) => row.job.queue === queue && row.job.state === "queued" && row.job.runAfter <= now)
      .sort(Protocol.claimNextOrder)

  /** What a plain `claimNext` picks from: due queued jobs and lapsed leases, in `Protocol.claimNextOrder`. */
  const claimableInQueue = (queue: string, now: number): Array<Row> =>
    [...rows.values()]
      .filter((row) => row.job.queue === queue && Protocol.isClaimable(row.job, now))
      .sort(Protocol.claimNextOrder)

  /** `claimNext` with `fair` at `now`: the picks of `Fairness.pick`, claimed in pick order, and the tenants' new service. */
  const claimNextFairAt = (
    options: ClaimNextOptions,
    fair: Fairness.FairOptions,
    now: number
  ): Array<ClaimNextResult> => {
    const serviceKey = (tenant: string | null) => JSON.stringify([options.queue, tenant])
    const candidates = dueInQueue(options.queue, now)
      .filter((row) => Protocol.runnableBy(row.job, options.types))
      .map((row) => ({
        row,
        tenant: row.job.tenant,
        priority: row.job.priority,
        runAfter: row.job.runAfter,
        seq: row.seq
      }))
    const { picks, services } = Fairness.pick({
      candidates,
      service: (tenant) => fairService.get(serviceKey(tenant)),
      fair,
      now,
      max: options.max
    })
    for (const [tenant, service] of services) fairService.set(serviceKey(tenant), service)
    const results: Array<ClaimNextResult> = []
    for (const candidate of picks) {
      const result = claimOne(candidate.row, now, options)
      if (result._tag === "Claimed" || result._tag === "Settled") results.push(result)
    }
    return results
  }

  /*
   * The bodies of the verbs a `cycle` composes: each applies its items at `now` in one synchronous step. The verbs
   * and `cycle` both call them, so the rules are written once.
   */

  /** `claimNext` at `now`; `claimNextProblem` has passed. */
  const claimNextAt = (options: ClaimNextOptions, now: number): Array<ClaimNextResult> => {
    if (options.fair !== undefined) return claimNextFairAt(options, options.fair, now)
    const results: Array<ClaimNextResult> = []
    for (const row of claimableInQueue(options.queue, now)) {
      if (results.length >= options.max) break
      if (!Protocol.runnableBy(row.job, options.types)) continue
      const result = claimOne(row, now, options)
      if (result._tag === "Claimed" || result._tag === "Settled") results.push(result)
    }
    return results
  }

  const heartbeatAt = (items: ReadonlyArray<HeartbeatItem>, now: number): Array<HeartbeatResult> =>
    items.map((item): HeartbeatResult => {
      const row = rows.get(item.jobId)
      if (row === undefined || !Protocol.holds(row.job, item.token)) return lost(item.jobId, item.token, row)
      const job = apply(row, now, Protocol.heartbeatTransition(row.job, now, item))
      return {
        _tag: "Renewed",
        leaseUntil: job.leaseUntil!,
        cancelRequested: job.cancelRequestedAt !== null,
        costCents: job.costCents
      }
    })

  /** `charge` at `now`; `chargeProblem` has passed. */
  const chargeAt = (items: ReadonlyArray<ChargeItem>, now: number): Array<ChargeResult> =>
    items.map((item): ChargeResult => {
      const row = rows.get(item.jobId)
      if (row === undefined) return { _tag: "NotFound", jobId: item.jobId }
      const existing = row.charges.get(item.callId)
      const batch = batchOf.get(item.jobId)?.batch
      if (batch !== undefined && Batch.chargeVerdict(batch, existing, item) === "Refuse") {
        return {
          _tag: "BatchBudgetExceeded",
          jobId: item.jobId,
          batchId: batch.id,
          costCents: row.job.costCents,
          batchCostCents: batch.costCents,
          budgetCents: batch.budgetCents ?? 0
        }
      }
      const step = Protocol.chargeStep(existing, item, now)
      if (step !== undefined) {
        row.charges.set(item.callId, step.row)
        const before = row.job
        row.job = Protocol.charged(row.job, step.deltaCents, now)
        itemWritten(before, row.job)
      }
      return { _tag: "Charged", costCents: row.job.costCents }
    })

  const settleAt = (items: ReadonlyArray<SettleItem>, now: number): Array<SettleResult> =>
    items.map((item): SettleResult => {
      const row = rows.get(item.jobId)
      if (row === undefined || !Protocol.holds(row.job, item.token)) return lost(item.jobId, item.token, row)
      return { _tag: "Settled", job: apply(row, now, Protocol.settleTransition(row.job, now, item.outcome)) }
    })

  const store: Store["Type"] = {
    now: Effect.sync(() => clock.unsafeCurrentTimeMillis()),

    submit: (options) =>
      Effect.flatten(
        write("submit", (): Effect.Effect<Reply<SubmitOutcome>, StoreError> => {
          const now = storeNow(options.now)
          const duplicate = duplicateId(options.items)
          if (duplicate !== undefined) {
            return Effect.fail(
              new StoreError({
                reason: "Constraint",
                operation: "submit",
                detail: `job id ${duplicate} already exists`
              })
            )
          }
          const results = options.items.map((item) => insert(item, now))
          return Effect.succeed({ now, results })
        })
      ),

    claim: (options) =>
      write("claim", () => {
        const now = storeNow(options.now)
        const results = options.items.map((item): ClaimResult => {
          const row = rows.get(item.jobId)
          return row === undefined ? { _tag: "NotFound", jobId: item.jobId } : claimOne(row, now, item)
        })
        return { now, results }
      }),

    claimNext: (options) => {
      const problem = claimNextProblem(options)
      if (problem !== undefined) return Effect.fail(problem)
      return write("claimNext", () => {
        const now = storeNow(options.now)
        return { now, results: claimNextAt(options, now) }
      })
    },

    heartbeat: (options) =>
      write("heartbeat", () => {
        const now = storeNow(options.now)
        return { now, results: heartbeatAt(options.items, now) }
      }),

    charge: (options) => {
      const problem = chargeProblem(options.items)
      if (problem !== undefined) return Effect.fail(problem)
      return write("charge", () => {
        const now = storeNow(options.now)
        return { now, results: chargeAt(options.items, now) }
      })
    },

    settle: (options) =>
      write("settle", () => {
        const now = storeNow(options.now)
        return { now, results: settleAt(options.items, now) }
      }),

    cycle: (options) => {
      const claim = options.claimNext
      const problem = chargeProblem(options.charge ?? []) ?? (claim === undefined ? undefined : claimNextProblem(claim))
      if (problem !== undefined) return Effect.fail(problem)
      return write("cycle", (): CycleReply => {
        const now = storeNow(options.now)
        const settle = settleAt(options.settle ?? [], now)
        const heartbeat = heartbeatAt(options.heartbeat ?? [], now)
        const charge = chargeAt(options.charge ?? [], now)
        return { now, settle, heartbeat, charge, claimNext: claim === undefined ? [] : claimNextAt(claim, now) }
      })
    },

    cancel: (options) =>
      write("cancel", () => {
        const now = storeNow(options.now)
        const results = options.items.map((item): CancelResult => {
          const row = rows.get(item.jobId)
          if (row === undefined || (item.tenant !== undefined && row.job.tenant !== item.tenant)) {
            return { _tag: "NotFound", jobId: item.jobId }
          }
          const verdict = Protocol.cancelVerdict(row.job)
          switch (verdict) {
            case "AlreadyTerminal":
              return { _tag: "AlreadyTerminal", job: row.job }
            case "Unchanged":
              return { _tag: "Cancelled", job: row.job }
            default:
              return { _tag: "Cancelled", job: apply(row, now, Protocol.cancelTransition(row.job, now, verdict)) }
          }
        })
        return { now, results }
      }),

    replay: (options) =>
      write("replay", () => {
        const now = storeNow(options.now)
        const results = options.items.map((item): ReplayItemResult => {
          const row = rows.get(item.jobId)
          if (row === undefined || !Protocol.replayable(row.job, options.filter)) {
            return { _tag: "Skipped", jobId: item.jobId, state: row?.job.state ?? null }
          }
          return { _tag: "Replayed", job: apply(row, now, Protocol.replayTransition(row.job, now)) }
        })
        return { now, results }
      }),

    sweep: (options) =>
      write("sweep", () => {
        const now = storeNow(options.now)
        const republishAfterMs = options.republishAfterMs ?? Protocol.defaults.republishAfterMs
        // One budget for the whole pass: expired leases first, then overdue queued jobs, then republish marks.
        let budget = options.limit ?? Protocol.defaults.sweepLimit
        const requeued: Array<Job> = []
        const expiredFailed: Array<JobId> = []
        const abandoned: Array<JobId> = []
        const inQueue = [...rows.values()].filter(
          (row) => options.queue === undefined || row.job.queue === options.queue
        )
        for (const phase of ["Expired", "Overdue"] as const) {
          for (const row of inQueue) {
            if (budget <= 0) break
            const verdict = Protocol.sweepVerdict(row.job, now)
            if (verdict === undefined || verdict._tag !== phase) continue
            budget--
            const job = apply(row, now, Protocol.sweepTransition(row.job, now, verdict))
            if (job.state === "queued") requeued.push(job)
            else if (job.state === "failed") expiredFailed.push(job.id)
            else abandoned.push(job.id)
          }
        }
        // A job this pass requeued is published by the caller as requeued, never also as stale.
        const written = new Set<JobId>(requeued.map((job) => job.id))
        const stale = inQueue
          .filter(
            (row) => !written.has(row.job.id) && Protocol.isStale(row.job, row.republishedAt, now, republishAfterMs)
          )
          .sort(
            (a, b) =>
              Protocol.lastTouched(a.job, a.republishedAt) - Protocol.lastTouched(b.job, b.republishedAt) ||
              a.seq - b.seq
          )
          .slice(0, Math.max(0, budget))
        // The republish mark is a write of its own: it leaves `updatedAt` and the job record alone.
        for (const row of stale) row.republishedAt = now
        return { now, requeued, expiredFailed, abandoned, stale: stale.map((row) => row.job) }
      })
  }

  const visible = (row: Row, tenant: string | undefined): boolean => tenant === undefined || row.job.tenant === tenant

  const query: Query["Type"] = {
    get: (options) =>
      Effect.suspend(() => {
        const row = rows.get(options.jobId)
        return row === undefined || !visible(row, options.tenant)
          ? Effect.fail(new JobNotFound({ jobId: options.jobId }))
          : Effect.succeed(row.job)
      }),

    list: (options) =>
      Effect.sync(() => {
        const sign = options.order === "oldest" ? -1 : 1
        const limit = options.limit === null ? Number.POSITIVE_INFINITY : (options.limit ?? Protocol.defaults.listLimit)
        const order = (a: Row, b: Row) => sign * (b.job.createdAt - a.job.createdAt || b.seq - a.seq)
        const after = options.after === undefined ? undefined : rows.get(options.after)
        if (options.after !== undefined && after === undefined) return []
        return [...rows.values()]
          .filter(
            (row) =>
              matches(row.job, options) &&
              (options.requestKey === undefined || row.job.requestKey === options.requestKey) &&
              (options.inputHash === undefined || row.job.inputHash === options.inputHash) &&
              (after === undefined || order(after, row) < 0)
          )
          .sort(order)
          .slice(0, limit)
          .map((row) => row.job)
      }),

    count: (options) =>
      Effect.sync(() => {
        const upTo = Math.max(0, Math.floor(options.upTo))
        let count = 0
        for (const row of rows.values()) {
          if (count >= upTo) break
          if (!matches(row.job, options)) continue
          if (options.requestKey !== undefined && row.job.requestKey !== options.requestKey) continue
          if (options.inputHash !== undefined && row.job.inputHash !== options.inputHash) continue
          count++
        }
        return count
      }),

    attempts: (options) =>
      Effect.sync(() => [...(rows.get(options.jobId)?.attempts ?? [])].sort((a, b) => a.token - b.token)),

    charges: (options) =>
      Effect.sync(() => {
        const row = rows.get(options.jobId)
        if (row === undefined) return []
        return [...row.charges.values()].map((charge): Charge => ({ jobId: row.job.id, ...charge }))
      }),

    estimates: (options) =>
      Effect.sync(() =>
        options.jobIds.map((jobId) => {
          const row = rows.get(jobId)
          return row === undefined ? 0 : Protocol.fallbackEstimate(row.charges.values())
        })
      ),

    deadLetters: (options) =>
      Effect.sync(() => {
        const failed = [...rows.values()].filter((row) => matches(row.job, { ...options, state: "failed" }))
        const failedAt = (row: Row): number => row.failedAt ?? row.job.updatedAt
        const groups = new Map<string, Omit<Mutable<DeadLetterGroup>, "jobIds"> & { jobIds: Array<JobId> }>()
        // Most recently failed first, so each group's ids come in that order and its first sets lastFailedAt.
        const byFailure = [...failed].sort((a, b) => failedAt(b) - failedAt(a) || b.seq - a.seq)
        for (const row of byFailure) {
          const job = row.job
          const key = JSON.stringify([job.errorClass, job.inputHash])
          const group = groups.get(key)
          if (group === undefined) {
            groups.set(key, {
              errorClass: job.errorClass,
              inputHash: job.inputHash,
              count: 1,
              costCents: 0,
              lastFailedAt: failedAt(row),
              jobIds: [job.id]
            })
          } else {
            group.count += 1
            if (group.jobIds.length < groupJobIdsLimit) group.jobIds.push(job.id)
          }
        }
        // Costs are summed in insertion order, as every backend sums them.
        for (const { job } of failed)
          groups.get(JSON.stringify([job.errorClass, job.inputHash]))!.costCents += job.costCents
        const ordered: Array<DeadLetterGroup> = [...groups.values()].sort(
          (a, b) =>
            b.count - a.count ||
            b.costCents - a.costCents ||
            (a.inputHash < b.inputHash ? -1 : a.inputHash > b.inputHash ? 1 : 0)
        )
        const jobs = failed
          .sort((a, b) => b.job.updatedAt - a.job.updatedAt || b.seq - a.seq)
          .slice(0, options.limit ?? Protocol.defaults.listLimit)
          .map((row) => row.job)
        return { jobs, groups: ordered }
      }),

    stats: (options) =>
      Effect.sync((): StoreStats => {
        const now = storeNow(options.now)
        const byState: Record<JobState, number> = { queued: 0, running: 0, succeeded: 0, failed: 0, abandoned: 0 }
        const oldestQueuedAt: Record<string, number> = {}
        const costCentsByErrorClass: Record<string, number> = {}
        const spend = new Map<string, { -readonly [K in keyof SpendGroup]: SpendGroup[K] }>()
        const waiting = new Map<string, { -readonly [K in keyof WaitingGroup]: WaitingGroup[K] }>()
        let failedInWindow = 0
        for (const row of rows.values()) {
          const job = row.job
          if (!matches(job, options)) continue
          byState[job.state] += 1
          if (job.state === "queued" && job.runAfter <= now) {
            const key = String(job.priority)
            const current = oldestQueuedAt[key]
            oldestQueuedAt[key] = current === undefined ? job.runAfter : Math.min(current, job.runAfter)
            const byType = JSON.stringify([job.type, job.version])
            const group = waiting.get(byType) ?? {
              type: job.type,
              version: job.version,
              count: 0,
              oldestDueAt: job.runAfter
            }
            group.count += 1
            group.oldestDueAt = Math.min(group.oldestDueAt, job.runAfter)
            waiting.set(byType, group)
          }
          // Each ended attempt's ledger rows count under the class it ended with, whatever the job did next.
          for (const attempt of row.attempts) {
            if (attempt.errorClass === null) continue
            let cost = costCentsByErrorClass[attempt.errorClass] ?? 0
            for (const charge of row.charges.values()) if (charge.token === attempt.token) cost += charge.amountCents
            costCentsByErrorClass[attempt.errorClass] = cost
          }
          if (job.state === "failed" && row.failedAt !== null && row.failedAt >= options.failedSince) failedInWindow++
          let spent = 0
          let charged = false
          for (const charge of row.charges.values()) {
            if (options.spendSince !== undefined && charge.createdAt < options.spendSince) continue
            spent += charge.amountCents
            charged = true
          }
          if (charged) {
            const key = JSON.stringify([job.queue, job.tenant, job.type, job.state])
            const group = spend.get(key) ?? {
              queue: job.queue,
              tenant: job.tenant,
              type: job.type,
              state: job.state,
              costCents: 0,
              jobs: 0
            }
            group.costCents += spent
            group.jobs += 1
            spend.set(key, group)
          }
        }
        return {
          byState,
          oldestQueuedAt,
          costCentsByErrorClass,
          failedInWindow,
          spend: [...spend.values()],
          waiting: [...waiting.values()]
        }
      }),

    countQueued: (options) =>
      Effect.sync(() => {
        const upTo = Math.max(0, Math.floor(options.upTo))
        let count = 0
        for (const row of rows.values()) {
          if (count >= upTo) break
          const job = row.job
          if (job.state !== "queued" || job.queue !== options.queue) continue
          if (options.tenant !== undefined && job.tenant !== options.tenant) continue
          count++
        }
        return count
      })
  }

  const batchVisible = (batchRow: BatchRow, tenant: string | undefined): boolean =>
    tenant === undefined || batchRow.batch.tenant === tenant

  const batchStore: Batch.BatchStore["Type"] = {
    open: (options) =>
      write("batchOpen", () => {
        const now = storeNow(options.now)
        const spec = options.spec
        const requestKey = spec.requestKey ?? null
        const key = requestKey === null ? null : JSON.stringify([spec.tenant ?? null, requestKey])
        const existingId = key === null ? undefined : batchKeys.get(key)
        const existing = existingId === undefined ? undefined : batches.get(existingId)
        if (existing !== undefined) {
          const result: Batch.OpenResult =
            Batch.openVerdict(existing.batch, spec) === "Existing"
              ? { _tag: "Existing", batch: existing.batch }
              : { _tag: "KeyReused", requestKey: requestKey!, existingBatchId: existing.batch.id }
          return { now, result }
        }
        const batchRow: BatchRow = { batch: Batch.newBatch(spec, now), items: [] }
        batches.set(spec.id, batchRow)
        if (key !== null) batchKeys.set(key, spec.id)
        return { now, result: { _tag: "Created", batch: batchRow.batch } as Batch.OpenResult }
      }),

    add: (options) =>
      Effect.flatten(
        write("batchAdd", (): Effect.Effect<Batch.BatchReply<Batch.AddResult>, StoreError> => {
          const now = storeNow(options.now)
          const batchRow = batches.get(options.batchId)
          if (batchRow === undefined) {
            return Effect.succeed({ now, result: { _tag: "NotFound", batchId: options.batchId } })
          }
          const verdict = Batch.addVerdict(batchRow.batch, options.offset, options.items.length)
          if (verdict._tag !== "Append") {
            return Effect.succeed({ now, result: { _tag: verdict._tag, batch: batchRow.batch } })
          }
          const items = options.items.slice(verdict.skip).map((item) => Batch.itemOf(batchRow.batch, item))
          const duplicate = duplicateId(items)
          if (duplicate !== undefined) {
            return Effect.fail(
              new StoreError({
                reason: "Constraint",
                operation: "batchAdd",
                detail: `job id ${duplicate} already exists`
              })
            )
          }
          const jobs = items.map((item) => {
            const job = Protocol.newJob(item, now)
            rows.set(job.id, { job, seq: seq++, failedAt: null, republishedAt: null, attempts: [], charges: new Map() })
            batchRow.items.push(job.id)
            batchOf.set(job.id, batchRow)
            return job
          })
          batchRow.batch = Batch.appended(batchRow.batch, jobs.length, now)
          return Effect.succeed({ now, result: { _tag: "Added", batch: batchRow.batch, jobs } })
        })
      ),

    get: (options) =>
      Effect.sync(() => {
        const batchRow = batches.get(options.batchId)
        return batchRow === undefined || !batchVisible(batchRow, options.tenant) ? undefined : batchRow.batch
      }),

    cancel: (options) =>
      write("batchCancel", (): Batch.BatchReply<Batch.CancelBatchResult> => {
        const now = storeNow(options.now)
        const batchRow = batches.get(options.batchId)
        if (batchRow === undefined || !batchVisible(batchRow, options.tenant)) {
          return { now, result: { _tag: "NotFound", batchId: options.batchId } }
        }
        const verdict = Batch.cancelVerdict(batchRow.batch)
        if (verdict !== "Cancel") return { now, result: { _tag: verdict, batch: batchRow.batch } }
        batchRow.batch = Batch.cancelTransition(batchRow.batch, now)
        const jobs: Array<Job> = []
        for (const jobId of batchRow.items) {
          const row = rows.get(jobId)!
          const itemVerdict = Protocol.cancelVerdict(row.job)
          if (itemVerdict === "Abandon" || itemVerdict === "Request") {
            jobs.push(apply(row, now, Protocol.cancelTransition(row.job, now, itemVerdict)))
          }
        }
        const step = Batch.finish(batchRow.batch, now)
        batchRow.batch = step.batch
        for (const item of step.callbacks) insert(item, step.at)
        return { now, result: { _tag: "Cancelled", batch: batchRow.batch, jobs } }
      }),

    replay: (options) =>
      write("batchReplay", (): Batch.BatchReply<Batch.ReplayBatchResult> => {
        const now = storeNow(options.now)
        const batchRow = batches.get(options.batchId)
        if (batchRow === undefined || !batchVisible(batchRow, options.tenant)) {
          return { now, result: { _tag: "NotFound", batchId: options.batchId } }
        }
        const jobs: Array<Job> = []
        for (const jobId of batchRow.items) {
          const row = rows.get(jobId)!
          if (Protocol.replayable(row.job)) jobs.push(apply(row, now, Protocol.replayTransition(row.job, now)))
        }
        return { now, result: { _tag: "Replayed", batch: batchRow.batch, jobs } }
      }),

    jobs: (options) =>
      Effect.sync(() => {
        const batchRow = batches.get(options.batchId)
        if (batchRow === undefined || !batchVisible(batchRow, options.tenant)) return []
        const start = options.after === undefined ? 0 : batchRow.items.indexOf(options.after) + 1
        if (options.after !== undefined && start === 0) return []
        const limit = options.limit ?? Protocol.defaults.listLimit
        const out: Array<Job> = []
        for (let i = start; i < batchRow.items.length && out.length < limit; i++) {
          const job = rows.get(batchRow.items[i]!)!.job
          if (Batch.listed(job, options.state)) out.push(job)
        }
        return out
      })
  }

  return {
    store,
    query,
    batches: batchStore,
    peek: (jobId) => rows.get(jobId)?.job,
    peekBatch: (batchId) => batches.get(batchId)?.batch,
    peekCharges: (jobId) => [...(rows.get(jobId)?.charges.values() ?? [])]
  }
}

/** @internal */
export const makeWith = (options: MemoryOptions): Effect.Effect<Made> =>
  Effect.map(Effect.clock, (clock) => build(clock, options))

/** @internal */
export const make: Effect.Effect<Made> = makeWith({})
