/**
 * The Query service: reads and operator views of the job records (get, list, attempts, charges, dead letters with
 * their groups, stats). These are GROUP BY- and index-shaped, so each adapter implements them natively (SQL
 * queries, secondary indexes kept by its scripts); none of them writes. Operator actions that write go through the
 * protocol `Store`'s conditional writes: `replay` here is derived in core from `list`, `estimates` and
 * `Store.replay`.
 *
 * @since 0.2.0
 */
import { Context, Effect } from "effect"
import type { ErrorClass } from "./ErrorClass.js"
import type { JobNotFound, StoreError } from "./Errors.js"
import type { Attempt, Charge, Job, JobId, JobState } from "./Job.js"
import { type ReplayFilter, replayable } from "./Protocol.js"
import type { Store } from "./Store.js"

/**
 * Filters of a listing; newest `createdAt` first unless `order` is `oldest`; at most `limit` (default 50, `null`
 * for every match). `requestKey` keeps the jobs submitted under that idempotency key, `inputHash` those of one input
 * (`Job.inputHash`). `after` pages: only the jobs
 * that come after that job in the listing's order (the last job of the previous page), whether or not it matches
 * the filters; an `after` naming no job gives no jobs.
 *
 * @since 0.1.0
 * @category models
 */
export interface ListOptions {
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly state?: JobState | undefined
  readonly type?: string | undefined
  readonly errorClass?: ErrorClass | undefined
  readonly requestKey?: string | undefined
  readonly inputHash?: string | undefined
  readonly after?: JobId | undefined
  readonly limit?: number | null | undefined
  readonly order?: "newest" | "oldest" | undefined
}

/**
 * Which jobs `Query.count` counts: the filters of a listing (`ListOptions` without its paging and order), and the
 * bound `upTo` past which the answer stops growing.
 *
 * @since 0.4.0
 * @category models
 */
export interface CountOptions {
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly state?: JobState | undefined
  readonly type?: string | undefined
  readonly errorClass?: ErrorClass | undefined
  readonly requestKey?: string | undefined
  readonly inputHash?: string | undefined
  readonly upTo: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface DeadLetterOptions {
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly errorClass?: ErrorClass | undefined
  readonly type?: string | undefined
  readonly limit?: number | undefined
}

/**
 * One group of dead letters: "what did this cost" and "which inputs caused it" in one row. `lastFailedAt` is when the
 * group's most recent job became failed (store time, epoch ms); `jobIds` are the group's jobs, most recently failed
 * first (equal times: the later submitted first), at most `groupJobIdsLimit`.
 *
 * @since 0.1.0
 * @category models
 */
export interface DeadLetterGroup {
  readonly errorClass: ErrorClass | null
  readonly inputHash: string
  readonly count: number
  readonly costCents: number
  readonly lastFailedAt: number
  readonly jobIds: ReadonlyArray<JobId>
}

/**
 * How many job ids a dead-letter group carries: enough to show and open the most recent of a group, bounded whatever
 * the group's size (a replay of a whole group goes by its filter, not by its ids).
 *
 * @since 0.5.0
 * @category constants
 */
export const groupJobIdsLimit = 50

/**
 * @since 0.1.0
 * @category models
 */
export interface DeadLetters {
  readonly jobs: ReadonlyArray<Job>
  readonly groups: ReadonlyArray<DeadLetterGroup>
}

/**
 * Spend of one group of jobs over the stats window: the sum of the ledger rows (reservations and settlements) whose
 * call started (`Charge.createdAt`) at or after `spendSince`, of the jobs in one (queue, tenant, type, state), and
 * how many jobs those rows belong to. `state` is the job's state now, so `succeeded` against `failed` is the spend
 * that bought results against the spend of dead letters.
 *
 * @since 0.3.0
 * @category models
 */
export interface SpendGroup {
  readonly queue: string
  readonly tenant: string | null
  readonly type: string
  readonly state: JobState
  readonly costCents: number
  readonly jobs: number
}

/**
 * Due queued jobs of one (type, version): how many wait, and since when the oldest of them has been due
 * (`runAfter`, store-time epoch ms). A group whose oldest has waited long is one no worker claims: a type or
 * version no running worker has a handler for, or workers that are down.
 *
 * @since 0.3.0
 * @category models
 */
export interface WaitingGroup {
  readonly type: string
  readonly version: number
  readonly count: number
  readonly oldestDueAt: number
}

/**
 * Counts and ages for dashboards and metrics.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreStats {
  readonly byState: Readonly<Record<JobState, number>>
  /** Store-time epoch ms of the oldest due queued job per priority. */
  readonly oldestQueuedAt: Readonly<Record<string, number>>
  /**
   * What failures cost, per error class: the ledger rows (reservations and settlements) of every attempt that ended
   * with that class, summed under it, whatever the job did next. A job that retried after a billed timeout and then
   * succeeded keeps its timeout's spend here; a failed job's spend is split over the classes its attempts ended
   * with. A class appears once an attempt ended with it (at 0 when nothing was charged); attempts still running and
   * those that ended without a class count nowhere.
   */
  readonly costCentsByErrorClass: Readonly<Record<string, number>>
  /**
   * Jobs still failed that became failed at or after the `failedSince` asked for (the dead-letter arrival count); a
   * dead letter replayed since then no longer counts.
   */
  readonly failedInWindow: number
  /**
   * Spend per (queue, tenant, type, state) of the ledger rows created at or after the `spendSince` asked for (every
   * row without one), in no particular order; groups without such rows are left out.
   */
  readonly spend: ReadonlyArray<SpendGroup>
  /** Due queued jobs per (type, version), in no particular order. */
  readonly waiting: ReadonlyArray<WaitingGroup>
}

