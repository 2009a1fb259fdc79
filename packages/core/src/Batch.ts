/**
 * Batches: many jobs followed, cancelled, replayed and finished as one thing. A batch is one record beside its
 * items' job records; this module states every rule a Store applies to it, as pure functions, the way `Protocol.ts`
 * states the job rules. The memory Store and the reference model are built from these functions; SQL and Lua
 * adapters are atomic versions of them, checked by the model-based property.
 *
 * The rules:
 * - **Counts are kept, never counted.** Every write that changes an item (its state, or its spend) changes the
 *   batch in the same write (`afterItemWrite`): `counts` always equal the items' states and `costCents` the sum of
 *   their ledgers.
 * - **Finished once, callbacks once.** A batch is complete when all its `size` items have landed and none is queued
 *   or running (`isComplete`). The write that makes it complete sets `finishedAt` and enqueues the `onComplete`
 *   callback job, and `onSuccess` when no item failed or was abandoned; each callback is enqueued at most once in the
 *   batch's life (its job id is kept on the record), with the request key `callbackKey(batch, kind)`. A replay that
 *   puts an item back clears `finishedAt`; the batch finishes again when that item ends, enqueueing only a callback
 *   it never enqueued (`onSuccess`, once every item has succeeded).
 * - **Budget and deadline.** No item is claimed once the batch has spent its budget, nor when the next attempt's
 *   estimate would take the batch past it (`claimVerdict`): the claim abandons the item (`budget`). Every call an
 *   item's attempt makes is checked against the batch's budget too, in the write that reserves its estimate
 *   (`chargeVerdict`): a reservation that would take the batch's spend, reservations of calls in flight included,
 *   past its budget is refused and writes nothing, so items running at once can never reserve past the budget
 *   together. The deadline is every item's deadline (`itemOf` caps each item's own).
 * - **Idempotent creation, in chunks.** A batch is opened with its full `size` and a `fingerprint` over all its
 *   items and options (`fingerprint`), then filled chunk by chunk at explicit offsets. The same request key with the
 *   same fingerprint is the same batch (`openVerdict`: `Existing`, with how many items have landed, so a caller
 *   resumes from there); another fingerprint is a reused key. Each chunk lands whole or not at all; a chunk at an
 *   offset whose items have landed already lands only its new part. Until every item has landed the batch is not
 *   complete, whatever its items' states.
 * - **Cancel** (`cancelTransition`): the batch is sealed at the items that have landed, queued items are abandoned
 *   at once, running ones are asked to stop (the job cancel), and no item is claimed afterwards.
 *
 * @since 0.7.0
 */
import { Context, type Effect, Schema } from "effect"
import type { StoreError } from "./Errors.js"
import { sha256Hex } from "./internal/sha256.js"
import type { Job, JobId, JobState } from "./Job.js"
import * as Protocol from "./Protocol.js"

/**
 * A batch id: a UUID version 7, like a job id (made with `Ids.makeJobId` and branded here).
 *
 * @since 0.7.0
 * @category models
 */
