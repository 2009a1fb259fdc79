/**
 * The protocol Store: the durable home of job records, attempts and the charge ledger, and the only place where the
 * lease protocol's conditional writes happen. It holds exactly the writes that workers, the sweeper and submitters
 * need, each in batch form (a one-job call is a batch of one); reads and operator views live in `Query.ts`.
 *
 * Contract (checked by `@slowcall/testing`'s conformance suites and model-based property on every adapter):
 * - Every rule is the one `Protocol.ts` states; an adapter's SQL or Lua is an atomic version of it.
 * - Time is store time: the adapter's own clock (SQL `now()`, Redis `TIME`) or the Effect `Clock` for the memory
 *   store. Every reply carries the store time its writes used (`now`), so a caller never asks again. The `now`
 *   option exists only so tests can drive time; workers never pass their own clock.
 * - Per-item results: each item of a batch is one atomic, conditional write with its own result, in the order the
 *   items were given, applied as if one after another (a later item sees an earlier one's write). One item's
 *   `LeaseLost` never fails its neighbours. A `StoreError` fails the whole call, and then any subset of the items
 *   may have applied (as with any lost reply). Every verb but `submit` is safe to repeat as it was sent; a
 *   submit is repeated with the same request key and fresh job ids, and the key returns the job the first try made.
 * - Fenced writes (`heartbeat`, `settle`) apply only when `state = 'running' AND leaseToken = token`, and otherwise
 *   report `LeaseLost` for that item, changing nothing.
 * - `charge` is keyed by call id, counted once, and accepted from stale tokens: the money was spent. The one charge
 *   a Store refuses is a reservation of a new call id on an item of a batch that the batch's budget cannot cover
 *   (`Batch.chargeVerdict`), decided in the same atomic write against the batch's spend as it is then.
 * - Every accepted write to a job record moves `updatedAt` strictly forward (`Protocol.bump`). The one write outside
 *   the record is the sweep's republish mark, which never moves `updatedAt`.
 * - One verb is optional: `cycle`, a worker's settlements, heartbeats, charges and next claim in one atomic write at
 *   one store time, answering what the four verbs would answer in that order (`CycleOptions`). The conformance
 *   suite and the model-based property check it on every store that offers it.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer } from "effect"
import { type Batch, type BatchId, BatchStore } from "./Batch.js"
import type { IdempotencyKeyReused, InvalidInput, StoreError } from "./Errors.js"
import type { FairOptions } from "./Fairness.js"
import * as internalMemoryStore from "./internal/memoryStore.js"
import type { Job, JobId, JobState } from "./Job.js"
import type { ChargeRow, Outcome, ReplayFilter, Runnable, SubmitItem } from "./Protocol.js"
import { Query } from "./Query.js"

/**
 * A batch reply: the store time the writes used and one result per item, in item order.
 *
 * @since 0.2.0
 * @category models
 */
export interface Reply<A> {
  readonly now: number
  readonly results: ReadonlyArray<A>
}

/**
 * Options every write takes: `now` overrides store time, for tests only.
 *
 * @since 0.2.0
 * @category models
 */
export interface WriteOptions {
  readonly now?: number | undefined
}

/**
 * The result of submitting one job:
 * - `Created`: a new queued record;
 * - `Existing`: the request key already named a job of the same request (`Protocol.submitVerdict`: the same
 *   fingerprint, or the same input hash where either side has no fingerprint); that job, nothing written;
 * - `KeyReused`: the request key names a job of another request; nothing written.
 *
 * @since 0.2.0
 * @category models
 */
export type SubmitOutcome =
  | { readonly _tag: "Created"; readonly job: Job }
  | { readonly _tag: "Existing"; readonly job: Job }
  | { readonly _tag: "KeyReused"; readonly requestKey: string; readonly existingJobId: JobId }

/**
 * One claim of a batch: which job, who claims it (recorded as `leaseOwner` and on the attempt row), for how long
 * (the worst case of one attempt, see `Lease.ts`), and the estimated cost of the attempt (the handler's; without
 * one the largest spend of an earlier attempt, `Protocol.fallbackEstimate`, serves).
 *
 * @since 0.2.0
 * @category models
 */
export interface ClaimItem {
  readonly jobId: JobId
  readonly owner: string
  readonly leaseMs: number
  readonly estimateCents?: number | undefined
}