/**
 * The Query service.
 *
 * @since 0.2.0
 * @category services
 */
export class Query extends Context.Tag("@slowcall/core/Query")<
  Query,
  {
    /** The job, or `JobNotFound` (also for another tenant's job). */
    readonly get: (options: {
      readonly jobId: JobId
      readonly tenant?: string | undefined
    }) => Effect.Effect<Job, JobNotFound | StoreError>
    /** Jobs matching every given filter, in `order` of `createdAt` (insertion order breaks ties), at most `limit`. */
    readonly list: (options: ListOptions) => Effect.Effect<ReadonlyArray<Job>, StoreError>
    /**
     * How many jobs `list` with the same filters and no limit would give, counted up to `upTo`: the answer is
     * `min(count, upTo)`, so a backend may stop counting there. A read like the others: under concurrent writes it
     * may be behind by what is being written.
     */
    readonly count: (options: CountOptions) => Effect.Effect<number, StoreError>
    /** The job's attempt rows in token order. */
    readonly attempts: (options: { readonly jobId: JobId }) => Effect.Effect<ReadonlyArray<Attempt>, StoreError>
    /** The job's charge rows in insertion order. */
    readonly charges: (options: { readonly jobId: JobId }) => Effect.Effect<ReadonlyArray<Charge>, StoreError>
    /**
     * The estimate of one more attempt of each job, in the order of `jobIds`: `Protocol.fallbackEstimate` of its
     * ledger (the largest total charged under one token), which is what a claim reserves against the budget when the
     * handler declares no estimate of its own; 0 for an id that names no job. One read for the whole batch.
     */
    readonly estimates: (options: {
      readonly jobIds: ReadonlyArray<JobId>
    }) => Effect.Effect<ReadonlyArray<number>, StoreError>
    /**
     * Failed jobs matching the filters (most recently updated first, at most `limit`, default 50) and, over all
     * matching failed jobs, groups by (errorClass, inputHash) with count, summed cost, when the most recent became
     * failed and its most recent job ids: largest count first, then largest cost, then input hash.
     */
    readonly deadLetters: (options: DeadLetterOptions) => Effect.Effect<DeadLetters, StoreError>
    /**
     * Counts by state, oldest due queued job per priority and due queued jobs per (type, version) (due at store
     * time, or at `now` when given, for tests), cost by error class, failures since `failedSince`, and spend per
     * (queue, tenant, type, state) of the ledger rows created since `spendSince` (all of them without it).
     */
    readonly stats: (options: {
      readonly queue?: string | undefined
      readonly tenant?: string | undefined
      readonly failedSince: number
      readonly spendSince?: number | undefined
      readonly now?: number | undefined
    }) => Effect.Effect<StoreStats, StoreError>
    /**
     * The number of queued jobs (due or not) of `queue`, of `tenant` when given, counted up to `upTo`: the answer is
     * `min(count, upTo)`, so a backend may stop counting there and the cost stays bounded whatever the backlog. A
     * read like the others: under concurrent submits it may be behind by what is being written.
     */
    readonly countQueued: (options: {
      readonly queue: string
      readonly tenant?: string | undefined
      readonly upTo: number
    }) => Effect.Effect<number, StoreError>
  }
