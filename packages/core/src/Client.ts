/**
 * The Client: how an application (or the HTTP server) submits jobs and follows them. It is the one edge over the
 * protocol `Store`, the read-side `Query` and the `Transport`: every submitter, in code or over HTTP, gets the same
 * validation, the same defaults and the same publishing.
 *
 * Invariants:
 * - Bad input (non-JSON `input`, input nested deeper than `Canonical.maxDepth`, a string any Store would refuse,
 *   both `input` and `inputRef`, options outside `limits`) fails with `InvalidInput` before anything is written; a
 *   reused idempotency key fails with `IdempotencyKeyReused` and writes nothing.
 * - The Store is the truth; the Transport only wakes workers. A publish that fails after a successful write is
 *   logged and loses nothing (the sweeper republishes queued jobs that have no message in flight), and so is a delay
 *   longer than the transport can express (`TransportCapabilities.maxDelayMs`): the sweeper hands the job over once
 *   it is due.
 * - A message's delay is the job's `runAfter` minus the store time of the write that queued it, so it never depends
 *   on the caller's clock.
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Either, Layer, Option, Schedule, Stream, type Tracer } from "effect"
import * as Batch from "./Batch.js"
import * as Canonical from "./Canonical.js"
import * as DeadLetters from "./DeadLetters.js"
import {
  AlreadyTerminal,
  BatchNotFound,
  IdempotencyKeyReused,
  InvalidInput,
  JobNotFound,
  QueueFull,
  StoreError
} from "./Errors.js"
import * as Ids from "./Ids.js"
import { catchFailure, inOrder } from "./internal/steps.js"
import * as Tracing from "./internal/tracing.js"
import { type Attempt, type Charge, isTerminal, type Job, type JobId, type Json } from "./Job.js"
import type { SubmitItem } from "./Protocol.js"
import * as Protocol from "./Protocol.js"
import * as QueryModule from "./Query.js"
import {
  type CountOptions,
  type DeadLetterOptions,
  type DeadLetters as DeadLettersRead,
  type ListOptions,
  Query,
  type StoreStats
} from "./Query.js"
import { Store, type SubmitError, type SubmitOutcome } from "./Store.js"
import { messageOf, type PublishItem, Transport } from "./Transport.js"

/**
 * What a caller submits. `input` may be any value: anything that is not plain JSON is rejected with `InvalidInput`
 * before anything is written; absent, it is `null`. `inputRef` names input kept elsewhere (an object store key):
 * then `input` must be absent, the job stores `null` as its input and the idempotency hash covers the reference.
 * Unset options take `defaults` (version 1, 3 attempts, priority 0), due now, no deadline, no budget, and the trace
 * id derived from the job id, or, while a tracer is installed, the W3C `traceparent` of the submit's
 * `slowcall.submit` span, so the worker's spans of the job join the submit's trace.
 *
 * Idempotency: a `requestKey` vouches for the whole request. Its fingerprint (`Protocol.fingerprint`) covers the
 * type, the version, the input (or `inputRef`), `maxAttempts`, `priority`, `budgetCents`, `deadlineAt` and the due
 * time as given (`delayMs` or `runAfter`), each with its default applied; a repeat of the key with any of them
 * different is `IdempotencyKeyReused`, and an exact repeat returns the job the first submit made. The trace id is
 * not part of it.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubmitOptions {
  readonly queue: string
  readonly type: string
  readonly version?: number | undefined
  readonly input?: unknown
  readonly inputRef?: string | undefined
  /** Idempotency key, unique per (queue, tenant). */
  readonly requestKey?: string | undefined
  readonly tenant?: string | undefined
  readonly priority?: number | undefined
  /** Delay before the job becomes due, in ms after the store time of the submit. */
  readonly delayMs?: number | undefined
  /**
   * When the job becomes due, as an absolute store-time epoch ms (give at most one of `delayMs` and `runAfter`): it
   * becomes a delay from the store's clock at the submit, and the fingerprint keeps the time as given.
   */
  readonly runAfter?: number | undefined
  /** Absolute deadline, store-time epoch ms. */
  readonly deadlineAt?: number | undefined
  readonly budgetCents?: number | undefined
  readonly maxAttempts?: number | undefined
  readonly traceId?: string | undefined
}

/**
 * The defaults of every submit, in code and over HTTP alike.
 *
 * @since 0.2.0
 * @category models
 */
export const defaults = { version: 1, maxAttempts: 3, priority: 0 } as const

/**
 * One submit's result: the job, whether this call created it (false: the idempotency key already named a job with
 * the same input, returned unchanged), and the store time of the submit.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubmitResult {
  readonly job: Job
  readonly created: boolean
  readonly now: number
}

/**
 * A bulk submit's result: the store time of the one batch write and one outcome per item, in item order
 * (`Created`, `Existing` or `KeyReused`, see `Store.SubmitOutcome`). Only the created jobs were published.
 *
 * @since 0.2.0
 * @category models
 */
export interface SubmitManyResult {
  readonly now: number
  readonly results: ReadonlyArray<SubmitOutcome>
}

/**
 * Options of `watch`: how often the job is read (default 1 s), and the tenant it must belong to.
 *
 * @since 0.1.0
 * @category models
 */
export interface WatchOptions {
  readonly intervalMs?: number | undefined
  readonly tenant?: string | undefined
}

/**
 * Options of `stats`: the population to count, the window of the dead-letter arrival count (default 5 minutes) and
 * the window of the spend groups (default 1 hour), both measured back from store time.
 *
 * @since 0.2.0
 * @category models
 */
export interface StatsOptions {
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly windowMs?: number | undefined
  readonly spendWindowMs?: number | undefined
}

/**
 * Counts, ages and spend (`Query.StoreStats`) with the store time they were read at and the windows
 * `failedInWindow` and `spend` cover, so ages and rates need no second clock.
 *
 * @since 0.2.0
 * @category models
 */
