/**
 * The Store: the durable home of job records, attempts and the charge ledger, and the only place where the lease
 * protocol's conditional writes happen. Adapters implement this narrow contract; richer operations live in core.
 *
 * Contract (checked by `@slowcall/testing`'s StoreConformance on every adapter):
 * - Time is store time: the adapter's own clock (SQL `now()`, Redis `TIME`) or the Effect `Clock` for the memory
 *   store. `now` options exist only so tests can drive time; workers never pass their own clock.
 * - `claim` is one conditional write: queued and due, or running with an expired lease. It bumps `leaseToken` and
 *   `attempts`, sets the lease, and appends an attempt row. At most one live lease per job.
 * - Fenced writes (`heartbeat`, `complete`, `fail`, `retry`, `abandon`, `release`) apply only when
 *   `state = 'running' AND leaseToken = token`, and otherwise fail with `LeaseLost`, changing nothing.
 * - `charge` is keyed by call id, counted once, and accepted from stale tokens: the money was spent.
 * - Every accepted write to the job record moves `updatedAt` strictly forward. The one write outside the record is
 *   the sweep's republish mark (see `sweep`), which never moves `updatedAt`.
 *
 * @since 0.1.0
 */
import { Context, type Effect, Layer } from "effect"
import type {
  AlreadyTerminal,
  IdempotencyKeyReused,
  InvalidInput,
  JobNotFound,
  LeaseLost,
  StoreError
} from "./Errors.js"
import * as internalMemoryStore from "./internal/memoryStore.js"
import type { AbandonReason, Attempt, Charge, ErrorClass, Job, JobId, JobState, Json } from "./Models.js"

/**
 * What a caller asks for when submitting. `input` must be plain JSON (checked by `Canonical.ts`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SubmitOptions {
  readonly id: JobId
  readonly queue: string
  readonly tenant?: string | null | undefined
  readonly type: string
  readonly version: number
  readonly requestKey?: string | null | undefined
  readonly inputHash: string
  readonly input: Json | null
  readonly inputRef?: string | null | undefined
  readonly priority?: number | undefined
  /** Epoch ms (store time); defaults to now. */
  readonly runAfter?: number | undefined
  readonly deadlineAt?: number | null | undefined
  readonly budgetCents?: number | null | undefined
  readonly maxAttempts: number
  readonly traceId?: string | null | undefined
  /** Test-only store time override. */
  readonly now?: number | undefined
}

/**
 * `created` is false when the idempotency key already named a job with the same input: that job is returned.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubmitResult {
  readonly job: Job
  readonly created: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ClaimOptions {
  readonly jobId: JobId
  /** Worker identity recorded as `leaseOwner` and on the attempt row. */
  readonly owner: string
  /** Lease length: the worst case of one attempt (see `Lease.ts`). */
  readonly leaseMs: number
  /**
   * The estimated cost of the next attempt. When `costCents >= budgetCents` or `costCents + estimate >
   * budgetCents` the claim abandons the job with reason `budget` instead. Without an estimate, the largest
   * spend of an earlier attempt serves.
   */
  readonly estimateCents?: number | undefined
  /** Test-only store time override. */
  readonly now?: number | undefined
}

/**
 * The outcome of a claim. Only `Claimed` allows a model call.
 * - `Claimed`: this caller holds the lease under `job.leaseToken`.
 * - `Busy`: another holder's lease is live until `until` (store time).
 * - `NotDue`: queued with `runAfter` in the future.
 * - `Settled`: the job is terminal (possibly made so by this claim: deadline passed, budget cannot cover the next
 *   attempt, attempts exhausted on a takeover). A transport acks the message.
 *
 * @since 0.1.0
 * @category models
 */
export type ClaimResult =
  | { readonly _tag: "Claimed"; readonly job: Job; readonly takeover: boolean }
  | { readonly _tag: "Busy"; readonly job: Job; readonly until: number }
  | { readonly _tag: "NotDue"; readonly job: Job; readonly until: number }
  | { readonly _tag: "Settled"; readonly job: Job }