>() {}

/**
 * The most jobs one `replay` touches when the caller names no `limit`: a bulk replay is one call, bounded.
 *
 * @since 0.5.0
 * @category constants
 */
export const replayLimit = 100_000

/** How many jobs a replay lists, estimates and moves per round trip. */
const replayPage = 500

/**
 * Which dead letters to replay: explicit ids (in the order given), or every failed job matching the filter (oldest
 * first); at most `limit` (default `replayLimit`) either way. Filters apply to explicit ids too. `dryRun` changes
 * nothing and answers what the call would do.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayOptions extends ReplayFilter {
  readonly jobIds?: ReadonlyArray<JobId> | undefined
  readonly limit?: number | undefined
  readonly dryRun?: boolean | undefined
  readonly now?: number | undefined
}

/**
 * What a replay found and did.
 *
 * - `matched`: the dead letters the call found matching: by filter, the failed jobs listed (at most `limit`); by ids,
 *   those the write moved (a dry run: the ids that name a failed job matching the filter, each counted once).
 * - `replayed`: the jobs moved back to queued (none in a dry run); `skipped`: by ids, the ids that were not (or would
 *   not be) moved; by filter, listed jobs that left `failed` before their write.
 * - `estimatedCents`: the sum over the matched jobs of `Query.estimates` (one attempt each, the protocol's fallback
 *   estimate): what re-running them once is expected to cost. A job that fails again may spend up to `maxAttempts`
 *   times that.
 * - `capped`: more jobs matched than `limit`; the call stopped there.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayResult {
  readonly matched: number
  readonly replayed: ReadonlyArray<JobId>
  readonly skipped: ReadonlyArray<JobId>
  readonly estimatedCents: number
  readonly capped: boolean
}

interface ReplayTally {
  matched: number
  estimatedCents: number
  readonly replayed: Array<JobId>
  readonly skipped: Array<JobId>
}

/** Adds the estimates of `jobIds` to the tally, in their order. */
const estimateInto = (query: Query["Type"], tally: ReplayTally, jobIds: ReadonlyArray<JobId>) =>
  jobIds.length === 0
    ? Effect.void
    : Effect.map(query.estimates({ jobIds }), (estimates) => {
        for (const cents of estimates) tally.estimatedCents += cents
      })

/** One conditional write of `jobIds`: the replayed ones and the skipped ones go to the tally, in item order. */
const writeInto = Effect.fnUntraced(function* (
  store: Store["Type"],
  tally: ReplayTally,
  jobIds: ReadonlyArray<JobId>,
  filter: ReplayFilter,
  now: number | undefined,
  onReplayed: (jobs: ReadonlyArray<Job>) => Effect.Effect<void>
) {
  const reply = yield* store.replay({ items: jobIds.map((jobId) => ({ jobId })), filter, now })
  const jobs: Array<Job> = []
  for (const result of reply.results) {
    if (result._tag === "Replayed") {
      tally.replayed.push(result.job.id)
      jobs.push(result.job)
    } else {
      tally.skipped.push(result.jobId)
    }
  }
  if (jobs.length > 0) yield* onReplayed(jobs)
  return jobs.map((job) => job.id)
})

