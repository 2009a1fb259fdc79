/**
 * A queue for async/await code: `open` a URL, `submit` jobs, follow them (`get`, `watch`, `wait`), cancel, read the
 * attempt and charge ledgers and the dead letters, replay, and run a `worker` of plain async handlers. Every call
 * goes through the core `Client`, `Worker` and `Sweeper` on the adapter's own layers: the lease protocol, the spend
 * ledger and the state machine are the core's, word for word; this module converts Promises, AbortSignals and
 * error classes at the edge and adds no rule of its own.
 *
 * @since 0.1.0
 */
import { type Batch, BatchId } from "@slowcall/core/Batch"
import * as Client from "@slowcall/core/Client"
import type * as CoreHandler from "@slowcall/core/Handler"
import * as Handler from "@slowcall/core/Handler"
import { type Attempt, type Charge, type Job, JobId } from "@slowcall/core/Job"
import type * as Lease from "@slowcall/core/Lease"
import type * as Query from "@slowcall/core/Query"
import type { Query as QueryTag } from "@slowcall/core/Query"
import type { RateLimitInfo } from "@slowcall/core/RateLimit"
import type { Store } from "@slowcall/core/Store"
import * as Sweeper from "@slowcall/core/Sweeper"
import type { Transport } from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Cause, Effect, Exit, Layer, ManagedRuntime, Option, type Runtime, Schema, Scope, Stream } from "effect"
import * as Backend from "./Backend.js"
import { BatchNotFound, ConfigError, fromCore, Interrupted, InvalidInput, SlowcallError, Timeout } from "./Errors.js"
import { inputSchema, resultSchema, type StandardSchemaV1, validate } from "./StandardSchema.js"

/**
 * A job record, as the Store keeps it (state, attempts, spend, result, error class, progress, times in epoch ms).
 *
 * @since 0.1.0
 * @category models
 */
export type JobRecord = Job

/**
 * Options of one billed call. `estimateCents` is reserved before `fn` runs; `cost` gives the actual amount from
 * the result (default: the estimate); `costOnError` the amount an error reports (`undefined`: the error's class
 * decides); `costOnInterrupt` what was consumed when the call is cut while it runs (`undefined`: the reservation
 * stays as the record). `span` describes the model call for its `slowcall.model_call` span while tracing is on
 * (`open({ tracing })`): the GenAI system and model, and the token usage read from the result.
 *
 * `resource`, `tokens`, `usage` and `rateLimit` are the core's (`Handler.CallOptions`), read by the worker's fleet
 * limiter: the provider resource the call uses (`provider:model-class:credential`, e.g. `openai:gpt-4.1:key-a`), the
 * tokens reserved from its buckets before the call (estimated input, the request's output cap), the usage the
 * provider reported (which corrects the reservation, and is the span's usage when `span.usage` is absent), and what
 * the reply's headers said about the limits. `@slowcall/providers` fills them.
 *
 * @since 0.1.0
 * @category models
 */
export interface CallOptions<T> {
  readonly estimateCents: number
  readonly cost?: ((result: T) => number) | undefined
  readonly costOnError?: ((error: unknown) => number | undefined) | undefined
  readonly costOnInterrupt?: (() => number | undefined) | undefined
  readonly span?: CallSpan<T> | undefined
  /** @since 0.4.0 */
  readonly resource?: string | undefined
  /** @since 0.4.0 */
  readonly tokens?: { readonly input?: number | undefined; readonly maxOutput?: number | undefined } | undefined
  /** @since 0.4.0 */
  readonly usage?:
    | ((
        result: T
      ) => { readonly inputTokens?: number | undefined; readonly outputTokens?: number | undefined } | undefined)
    | undefined
  /** @since 0.4.0 */
  readonly rateLimit?: ((result: T) => RateLimitInfo | undefined) | undefined
}

/**
 * What a model call's span says about it, named as the OpenTelemetry GenAI conventions name it: `system`
 * (`gen_ai.system`, such as `openai`), `model` (`gen_ai.request.model`) and `usage`, the token counts of the result
 * (`gen_ai.usage.input_tokens` / `output_tokens`). Read only while a tracer is installed.
 *
 * @since 0.1.0
 * @category models
 */
export interface CallSpan<T> {
  readonly system?: string | undefined
  readonly model?: string | undefined
  readonly usage?:
    | ((result: T) => { readonly inputTokens?: number; readonly outputTokens?: number } | undefined)
    | undefined
}