export interface StatsResult {
  readonly now: number
  readonly windowMs: number
  readonly spendWindowMs: number
  readonly stats: StoreStats
}

/**
 * What `deadLetterPage` shows: the filters of `Query.deadLetters`, then the view's sort, page size (default 50; also
 * how many recent failed jobs come with it) and cursor (a `DeadLetters.decodeCursor` key).
 *
 * @since 0.5.0
 * @category models
 */
export interface DeadLetterPageOptions extends Omit<DeadLetterOptions, "limit"> {
  readonly sort?: DeadLetters.Sort | undefined
  readonly limit?: number | undefined
  readonly cursor?: DeadLetters.Cursor | undefined
}

/**
 * A page of the dead-letter view with each group's most recent job, and the most recent failed jobs.
 *
 * @since 0.5.0
 * @category models
 */
export interface DeadLetterPage extends Omit<DeadLetters.Page, "groups"> {
  readonly groups: ReadonlyArray<DeadLetters.Summary & { readonly latest: Job | null }>
  readonly jobs: ReadonlyArray<Job>
}

/**
 * A batch callback: the job to enqueue when the batch finishes. Its input is `{ batchId, input }` (the given input,
 * or null), its tenant the batch's, its request key `Batch.callbackKey(batchId, kind)`; the options are a submit's.
 *
 * @since 0.7.0
 * @category models
 */
export interface CallbackOptions {
  readonly queue: string
  readonly type: string
  readonly version?: number | undefined
  readonly input?: unknown
  readonly maxAttempts?: number | undefined
  readonly priority?: number | undefined
  readonly budgetCents?: number | undefined
}

/**
 * What `submitBatch` asks for: the items (each a submit without a request key or tenant of its own: the batch's key
 * vouches for them and the batch's tenant is theirs), and the batch's options. `requestKey` makes the call
 * idempotent: repeated with the same items and options it returns the same batch (and lands any items a cut-off
 * earlier call did not), with anything different it fails with `IdempotencyKeyReused` naming the batch.
 * `chunkSize` (default 500) is how many items one atomic write lands.
 *
 * @since 0.7.0
 * @category models
 */
export interface SubmitBatchOptions {
  readonly items: ReadonlyArray<Omit<SubmitOptions, "requestKey" | "tenant">>
  readonly requestKey?: string | undefined
  readonly tenant?: string | undefined
  /** The batch's spend cap: no item is claimed once the batch has spent it. */
  readonly budgetCents?: number | undefined
  /** Every item's deadline at the latest (store-time epoch ms). */
  readonly deadlineAt?: number | undefined
  /** Enqueued once, when every item is terminal. */
  readonly onComplete?: CallbackOptions | undefined
  /** Enqueued once, when every item has succeeded. */
  readonly onSuccess?: CallbackOptions | undefined
  /** The job whose handler makes this batch (fan-out), kept for display. */
  readonly parentJobId?: JobId | undefined
  readonly chunkSize?: number | undefined
}

/**
 * A `submitBatch` result: the batch as the last write left it, whether this call opened it (false: the request key
 * named it already), and how many items this call landed.
 *
 * @since 0.7.0
 * @category models
 */
export interface SubmitBatchResult {
  readonly batch: Batch.Batch
  readonly created: boolean
  readonly landed: number
}

/**
 * Options of `watchBatch`: how often the batch is read (default 1 s), and the tenant it must belong to.
 *
 * @since 0.7.0
 * @category models
 */
export interface WatchBatchOptions {
  readonly intervalMs?: number | undefined
  readonly tenant?: string | undefined
}