/**
 * The outcome of a claim. Only `Claimed` allows a model call.
 * - `Claimed`: this caller holds the lease under `job.leaseToken`; `takeover` when a lapsed lease was taken.
 * - `Busy`: another holder's lease is live until `until` (store time).
 * - `NotDue`: queued with `runAfter` in the future (`until`).
 * - `Settled`: the job is terminal, possibly made so by this claim (`Protocol.claimVerdict`). A transport acks.
 * - `NotFound`: no such job. A transport acks.
 *
 * @since 0.1.0
 * @category models
 */
export type ClaimResult =
  | { readonly _tag: "Claimed"; readonly job: Job; readonly takeover: boolean }
  | { readonly _tag: "Busy"; readonly job: Job; readonly until: number }
  | { readonly _tag: "NotDue"; readonly job: Job; readonly until: number }
  | { readonly _tag: "Settled"; readonly job: Job }
  | { readonly _tag: "NotFound"; readonly jobId: JobId }

/**
 * A fenced write that missed: the job is not running under `token` (another holder, a settled job, or no job:
 * `currentToken` and `state` null). Changes nothing.
 *
 * @since 0.2.0
 * @category models
 */
export interface Fenced {
  readonly _tag: "LeaseLost"
  readonly jobId: JobId
  readonly token: number
  readonly currentToken: number | null
  readonly state: JobState | null
}

/**
 * What `claimNext` is asked for: up to `max` jobs of `queue`, claimed by `owner` for `leaseMs`, of the listed
 * `types` only when given, picked across tenants by `Fairness.pick` when `fair` is given.
 *
 * @since 0.9.0
 * @category models
 */
export interface ClaimNextOptions {
  readonly queue: string
  readonly max: number
  readonly owner: string
  readonly leaseMs: number
  readonly types?: ReadonlyArray<Runnable> | undefined
  readonly fair?: FairOptions | undefined
}

/**
 * One result of `claimNext`: only the jobs it wrote, `Claimed` or `Settled`.
 *
 * @since 0.9.0
 * @category models
 */
export type ClaimNextResult = Extract<ClaimResult, { readonly _tag: "Claimed" | "Settled" }>

/**
 * The parts of one `cycle`, each optional (an absent part is an empty one; without `claimNext` nothing is claimed):
 * the settlements, heartbeats and charges a worker has queued since its last tick, and the claim of its next jobs.
 *
 * Invariant: the four parts are applied at one store time (the reply's `now`) in one atomic write, in this order,
 * settle, heartbeat, charge, claimNext, each part's items in their order; the results equal those of `settle`,
 * `heartbeat`, `charge` and `claimNext` called one after another at that time with the same parts, and so does
 * what the store holds afterwards (a job released by the settle part is there for the claim part to take; a
 * heartbeat after a settle of the same job is `LeaseLost`). A part that its verb would refuse as a whole (a charge
 * amount `Protocol.chargeProblem` rejects, a `fair` that `Fairness.problem` rejects) fails the whole cycle with
 * `StoreError` (`Constraint`) and writes none of the parts. As with every verb, another `StoreError` leaves any
 * subset applied, and a cycle is safe to repeat as sent, because each of its parts is. A store that keeps queues
 * apart (Redis: one Cluster slot per queue) may apply each queue's share of the parts as one atomic write, all at
 * the one store time: items of different queues name different jobs and the claim picks only its own queue's, so
 * the answers are the same.
 *
 * @since 0.9.0
 * @category models
 */
export interface CycleOptions extends WriteOptions {
  readonly settle?: ReadonlyArray<SettleItem> | undefined
  readonly heartbeat?: ReadonlyArray<HeartbeatItem> | undefined
  readonly charge?: ReadonlyArray<ChargeItem> | undefined
  readonly claimNext?: ClaimNextOptions | undefined
}

/**
 * What one `cycle` did: the store time all its parts used, and each part's results in item order (empty for an
 * absent part).
 *
 * @since 0.9.0
 * @category models
 */
export interface CycleReply {
  readonly now: number
  readonly settle: ReadonlyArray<SettleResult>
  readonly heartbeat: ReadonlyArray<HeartbeatResult>
  readonly charge: ReadonlyArray<ChargeResult>
  readonly claimNext: ReadonlyArray<ClaimNextResult>
}

/**
 * One heartbeat: the lease of `jobId` under `token` runs to `now + leaseMs`, or stays where it is when it ends later
 * already (a heartbeat never moves a lease's end back); `progress` (0..1) is stored when given.
 *
 * @since 0.2.0
 * @category models
 */
export interface HeartbeatItem {
  readonly jobId: JobId
  readonly token: number
  readonly leaseMs: number
  readonly progress?: number | undefined
}