/**
 * What a handler gets besides its input. `signal` aborts when the attempt is stopped: cancel requested, deadline
 * passed, lease lost, or the worker shutting down past its grace period. `call` is the only sanctioned way to make
 * a billed call: the spend is reserved before `fn` and settled after it, even when the lease was lost; `fn` gets a
 * signal of its own that aborts when the call is cut. It rejects with `BudgetExceeded` or `DeadlineExceeded`
 * (nothing called: rethrow them and the job is abandoned for that reason), `Interrupted` (the call was cut), or
 * whatever `fn` threw.
 *
 * @since 0.1.0
 * @category models
 */
export interface JobContext {
  readonly jobId: string
  /** The attempt number within the current run, starting at 1. */
  readonly attempt: number
  readonly traceId: string | null
  readonly signal: AbortSignal
  /** Record progress in 0..1 (clamped); stored with the next heartbeat. */
  readonly progress: (value: number) => Promise<void>
  readonly call: <T>(fn: (signal: AbortSignal) => Promise<T>, options: CallOptions<T>) => Promise<T>
}

/**
 * A handler: a bare async function, or one with schemas (any Standard Schema v1), an estimate of one attempt's
 * spend (fixed, or from the input), the attempt's shape (call timeout, retries, fallbacks: the lease is sized from
 * it; default a 60 s call) and the payload version it handles (default 1).
 *
 * @since 0.1.0
 * @category models
 */
export type HandlerDefinition<I = any, O = any> =
  | ((input: I, ctx: JobContext) => Promise<O>)
  | {
      readonly input?: StandardSchemaV1<unknown, I> | undefined
      readonly result?: StandardSchemaV1<unknown, O> | undefined
      readonly estimateCents?: number | ((input: I) => number) | undefined
      readonly attempt?: Lease.AttemptPolicy | undefined
      readonly version?: number | undefined
      /**
       * The provider resource of every `ctx.call` of this handler that names none (`CallOptions.resource`).
       *
       * @since 0.4.0
       */
      readonly resource?: string | undefined
      readonly run: (input: I, ctx: JobContext) => Promise<O>
    }

/**
 * Handlers by job type.
 *
 * @since 0.1.0
 * @category models
 */
export type Handlers = Readonly<Record<string, HandlerDefinition>>

/**
 * What `open` takes: the backend (a `url`, see `Backend.ts`, or a `layer`), the queue name (default `default`), handlers known at submit (with those of every worker made from the queue)
 * (their input schema checks each submit before anything is written), the default poll interval of `watch` and
 * `wait` (default 250 ms), and a backlog bound (`maxQueued`, `maxQueuedPerTenant`: over it a submit fails with
 * `QueueFull`).
 *
 * @since 0.1.0
 * @category models
 */
export interface OpenOptions {
  readonly url?: string | undefined
  /**
   * For Effect users and tests: the Store, Query and Transport to run on instead of the ones `url` names (the
   * caller keeps it; `close` does not tear down what it was built from when it is a prebuilt context).
   */
  readonly layer?: Layer.Layer<Store | QueryTag | Transport, unknown> | undefined
  readonly queue?: string | undefined
  readonly schema?: string | undefined
  readonly migrate?: boolean | undefined
  readonly sqs?: Backend.BackendOptions["sqs"]
  readonly handlers?: Handlers | undefined
  readonly watchIntervalMs?: number | undefined
  readonly maxQueued?: number | undefined
  readonly maxQueuedPerTenant?: number | undefined
  /**
   * Trace this queue's submits, claims, attempts and model calls with OpenTelemetry: the layer `@slowcall/otel`
   * makes from an SDK you already run (`Tracing.layerGlobal({ serviceName })` for the globally registered provider,
   * `Tracing.layerFromProvider(provider, { serviceName })` for one of yours). Without it, no span is made.
   */
  readonly tracing?: Layer.Layer<never> | undefined
}

/**
 * Options of one submit. `key` is the idempotency key (a repeat with the same request returns the first job; with a
 * different one, `KeyReused`); `deadline` and `runAfter` are a `Date` or epoch ms; `delayMs` delays from now.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubmitOptions {
  readonly key?: string | undefined
  readonly priority?: number | undefined
  readonly delayMs?: number | undefined
  readonly runAfter?: Date | number | undefined
  readonly budgetCents?: number | undefined
  readonly deadline?: Date | number | undefined
  readonly maxAttempts?: number | undefined
  readonly tenant?: string | undefined
  readonly traceId?: string | undefined
  readonly version?: number | undefined
}

/**
 * One submit's answer: the job, and whether this call created it (false: an idempotent repeat).
 *
 * @since 0.1.0
 * @category models
 */