/**
 * The client operations.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClientService {
  /**
   * Validate, hash and store one job, then publish it when it was created (an idempotent repeat publishes nothing).
   * A failed publish is logged and the job is still accepted.
   */
  readonly submit: (options: SubmitOptions) => Effect.Effect<SubmitResult, SubmitError | QueueFull>
  /**
   * Validate every item, then store them all in one `Store.submit` batch and publish the created ones. One invalid
   * item fails the whole call with `InvalidInput` (its path starts with the item's index) and nothing is written; a
   * reused key is that item's `KeyReused` outcome and does not stop the others. Over a queue bound, the whole call
   * fails with `QueueFull` and nothing is written.
   */
  readonly submitMany: (
    items: ReadonlyArray<SubmitOptions>
  ) => Effect.Effect<SubmitManyResult, InvalidInput | QueueFull | StoreError>
  /** The job, or `JobNotFound` (also for another tenant's job). */
  readonly get: (
    jobId: JobId,
    options?: { readonly tenant?: string | undefined }
  ) => Effect.Effect<Job, JobNotFound | StoreError>
  /** Cancel: queued -> abandoned(cancelled) at once; running -> flagged, the worker stops at its next heartbeat. */
  readonly cancel: (
    jobId: JobId,
    options?: { readonly tenant?: string | undefined }
  ) => Effect.Effect<Job, JobNotFound | AlreadyTerminal | StoreError>
  /** Jobs matching every given filter (`Query.list`). */
  readonly list: (options?: ListOptions) => Effect.Effect<ReadonlyArray<Job>, StoreError>
  /** How many jobs `list` would give for the same filters, at most `upTo` (`Query.count`). */
  readonly count: (options: CountOptions) => Effect.Effect<number, StoreError>
  /** Failed jobs and their groups (`Query.deadLetters`). */
  readonly deadLetters: (options?: DeadLetterOptions) => Effect.Effect<DeadLettersRead, StoreError>
  /**
   * One page of the dead-letter view (`DeadLetters.page`: singletons collapsed per error class, sorted, paged by
   * cursor), each shown group with its most recent job (`null` when that job is gone), and the most recent failed
   * jobs, at most `limit` of them.
   */
  readonly deadLetterPage: (options?: DeadLetterPageOptions) => Effect.Effect<DeadLetterPage, StoreError>
  /** The job's attempt rows in token order. */
  readonly attempts: (jobId: JobId) => Effect.Effect<ReadonlyArray<Attempt>, StoreError>
  /** The job's charge rows in insertion order. */
  readonly charges: (jobId: JobId) => Effect.Effect<ReadonlyArray<Charge>, StoreError>
  /** Counts and ages of the population, read at one store time (see `StatsResult`). */
  readonly stats: (options?: StatsOptions) => Effect.Effect<StatsResult, StoreError>
  /** Store time now (epoch ms). */
  readonly now: Effect.Effect<number, StoreError>
  /** Move dead letters back to queued (`Query.replay`: never a succeeded job) and publish each replayed job. */
  readonly replay: (options: QueryModule.ReplayOptions) => Effect.Effect<QueryModule.ReplayResult, StoreError>
  /** The current job, then every change (by `updatedAt`); ends after the first terminal state it emits. */
  readonly watch: (jobId: JobId, options?: WatchOptions) => Stream.Stream<Job, JobNotFound | StoreError>
  /**
   * Validate every item and callback (one bad one fails the call with `InvalidInput`, its path starting with
   * `items[i]`, `onComplete` or `onSuccess`, before anything is written), open the batch, then land its items in
   * chunks, each one atomic write, publishing each chunk's jobs. A call cut off between chunks leaves a batch that
   * is not complete (its `added` is below its `size`); repeating it with the same `requestKey` lands the rest. Needs
   * a Store with batch verbs (`Batch.BatchStore`); without one it fails with `StoreError` (`Constraint`).
   */
  readonly submitBatch: (
    options: SubmitBatchOptions
  ) => Effect.Effect<SubmitBatchResult, InvalidInput | IdempotencyKeyReused | StoreError>
  /** The batch (its counts, cost and times are kept by the Store, never counted), or `BatchNotFound`. */
  readonly getBatch: (
    batchId: Batch.BatchId,
    options?: { readonly tenant?: string | undefined }
  ) => Effect.Effect<Batch.Batch, BatchNotFound | StoreError>
  /**
   * Cancel the batch: sealed at the items that have landed, queued items abandoned at once, running ones asked to
   * stop (each worker sees it at its next heartbeat), no item claimed afterwards. A finished batch is returned as it
   * is.
   */
  readonly cancelBatch: (
    batchId: Batch.BatchId,
    options?: { readonly tenant?: string | undefined }
  ) => Effect.Effect<Batch.Batch, BatchNotFound | StoreError>
  /**
   * Move the batch's failed items back to queued (the replay of dead letters: never a succeeded item), in one write,
   * and publish them. A finished batch becomes unfinished until they end; a callback it already enqueued is not
   * enqueued again.
   */
  readonly replayBatch: (
    batchId: Batch.BatchId,
    options?: { readonly tenant?: string | undefined }
  ) => Effect.Effect<{ readonly batch: Batch.Batch; readonly replayed: ReadonlyArray<Job> }, BatchNotFound | StoreError>
  /**
   * The batch's items in the order they landed, those in `state` only when given, one page of `limit` (default 50)
   * after the item `after`; none for another tenant's batch.
   */
  readonly batchJobs: (
    batchId: Batch.BatchId,
    options?: {
      readonly tenant?: string | undefined
      readonly state?: Job["state"] | undefined
      readonly after?: JobId | undefined
      readonly limit?: number | undefined
    }
  ) => Effect.Effect<ReadonlyArray<Job>, StoreError>
  /**
   * The current batch, then every change of it (landed items, counts, cost, times, cancel), read by polling; ends
   * after the first finished batch it emits.
   */
  readonly watchBatch: (
    batchId: Batch.BatchId,
    options?: WatchBatchOptions
  ) => Stream.Stream<Batch.Batch, BatchNotFound | StoreError>
}

/**
 * The Client service.
 *
 * @since 0.1.0
 * @category services
 */
export class Client extends Context.Tag("@slowcall/core/Client")<Client, ClientService>() {}

/**
 * The ranges every submit's numbers must fall in, the same for every Store: integers a 32-bit column holds
 * (`version`, `maxAttempts` of at least 1, `priority`), times from the epoch to the end of year 9999 (`runAfter`,
 * `deadlineAt`, as ISO-8601 can write them) and delays of at most a hundred years either way.
 *
 * @since 0.3.0
 * @category models
 */
export const limits = {
  minInt: -2_147_483_648,
  maxInt: 2_147_483_647,
  maxEpochMs: 253_402_300_799_999,
  maxDelayMs: 100 * 365 * 24 * 3_600_000
} as const

const isInteger = (min: number) => (value: number) => Number.isInteger(value) && value >= min && value <= limits.maxInt
const isTime = (value: number) => Number.isFinite(value) && value >= 0 && value <= limits.maxEpochMs

/** The numeric options and what each must be; anything else is `InvalidInput` naming the option. */
const numericRules: ReadonlyArray<
  readonly [
    "version" | "maxAttempts" | "priority" | "delayMs" | "runAfter" | "deadlineAt" | "budgetCents",
    (value: number) => boolean,
    string
  ]
> = [
  ["version", isInteger(1), `must be an integer from 1 to ${limits.maxInt}`],
  ["maxAttempts", isInteger(1), `must be an integer from 1 to ${limits.maxInt}`],
  ["priority", isInteger(limits.minInt), `must be an integer from ${limits.minInt} to ${limits.maxInt}`],
  [
    "delayMs",
    (value) => Number.isFinite(value) && Math.abs(value) <= limits.maxDelayMs,
    `must be a finite number of milliseconds, at most ${limits.maxDelayMs}`
  ],
  ["runAfter", isTime, "must be an epoch-ms time from 1970 to the end of 9999"],
  ["deadlineAt", isTime, "must be an epoch-ms time from 1970 to the end of 9999"],
  ["budgetCents", (value) => Number.isFinite(value) && value >= 0, "must be a finite number of cents, at least 0"]
]