/**
 * @since 0.1.0
 * @category models
 */
export interface FencedOptions {
  readonly jobId: JobId
  readonly token: number
  readonly now?: number | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface HeartbeatOptions extends FencedOptions {
  readonly leaseMs: number
  /** 0..1; kept when omitted. */
  readonly progress?: number | undefined
}

/**
 * `leaseUntil` is the new lease end in store time; `cancelRequested` tells the worker to stop at once.
 *
 * @since 0.1.0
 * @category models
 */
export interface HeartbeatResult {
  readonly leaseUntil: number
  readonly cancelRequested: boolean
}

/**
 * A reservation (`settled: false`, the estimate, written before the call) or a settlement (`settled: true`, the
 * actual amount, on the same `callId`). A settled charge is final: later writes to the same call id change nothing.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChargeOptions {
  readonly jobId: JobId
  readonly callId: string
  readonly token: number
  readonly amountCents: number
  readonly settled: boolean
  readonly now?: number | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface CompleteOptions extends FencedOptions {
  readonly result: Json | null
}

/**
 * @since 0.1.0
 * @category models
 */
export interface FailOptions extends FencedOptions {
  readonly errorClass: ErrorClass
  /** Redacted, truncated evidence. */
  readonly error: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface RetryOptions extends FailOptions {
  /** Store-time epoch ms when the job becomes due again. */
  readonly runAfter: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface AbandonOptions extends FencedOptions {
  readonly reason: AbandonReason
  readonly errorClass?: ErrorClass | undefined
  readonly error?: string | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ListOptions {
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly state?: JobState | undefined
  readonly type?: string | undefined
  /** Newest first; default 50. */
  readonly limit?: number | undefined
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
 * Which dead letters to replay: explicit ids, or a filter. Each is moved failed -> queued through one conditional
 * write; a job in any other state (a succeeded one above all) is skipped.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayOptions {
  readonly jobIds?: ReadonlyArray<JobId> | undefined
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly errorClass?: ErrorClass | undefined
  readonly type?: string | undefined
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
}

/**
 * @since 0.1.0
 * @category models
 */
export interface SweepOptions {
  readonly queue?: string | undefined
  /**
   * Queued, due jobs neither written nor returned in `stale` for this long are returned in `stale` for
   * republishing (default 30 s).
   */
  readonly republishAfterMs?: number | undefined
  /**
   * The most jobs one pass writes, all kinds together: requeued, expired-failed, abandoned and stale (default 1000).
   */
  readonly limit?: number | undefined
  readonly now?: number | undefined
}

/**
 * What a sweep changed: expired leases requeued (or failed with `lease_expired` when no attempt is left), jobs
 * past their deadline abandoned, and queued jobs that should be republished to a transport.
 *
 * @since 0.1.0
 * @category models
 */
export interface SweepResult {
  readonly requeued: ReadonlyArray<JobId>
  readonly expiredFailed: ReadonlyArray<JobId>
  readonly abandoned: ReadonlyArray<JobId>
  readonly stale: ReadonlyArray<Job>
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
  /** Jobs that became failed at or after the `failedSince` asked for (the dead-letter arrival count). */
  readonly failedInWindow: number
}

/**
 * The Store service: one tag, many adapters.
 *
 * @since 0.1.0
 * @category services
 */
export class Store extends Context.Tag("@slowcall/core/Store")<
  Store,
  {
    /**
     * Insert a queued job (`attempts = attemptsBase = leaseToken = 0`, `costCents = 0`, `progress = 0`,
     * `runAfter = options.runAfter ?? now`, `createdAt = updatedAt = now`). With a `requestKey` already used in the
     * same (queue, tenant): the same `inputHash` returns the existing job with `created: false` and writes nothing;
     * another hash fails with `IdempotencyKeyReused` and writes nothing.
     */
    readonly submit: (options: SubmitOptions) => Effect.Effect<SubmitResult, IdempotencyKeyReused | StoreError>
    /**
     * One conditional write. In order: unknown id -> `JobNotFound`; terminal -> `Settled`; running with
     * `leaseUntil >= now` -> `Busy`; queued with `runAfter > now` -> `NotDue`. Otherwise the job is claimable
     * (queued and due, or running with an expired lease: a takeover, whose previous attempt row ends `expired`),
     * and the claim settles it instead of running it when: a cancel was requested -> abandoned(cancelled);
     * `deadlineAt <= now` -> abandoned(deadline); no attempt left in the run -> failed (`lease_expired` on a
     * takeover, else the job's last error class); `budgetCents` set and `costCents >= budgetCents` or
     * `costCents + estimate > budgetCents` -> abandoned(budget). Each of those returns `Settled`. Else: running,
     * `attempts + 1`, `leaseToken + 1`, `leaseOwner`, `leaseUntil = now + leaseMs`, `cancelRequestedAt` null,
     * a new attempt row (`running`), and `Claimed`.
     */
    readonly claim: (options: ClaimOptions) => Effect.Effect<ClaimResult, JobNotFound | StoreError>
    /**
     * Fenced. Extends the lease to `now + leaseMs` (also when it has lapsed but nobody took over: the token is
     * still current), stores `progress` when given, and reports whether a cancel was requested.
     */
    readonly heartbeat: (options: HeartbeatOptions) => Effect.Effect<HeartbeatResult, LeaseLost | StoreError>
    /**
     * Not fenced (the money was spent whatever the token). Unknown job -> `JobNotFound`. A new call id inserts a
     * row; a reservation for an existing call id changes nothing; a settlement of an unsettled row sets the
     * amount and marks it settled; anything on a settled row changes nothing. `costCents` is the ledger's sum.
     */
    readonly charge: (options: ChargeOptions) => Effect.Effect<{ readonly costCents: number }, JobNotFound | StoreError>
    /** Fenced. running -> succeeded with `result`, `progress = 1`, lease cleared, error fields cleared. */
    readonly complete: (options: CompleteOptions) => Effect.Effect<Job, LeaseLost | StoreError>
    /** Fenced. running -> failed (a dead letter) with the error class and evidence; lease cleared. */
    readonly fail: (options: FailOptions) => Effect.Effect<Job, LeaseLost | StoreError>
    /** Fenced. running -> queued with `runAfter`, the error class and evidence; lease cleared. */
    readonly retry: (options: RetryOptions) => Effect.Effect<Job, LeaseLost | StoreError>
    /** Fenced. running -> abandoned with the reason (and optional error class and evidence); lease cleared. */
    readonly abandon: (options: AbandonOptions) => Effect.Effect<Job, LeaseLost | StoreError>
    /**
     * Fenced. running -> queued, due now, lease cleared, `attemptsBase + 1` (the attempt is handed back; a
     * graceful shutdown is not a failure). The attempt row ends `released`.
     */
    readonly release: (options: FencedOptions) => Effect.Effect<Job, LeaseLost | StoreError>
    /**
     * queued -> abandoned(cancelled) at once; running -> `cancelRequestedAt = now` (kept if already set; the
     * holder sees it at its next heartbeat); terminal -> `AlreadyTerminal`, nothing changed. A `tenant` that is
     * not the job's gives `JobNotFound`.
     */
    readonly cancel: (options: {
      readonly jobId: JobId
      readonly tenant?: string | undefined
      readonly now?: number | undefined
    }) => Effect.Effect<Job, JobNotFound | AlreadyTerminal | StoreError>
    /** The job, or `JobNotFound` (also for another tenant's job). */
    readonly get: (options: {
      readonly jobId: JobId
      readonly tenant?: string | undefined
    }) => Effect.Effect<Job, JobNotFound | StoreError>
    /** Jobs matching every given filter, newest `createdAt` first, at most `limit` (default 50). */
    readonly list: (options: ListOptions) => Effect.Effect<ReadonlyArray<Job>, StoreError>
    /** The job's attempt rows in token order. */
    readonly attempts: (options: { readonly jobId: JobId }) => Effect.Effect<ReadonlyArray<Attempt>, StoreError>
    /** The job's charge rows in insertion order. */
    readonly charges: (options: { readonly jobId: JobId }) => Effect.Effect<ReadonlyArray<Charge>, StoreError>
    /**
     * Failed jobs matching the filters (newest first, at most `limit`, default 50) and, over all matching failed
     * jobs, groups by (errorClass, inputHash) with count and summed cost, largest count first.
     */
    readonly deadLetters: (options: DeadLetterOptions) => Effect.Effect<DeadLetters, StoreError>
    /**
     * For each target, in the order given: failed -> queued (due now, `attemptsBase = attempts`: a fresh run of
     * `maxAttempts`; `cancelRequestedAt` cleared, so a cancel requested before the failure does not settle the new
     * run; history and spend stay) through one conditional write; any other state is skipped. An id given twice is
     * replayed at most once: its repeat finds the job queued and is skipped.
     */
    readonly replay: (options: ReplayOptions) => Effect.Effect<ReplayResult, StoreError>
    /**
     * One pass, in this order, writing at most `limit` jobs in all (default 1000):
     * 1. Running jobs whose lease ended (`leaseUntil < now`), oldest insertion first: abandoned(cancelled) when a
     *    cancel was requested, abandoned(deadline) past the deadline, failed(`lease_expired`) with no attempt left,
     *    else queued and due now (attempt row `expired`).
     * 2. Queued jobs past their deadline, oldest insertion first: abandoned(deadline).
     * 3. `stale`, with what is left of the limit: queued, due jobs not past their deadline (and not requeued by
     *    this pass) whose last touch (the later of `updatedAt` and the time a sweep last returned them in `stale`)
     *    is `<= now - republishAfterMs` (default 30 s), least recently touched first, for a transport to
     *    republish. Each job returned is marked republished at `now`, so it is not returned again until another
     *    `republishAfterMs` has passed without a write. The mark is not part of the job record: it does not move
     *    `updatedAt` or change anything `get` shows.
     */
    readonly sweep: (options: SweepOptions) => Effect.Effect<SweepResult, StoreError>
    /** Counts by state, oldest due queued job per priority, cost by error class, failures since `failedSince`. */
    readonly stats: (options: {
      readonly queue?: string | undefined
      readonly tenant?: string | undefined
      readonly failedSince: number
    }) => Effect.Effect<StoreStats, StoreError>
    /** Store time now (epoch ms), for callers that must compare against lease or run-after times. */
    readonly now: Effect.Effect<number, StoreError>
  }
>() {}

/**
 * An input that is not plain JSON can never reach a Store; Client rejects it first.
 *
 * @since 0.1.0
 * @category errors
 */
export type SubmitError = IdempotencyKeyReused | InvalidInput | StoreError

/**
 * A fresh, empty in-memory Store that implements every verb exactly as documented on `Store`. Each verb is one
 * synchronous step over plain maps, so verbs are atomic among fibers. Store time is the `Clock` in scope when the
 * store is made (or an explicit `now`), never the caller's clock. Nothing is persisted: for tests, examples and the
 * simulator.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Store["Type"]> = internalMemoryStore.make

/**
 * A fresh in-memory Store (as `makeMemory`) together with `peek`, a synchronous read of one job record exactly as
 * the store holds it right now (undefined when there is none). `peek` changes nothing and sees every write the moment
 * its verb returns: for harnesses that record ground truth around each call, such as the simulator's proxies.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemoryInspectable: Effect.Effect<{
  readonly store: Store["Type"]
  readonly peek: (jobId: JobId) => Job | undefined
}> = internalMemoryStore.makeInspectable

/**
 * A Layer with a fresh in-memory Store (see `makeMemory`). Cheap to build: for tests, examples and the simulator,
 * which builds thousands of them. Not durable.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<Store> = Layer.effect(Store, makeMemory)