/** A dry run by ids: reads each id and counts those a replay would move (a repeated id once). */
const dryRunIds = Effect.fnUntraced(function* (
  query: Query["Type"],
  tally: ReplayTally,
  jobIds: ReadonlyArray<JobId>,
  filter: ReplayFilter,
  seen: Set<JobId>
) {
  const found = yield* Effect.forEach(
    jobIds,
    (jobId) =>
      query.get({ jobId, tenant: filter.tenant }).pipe(Effect.catchTag("JobNotFound", () => Effect.succeed(undefined))),
    { concurrency: 8 }
  )
  const eligible: Array<JobId> = []
  jobIds.forEach((jobId, i) => {
    const job = found[i]
    if (job !== undefined && !seen.has(jobId) && replayable(job, filter)) {
      eligible.push(jobId)
      seen.add(jobId)
    } else {
      tally.skipped.push(jobId)
    }
  })
  tally.matched += eligible.length
  yield* estimateInto(query, tally, eligible)
})

const ignoreReplayed = (_jobs: ReadonlyArray<Job>): Effect.Effect<void> => Effect.void

/**
 * A replay, derived from `Query.list`, `Query.estimates` and `Store.replay`: each target is moved failed -> queued
 * through the Store's conditional write, so a job that left `failed` meanwhile (a succeeded one above all) is skipped.
 * Targets are the explicit ids in the order given, or the matching failed jobs oldest first, read a page at a time;
 * at most `limit` (default `replayLimit`) in all, so one call over every dead letter stays bounded and says when it
 * stopped (`capped`). `onReplayed` sees each page's replayed jobs as that page's write left them (queued), for
 * publishing. A dry run reads and estimates the same targets and writes nothing.
 *
 * @since 0.2.0
 * @category combinators
 */
export const replay: (
  store: Store["Type"],
  query: Query["Type"],
  options: ReplayOptions,
  onReplayed?: (jobs: ReadonlyArray<Job>) => Effect.Effect<void>
) => Effect.Effect<ReplayResult, StoreError> = Effect.fnUntraced(function* (
  store: Store["Type"],
  query: Query["Type"],
  options: ReplayOptions,
  onReplayed: (jobs: ReadonlyArray<Job>) => Effect.Effect<void> = ignoreReplayed
) {
  const filter: ReplayFilter = {
    queue: options.queue,
    tenant: options.tenant,
    errorClass: options.errorClass,
    type: options.type,
    inputHash: options.inputHash
  }
  const limit = Math.max(0, Math.floor(options.limit ?? replayLimit))
  const dryRun = options.dryRun === true
  const tally: ReplayTally = { matched: 0, estimatedCents: 0, replayed: [], skipped: [] }
  const result = (capped: boolean): ReplayResult => ({
    matched: tally.matched,
    replayed: tally.replayed,
    skipped: tally.skipped,
    estimatedCents: tally.estimatedCents,
    capped
  })

  if (options.jobIds !== undefined) {
    const targets = options.jobIds.slice(0, limit)
    const seen = new Set<JobId>()
    for (let from = 0; from < targets.length; from += replayPage) {
      const chunk = targets.slice(from, from + replayPage)
      if (dryRun) {
        yield* dryRunIds(query, tally, chunk, filter, seen)
      } else {
        const moved = yield* writeInto(store, tally, chunk, filter, options.now, onReplayed)
        tally.matched += moved.length
        yield* estimateInto(query, tally, moved)
      }
    }
    return result(options.jobIds.length > limit)
  }

  let after: JobId | undefined
  while (tally.matched < limit) {
    const want = Math.min(replayPage, limit - tally.matched)
    const page = yield* query.list({ ...filter, state: "failed", order: "oldest", after, limit: want })
    const ids = page.map((job) => job.id)
    tally.matched += ids.length
    yield* estimateInto(query, tally, ids)
    if (!dryRun && ids.length > 0) yield* writeInto(store, tally, ids, filter, options.now, onReplayed)
    if (ids.length < want) return result(false)
    after = ids[ids.length - 1]
  }
  // The limit is reached: capped when one more match is left behind.
  const more = yield* query.list({ ...filter, state: "failed", order: "oldest", after, limit: 1 })
  return result(more.length > 0)
})