/** The string options: each must be storable by every Store (`Canonical.unstorable`). */
const stringOptions = ["queue", "type", "requestKey", "inputRef", "tenant", "traceId"] as const

const optionsProblem = (options: SubmitOptions): InvalidInput | undefined => {
  for (const name of stringOptions) {
    const value: unknown = options[name]
    if (value === undefined) continue
    if (typeof value !== "string") return new InvalidInput({ path: name, message: "must be a string" })
    const problem = Canonical.unstorable(value)
    if (problem !== undefined) return new InvalidInput({ path: name, message: problem })
  }
  if (options.queue.length === 0) return new InvalidInput({ path: "queue", message: "must not be empty" })
  if (options.type.length === 0) return new InvalidInput({ path: "type", message: "must not be empty" })
  if (options.requestKey !== undefined && options.requestKey.length === 0) {
    return new InvalidInput({ path: "requestKey", message: "must not be empty" })
  }
  if (options.inputRef !== undefined) {
    if (options.inputRef.length === 0) return new InvalidInput({ path: "inputRef", message: "must not be empty" })
    if (options.input !== undefined) {
      return new InvalidInput({ path: "inputRef", message: "give either input or inputRef, not both" })
    }
  }
  if (options.delayMs !== undefined && options.runAfter !== undefined) {
    return new InvalidInput({ path: "delayMs", message: "give either delayMs or runAfter, not both" })
  }
  for (const [name, valid, message] of numericRules) {
    const value = options[name]
    if (value !== undefined && !(typeof value === "number" && valid(value)))
      return new InvalidInput({ path: name, message })
  }
  return undefined
}

/**
 * The Store item of one submit: validated, hashed, fingerprinted, with a fresh id and every default applied. A
 * `runAfter` becomes a delay from `storeNow` (read only when one is given). Writes nothing. With an `index` (an item
 * of a batch), an `InvalidInput` path starts with `[index].`.
 */
const prepare = <E>(
  options: SubmitOptions,
  storeNow: Effect.Effect<number, E>,
  span: Tracer.AnySpan | undefined,
  index?: number
): Effect.Effect<SubmitItem, InvalidInput | E> => {
  const invalid = (error: InvalidInput) =>
    Effect.fail(
      index === undefined ? error : new InvalidInput({ path: `[${index}].${error.path}`, message: error.message })
    )
  const problem = optionsProblem(options)
  if (problem !== undefined) return invalid(problem)
  const inputRef = options.inputRef
  // One walk of the input both checks it and writes the canonical text its hash is taken of.
  const hashed = Canonical.inputHashEither(
    inputRef === undefined ? (options.input === undefined ? null : options.input) : { inputRef }
  )
  if (Either.isLeft(hashed)) return invalid(hashed.left)
  const inputHash = hashed.right
  const input = (inputRef === undefined && options.input !== undefined ? options.input : null) as Json
  const version = options.version ?? defaults.version
  const priority = options.priority ?? defaults.priority
  const maxAttempts = options.maxAttempts ?? defaults.maxAttempts
  const budgetCents = options.budgetCents ?? null
  const deadlineAt = options.deadlineAt ?? null
  const runAfter = options.runAfter
  const fingerprint = Protocol.fingerprint({
    type: options.type,
    version,
    inputHash,
    maxAttempts,
    priority,
    budgetCents,
    deadlineAt,
    schedule: runAfter === undefined ? { delayMs: options.delayMs ?? 0 } : { runAfter }
  })
  const item = (id: JobId, delayMs: number): SubmitItem => ({
    id,
    queue: options.queue,
    tenant: options.tenant ?? null,
    type: options.type,
    version,
    requestKey: options.requestKey ?? null,
    inputHash,
    input,
    inputRef: inputRef ?? null,
    priority,
    delayMs,
    deadlineAt,
    budgetCents,
    maxAttempts,
    traceId: options.traceId ?? (span === undefined ? id.replace(/-/g, "") : Tracing.traceparentOf(span)),
    fingerprint
  })
  return runAfter === undefined
    ? Effect.map(Ids.makeJobId, (id) => item(id, options.delayMs ?? 0))
    : Effect.flatMap(Ids.makeJobId, (id) => Effect.map(storeNow, (now) => item(id, Math.max(0, runAfter - now))))
}

/** What `watchBatch` tells apart: every field an item write or a batch verb moves. */
const batchShown = (batch: Batch.Batch): string =>
  JSON.stringify([
    batch.added,
    batch.size,
    batch.counts,
    batch.costCents,
    batch.updatedAt,
    batch.finishedAt,
    batch.cancelRequestedAt
  ])

/** `prepare` whose `InvalidInput` paths start with `prefix.` (an item or a callback of a batch). */
const prepareIn = <E>(
  options: SubmitOptions,
  storeNow: Effect.Effect<number, E>,
  span: Tracer.AnySpan | undefined,
  prefix: string
): Effect.Effect<SubmitItem, InvalidInput | E> =>
  Effect.mapError(prepare(options, storeNow, span), (error) =>
    error instanceof InvalidInput
      ? new InvalidInput({ path: `${prefix}.${error.path}`, message: error.message })
      : error
  )

