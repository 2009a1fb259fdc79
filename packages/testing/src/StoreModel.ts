/**
 * The reference model of the protocol Store and its Query: the oracle of the model-based property
 * (`StoreProperty.ts`). It is plain synchronous bookkeeping over one array of rows in insertion order, and every
 * rule it applies is a call of a pure function of `@slowcall/core/Protocol` (claim and sweep verdicts, transitions,
 * the fence, the charge step, budgets, replay eligibility, staleness). What it adds is only what the Store contract
 * states about shape and order: one result per item, items applied one after another, request keys unique per
 * (queue, tenant), listing and selection orders, and which attempt row a transition ends.
 *
 * Store time is always the caller's `now`; the model has no clock.
 *
 * @since 0.2.0
 */

import type { ErrorClass } from "@slowcall/core/ErrorClass"
import { StoreError } from "@slowcall/core/Errors"
import type { Attempt, Charge, Job, JobId, JobState } from "@slowcall/core/Job"
import * as Protocol from "@slowcall/core/Protocol"
import type {
  DeadLetterGroup,
  DeadLetterOptions,
  DeadLetters,
  ListOptions,
  ReplayOptions,
  ReplayResult,
  SpendGroup,
  StoreStats,
  WaitingGroup
} from "@slowcall/core/Query"
import type {
  CancelItem,
  CancelResult,
  ChargeItem,
  ChargeResult,
  ClaimItem,
  ClaimResult,
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
    },
    now: number
  ) => Reply<Extract<ClaimResult, { readonly _tag: "Claimed" | "Settled" }>>
  readonly heartbeat: (items: ReadonlyArray<HeartbeatItem>, now: number) => Reply<HeartbeatResult>
  readonly charge: (items: ReadonlyArray<ChargeItem>, now: number) => Reply<ChargeResult>
  readonly settle: (items: ReadonlyArray<SettleItem>, now: number) => Reply<SettleResult>
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
    },
    now: number
  ) => SweepResult
  /** `Query.replay`, derived the same way: the targets from `list` (or the ids), then `replay`. */
  readonly replayWhere: (options: ReplayOptions, now: number) => ReplayResult
  /** The job, or undefined (also for another tenant's job). */
  readonly get: (jobId: JobId, tenant?: string | undefined) => Job | undefined
  readonly list: (options: ListOptions) => ReadonlyArray<Job>
  readonly attempts: (jobId: JobId) => ReadonlyArray<Attempt>
  readonly charges: (jobId: JobId) => ReadonlyArray<Charge>
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

/** Stores what a transition returns: the record, the attempt row it ends (if still running) or starts. */
const record = (row: ModelRow, now: number, transition: Protocol.Transition): Job => {
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
  row.job = transition.job
  return row.job
}

const claimRow = (row: ModelRow, now: number, item: Omit<ClaimItem, "jobId">): ClaimResult => {
  const job = row.job
  const estimate = item.estimateCents ?? Protocol.fallbackEstimate(row.charges)
  const verdict = Protocol.claimVerdict(job, now, estimate)
  switch (verdict._tag) {
    case "Settled":
      return { _tag: "Settled", job }
    case "Busy":
      return { _tag: "Busy", job, until: verdict.until }
    case "NotDue":
      return { _tag: "NotDue", job, until: verdict.until }
    case "Settle":
      return { _tag: "Settled", job: record(row, now, Protocol.claimTransition(job, now, verdict, item)) }
    case "Claim":
      return {
        _tag: "Claimed",
        job: record(row, now, Protocol.claimTransition(job, now, verdict, item)),
        takeover: verdict.takeover
      }
  }
}

/** The protocol writes on one job each item: claims, heartbeats, charges, settlements and cancels. */
const jobWrites = (
  rows: ReadonlyArray<ModelRow>,
  row: (jobId: JobId) => ModelRow | undefined
): Pick<StoreModel, "claim" | "claimNext" | "heartbeat" | "charge" | "settle" | "cancel"> => ({
  claim: (items, now) => ({
    now,
    results: items.map((item): ClaimResult => {
      const r = row(item.jobId)
      return r === undefined ? { _tag: "NotFound", jobId: item.jobId } : claimRow(r, now, item)
    })
  }),
  claimNext: (options, now) => {
    const due = rows
      .filter(
        (r) =>
          r.job.queue === options.queue &&
          r.job.state === "queued" &&
          Protocol.isClaimable(r.job, now) &&
          Protocol.runnableBy(r.job, options.types)
      )
      .sort((a, b) => b.job.priority - a.job.priority || a.job.runAfter - b.job.runAfter)
      .slice(0, Math.max(0, options.max))
    const results = due.map((r) => claimRow(r, now, options) as Extract<ClaimResult, { _tag: "Claimed" | "Settled" }>)
    return { now, results }
  },
  heartbeat: (items, now) => ({
    now,
    results: items.map((item): HeartbeatResult => {
      const r = row(item.jobId)
      if (r === undefined || !Protocol.holds(r.job, item.token)) return lost(item.jobId, item.token, r)
      const job = record(r, now, Protocol.heartbeatTransition(r.job, now, item))
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
      const step = Protocol.chargeStep(index >= 0 ? r.charges[index] : undefined, item, now)
      if (step !== undefined) {
        if (index >= 0) r.charges[index] = step.row
        else r.charges.push(step.row)
        r.job = Protocol.charged(r.job, step.deltaCents, now)
      }
      return { _tag: "Charged", costCents: r.job.costCents }
    })
  }),
  settle: (items, now) => ({
    now,
    results: items.map((item): SettleResult => {
      const r = row(item.jobId)
      if (r === undefined || !Protocol.holds(r.job, item.token)) return lost(item.jobId, item.token, r)
      return { _tag: "Settled", job: record(r, now, Protocol.settleTransition(r.job, now, item.outcome)) }
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
      return { _tag: "Cancelled", job: record(r, now, Protocol.cancelTransition(r.job, now, verdict)) }
    })
  })
})