/**
 * A renewed lease: its new end (store time), whether a cancel was requested (stop at once), and the job's spend.
 *
 * @since 0.2.0
 * @category models
 */
export type HeartbeatResult =
  | {
      readonly _tag: "Renewed"
      readonly leaseUntil: number
      readonly cancelRequested: boolean
      readonly costCents: number
    }
  | Fenced

/**
 * A reservation (`settled: false`, the estimate, written before the call) or a settlement (`settled: true`, the
 * actual amount, on the same `callId`). A settled charge is final: later writes to the same call id change nothing.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChargeItem {
  readonly jobId: JobId
  readonly callId: string
  readonly token: number
  readonly amountCents: number
  readonly settled: boolean
}

/**
 * The job's spend after the charge (the sum of its ledger), or no such job, or `BatchBudgetExceeded`: the job is an
 * item of a batch and the charge a reservation that does not fit what is left of the batch's budget
 * (`Batch.chargeVerdict`). Nothing was written; the reply carries the job's spend (`costCents`, unchanged), the
 * batch's spend at the write (`batchCostCents`, reservations of calls in flight included) and its budget.
 *
 * @since 0.2.0
 * @category models
 */
export type ChargeResult =
  | { readonly _tag: "Charged"; readonly costCents: number }
  | { readonly _tag: "NotFound"; readonly jobId: JobId }
  | {
      readonly _tag: "BatchBudgetExceeded"
      readonly jobId: JobId
      readonly batchId: BatchId
      readonly costCents: number
      readonly batchCostCents: number
      readonly budgetCents: number
    }

/**
 * One settlement: how the holder of `token` ends its attempt (see `Protocol.Outcome`).
 *
 * @since 0.2.0
 * @category models
 */
export interface SettleItem {
  readonly jobId: JobId
  readonly token: number
  readonly outcome: Outcome
}

/**
 * The job as the settlement left it, or `LeaseLost`.
 *
 * @since 0.2.0
 * @category models
 */
export type SettleResult = { readonly _tag: "Settled"; readonly job: Job } | Fenced

/**
 * One cancel; a `tenant` that is not the job's gives `NotFound`.
 *
 * @since 0.2.0
 * @category models
 */
export interface CancelItem {
  readonly jobId: JobId
  readonly tenant?: string | undefined
}

/**
 * `Cancelled`: the job as the cancel left it (abandoned, or running with `cancelRequestedAt` set);
 * `AlreadyTerminal`: nothing changed; `NotFound`: no such job for this tenant.
 *
 * @since 0.2.0
 * @category models
 */
export type CancelResult =
  | { readonly _tag: "Cancelled"; readonly job: Job }
  | { readonly _tag: "AlreadyTerminal"; readonly job: Job }
  | { readonly _tag: "NotFound"; readonly jobId: JobId }

/**
 * `Replayed`: failed -> queued, the job as it is now; `Skipped`: not a failed job matching the filter (its state,
 * or null when there is no such job), nothing changed.
 *
 * @since 0.2.0
 * @category models
 */
export type ReplayItemResult =
  | { readonly _tag: "Replayed"; readonly job: Job }
  | { readonly _tag: "Skipped"; readonly jobId: JobId; readonly state: JobState | null }

/**
 * @since 0.1.0
 * @category models
 */
export interface SweepOptions extends WriteOptions {
  readonly queue?: string | undefined
  /**
   * Queued, due jobs neither written nor returned in `stale` for longer than this are returned in `stale`
   * for republishing (default 30 s).
   */
  readonly republishAfterMs?: number | undefined
  /**
   * The most jobs one pass writes, all kinds together: requeued, expired-failed, abandoned and stale (default 1000).
   */
  readonly limit?: number | undefined
}

/**
 * What a sweep changed: expired leases requeued (the jobs, ready to publish) or failed with `lease_expired`, jobs
 * abandoned (cancel requested or past their deadline), and queued jobs that should be republished to a transport.
 *
 * @since 0.1.0
 * @category models
 */
export interface SweepResult {
  readonly now: number
  readonly requeued: ReadonlyArray<Job>
  readonly expiredFailed: ReadonlyArray<JobId>
  readonly abandoned: ReadonlyArray<JobId>
  readonly stale: ReadonlyArray<Job>
}

/**
 * The protocol Store service: one tag, many adapters. Each verb is a batch; see the module header for what every
 * verb keeps.
 *
 * @since 0.1.0
 * @category services
 */
