/**
 * The Query service: reads and operator views of the job records (get, list, attempts, charges, dead letters with
 * their groups, stats). These are GROUP BY- and index-shaped, so each adapter implements them natively (SQL
 * queries, secondary indexes kept by its scripts); none of them writes. Operator actions that write go through the
 * protocol `Store`'s conditional writes: `replay` here is derived in core from `list` and `Store.replay`.
 *
 * @since 0.2.0
 */
import { Context, Effect } from "effect"
import type { ErrorClass } from "./ErrorClass.js"
import type { JobNotFound, StoreError } from "./Errors.js"
import type { Attempt, Charge, Job, JobId, JobState } from "./Job.js"
import type { ReplayFilter } from "./Protocol.js"
import type { Store } from "./Store.js"

/**
 * Filters of a listing; newest `createdAt` first unless `order` is `oldest`; at most `limit` (default 50, `null`
 * for every match). `requestKey` keeps the jobs submitted under that idempotency key. `after` pages: only the jobs
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
  readonly after?: JobId | undefined
  readonly limit?: number | null | undefined
  readonly order?: "newest" | "oldest" | undefined
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
 * One group of dead letters: "what did this cost" and "which inputs caused it" in one row.
 *
 * @since 0.1.0
 * @category models
 */
export interface DeadLetterGroup {
  readonly errorClass: ErrorClass | null
  readonly inputHash: string
  readonly count: number
  readonly costCents: number
}

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
    /** The job's attempt rows in token order. */
    readonly attempts: (options: { readonly jobId: JobId }) => Effect.Effect<ReadonlyArray<Attempt>, StoreError>
    /** The job's charge rows in insertion order. */
    readonly charges: (options: { readonly jobId: JobId }) => Effect.Effect<ReadonlyArray<Charge>, StoreError>
    /**
     * Failed jobs matching the filters (most recently updated first, at most `limit`, default 50) and, over all
     * matching failed jobs, groups by (errorClass, inputHash) with count and summed cost: largest count first, then
     * largest cost, then input hash.
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
 * Which dead letters to replay: explicit ids, or every failed job matching the filter (oldest first), at most
 * `limit`. Filters apply to explicit ids too.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayOptions extends ReplayFilter {
  readonly jobIds?: ReadonlyArray<JobId> | undefined
  readonly limit?: number | undefined
  readonly now?: number | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ReplayResult {
  readonly replayed: ReadonlyArray<JobId>
  readonly skipped: ReadonlyArray<JobId>
  /** The replayed jobs as the replay left them (queued), for publishing. */
  readonly jobs: ReadonlyArray<Job>
}

/**
 * A filtered replay, derived from `Query.list` and `Store.replay`: each target is moved failed -> queued through
 * the Store's conditional write, so a job that left `failed` meanwhile (a succeeded one above all) is skipped.
 * Targets are the explicit ids in the order given (at most `limit`), or the matching failed jobs oldest first.
 *
 * @since 0.2.0
 * @category combinators
 */
export const replay: (
  store: Store["Type"],
  query: Query["Type"],
  options: ReplayOptions
) => Effect.Effect<ReplayResult, StoreError> = Effect.fnUntraced(function* (
  store: Store["Type"],
  query: Query["Type"],
  options: ReplayOptions
) {
  const filter: ReplayFilter = {
    queue: options.queue,
    tenant: options.tenant,
    errorClass: options.errorClass,
    type: options.type
  }
  const targets: ReadonlyArray<JobId> =
    options.jobIds !== undefined
      ? options.jobIds.slice(0, options.limit ?? options.jobIds.length)
      : (yield* query.list({ ...filter, state: "failed", order: "oldest", limit: options.limit ?? null })).map(
          (job) => job.id
        )
  if (targets.length === 0) return { replayed: [], skipped: [], jobs: [] }
  const reply = yield* store.replay({ items: targets.map((jobId) => ({ jobId })), filter, now: options.now })
  const replayed: Array<JobId> = []
  const skipped: Array<JobId> = []
  const jobs: Array<Job> = []
  for (const result of reply.results) {
    if (result._tag === "Replayed") {
      replayed.push(result.job.id)
      jobs.push(result.job)
    } else {
      skipped.push(result.jobId)
    }
  }
  return { replayed, skipped, jobs }
})