/** The batch's own options that `prepare` does not see: anything else is checked item by item. */
const batchProblem = (options: SubmitBatchOptions): InvalidInput | undefined => {
  if (options.items.length === 0) return new InvalidInput({ path: "items", message: "a batch holds at least one item" })
  if (options.requestKey !== undefined) {
    if (typeof options.requestKey !== "string" || options.requestKey.length === 0) {
      return new InvalidInput({ path: "requestKey", message: "must be a non-empty string" })
    }
    const problem = Canonical.unstorable(options.requestKey)
    if (problem !== undefined) return new InvalidInput({ path: "requestKey", message: problem })
  }
  const budget = options.budgetCents
  if (budget !== undefined && !(typeof budget === "number" && Number.isFinite(budget) && budget >= 0)) {
    return new InvalidInput({ path: "budgetCents", message: "must be a finite number of cents, at least 0" })
  }
  const deadline = options.deadlineAt
  if (deadline !== undefined && !(typeof deadline === "number" && isTime(deadline))) {
    return new InvalidInput({ path: "deadlineAt", message: "must be an epoch-ms time from 1970 to the end of 9999" })
  }
  const chunk = options.chunkSize
  if (chunk !== undefined && !(Number.isInteger(chunk) && chunk >= 1)) {
    return new InvalidInput({ path: "chunkSize", message: "must be an integer of at least 1" })
  }
  return undefined
}

/**
 * `submitBatch` over the Store's batch verbs: validate and prepare every item and callback, open the batch, land
 * its items chunk by chunk from where it stands, publishing each chunk.
 */
const submitBatchWith = Effect.fnUntraced(function* (
  env: {
    readonly verbs: Batch.BatchStore["Type"]
    readonly now: Effect.Effect<number, StoreError>
    readonly publish: (jobs: ReadonlyArray<Job>, now: number) => Effect.Effect<void>
  },
  options: SubmitBatchOptions,
  span: Tracer.AnySpan | undefined
) {
  const { publish, verbs } = env
  const problem = batchProblem(options)
  if (problem !== undefined) return yield* problem
  const storeNow = yield* Effect.cached(env.now)
  const tenant = options.tenant
  const items: Array<SubmitItem> = []
  for (const [index, item] of options.items.entries()) {
    if ((item as SubmitOptions).requestKey !== undefined) {
      return yield* new InvalidInput({
        path: `items[${index}].requestKey`,
        message: "items of a batch have no key of their own: the batch's requestKey vouches for them"
      })
    }
    items.push(yield* prepareIn({ ...item, tenant }, storeNow, span, `items[${index}]`))
  }
  const batchId = Batch.BatchId.make(yield* Ids.makeJobId, { disableValidation: true })
  const onComplete = yield* callbackOf(options.onComplete, "onComplete", batchId, tenant, storeNow)
  const onSuccess = yield* callbackOf(options.onSuccess, "onSuccess", batchId, tenant, storeNow)
  // The queue every item and callback shares, if one: a Store that keeps a batch beside its items needs it.
  const queues = new Set([
    ...items.map((item) => item.queue),
    ...[onComplete, onSuccess].flatMap((c) => (c === undefined ? [] : [c.callback.queue]))
  ])
  const spec: Batch.BatchSpec = {
    id: batchId,
    queue: queues.size === 1 ? [...queues][0]! : null,
    requestKey: options.requestKey ?? null,
    tenant: tenant ?? null,
    fingerprint: Batch.fingerprint({
      itemFingerprints: items.map((item) => item.fingerprint ?? item.inputHash),
      budgetCents: options.budgetCents ?? null,
      deadlineAt: options.deadlineAt ?? null,
      onComplete: onComplete?.fingerprint ?? null,
      onSuccess: onSuccess?.fingerprint ?? null,
      parentJobId: options.parentJobId ?? null
    }),
    size: items.length,
    budgetCents: options.budgetCents ?? null,
    deadlineAt: options.deadlineAt ?? null,
    onComplete: onComplete?.callback ?? null,
    onSuccess: onSuccess?.callback ?? null,
    parentJobId: options.parentJobId ?? null
  }
  const opened = (yield* verbs.open({ spec })).result
  if (opened._tag === "KeyReused") {
    return yield* new IdempotencyKeyReused({
      requestKey: opened.requestKey,
      existingJobId: opened.existingBatchId as string as JobId
    })
  }
  let batch = opened.batch
  let landed = 0
  const chunkSize = Math.max(1, Math.floor(options.chunkSize ?? 500))
  // Each chunk lands at the batch's landed items; a resumed call starts where the earlier one stopped.
  while (batch.added < batch.size && batch.cancelRequestedAt === null) {
    const offset = batch.added
    const reply = yield* verbs.add({ batchId: batch.id, offset, items: items.slice(offset, offset + chunkSize) })
    const result = reply.result
    if (result._tag === "NotFound") return yield* Effect.die(new Error(`batch ${batch.id} vanished while filled`))
    batch = result.batch
    if (result._tag === "Added") {
      landed += result.jobs.length
      yield* publish(result.jobs, reply.now)
    }
  }
  return { batch, created: opened._tag === "Created", landed } satisfies SubmitBatchResult
})

/** A callback's stored spec and the fingerprint of what the caller gave (the batch id is not part of it). */
const callbackOf = Effect.fnUntraced(function* (
  options: CallbackOptions | undefined,
  kind: Batch.CallbackKind,
  batchId: Batch.BatchId,
  tenant: string | undefined,
  storeNow: Effect.Effect<number, StoreError>
) {
  if (options === undefined) return undefined
  const given = yield* prepareIn({ ...options, tenant }, storeNow, undefined, kind)
  const wrapped = yield* prepareIn(
    { ...options, tenant, input: { batchId, input: options.input === undefined ? null : options.input } },
    storeNow,
    undefined,
    kind
  )
  const { requestKey: _key, tenant: _tenant, ...callback } = wrapped
  return { callback: callback satisfies Batch.Callback, fingerprint: given.fingerprint ?? given.inputHash }
})