export class Store extends Context.Tag("@slowcall/core/Store")<
  Store,
  {
    /**
     * Insert queued jobs (`Protocol.newJob`, which keeps the item's `fingerprint` on the record). A `requestKey`
     * already used in the same (queue, tenant), by an earlier job or an earlier item of the batch, gives `Existing`
     * or `KeyReused` (`Protocol.submitVerdict` on the holder's stored fingerprint and input hash) and writes nothing.
     * A Store never computes a fingerprint; it stores and compares the one it is given. A job id that exists already
     * is a caller bug: `StoreError` with reason `Constraint`, nothing written.
     */
    readonly submit: (
      options: WriteOptions & { readonly items: ReadonlyArray<SubmitItem> }
    ) => Effect.Effect<Reply<SubmitOutcome>, StoreError>
    /**
     * Claim each named job: one conditional write per item deciding by `Protocol.claimVerdict` and writing
     * `Protocol.claimTransition`. At most one live lease per job.
     */
    readonly claim: (
      options: WriteOptions & { readonly items: ReadonlyArray<ClaimItem> }
    ) => Effect.Effect<Reply<ClaimResult>, StoreError>
    /**
     * Claim up to `max` jobs of `queue` the store selects itself, each as `claim` would with the fallback estimate:
     * running jobs whose lease ended first (taken over directly, `takeover` true, without waiting for a sweep), oldest
     * insertion first, then due queued jobs (highest priority first, then earliest `runAfter`, then insertion order):
     * `Protocol.claimNextOrder`. Rows another claimer holds are skipped, never waited for. With `types`, only jobs whose (type, version) is listed are picked
     * (`Protocol.runnableBy`); others stay queued as they are. Returns only the jobs it wrote: `Claimed`, or
     * `Settled` when the claim settled the job instead; a settled job counts toward `max` like a claimed one.
     *
     * With `fair`, the due queued jobs are picked across tenants by `Fairness.pick` instead (least decayed service
     * per weight first, today's order within a tenant and between equal services; lapsed leases are left to `claim`
     * and to the sweep), and each tenant's service in the
     * queue is updated in the same atomic write as the claims; a `fair` that `Fairness.problem` rejects fails with
     * `StoreError` (`Constraint`) and writes nothing. Without `fair` nothing about the order or the writes changes.
     */
    readonly claimNext: (options: WriteOptions & ClaimNextOptions) => Effect.Effect<Reply<ClaimNextResult>, StoreError>
    /** Fenced. `Protocol.heartbeatTransition` per item. */
    readonly heartbeat: (
      options: WriteOptions & { readonly items: ReadonlyArray<HeartbeatItem> }
    ) => Effect.Effect<Reply<HeartbeatResult>, StoreError>
    /**
     * Not fenced (the money was spent whatever the token). `Protocol.chargeStep` per item; the job's `costCents`
     * stays the ledger's sum. On an item of a batch, `Batch.chargeVerdict` first, in the same atomic write: a
     * reservation the batch's budget cannot cover is `BatchBudgetExceeded` and writes nothing. A call with an amount
     * below 0 or not finite (`Protocol.chargeProblem`) fails with `StoreError` (`Constraint`) and writes none of its
     * items.
     */
    readonly charge: (
      options: WriteOptions & { readonly items: ReadonlyArray<ChargeItem> }
    ) => Effect.Effect<Reply<ChargeResult>, StoreError>
    /** Fenced. `Protocol.settleTransition` per item: complete, retry, fail, abandon or release. */
    readonly settle: (
      options: WriteOptions & { readonly items: ReadonlyArray<SettleItem> }
    ) => Effect.Effect<Reply<SettleResult>, StoreError>
    /** `Protocol.cancelVerdict` per item; an already requested cancel is returned without a write. */
    readonly cancel: (
      options: WriteOptions & { readonly items: ReadonlyArray<CancelItem> }
    ) => Effect.Effect<Reply<CancelResult>, StoreError>
    /**
     * Replay each named dead letter that is `Protocol.replayable` under `filter`, through one conditional write
     * (`Protocol.replayTransition`); anything else is skipped. An id given twice is replayed at most once: its
     * repeat finds the job queued.
     */
    readonly replay: (
      options: WriteOptions & {
        readonly items: ReadonlyArray<{ readonly jobId: JobId }>
        readonly filter?: ReplayFilter | undefined
      }
    ) => Effect.Effect<Reply<ReplayItemResult>, StoreError>
    /**
     * One pass, in this order, writing at most `limit` jobs in all (default 1000), each by `Protocol.sweepVerdict`
     * and `Protocol.sweepTransition`:
     * 1. running jobs whose lease ended, oldest insertion first;
     * 2. queued jobs past their deadline, oldest insertion first;
     * 3. `stale`, with what is left of the limit: jobs `Protocol.isStale` (not requeued by this pass), least
     *    recently touched first, each marked republished at `now` (not part of the job record).
     * As with `claimNext`, a job another writer holds at that moment may be passed over, left for the next pass.
     */
    readonly sweep: (options: SweepOptions) => Effect.Effect<SweepResult, StoreError>
    /** Store time now (epoch ms), for callers that must compare against lease, deadline or run-after times. */
    readonly now: Effect.Effect<number, StoreError>
    /**
     * Optional: one worker tick in one atomic write (see `CycleOptions`). A store that offers it answers exactly what
     * `settle`, `heartbeat`, `charge` and `claimNext`, called one after another at one store time with the same
     * parts, would answer together; a caller without it makes those calls itself. A wrapper that changes any of
     * the four verbs must wrap `cycle` too, or leave it out.
     */
    readonly cycle?: ((options: CycleOptions) => Effect.Effect<CycleReply, StoreError>) | undefined
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
 * A fresh, empty in-memory Store, Query and BatchStore over the same maps, built from `Protocol.ts` and `Batch.ts`
 * and nothing else (every job write on a batch item writes its batch in the same step). Each
 * item is one synchronous step, so writes are atomic among fibers; a `cycle` is one synchronous step for all its
 * parts, made of the four verbs' own bodies. Store time is the `Clock` in scope when the
 * store is made (or an explicit `now`), never the caller's clock. Nothing is persisted: for tests, examples and the
 * simulator. `peek` reads one job record synchronously exactly as the store holds it (undefined when there is
 * none), for harnesses that record ground truth around each call.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<{
  readonly store: Store["Type"]
  readonly query: Query["Type"]
  readonly batches: BatchStore["Type"]
  readonly peek: (jobId: JobId) => Job | undefined
}> = internalMemoryStore.make

/**
 * Options of `makeMemoryWith`. `interleave` is consulted as each write reaches the store; an effect it returns runs
 * before the write is applied, and other fibers run meanwhile (a networked store's round trip between reading a row
 * and writing it). The write still checks and applies in one synchronous step at the end, against the record as it
 * is then: a correct store gives the same replies however long the window. A caller interrupted during the window
 * leaves the write unapplied, as a request that never reached a store would (run the write uninterruptibly to model
 * one that had). The simulator uses it to open windows inside writes, where a store that checked before the window
 * and wrote after it would be caught.
 *
 * @since 0.2.0
 * @category models
 */
export interface MemoryOptions {
  readonly interleave?: ((verb: WriteVerb) => Effect.Effect<void> | undefined) | undefined
}

/**
 * The Store verbs that write, by name.
 *
 * @since 0.2.0
 * @category models
 */
export type WriteVerb =
  | "batchOpen"
  | "batchAdd"
  | "batchCancel"
  | "batchReplay"
  | "submit"
  | "claim"
  | "claimNext"
  | "heartbeat"
  | "charge"
  | "settle"
  | "cancel"
  | "replay"
  | "sweep"
  | "cycle"

/**
 * `makeMemory` with options (see `MemoryOptions`).
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeMemoryWith = (
  options: MemoryOptions
): Effect.Effect<{
  readonly store: Store["Type"]
  readonly query: Query["Type"]
  readonly batches: BatchStore["Type"]
  readonly peek: (jobId: JobId) => Job | undefined
  /** The batch record as the store holds it now, read without an effect (the simulator's ground truth). */
  readonly peekBatch: (batchId: BatchId) => Batch | undefined
  /** The job's ledger rows as the store holds them now, in insertion order, read without an effect. */
  readonly peekCharges: (jobId: JobId) => ReadonlyArray<ChargeRow>
}> => internalMemoryStore.makeWith(options)

/**
 * A Layer with a fresh in-memory Store, its Query and its BatchStore (see `makeMemory`). Cheap to build: for tests,
 * examples and the simulator, which builds thousands of them. Not durable.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<Store | Query | BatchStore> = Layer.effectContext(
  Effect.map(internalMemoryStore.make, ({ batches, query, store }) =>
    Context.make(Store, store).pipe(Context.add(Query, query), Context.add(BatchStore, batches))
  )
)