/**
 * A fresh, empty model.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (): StoreModel => {
  const rows: Array<ModelRow> = []
  const byId = new Map<JobId, ModelRow>()
  const row = (jobId: JobId) => byId.get(jobId)
  const keyed = (queue: string, tenant: string | null, requestKey: string): ModelRow | undefined =>
    rows.find((r) => r.job.queue === queue && r.job.tenant === tenant && r.job.requestKey === requestKey)

  const submit: StoreModel["submit"] = (items, now) => {
    const ids = new Set<JobId>()
    for (const item of items) {
      if (byId.has(item.id) || ids.has(item.id)) {
        throw new StoreError({ reason: "Constraint", operation: "submit", detail: `job id ${item.id} exists` })
      }
      ids.add(item.id)
    }
    const results = items.map((item): SubmitOutcome => {
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
    })
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
        (r) => matches(r.job, options) && (options.requestKey === undefined || r.job.requestKey === options.requestKey)
      )
    const limit = options.limit === null ? ordered.length : (options.limit ?? Protocol.defaults.listLimit)
    return ordered.slice(0, limit).map((r) => r.job)
  }

  const replay: StoreModel["replay"] = (items, filter, now) => ({
    now,
    results: items.map((item): ReplayItemResult => {
      const r = row(item.jobId)
      if (r === undefined || !Protocol.replayable(r.job, filter)) {
        return { _tag: "Skipped", jobId: item.jobId, state: r?.job.state ?? null }
      }
      return { _tag: "Replayed", job: record(r, now, Protocol.replayTransition(r.job, now)) }
    })
  })

  return {
    rows,
    row,
    submit,
    ...jobWrites(rows, row),
    replay,
    sweep: (options, now) => sweepRows(rows, options, now),
    replayWhere: (options, now) => {
      const filter: Protocol.ReplayFilter = {
        queue: options.queue,
        tenant: options.tenant,
        errorClass: options.errorClass,
        type: options.type
      }
      const targets =
        options.jobIds !== undefined
          ? options.jobIds.slice(0, options.limit ?? options.jobIds.length)
          : list({ ...filter, state: "failed", order: "oldest", limit: options.limit ?? null }).map((job) => job.id)
      const results =
        targets.length === 0
          ? []
          : replay(
              targets.map((jobId) => ({ jobId })),
              filter,
              now
            ).results
      return {
        replayed: results.flatMap((r) => (r._tag === "Replayed" ? [r.job.id] : [])),
        skipped: results.flatMap((r) => (r._tag === "Skipped" ? [r.jobId] : [])),
        jobs: results.flatMap((r) => (r._tag === "Replayed" ? [r.job] : []))
      }
    },
    get: (jobId, tenant) => {
      const r = row(jobId)
      return r === undefined || (tenant !== undefined && r.job.tenant !== tenant) ? undefined : r.job
    },
    list,
    attempts: (jobId) => [...(row(jobId)?.attempts ?? [])].sort((a, b) => a.token - b.token),
    charges: (jobId) => (row(jobId)?.charges ?? []).map((c): Charge => ({ jobId, ...c })),
    deadLetters: (options) => deadLettersOf(rows, options),
    stats: (options, now) => statsOf(rows, options, now),
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
  rows: ReadonlyArray<ModelRow>,
  options: {
    readonly queue?: string | undefined
    readonly republishAfterMs?: number | undefined
    readonly limit?: number | undefined
  },
  now: number
): SweepResult => {
  let left = options.limit ?? Protocol.defaults.sweepLimit
  const inQueue = rows.filter((r) => options.queue === undefined || r.job.queue === options.queue)
  const requeued: Array<Job> = []
  const expiredFailed: Array<JobId> = []
  const abandoned: Array<JobId> = []
  for (const phase of ["Expired", "Overdue"] as const) {
    for (const r of inQueue) {
      if (left <= 0) break
      const verdict = Protocol.sweepVerdict(r.job, now)
      if (verdict?._tag !== phase) continue
      left -= 1
      const job = record(r, now, Protocol.sweepTransition(r.job, now, verdict))
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
  const groups: Array<{ errorClass: ErrorClass | null; inputHash: string; count: number; costCents: number }> = []
  for (const { job } of failed) {
    const group = groups.find((g) => g.errorClass === job.errorClass && g.inputHash === job.inputHash)
    if (group === undefined)
      groups.push({ errorClass: job.errorClass, inputHash: job.inputHash, count: 1, costCents: job.costCents })
    else {
      group.count += 1
      group.costCents += job.costCents
    }
  }
  const ordered: Array<DeadLetterGroup> = [...groups].sort(
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
    if (job.errorClass !== null) {
      costCentsByErrorClass[job.errorClass] = (costCentsByErrorClass[job.errorClass] ?? 0) + job.costCents
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