export interface Submitted {
  readonly id: string
  readonly created: boolean
  readonly job: JobRecord
}

/**
 * One item of `submitMany`: its type and input, and the options of a single submit.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubmitManyItem extends SubmitOptions {
  readonly type: string
  readonly input: unknown
}

/**
 * The answer for one `submitMany` item: `created` (written and published), `existing` (its key named a job with the
 * same request, returned unchanged), or `key_reused` (its key named another request; only this item was refused).
 *
 * @since 0.1.0
 * @category models
 */
export type SubmitManyResult =
  | { readonly status: "created" | "existing"; readonly id: string; readonly job: JobRecord }
  | { readonly status: "key_reused"; readonly key: string; readonly existingJobId: string }

/**
 * A batch as the Store keeps it: counts per state and cost kept in the same write as each item's change, never
 * counted; `finishedAt` set once every item has landed and none is queued or running.
 *
 * @since 0.7.0
 * @category models
 */
export type BatchRecord = Batch

/**
 * One item of `submitBatch`: its type and input, and a submit's options without a key or tenant of its own (the
 * batch's key vouches for every item, and the batch's tenant is theirs).
 *
 * @since 0.7.0
 * @category models
 */
export interface BatchItem extends Omit<SubmitOptions, "key" | "tenant"> {
  readonly type: string
  readonly input: unknown
}

/**
 * A batch callback: the job enqueued once, in this queue, when the batch finishes. Its input is
 * `{ batchId, input }`.
 *
 * @since 0.7.0
 * @category models
 */
export interface BatchCallback {
  readonly type: string
  readonly input?: unknown
  readonly version?: number | undefined
  readonly priority?: number | undefined
  readonly budgetCents?: number | undefined
  readonly maxAttempts?: number | undefined
}

/**
 * Options of `submitBatch`. `key` makes the call idempotent: repeated with the same items and options it returns the
 * same batch (landing what a cut-off earlier call did not); with anything else it rejects with `KeyReused`.
 *
 * @since 0.7.0
 * @category models
 */
export interface SubmitBatchOptions {
  readonly key?: string | undefined
  readonly tenant?: string | undefined
  readonly budgetCents?: number | undefined
  readonly deadline?: Date | number | undefined
  readonly onComplete?: BatchCallback | undefined
  readonly onSuccess?: BatchCallback | undefined
  readonly chunkSize?: number | undefined
}

/**
 * A `submitBatch` answer: the batch, whether this call opened it, and how many items this call landed.
 *
 * @since 0.7.0
 * @category models
 */
export interface SubmittedBatch {
  readonly id: string
  readonly created: boolean
  readonly landed: number
  readonly batch: BatchRecord
}

/**
 * Options of `worker`. `sweeper` (default true) also runs the core Sweeper for this queue in the worker: expired
 * leases go back to queued, lost messages are republished, overdue jobs are abandoned. `shutdownGraceMs` is how long
 * `stop` lets running handlers finish before aborting their signals (default 10 s). `keepAliveMs` is the core
 * Worker's (see its doc).
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkerOptions {
  readonly handlers?: Handlers | undefined
  readonly concurrency?: number | undefined
  readonly prefetch?: number | undefined
  readonly sweeper?: boolean | { readonly intervalMs?: number | undefined } | undefined
  readonly shutdownGraceMs?: number | undefined
  readonly id?: string | undefined
  /**
   * How long a job this worker holds may go unheard from before another worker may claim it (default 6 s,
   * `Lease.defaultKeepAliveMs`; a handler whose attempt worst case is shorter holds only that). The worker renews it
   * every third, batched; a worker that dies gives its jobs back after about this long. A process paused for longer
   * has its attempts fenced (they commit nothing) and another worker may make the call again. A whole number of ms,
   * at least 3: anything else rejects `start` with `ConfigError` (its `.cause` the core's `InvalidWorkerOptions`)
   * and nothing is claimed.
   *
   * @since 0.9.0
   */
  readonly keepAliveMs?: number | undefined
}