/**
 * How a Client bounds the backlog it adds to. `maxQueued` is the most queued jobs (due or not) one queue may hold,
 * `maxQueuedPerTenant` the most one tenant may hold in a queue; a submit that would go past either fails with
 * `QueueFull` (`retryAfterMs` in it, default 5 s) and writes nothing. Unset, there is no bound.
 *
 * The bound is soft: the count is one `Query.countQueued` read (counting no further than the bound) before the
 * write, not part of it, so submits racing each other from several clients may together pass it by as many jobs as
 * they submit at once. It keeps a runaway producer from filling a queue without bound; it is not an exact quota.
 * An idempotent repeat of a submit that already made its job is refused like any other while the bound is reached.
 *
 * @since 0.3.0
 * @category models
 */
export interface ClientOptions {
  readonly maxQueued?: number | undefined
  readonly maxQueuedPerTenant?: number | undefined
  readonly queueFullRetryAfterMs?: number | undefined
}

/**
 * Refuses a batch that would take a queue, or a tenant's share of one, past its bound: for each (queue, tenant) of
 * the items, the queued jobs already there plus the items going there.
 */
const admitBounded = Effect.fnUntraced(function* (
  query: Query["Type"],
  clientOptions: ClientOptions,
  retryAfterMs: number,
  items: ReadonlyArray<SubmitItem>
) {
  const { maxQueued, maxQueuedPerTenant } = clientOptions
  const byQueue = new Map<string, number>()
  const byTenant = new Map<string, { queue: string; tenant: string; count: number }>()
  for (const item of items) {
    byQueue.set(item.queue, (byQueue.get(item.queue) ?? 0) + 1)
    if (item.tenant != null) {
      const key = JSON.stringify([item.queue, item.tenant])
      const entry = byTenant.get(key) ?? { queue: item.queue, tenant: item.tenant, count: 0 }
      entry.count += 1
      byTenant.set(key, entry)
    }
  }
  if (maxQueued !== undefined) {
    for (const [queue, count] of byQueue) {
      const queued = yield* query.countQueued({ queue, upTo: maxQueued })
      if (queued + count > maxQueued) {
        return yield* new QueueFull({ queue, tenant: null, limit: maxQueued, retryAfterMs })
      }
    }
  }
  if (maxQueuedPerTenant !== undefined) {
    for (const { count, queue, tenant } of byTenant.values()) {
      const queued = yield* query.countQueued({ queue, tenant, upTo: maxQueuedPerTenant })
      if (queued + count > maxQueuedPerTenant) {
        return yield* new QueueFull({ queue, tenant, limit: maxQueuedPerTenant, retryAfterMs })
      }
    }
  }
})

/**
 * Build a client over the Store, Query and Transport in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<ClientService, never, Store | Query | Transport> = Effect.suspend(() => makeWith({}))

/**
 * Build a client with a backlog bound (see `ClientOptions`) over the Store, Query and Transport in context.
 *
 * @since 0.3.0
 * @category constructors
 */