export const BatchId = Schema.String.pipe(
  Schema.pattern(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
  Schema.brand("@slowcall/BatchId")
)
/**
 * @since 0.7.0
 * @category models
 */
export type BatchId = typeof BatchId.Type

/**
 * How many of a batch's items are in each job state.
 *
 * @since 0.7.0
 * @category models
 */
export type Counts = { readonly [S in JobState]: number }

/**
 * The two callbacks a batch may name.
 *
 * @since 0.7.0
 * @category models
 */
export type CallbackKind = "onComplete" | "onSuccess"

/**
 * A callback job as the batch keeps it until it is enqueued: a submit item without tenant and request key (the
 * batch's tenant and `callbackKey` fill them), its id chosen when the batch was opened.
 *
 * @since 0.7.0
 * @category models
 */
export type Callback = Omit<Protocol.SubmitItem, "tenant" | "requestKey">

/**
 * The batch record.
 *
 * Invariants kept by every Store:
 * - `added <= size`; `counts` sum to `added` and equal the states of the batch's items; `costCents` is the sum of
 *   their ledgers.
 * - `finishedAt` is set exactly when the batch `isComplete`.
 * - `onCompleteJobId` / `onSuccessJobId` are null until their callback job is enqueued, then that job's id for good.
 * - `updatedAt` never decreases: the batch verbs (open, add, cancel) move it with `Protocol.bump`; an item write
 *   moves it to the later of its value and the item write's time (`afterItemWrite`), so the item writes of one
 *   statement give the same batch in whatever order a database applies them.
 *
 * @since 0.7.0
 * @category models
 */
export interface Batch {
  readonly id: BatchId
  readonly requestKey: string | null
  readonly tenant: string | null
  readonly fingerprint: string
  /** The number of items the batch holds once every chunk has landed (the landed ones, once cancelled). */
  readonly size: number
  /** Items landed so far, in order; the batch is sealed when `added === size`. */
  readonly added: number
  readonly counts: Counts
  readonly costCents: number
  readonly budgetCents: number | null
  readonly deadlineAt: number | null
  readonly onComplete: Callback | null
  readonly onSuccess: Callback | null
  readonly onCompleteJobId: JobId | null
  readonly onSuccessJobId: JobId | null
  /** The job whose handler made this batch (fan-out), for display. */
  readonly parentJobId: JobId | null
  readonly cancelRequestedAt: number | null
  readonly createdAt: number
  readonly updatedAt: number
  readonly finishedAt: number | null
}

/**
 * What opening a batch asks for. `fingerprint` is `fingerprint(...)` of the whole batch, computed by the caller.
 *
 * @since 0.7.0
 * @category models
 */
export interface BatchSpec {
  readonly id: BatchId
  /**
   * The queue of the batch's items and callbacks, when they all share one. A Store that keeps a batch in the same
   * place as its items (Redis: one Cluster slot per queue) requires it and refuses items and callbacks of another
   * queue; the other Stores ignore it. Not part of the record nor of the fingerprint.
   */
  readonly queue?: string | null | undefined
  readonly requestKey?: string | null | undefined
  readonly tenant?: string | null | undefined
  readonly fingerprint: string
  readonly size: number
  readonly budgetCents?: number | null | undefined
  readonly deadlineAt?: number | null | undefined
  readonly onComplete?: Callback | null | undefined
  readonly onSuccess?: Callback | null | undefined
  readonly parentJobId?: JobId | null | undefined
}

const zero: Counts = { queued: 0, running: 0, succeeded: 0, failed: 0, abandoned: 0 }

/**
 * A new, empty batch: no item landed yet, created and updated at `now`.
 *
 * @since 0.7.0
 * @category rules
 */
export const newBatch = (spec: BatchSpec, now: number): Batch => ({
  id: spec.id,
  requestKey: spec.requestKey ?? null,
  tenant: spec.tenant ?? null,
  fingerprint: spec.fingerprint,
  size: spec.size,
  added: 0,
  counts: zero,
  costCents: 0,
  budgetCents: spec.budgetCents ?? null,
  deadlineAt: spec.deadlineAt ?? null,
  onComplete: spec.onComplete ?? null,
  onSuccess: spec.onSuccess ?? null,
  onCompleteJobId: null,
  onSuccessJobId: null,
  parentJobId: spec.parentJobId ?? null,
  cancelRequestedAt: null,
  createdAt: now,
  updatedAt: now,
  finishedAt: null
})

/**
 * The parts of a batch its request key vouches for: the size, every item's request fingerprint in order
 * (`Protocol.fingerprint`), the budget, the deadline, each callback's fingerprint and the parent job.
 *
 * @since 0.7.0
 * @category models
 */
export interface FingerprintFields {
  readonly itemFingerprints: ReadonlyArray<string>
  readonly budgetCents: number | null
  readonly deadlineAt: number | null
  readonly onComplete: string | null
  readonly onSuccess: string | null
  readonly parentJobId: JobId | null
}

/**
 * The batch fingerprint: lowercase hex sha-256 over the `FingerprintFields`, prefixed with a format version. Equal
 * fields give equal fingerprints; another item, another order of items or another option gives another.
 *
 * @since 0.7.0
 * @category rules
 */
export const fingerprint = (fields: FingerprintFields): string =>
  `b1:${sha256Hex(
    JSON.stringify([
      fields.itemFingerprints.length,
      fields.itemFingerprints,
      fields.budgetCents,
      fields.deadlineAt,
      fields.onComplete,
      fields.onSuccess,
      fields.parentJobId
    ])
  )}`

/**
 * The verdict of opening a batch whose request key already names `existing` in the tenant: the same fingerprint is
 * the same batch (returned, nothing written, the caller resumes at `existing.added`); another is a reused key.
 *
 * @since 0.7.0
 * @category rules
 */
export const openVerdict = (existing: Batch, spec: BatchSpec): "Existing" | "KeyReused" =>
  existing.fingerprint === spec.fingerprint ? "Existing" : "KeyReused"

/**
 * The verdict of adding `count` items at position `offset`:
 * - `Append`: the items from `skip` on (those at positions `>= added`) land; the first `skip` have landed already;
 * - `Cancelled`: the batch was cancelled, nothing lands;
 * - `Misplaced`: the chunk starts past the landed items (a gap) or ends past `size`; nothing lands.
 *
 * @since 0.7.0
 * @category rules
 */
export const addVerdict = (
  batch: Batch,
  offset: number,
  count: number
): { readonly _tag: "Append"; readonly skip: number } | { readonly _tag: "Cancelled" | "Misplaced" } => {
  if (batch.cancelRequestedAt !== null) return { _tag: "Cancelled" }
  if (!Number.isInteger(offset) || offset < 0 || offset > batch.added || offset + count > batch.size) {
    return { _tag: "Misplaced" }
  }
  return { _tag: "Append", skip: Math.min(count, batch.added - offset) }
}

/**
 * The submit item an item of the batch becomes: the batch's tenant, no request key of its own (the batch's key
 * vouches for it), and a deadline no later than the batch's.
 *
 * @since 0.7.0
 * @category rules
 */
export const itemOf = (batch: Batch, item: Protocol.SubmitItem): Protocol.SubmitItem => {
  const own = item.deadlineAt ?? null
  return {
    ...item,
    tenant: batch.tenant,
    requestKey: null,
    deadlineAt: own === null ? batch.deadlineAt : batch.deadlineAt === null ? own : Math.min(own, batch.deadlineAt)
  }
}

/**
 * The batch after `added` more items landed, all queued.
 *
 * @since 0.7.0
 * @category rules
 */
export const appended = (batch: Batch, added: number, now: number): Batch =>
  added === 0
    ? batch
    : {
        ...batch,
        added: batch.added + added,
        counts: { ...batch.counts, queued: batch.counts.queued + added },
        updatedAt: Protocol.bump(batch.updatedAt, now)
      }

/**
 * Whether every item has landed and none is queued or running.
 *
 * @since 0.7.0
 * @category rules
 */
export const isComplete = (batch: Batch): boolean =>
  batch.added === batch.size && batch.counts.queued === 0 && batch.counts.running === 0

/**
 * The request key of a batch's callback job: unique to the batch and the kind, so a callback can only ever name one
 * job.
 *
 * @since 0.7.0
 * @category rules
 */
export const callbackKey = (batchId: BatchId, kind: CallbackKind): string => `batch:${batchId}:${kind}`

/**
 * The submit item of a callback: the kept spec under the batch's tenant and `callbackKey`.
 *
 * @since 0.7.0
 * @category rules
 */
export const callbackItem = (batch: Batch, kind: CallbackKind, callback: Callback): Protocol.SubmitItem => ({
  ...callback,
  tenant: batch.tenant,
  requestKey: callbackKey(batch.id, kind)
})

/**
 * A batch write's result: the batch as it is now, and the callback jobs the same write must insert (queued, by
 * `Protocol.newJob` at time `at`), in the order `onComplete`, `onSuccess`.
 *
 * @since 0.7.0
 * @category models
 */
export interface BatchStep {
  readonly batch: Batch
  readonly callbacks: ReadonlyArray<Protocol.SubmitItem>
  readonly at: number
}

/**
 * The finishing rule, applied after every write that may change whether the batch is complete: a batch that has
 * become complete gets `finishedAt` (and `updatedAt`) = the later of `updatedAt` and `now`, and enqueues each callback it names and has never enqueued (`onSuccess`
 * only when no item failed or was abandoned); one that is no longer complete (a replay) loses `finishedAt`. A batch
 * whose completeness did not change is returned as it is.
 *
 * @since 0.7.0
 * @category rules
 */
export const finish = (batch: Batch, now: number): BatchStep => {
  const complete = isComplete(batch)
  if (complete === (batch.finishedAt !== null)) return { batch, callbacks: [], at: now }
  if (!complete) {
    const reopened = { ...batch, finishedAt: null, updatedAt: Math.max(batch.updatedAt, now) }
    return { batch: reopened, callbacks: [], at: now }
  }
  const callbacks: Array<Protocol.SubmitItem> = []
  let onCompleteJobId = batch.onCompleteJobId
  let onSuccessJobId = batch.onSuccessJobId
  if (batch.onComplete !== null && onCompleteJobId === null) {
    callbacks.push(callbackItem(batch, "onComplete", batch.onComplete))
    onCompleteJobId = batch.onComplete.id
  }
  const allSucceeded = batch.counts.failed === 0 && batch.counts.abandoned === 0
  const finishedAt = Math.max(batch.updatedAt, now)
  if (batch.onSuccess !== null && onSuccessJobId === null && allSucceeded) {
    callbacks.push(callbackItem(batch, "onSuccess", batch.onSuccess))
    onSuccessJobId = batch.onSuccess.id
  }
  return {
    batch: {
      ...batch,
      finishedAt,
      onCompleteJobId,
      onSuccessJobId,
      updatedAt: finishedAt
    },
    callbacks,
    at: finishedAt
  }
}

/**
 * The batch write that goes with a write to one of its items, from the item's record `before` and `after`: the
 * item's count moves from its old state to its new one, the item's spend change joins the batch's cost, then
 * `finish`. Its time is the item write's own (`after.updatedAt`), so the batch's `updatedAt`, its `finishedAt` and
 * its callbacks' creation follow the write that moved it. An item write that changed neither state nor spend leaves
 * the batch as it is.
 *
 * @since 0.7.0
 * @category rules
 */
export const afterItemWrite = (batch: Batch, before: Job, after: Job): BatchStep => {
  const at = after.updatedAt
  const deltaCents = after.costCents - before.costCents
  if (before.state === after.state && deltaCents === 0) return { batch, callbacks: [], at }
  const counts = { ...batch.counts }
  counts[before.state] -= 1
  counts[after.state] += 1
  return finish(
    { ...batch, counts, costCents: batch.costCents + deltaCents, updatedAt: Math.max(batch.updatedAt, at) },
    at
  )
}

/**
 * The claim verdict of an item of `batch` (see `Protocol.claimVerdict`): the job's own verdict, except that a claim
 * that would run the item settles it instead when the batch was cancelled (`cancelled`) or when the batch's spend
 * cannot cover the attempt's estimate (`budget`, by `Protocol.budgetFits` on the batch's budget and cost).
 *
 * @since 0.7.0
 * @category rules
 */
export const claimVerdict = (job: Job, batch: Batch, now: number, estimateCents: number): Protocol.ClaimVerdict => {
  const verdict = Protocol.claimVerdict(job, now, estimateCents)
  if (verdict._tag !== "Claim") return verdict
  if (batch.cancelRequestedAt !== null) return { _tag: "Settle", takeover: verdict.takeover, reason: "cancelled" }
  if (!Protocol.budgetFits(batch.budgetCents, batch.costCents, estimateCents)) {
    return { _tag: "Settle", takeover: verdict.takeover, reason: "budget" }
  }
  return verdict
}

/**
 * The batch's verdict on a charge of one of its items, checked in the same atomic write as the charge
 * (`Protocol.chargeStep` on the ledger row `existing` of its call id): a reservation of a new call id (`settled:
 * false`) whose amount does not fit what is left of the batch's budget (`Protocol.budgetFits` on the batch's budget and
 * cost, which counts the reservations of calls still in flight) is `Refuse`d and writes nothing. Everything else is
 * `Apply`: a settlement (the money was spent, whatever the budget), a repeat of a reservation already written (its
 * call id has its row), and any charge of a batch without a budget.
 *
 * @since 0.8.0
 * @category rules
 */
export const chargeVerdict = (
  batch: Batch,
  existing: Protocol.ChargeRow | undefined,
  charge: { readonly amountCents: number; readonly settled: boolean }
): "Apply" | "Refuse" =>
  existing === undefined &&
  !charge.settled &&
  !Protocol.budgetFits(batch.budgetCents, batch.costCents, charge.amountCents)
    ? "Refuse"
    : "Apply"

/**
 * The verdict of cancelling a batch: a finished batch is left as it is (`AlreadyFinished`); an already cancelled one
 * too (`Unchanged`, its items were handled by the first cancel); any other is cancelled.
 *
 * @since 0.7.0
 * @category rules
 */
export const cancelVerdict = (batch: Batch): "Cancel" | "Unchanged" | "AlreadyFinished" =>
  batch.finishedAt !== null ? "AlreadyFinished" : batch.cancelRequestedAt !== null ? "Unchanged" : "Cancel"

/**
 * The batch write of a cancel: sealed at the items that have landed (`size = added`), `cancelRequestedAt = now`.
 * The same write then cancels each item (`Protocol.cancelVerdict`, `Protocol.cancelTransition`, each followed by
 * `afterItemWrite`) and applies `finish` (a batch sealed with every landed item terminal finishes here).
 *
 * @since 0.7.0
 * @category rules
 */
export const cancelTransition = (batch: Batch, now: number): Batch => ({
  ...batch,
  size: batch.added,
  cancelRequestedAt: now,
  updatedAt: Protocol.bump(batch.updatedAt, now)
})

/**
 * Whether a listing of a batch's items with state filter `state` shows `job`.
 *
 * @since 0.7.0
 * @category rules
 */
export const listed = (job: Job, state: JobState | undefined): boolean => state === undefined || job.state === state

/**
 * The outcome of opening a batch (see `openVerdict`): `Created`, `Existing` (nothing written; resume at
 * `batch.added`) or `KeyReused` (nothing written).
 *
 * @since 0.7.0
 * @category models
 */
export type OpenResult =
  | { readonly _tag: "Created"; readonly batch: Batch }
  | { readonly _tag: "Existing"; readonly batch: Batch }
  | { readonly _tag: "KeyReused"; readonly requestKey: string; readonly existingBatchId: BatchId }

/**
 * The outcome of adding a chunk (see `addVerdict`): `Added` with the batch and the jobs this write created (items
 * that had landed already are not repeated), `NotFound`, `Cancelled` or `Misplaced` (nothing written).
 *
 * @since 0.7.0
 * @category models
 */
export type AddResult =
  | { readonly _tag: "Added"; readonly batch: Batch; readonly jobs: ReadonlyArray<Job> }
  | { readonly _tag: "Cancelled" | "Misplaced"; readonly batch: Batch }
  | { readonly _tag: "NotFound"; readonly batchId: BatchId }

/**
 * The outcome of `cancelBatch`: `Cancelled` with the batch and its items the cancel wrote (abandoned, or running
 * with a cancel requested), `Unchanged` / `AlreadyFinished` with the batch (nothing written), or `NotFound`.
 *
 * @since 0.7.0
 * @category models
 */
export type CancelBatchResult =
  | { readonly _tag: "Cancelled"; readonly batch: Batch; readonly jobs: ReadonlyArray<Job> }
  | { readonly _tag: "Unchanged" | "AlreadyFinished"; readonly batch: Batch }
  | { readonly _tag: "NotFound"; readonly batchId: BatchId }

/**
 * The outcome of `replayBatch`: the batch and the failed items moved back to queued (`Protocol.replayTransition`),
 * or `NotFound`.
 *
 * @since 0.7.0
 * @category models
 */
export type ReplayBatchResult =
  | { readonly _tag: "Replayed"; readonly batch: Batch; readonly jobs: ReadonlyArray<Job> }
  | { readonly _tag: "NotFound"; readonly batchId: BatchId }

/**
 * A write's reply: its store time and its result.
 *
 * @since 0.7.0
 * @category models
 */
export interface BatchReply<A> {
  readonly now: number
  readonly result: A
}

/**
 * The batch verbs of a Store, beside `Store.Store` over the same records: a Store that provides them keeps every
 * batch rule of this module in the same atomic writes as its job verbs (each of `claim`, `claimNext`, `settle`,
 * `charge`, `cancel`, `replay` and `sweep` on an item writes the batch too). `now` overrides store time, for tests.
 *
 * @since 0.7.0
 * @category services
 */
export class BatchStore extends Context.Tag("@slowcall/core/BatchStore")<
  BatchStore,
  {
    /** Open a batch (`openVerdict` when its request key is taken in the tenant; `newBatch` otherwise). */
    readonly open: (options: {
      readonly spec: BatchSpec
      readonly now?: number | undefined
    }) => Effect.Effect<BatchReply<OpenResult>, StoreError>
    /**
     * Add a chunk at `offset` in one atomic write (`addVerdict`, `itemOf`, `Protocol.newJob`, `appended`). An item
     * whose job id exists already is a caller bug: `StoreError` (`Constraint`), nothing written.
     */
    readonly add: (options: {
      readonly batchId: BatchId
      readonly offset: number
      readonly items: ReadonlyArray<Protocol.SubmitItem>
      readonly now?: number | undefined
    }) => Effect.Effect<BatchReply<AddResult>, StoreError>
    /** The batch, or undefined (also for another tenant's batch). */
    readonly get: (options: {
      readonly batchId: BatchId
      readonly tenant?: string | undefined
    }) => Effect.Effect<Batch | undefined, StoreError>
    /** `cancelVerdict`, then `cancelTransition` and each item's cancel, in one atomic write. */
    readonly cancel: (options: {
      readonly batchId: BatchId
      readonly tenant?: string | undefined
      readonly now?: number | undefined
    }) => Effect.Effect<BatchReply<CancelBatchResult>, StoreError>
    /** Every failed item back to queued (`Protocol.replayTransition`, each with `afterItemWrite`), in one atomic write. */
    readonly replay: (options: {
      readonly batchId: BatchId
      readonly tenant?: string | undefined
      readonly now?: number | undefined
    }) => Effect.Effect<BatchReply<ReplayBatchResult>, StoreError>
    /**
     * The batch's items in the order they landed, those in `state` only when given, after the item `after` (a job
     * id of the batch; none after an id that is not one), at most `limit` (default `Protocol.defaults.listLimit`).
     * None for another tenant's batch.
     */
    readonly jobs: (options: {
      readonly batchId: BatchId
      readonly tenant?: string | undefined
      readonly state?: JobState | undefined
      readonly after?: JobId | undefined
      readonly limit?: number | undefined
    }) => Effect.Effect<ReadonlyArray<Job>, StoreError>
  }
>() {}