/**
 * A worker. `start` resolves once it is claiming; `stop` resolves once it has shut down gracefully (running handlers
 * finished or stopped, their leases released). Both are idempotent.
 *
 * @since 0.1.0
 * @category models
 */
export interface QueueWorker {
  readonly start: () => Promise<void>
  readonly stop: () => Promise<void>
}

/**
 * An open queue. Every method rejects with a `SlowcallError` subclass for the core's typed failures.
 *
 * @since 0.1.0
 * @category models
 */
export interface Queue {
  readonly name: string
  readonly submit: (type: string, input: unknown, options?: SubmitOptions) => Promise<Submitted>
  readonly submitMany: (items: ReadonlyArray<SubmitManyItem>) => Promise<ReadonlyArray<SubmitManyResult>>
  readonly get: (id: string) => Promise<JobRecord>
  readonly cancel: (id: string) => Promise<JobRecord>
  /** The job now, then every change, until (and including) its first terminal state. `break` stops the polling. */
  readonly watch: (id: string, options?: { readonly intervalMs?: number | undefined }) => AsyncIterable<JobRecord>
  /** The job in its terminal state; `Timeout` after `timeoutMs` (the job goes on). */
  readonly wait: (
    id: string,
    options?: { readonly timeoutMs?: number | undefined; readonly intervalMs?: number | undefined }
  ) => Promise<JobRecord>
  readonly list: (
    filter?: Omit<Query.ListOptions, "queue" | "after"> & { readonly after?: string }
  ) => Promise<ReadonlyArray<JobRecord>>
  readonly attempts: (id: string) => Promise<ReadonlyArray<Attempt>>
  readonly charges: (id: string) => Promise<ReadonlyArray<Charge>>
  readonly deadLetters: (filter?: Omit<Query.DeadLetterOptions, "queue">) => Promise<Query.DeadLetters>
  /** Move failed jobs back to queued (never a succeeded one) by ids or by filter. */
  readonly replay: (
    options: Omit<Query.ReplayOptions, "queue" | "jobIds" | "now"> & { readonly jobIds?: ReadonlyArray<string> }
  ) => Promise<Query.ReplayResult>
  /**
   * Submit many jobs as one batch, followed, cancelled and replayed as one thing. Every item (checked against its
   * handler's input schema when this queue knows it) and callback is validated before anything is written.
   */
  readonly submitBatch: (items: ReadonlyArray<BatchItem>, options?: SubmitBatchOptions) => Promise<SubmittedBatch>
  /** The batch, or `BatchNotFound`. */
  readonly getBatch: (id: string, options?: { readonly tenant?: string | undefined }) => Promise<BatchRecord>
  /** Cancel the batch: queued items abandoned at once, running ones asked to stop, none claimed afterwards. */
  readonly cancelBatch: (id: string, options?: { readonly tenant?: string | undefined }) => Promise<BatchRecord>
  /** Move the batch's failed items back to queued (never a succeeded one). */
  readonly replayBatch: (
    id: string,
    options?: { readonly tenant?: string | undefined }
  ) => Promise<{ readonly batch: BatchRecord; readonly replayed: ReadonlyArray<JobRecord> }>
  /** The batch's items in the order they landed, those in `state` only when given, a page after `after`. */
  readonly batchJobs: (
    id: string,
    options?: {
      readonly tenant?: string | undefined
      readonly state?: JobRecord["state"] | undefined
      readonly after?: string | undefined
      readonly limit?: number | undefined
    }
  ) => Promise<ReadonlyArray<JobRecord>>
  /** The batch now, then every change of it, until (and including) it first finishes. `break` stops the polling. */
  readonly watchBatch: (
    id: string,
    options?: { readonly intervalMs?: number | undefined; readonly tenant?: string | undefined }
  ) => AsyncIterable<BatchRecord>
  readonly worker: (options?: WorkerOptions) => QueueWorker
  /** Stop every worker started from this queue, then release the connections. Idempotent. */
  readonly close: () => Promise<void>
}

type Services = Client.Client | Store | QueryTag | Transport

const asTime = (value: Date | number | undefined): number | undefined =>
  value instanceof Date ? value.getTime() : value

const toBatchId = (id: string): BatchId => {
  if (!Schema.is(BatchId)(id)) throw new BatchNotFound(id)
  return id
}