export const makeWith: (
  clientOptions: ClientOptions
) => Effect.Effect<ClientService, never, Store | Query | Transport> = Effect.fnUntraced(function* (
  clientOptions: ClientOptions
) {
  // The client's generators are made once, at module level (this one, `admitBounded`); its methods are plain
  // functions (why in scripts/check-generators.mjs).
  const store = yield* Store
  const query = yield* Query
  const transport = yield* Transport
  const batchStore = Option.getOrUndefined(yield* Effect.serviceOption(Batch.BatchStore))
  const maxDelayMs = transport.capabilities.maxDelayMs
  const maxBatch = Math.max(1, transport.capabilities.maxBatch)
  const retryAfterMs = clientOptions.queueFullRetryAfterMs ?? 5_000

  /**
   * Refuses a batch that would take a queue, or a tenant's share of one, past its bound: for each (queue, tenant)
   * of the items, the queued jobs already there plus the items going there.
   */
  const admit = (items: ReadonlyArray<SubmitItem>): Effect.Effect<void, QueueFull | StoreError> =>
    clientOptions.maxQueued === undefined && clientOptions.maxQueuedPerTenant === undefined
      ? Effect.void
      : admitBounded(query, clientOptions, retryAfterMs, items)

  /**
   * Hand queued jobs to the transport, each due `runAfter - now` after the write at store time `now` (without `now`,
   * each job's own `updatedAt`: the store time of the write that queued it): one publish call per queue and transport
   * batch. A job whose delay is beyond the transport's limit is left to the sweeper.
   */
  const publish = (jobs: ReadonlyArray<Job>, now?: number): Effect.Effect<void> => {
    const queues = new Map<string, Array<PublishItem>>()
    for (const job of jobs) {
      const delayMs = Math.max(0, job.runAfter - (now ?? job.updatedAt))
      if (maxDelayMs !== null && delayMs > maxDelayMs) continue
      let items = queues.get(job.queue)
      if (items === undefined) {
        items = []
        queues.set(job.queue, items)
      }
      items.push({ message: messageOf(job), delayMs })
    }
    const calls: Array<Effect.Effect<void>> = []
    for (const [queue, items] of queues) {
      for (let i = 0; i < items.length; i += maxBatch) {
        const chunk = items.slice(i, i + maxBatch)
        calls.push(
          catchFailure(transport.publish({ queue, items: chunk }), (error) =>
            Effect.logWarning("publish failed; the sweeper will republish the jobs", error).pipe(
              Effect.annotateLogs({ queue, jobs: chunk.length, firstJobId: chunk[0]?.message.jobId ?? "" })
            )
          )
        )
      }
    }
    return inOrder(calls)
  }

  /**
   * Run a submit in its `slowcall.submit` span while a tracer is installed (parented to a `traceparent` given as
   * `traceId`, else to the current span), handing the span to `prepare` so the jobs carry it to the worker.
   */
  const traced = <A, E>(
    attributes: Record<string, unknown>,
    parentTraceId: string | undefined,
    body: (span: Tracer.AnySpan | undefined) => Effect.Effect<A, E>
  ): Effect.Effect<A, E> =>
    Effect.flatMap(Tracing.activeTracer, (tracer) => {
      if (tracer === undefined) return body(undefined)
      const parent = parentTraceId?.startsWith("00-") ? Tracing.parentOf(parentTraceId) : undefined
      return Effect.withSpan(
        Effect.flatMap(Effect.orDie(Effect.currentSpan), body),
        "slowcall.submit",
        parent === undefined
          ? { captureStackTrace: false, kind: "producer", attributes }
          : { captureStackTrace: false, kind: "producer", attributes, parent }
      )
    })

  const submit = (options: SubmitOptions): Effect.Effect<SubmitResult, SubmitError | QueueFull> =>
    traced({ "slowcall.queue": options.queue, "slowcall.type": options.type }, options.traceId, (span) =>
      submitOne(options, span)
    )

  const submitOne = (
    options: SubmitOptions,
    span: Tracer.AnySpan | undefined
  ): Effect.Effect<SubmitResult, SubmitError | QueueFull> =>
    Effect.flatMap(prepare(options, store.now, span), (item) => {
      const write = Effect.flatMap(store.submit({ items: [item] }), (reply) => outcomeOf(reply.results[0], reply.now))
      const admitted = Effect.zipRight(admit([item]), write)
      return span === undefined
        ? admitted
        : Effect.zipRight(Effect.annotateCurrentSpan("slowcall.job_id", item.id), admitted)
    })

  /** One submit's result from its item's outcome: publish a created job, refuse a reused key. */
  const outcomeOf = (
    outcome: SubmitOutcome | undefined,
    now: number
  ): Effect.Effect<SubmitResult, IdempotencyKeyReused> => {
    if (outcome === undefined) return Effect.die(new Error("Store.submit returned no result for its item"))
    switch (outcome._tag) {
      case "KeyReused":
        return Effect.fail(
          new IdempotencyKeyReused({ requestKey: outcome.requestKey, existingJobId: outcome.existingJobId })
        )
      case "Existing":
        return Effect.succeed({ job: outcome.job, created: false, now })
      case "Created":
        return Effect.as(publish([outcome.job], now), { job: outcome.job, created: true, now })
    }
  }

  const submitMany = (
    items: ReadonlyArray<SubmitOptions>
  ): Effect.Effect<SubmitManyResult, InvalidInput | QueueFull | StoreError> =>
    traced({ "slowcall.batch_size": items.length }, undefined, (span) => submitAll(items, span))

  const submitAll = (
    items: ReadonlyArray<SubmitOptions>,
    span: Tracer.AnySpan | undefined
  ): Effect.Effect<SubmitManyResult, InvalidInput | QueueFull | StoreError> =>
    // Store time is read once for the batch, and only when an item gives an absolute `runAfter`.
    Effect.flatMap(Effect.cached(store.now), (storeNow) =>
      Effect.flatMap(
        Effect.forEach(items, (options, index) => prepare(options, storeNow, span, index)),
        (prepared): Effect.Effect<SubmitManyResult, QueueFull | StoreError> =>
          prepared.length === 0
            ? Effect.map(store.now, (now) => ({ now, results: [] }))
            : Effect.zipRight(
                admit(prepared),
                Effect.flatMap(store.submit({ items: prepared }), (reply) => {
                  const created = reply.results.flatMap((outcome) => (outcome._tag === "Created" ? [outcome.job] : []))
                  return Effect.as(publish(created, reply.now), { now: reply.now, results: reply.results })
                })
              )
      )
    )

  const cancel = (
    jobId: JobId,
    options?: { readonly tenant?: string | undefined }
  ): Effect.Effect<Job, JobNotFound | AlreadyTerminal | StoreError> =>
    Effect.flatMap(
      store.cancel({ items: [{ jobId, tenant: options?.tenant }] }),
      (reply): Effect.Effect<Job, JobNotFound | AlreadyTerminal> => {
        const result = reply.results[0]
        if (result === undefined) return Effect.die(new Error("Store.cancel returned no result for its item"))
        switch (result._tag) {
          case "Cancelled":
            return Effect.succeed(result.job)
          case "AlreadyTerminal":
            return Effect.fail(new AlreadyTerminal({ jobId, state: result.job.state }))
          case "NotFound":
            return Effect.fail(new JobNotFound({ jobId }))
        }
      }
    )

  const replay = (options: QueryModule.ReplayOptions): Effect.Effect<QueryModule.ReplayResult, StoreError> =>
    // `Query.replay` does not return the store time of its writes; each write bumped the job's `updatedAt` to at
    // least that time, so it stands in (a replayed job is due at its write). Each page is published as it moves.
    QueryModule.replay(store, query, options, (jobs) => publish(jobs))

  const deadLetterPage = (options: DeadLetterPageOptions = {}): Effect.Effect<DeadLetterPage, StoreError> =>
    deadLetterPageOf(query, options)

  const stats = (options: StatsOptions = {}): Effect.Effect<StatsResult, StoreError> =>
    Effect.flatMap(store.now, (now) => {
      const windowMs = options.windowMs ?? 300_000
      const spendWindowMs = options.spendWindowMs ?? 3_600_000
      return Effect.map(
        query.stats({
          queue: options.queue,
          tenant: options.tenant,
          failedSince: now - windowMs,
          spendSince: now - spendWindowMs
        }),
        (result) => ({ now, windowMs, spendWindowMs, stats: result })
      )
    })

  const watch = (jobId: JobId, options: WatchOptions = {}): Stream.Stream<Job, JobNotFound | StoreError> =>
    Stream.repeatEffectWithSchedule(
      query.get({ jobId, tenant: options.tenant }),
      Schedule.spaced(Duration.millis(options.intervalMs ?? 1_000))
    ).pipe(
      Stream.changesWith((a, b) => a.updatedAt === b.updatedAt),
      Stream.takeUntil((job) => isTerminal(job.state))
    )

  /** The Store's batch verbs, or the error of a Store that has none. */
  const batches: Effect.Effect<Batch.BatchStore["Type"], StoreError> =
    batchStore === undefined
      ? Effect.fail(
          new StoreError({
            reason: "Constraint",
            operation: "batch",
            detail: "this Store has no batch verbs (Batch.BatchStore is not provided)"
          })
        )
      : Effect.succeed(batchStore)

  const submitBatch = (
    options: SubmitBatchOptions
  ): Effect.Effect<SubmitBatchResult, InvalidInput | IdempotencyKeyReused | StoreError> =>
    Effect.flatMap(batches, (verbs) =>
      traced({ "slowcall.batch_size": options.items.length }, undefined, (span) =>
        submitBatchWith({ verbs, now: store.now, publish }, options, span)
      )
    )

  const batchResult = <A>(
    batchId: Batch.BatchId,
    result: { readonly _tag: string; readonly batch?: Batch.Batch } & A
  ): Effect.Effect<A & { readonly batch: Batch.Batch }, BatchNotFound> =>
    result.batch === undefined
      ? Effect.fail(new BatchNotFound({ batchId }))
      : Effect.succeed(result as A & { readonly batch: Batch.Batch })

  const getBatch = (
    batchId: Batch.BatchId,
    options?: { readonly tenant?: string | undefined }
  ): Effect.Effect<Batch.Batch, BatchNotFound | StoreError> =>
    Effect.flatMap(batches, (verbs) =>
      Effect.flatMap(verbs.get({ batchId, tenant: options?.tenant }), (batch) =>
        batch === undefined ? Effect.fail(new BatchNotFound({ batchId })) : Effect.succeed(batch)
      )
    )

  const cancelBatch = (
    batchId: Batch.BatchId,
    options?: { readonly tenant?: string | undefined }
  ): Effect.Effect<Batch.Batch, BatchNotFound | StoreError> =>
    Effect.flatMap(batches, (verbs) =>
      Effect.flatMap(verbs.cancel({ batchId, tenant: options?.tenant }), (reply) =>
        Effect.map(batchResult(batchId, reply.result), (result) => result.batch)
      )
    )

  const replayBatch = (
    batchId: Batch.BatchId,
    options?: { readonly tenant?: string | undefined }
  ): Effect.Effect<
    { readonly batch: Batch.Batch; readonly replayed: ReadonlyArray<Job> },
    BatchNotFound | StoreError
  > =>
    Effect.flatMap(batches, (verbs) =>
      Effect.flatMap(verbs.replay({ batchId, tenant: options?.tenant }), (reply) =>
        Effect.flatMap(batchResult(batchId, reply.result), (result) => {
          const replayed = result._tag === "Replayed" ? (result as { readonly jobs: ReadonlyArray<Job> }).jobs : []
          return Effect.as(publish(replayed, reply.now), { batch: result.batch, replayed })
        })
      )
    )

  const watchBatch = (
    batchId: Batch.BatchId,
    options: WatchBatchOptions = {}
  ): Stream.Stream<Batch.Batch, BatchNotFound | StoreError> =>
    Stream.repeatEffectWithSchedule(
      getBatch(batchId, { tenant: options.tenant }),
      Schedule.spaced(Duration.millis(options.intervalMs ?? 1_000))
    ).pipe(
      Stream.changesWith((a, b) => batchShown(a) === batchShown(b)),
      Stream.takeUntil((batch) => batch.finishedAt !== null)
    )

  return {
    submitBatch,
    getBatch,
    cancelBatch,
    replayBatch,
    batchJobs: (batchId, options) =>
      Effect.flatMap(batches, (verbs) =>
        verbs.jobs({
          batchId,
          tenant: options?.tenant,
          state: options?.state,
          after: options?.after,
          limit: options?.limit
        })
      ),
    watchBatch,
    submit,
    submitMany,
    get: (jobId, options) => query.get({ jobId, tenant: options?.tenant }),
    cancel,
    list: (options) => query.list(options ?? {}),
    count: (options) => query.count(options),
    deadLetters: (options) => query.deadLetters(options ?? {}),
    deadLetterPage,
    attempts: (jobId) => query.attempts({ jobId }),
    charges: (jobId) => query.charges({ jobId }),
    stats,
    now: store.now,
    replay,
    watch
  }
})