const toJobId = (id: string): JobId => {
  if (!Schema.is(JobId)(id)) throw new InvalidInput([{ message: `not a job id: ${JSON.stringify(id)}`, path: [] }])
  return id
}

/** The facade error for a failed Exit: a core typed failure mapped, a defect or a foreign error as it is. */
const rethrow = (cause: Cause.Cause<unknown>): never => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) throw fromCore(failure.value)
  if (Cause.isInterruptedOnly(cause)) throw new Interrupted()
  throw Cause.squash(cause)
}

const normalizeHandler = (type: string, definition: HandlerDefinition) =>
  typeof definition === "function" ? { type, run: definition } : { type, ...definition }

/** The core handler of one definition: schemas as effect Schemas, the run as a Promise bridged with its signal. */
const toCore = (type: string, definition: HandlerDefinition): CoreHandler.Handler<unknown, unknown> => {
  const spec = normalizeHandler(type, definition)
  const estimate = spec.estimateCents
  return Handler.make({
    type,
    version: spec.version ?? 1,
    input: inputSchema(spec.input),
    result: resultSchema(spec.result),
    estimateCents: typeof estimate === "function" ? (input: unknown) => estimate(input) : estimate,
    attempt: spec.attempt ?? { timeoutMs: 60_000 },
    ...("resource" in spec && spec.resource !== undefined ? { resource: spec.resource } : {}),
    // The core decides the outcome from its own errors: a rethrown BudgetExceeded ends abandoned(budget).
    run: (input, ctx) =>
      Handler.fromPromise(ctx, (scope) => spec.run(input, makeContext(ctx, scope))).pipe(
        Effect.mapError((error) =>
          error instanceof SlowcallError && error.cause !== undefined && typeof error.cause === "object"
            ? error.cause
            : error
        )
      )
  })
}

const makeContext = (ctx: CoreHandler.HandlerContext, scope: CoreHandler.PromiseScope): JobContext => ({
  jobId: ctx.jobId,
  attempt: ctx.attempt,
  traceId: ctx.traceId,
  signal: scope.signal,
  progress: (value) => scope.run(ctx.progress(value)),
  call: async <T>(fn: (signal: AbortSignal) => Promise<T>, options: CallOptions<T>): Promise<T> => {
    if (scope.signal.aborted) throw new Interrupted("the attempt was stopped before the call")
    const exit = await scope.call(fn, options)
    return Exit.isSuccess(exit) ? exit.value : rethrow(exit.cause)
  }
})

/**
 * Open a queue on the backend the URL names (see `Backend.ts`): connects and migrates before it resolves. Rejects
 * with `ConfigError` for an unknown URL, `StoreUnavailable` when the store cannot be reached.
 *
 * @since 0.1.0
 * @category constructors
 */
export const open = async (options: OpenOptions): Promise<Queue> => {
  const queue = options.queue ?? "default"
  const url = options.url
  if (options.layer === undefined && url === undefined) throw new ConfigError("open needs a url or a layer")
  const backend =
    options.layer ??
    Backend.layer({ url: url ?? "", queue, schema: options.schema, migrate: options.migrate, sqs: options.sqs })
  const client = Client.layerWith({
    maxQueued: options.maxQueued,
    maxQueuedPerTenant: options.maxQueuedPerTenant
  })
  const app = Layer.provideMerge(client, backend)
  // The tracer is set while its layer is built, before the backend's and the client's, so every fiber of this
  // runtime (submits, workers, sweepers) runs with it.
  const runtime = ManagedRuntime.make(options.tracing === undefined ? app : Layer.provideMerge(app, options.tracing))
  let services: Runtime.Runtime<Services>
  try {
    services = await runtime.runtime()
  } catch (error) {
    await runtime.dispose()
    throw fromCore(Cause.isCause(error) ? Cause.squash(error) : squashFiberFailure(error))
  }
  const run = async <A>(effect: Effect.Effect<A, unknown, Services>): Promise<A> => {
    if (closed) throw new ConfigError(`queue ${queue} is closed`)
    const exit = await runtime.runPromiseExit(effect)
    return Exit.isSuccess(exit) ? exit.value : rethrow(exit.cause)
  }
  let closed = false
  const schemas = new Map<string, StandardSchemaV1 | undefined>()
  const learn = (handlers: Handlers | undefined) => {
    for (const [type, definition] of Object.entries(handlers ?? {})) {
      const spec = normalizeHandler(type, definition)
      schemas.set(`${type}@${spec.version ?? 1}`, spec.input)
    }
  }
  learn(options.handlers)
  const workers = new Set<QueueWorker>()
  const intervalMs = options.watchIntervalMs ?? 250

  const toSubmit = async (type: string, input: unknown, opts: SubmitOptions): Promise<Client.SubmitOptions> => {
    const schema = schemas.get(`${type}@${opts.version ?? 1}`)
    if (schema !== undefined) await validate(schema, input)
    return {
      queue,
      type,
      input,
      version: opts.version,
      requestKey: opts.key,
      tenant: opts.tenant,
      priority: opts.priority,
      delayMs: opts.delayMs,
      runAfter: asTime(opts.runAfter),
      deadlineAt: asTime(opts.deadline),
      budgetCents: opts.budgetCents,
      maxAttempts: opts.maxAttempts,
      traceId: opts.traceId
    }
  }

  const watchStream = (id: string, every: number | undefined) =>
    Stream.unwrap(Effect.map(Client.Client, (c) => c.watch(toJobId(id), { intervalMs: every ?? intervalMs })))

  const self: Queue = {
    name: queue,
    submit: async (type, input, opts = {}) => {
      const item = await toSubmit(type, input, opts)
      const result = await run(Effect.flatMap(Client.Client, (c) => c.submit(item)))
      return { id: result.job.id, created: result.created, job: result.job }
    },
    submitMany: async (items) => {
      const prepared = await Promise.all(
        items.map(({ input, type, ...opts }, index) =>
          toSubmit(type, input, opts).catch((error: unknown) => {
            throw error instanceof InvalidInput
              ? new InvalidInput(
                  error.issues.map((issue) => ({ ...issue, path: [index, ...issue.path] })),
                  { cause: error }
                )
              : error
          })
        )
      )
      const result = await run(Effect.flatMap(Client.Client, (c) => c.submitMany(prepared)))
      return result.results.map(
        (outcome): SubmitManyResult =>
          outcome._tag === "KeyReused"
            ? { status: "key_reused", key: outcome.requestKey, existingJobId: outcome.existingJobId }
            : { status: outcome._tag === "Created" ? "created" : "existing", id: outcome.job.id, job: outcome.job }
      )
    },
    get: (id) => run(Effect.flatMap(Client.Client, (c) => c.get(toJobId(id)))),
    cancel: (id) => run(Effect.flatMap(Client.Client, (c) => c.cancel(toJobId(id)))),
    watch: (id, opts = {}) => {
      toJobId(id)
      return Stream.toAsyncIterableRuntime(watchStream(id, opts.intervalMs).pipe(Stream.mapError(fromCore)), services)
    },
    wait: async (id, opts = {}) => {
      const timeoutMs = opts.timeoutMs
      const last = Stream.runLast(watchStream(id, opts.intervalMs))
      const bounded =
        timeoutMs === undefined
          ? last
          : Effect.timeoutFail(last, { duration: timeoutMs, onTimeout: () => new Timeout(id, timeoutMs) })
      const job = await run(bounded)
      if (Option.isNone(job)) throw new ConfigError(`watch of ${id} ended without a record`)
      return job.value
    },
    list: (filter = {}) =>
      run(
        Effect.flatMap(Client.Client, (c) =>
          c.list({ ...filter, queue, after: filter.after === undefined ? undefined : toJobId(filter.after) })
        )
      ),
    attempts: (id) => run(Effect.flatMap(Client.Client, (c) => c.attempts(toJobId(id)))),
    charges: (id) => run(Effect.flatMap(Client.Client, (c) => c.charges(toJobId(id)))),
    deadLetters: (filter = {}) => run(Effect.flatMap(Client.Client, (c) => c.deadLetters({ ...filter, queue }))),
    replay: (opts) =>
      run(
        Effect.flatMap(Client.Client, (c) =>
          c.replay({ ...opts, queue, jobIds: opts.jobIds === undefined ? undefined : opts.jobIds.map(toJobId) })
        )
      ),
    submitBatch: async (items, opts = {}) => {
      const prepared = await Promise.all(
        items.map(({ input, type, ...rest }, index) =>
          toSubmit(type, input, rest).catch((error: unknown) => {
            throw error instanceof InvalidInput
              ? new InvalidInput(
                  error.issues.map((issue) => ({ ...issue, path: [index, ...issue.path] })),
                  { cause: error }
                )
              : error
          })
        )
      )
      const callback = (given: BatchCallback | undefined) => (given === undefined ? undefined : { ...given, queue })
      const result = await run(
        Effect.flatMap(Client.Client, (c) =>
          c.submitBatch({
            items: prepared.map(({ requestKey: _key, tenant: _tenant, ...item }) => item),
            requestKey: opts.key,
            tenant: opts.tenant,
            budgetCents: opts.budgetCents,
            deadlineAt: asTime(opts.deadline),
            onComplete: callback(opts.onComplete),
            onSuccess: callback(opts.onSuccess),
            chunkSize: opts.chunkSize
          })
        )
      )
      return { id: result.batch.id, created: result.created, landed: result.landed, batch: result.batch }
    },
    getBatch: async (id, opts = {}) => run(Effect.flatMap(Client.Client, (c) => c.getBatch(toBatchId(id), opts))),
    cancelBatch: async (id, opts = {}) => run(Effect.flatMap(Client.Client, (c) => c.cancelBatch(toBatchId(id), opts))),
    replayBatch: async (id, opts = {}) => run(Effect.flatMap(Client.Client, (c) => c.replayBatch(toBatchId(id), opts))),
    batchJobs: async (id, opts = {}) =>
      run(
        Effect.flatMap(Client.Client, (c) =>
          c.batchJobs(toBatchId(id), { ...opts, after: opts.after === undefined ? undefined : toJobId(opts.after) })
        )
      ),
    watchBatch: (id, opts = {}) => {
      const batchId = toBatchId(id)
      const stream = Stream.unwrap(
        Effect.map(Client.Client, (c) =>
          c.watchBatch(batchId, { intervalMs: opts.intervalMs ?? intervalMs, tenant: opts.tenant })
        )
      )
      return Stream.toAsyncIterableRuntime(stream.pipe(Stream.mapError(fromCore)), services)
    },
    worker: (workerOptions = {}) => {
      const handlers = workerOptions.handlers ?? options.handlers ?? {}
      if (Object.keys(handlers).length === 0) throw new ConfigError("a worker needs at least one handler")
      learn(handlers)
      const coreHandlers = Object.entries(handlers).map(([type, definition]) => toCore(type, definition))
      let scope: Scope.CloseableScope | undefined
      let starting: Promise<void> | undefined
      const sweeper = workerOptions.sweeper ?? true
      const worker: QueueWorker = {
        start: () => {
          starting ??= run(
            Effect.gen(function* () {
              const opened = yield* Scope.make()
              scope = opened
              // A start that fails (an option the core Worker refuses) leaves nothing running behind it.
              yield* Effect.gen(function* () {
                yield* Worker.make({
                  queue,
                  handlers: coreHandlers,
                  id: workerOptions.id,
                  concurrency: workerOptions.concurrency,
                  prefetch: workerOptions.prefetch,
                  shutdownGraceMs: workerOptions.shutdownGraceMs,
                  keepAliveMs: workerOptions.keepAliveMs
                })
                if (sweeper !== false) {
                  const every = sweeper === true ? undefined : sweeper.intervalMs
                  yield* Sweeper.make({ queue, intervalMs: every })
                }
              }).pipe(
                Scope.extend(opened),
                Effect.onError((cause) => Scope.close(opened, Exit.failCause(cause)))
              )
            })
          ).then(() => {
            workers.add(worker)
          })
          return starting
        },
        stop: async () => {
          if (starting !== undefined) await starting.catch(() => undefined)
          const current = scope
          scope = undefined
          workers.delete(worker)
          if (current !== undefined) await runtime.runPromise(Scope.close(current, Exit.void))
        }
      }
      return worker
    },
    close: async () => {
      if (closed) return
      for (const worker of [...workers]) await worker.stop()
      closed = true
      await runtime.dispose()
    }
  }
  return self
}

/** A rejection of `ManagedRuntime.runtime()` is a FiberFailure; its cause names the layer's error. */
const squashFiberFailure = (error: unknown): unknown => {
  if (typeof error === "object" && error !== null) {
    const symbols = Object.getOwnPropertySymbols(error)
    for (const symbol of symbols) {
      const value = (error as Record<symbol, unknown>)[symbol]
      if (Cause.isCause(value)) return Cause.squash(value)
    }
  }
  return error
}