/** `ClientService.deadLetterPage` over `query`: the groups read once, the view, each shown group's latest job. */
const deadLetterPageOf = Effect.fnUntraced(function* (query: Query["Type"], options: DeadLetterPageOptions) {
  const limit = options.limit ?? DeadLetters.defaultLimit
  const read = yield* query.deadLetters({
    queue: options.queue,
    tenant: options.tenant,
    errorClass: options.errorClass,
    type: options.type,
    limit
  })
  const page = DeadLetters.page(read.groups, { sort: options.sort, limit, cursor: options.cursor })
  const groups = yield* Effect.forEach(
    page.groups,
    (group) => {
      const latest = group.jobIds[0]
      return latest === undefined
        ? Effect.succeed({ ...group, latest: null })
        : query.get({ jobId: latest, tenant: options.tenant }).pipe(
            Effect.map((job): Job | null => job),
            Effect.catchTag("JobNotFound", () => Effect.succeed(null)),
            Effect.map((job) => ({ ...group, latest: job }))
          )
    },
    { concurrency: 8 }
  )
  return { ...page, groups, jobs: read.jobs } satisfies DeadLetterPage
})

/**
 * A layer providing `Client` over the Store, Query and Transport in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Client, never, Store | Query | Transport> = Layer.effect(Client, make)

/**
 * A layer providing `Client` with a backlog bound (see `ClientOptions`).
 *
 * @since 0.3.0
 * @category layers
 */
export const layerWith = (options: ClientOptions): Layer.Layer<Client, never, Store | Query | Transport> =>
  Layer.effect(Client, makeWith(options))
