/**
 * Handlers: the code a worker runs for a job type. A handler is registered by `(type, version)`, declares the
 * schemas of its input and result, the shape of one attempt (from which its lease is sized) and, optionally, what
 * an attempt is expected to cost. Its `run` receives a context whose `call` is the only sanctioned way to make a
 * billed model call: the spend is reserved before the call and settled after it, so it is recorded even when the
 * call is interrupted or the worker has lost its lease.
 *
 * @since 0.1.0
 */
import { Data, Effect, type Exit, Fiber, Runtime, type Schema } from "effect"
import type { StoreError } from "./Errors.js"
import type { JobId } from "./Job.js"
import { type AttemptPolicy, leaseFor } from "./Lease.js"
import type { RateLimitInfo } from "./RateLimit.js"

/**
 * A model call whose estimate would take the job's spend past its budget, or, with `batchId`, the spend of the batch
 * the job belongs to past the batch's budget (the Store refused the reservation: `costCents` is then the batch's
 * spend, reservations of its calls in flight included, and `budgetCents` the batch's budget). Nothing was reserved
 * and nothing was called; the worker ends the job `abandoned(budget)`, its `lastError` this message.
 *
 * @since 0.1.0
 * @category errors
 */
export class BudgetExceeded extends Data.TaggedError("BudgetExceeded")<{
  readonly jobId: JobId
  readonly costCents: number
  readonly estimateCents: number
  readonly budgetCents: number
  /** @since 0.8.0 */
  readonly batchId?: string | undefined
}> {
  override get message() {
    return this.batchId === undefined
      ? `job ${this.jobId}: spend ${this.costCents} + estimate ${this.estimateCents} exceeds budget ${this.budgetCents}`
      : `job ${this.jobId}: batch ${this.batchId} spend ${this.costCents} + estimate ${this.estimateCents} exceeds the batch's budget ${this.budgetCents}`
  }
}

/**
 * A model call asked for once the job's deadline (`deadlineAt`, store time) had passed, as the store time of its
 * reservation showed. Nothing was called and the reservation was settled at 0; the worker ends the job
 * `abandoned(deadline)`.
 *
 * @since 0.1.0
 * @category errors
 */
export class DeadlineExceeded extends Data.TaggedError("DeadlineExceeded")<{
  readonly jobId: JobId
  readonly deadlineAt: number
  readonly now: number
}> {
  override get message() {
    return `job ${this.jobId}: deadline ${this.deadlineAt} passed (store time ${this.now})`
  }
}

/**
 * One billed model call. `estimateCents` is reserved in the charge ledger before `run` starts; `cost` gives the
 * actual amount from the reply, settled on the same call id afterwards. When `run` fails, `costOnError` may give
 * the amount the error reports (a timeout the provider billed, 0 for a request it refused); when it is absent or
 * gives `undefined`, the error's class decides (`ErrorClass.defaultCostOnError`): settled at 0 for the classes
 * providers do not bill (rate limits, overload, rejected requests), the reservation kept as the record for those
 * they may have billed (timeouts, lost connections, unknown failures). When `run` is interrupted after it started
 * (cancel, deadline, lost lease, shutdown), `costOnInterrupt` may give what was consumed up to the cut (a stream
 * settles at the tokens it received); absent, or giving `undefined`, the reservation stays as the record. A call
 * interrupted before `run` started (a gate or an admission wait) never asks `costOnInterrupt`: nothing was consumed, and its reservation is settled at 0.
 *
 * `resource`, `tokens`, `usage` and `rateLimit` are what the worker's fleet limiter reads (see "Staying within provider
 * limits" in the docs): the call is admitted against its resource's limits before `run` starts, taking one request
 * and the `tokens` reservation; after the call the reservation is corrected by `usage`, and `rateLimit` tells the
 * limiter what the provider said about its limits. A call that must wait does not start: its job goes back to the
 * queue until the wait ends, its attempt not used and its reservation given back. A call without `resource` (its own
 * or its handler's) is not limited and pays nothing for it.
 * `@slowcall/providers` fills all four from the request and the reply.
 *
 * @since 0.1.0
 * @category models
 */
export interface CallOptions<A, E, R> {
  readonly estimateCents: number
  readonly run: Effect.Effect<A, E, R>
  readonly cost: (result: A) => number
  readonly costOnError?: ((error: E) => number | undefined) | undefined
  /**
   * What the `slowcall.model_call` span of this call says about the model, as the OpenTelemetry GenAI semantic
   * conventions name it: `system` (`gen_ai.system`, e.g. `openai`), `model` (`gen_ai.request.model`), and `usage`,
   * the token counts read from the reply (`gen_ai.usage.input_tokens` / `output_tokens`). Only read while a tracer is
   * installed; a throwing `usage` leaves the counts out and changes nothing else.
   */
  readonly span?: CallSpan<A> | undefined
  /** @since 0.4.0 */
  readonly costOnInterrupt?: (() => number | undefined) | undefined
  /**
   * The provider resource the call uses, named `provider:model-class:credential` (e.g. `openai:gpt-4.1:key-a`; the
   * credential is a label for the key, never the key): 1..200 characters of `[A-Za-z0-9._:/@+-]`. Every call naming
   * the same resource shares its limits across the whole fleet. Absent: the handler's `resource`; absent too, the
   * call is not limited.
   *
   * @since 0.4.0
   */
  readonly resource?: string | undefined
  /**
   * The reservation the call takes from its resource's token buckets before it starts: `input`, the estimated input
   * tokens (the providers' wrappers count the prompt's characters / 4), and `maxOutput`, the request's cap on output
   * tokens (`max_tokens`), which providers count against output limits when they admit a request. Absent fields
   * reserve nothing in that dimension. Read only when `resource` is set.
   *
   * @since 0.4.0
   */
  readonly tokens?: CallTokens | undefined
  /**
   * The token usage the provider reported for this call, as it counts against the provider's limits: the limiter
   * corrects the reservation by it once the call returned (absent or `undefined`: the reservation stands). It is also
   * the default of `span.usage`: write the usage here once and the span reports it too; give `span.usage` only when
   * the span should count differently (every input token, cached or not, where the provider's limit leaves cache
   * reads out). A throwing `usage` counts as `undefined`.
   *
   * @since 0.4.0
   */
  readonly usage?: ((result: A) => CallUsage | undefined) | undefined
  /**
   * What the successful reply said about the resource's rate limits (its headers, read with
   * `RateLimit.fromHeaders`): the limiter learns limits from it and pauses the resource when a dimension is
   * exhausted until its reset. A failed call's facts come from its error (`Normalize.normalize(error).rateLimit`).
   *
   * @since 0.4.0
   */
  readonly rateLimit?: ((result: A) => RateLimitInfo | undefined) | undefined
}

/**
 * A call's token reservation (see `CallOptions.tokens`): estimated input tokens and the request's output cap, each a
 * finite count >= 0.
 *
 * @since 0.4.0
 * @category models
 */
export interface CallTokens {
  readonly input?: number | undefined
  readonly maxOutput?: number | undefined
}

/**
 * The GenAI description of one model call, for its span (see `CallOptions.span`).
 *
 * @since 0.4.0
 * @category models
 */
export interface CallSpan<A> {
  readonly system?: string | undefined
  readonly model?: string | undefined
  /** The span's token counts; absent, the call's own `usage` (`CallOptions.usage`) gives them. */
  readonly usage?: ((result: A) => CallUsage | undefined) | undefined
}

/**
 * Token usage of one model call as the provider reported it (see `CallOptions.usage`).
 *
 * @since 0.4.0
 * @category models
 */
export interface CallUsage {
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
}

/**
 * What a running handler may use. Every write it causes is fenced by `token` except charges, which are accepted
 * whatever the token because the money was spent.
 *
 * @since 0.1.0
 * @category models
 */
export interface HandlerContext {
  readonly jobId: JobId
  /** The fencing token of this attempt's lease. */
  readonly token: number
  /** The attempt number within the current run, starting at 1. */
  readonly attempt: number
  readonly traceId: string | null
  /** Record progress in 0..1; written with the next heartbeat. */
  readonly progress: (value: number) => Effect.Effect<void>
  /**
   * Interrupts the handler once the attempt was stopped (cancel requested, deadline passed, lease lost, shutdown);
   * otherwise does nothing.
   */
  readonly checkpoint: Effect.Effect<void>
  /**
   * Make a billed model call: reserve the estimate under the call id `${jobId}:${token}:${n}`, run the call,
   * settle the actual cost. The budget check and the reservation are one step, so calls made in parallel never
   * reserve past the budget together; once the call has returned, its settlement is not interrupted. Fails with
   * `BudgetExceeded` (nothing called) when the estimate does not fit the job's budget, or (for an item of a batch
   * with a budget) when the Store refuses the reservation because it does not fit the batch's budget, which the
   * Store checks in the reservation's own write, against every item's calls; with `DeadlineExceeded` (nothing
   * called) when the job's deadline has passed in store time, and with `StoreError` when the reservation cannot be
   * written (nothing called either).
   */
  readonly call: <A, E, R>(
    options: CallOptions<A, E, R>
  ) => Effect.Effect<A, E | BudgetExceeded | DeadlineExceeded | StoreError, R>
}

/**
 * One billed call of Promise code (see `fromPromise`): the `CallOptions` of `ctx.call`, with the call itself given as
 * a function of an AbortSignal instead of `run`, and `cost` optional (absent: the call costs its estimate).
 *
 * @since 0.5.0
 * @category models
 */
export interface PromiseCallOptions<A> extends Omit<CallOptions<A, unknown, never>, "run" | "cost"> {
  readonly cost?: ((result: A) => number) | undefined
}

/**
 * What Promise code inside a handler gets from `fromPromise`. `signal` aborts when the handler's effect is
 * interrupted (the attempt stopped: cancel, deadline, lost lease, shutdown). `call` makes one `ctx.call` of `fn`,
 * whose own signal aborts when the call is cut, and cuts it when `signal` aborts; it resolves with the call's `Exit`
 * and never rejects, so each caller turns a failure into its own errors. `run` runs an effect of the handler's
 * context (such as `ctx.progress`) as a Promise.
 *
 * @since 0.5.0
 * @category models
 */
export interface PromiseScope {
  readonly signal: AbortSignal
  readonly call: <A>(
    fn: (signal: AbortSignal) => Promise<A>,
    options: PromiseCallOptions<A>
  ) => Promise<Exit.Exit<A, unknown>>
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
}

/**
 * Runs Promise code as a handler's effect: `f` gets a `PromiseScope` over `ctx`, and the effect fails with what `f`
 * rejected with. Every call made through the scope is a `ctx.call` (reserved, gated, limited and settled by the
 * core), and once the effect is interrupted it ends only after every call it started has settled its charge, as a
 * handler written in Effect does. The Promise facade's handlers and `@slowcall/providers`' `tryPromise` both run
 * through it.
 *
 * @since 0.5.0
 * @category combinators
 */
export const fromPromise = <A>(
  ctx: HandlerContext,
  f: (scope: PromiseScope) => Promise<A>
): Effect.Effect<A, unknown> =>
  Effect.flatMap(Effect.runtime<never>(), (runtime) => {
    const calls = new Set<Fiber.RuntimeFiber<unknown, unknown>>()
    const scope = (signal: AbortSignal): PromiseScope => ({
      signal,
      run: (effect) => Runtime.runPromise(runtime, effect),
      call: async (fn, options) => {
        const fiber = Runtime.runFork(
          runtime,
          ctx.call({
            ...options,
            run: Effect.tryPromise({ try: (callSignal) => fn(callSignal), catch: (error) => error }),
            cost: options.cost ?? (() => options.estimateCents)
          })
        )
        calls.add(fiber)
        const cut = () => fiber.unsafeInterruptAsFork(fiber.id())
        signal.addEventListener("abort", cut, { once: true })
        try {
          return await Runtime.runPromise(runtime, Fiber.await(fiber))
        } finally {
          signal.removeEventListener("abort", cut)
          calls.delete(fiber)
        }
      }
    })
    return Effect.tryPromise({ try: (signal) => f(scope(signal)), catch: (error) => error }).pipe(
      Effect.onInterrupt(() => Effect.forEach([...calls], Fiber.await, { discard: true }))
    )
  })

/**
 * What `make` takes. `estimateCents` (fixed or from the input) is the expected spend of one attempt, used to
 * refuse an attempt the budget cannot cover before any model call.
 *
 * @since 0.1.0
 * @category models
 */
export interface HandlerOptions<I, IE, O, OE, R> {
  readonly type: string
  readonly version: number
  readonly input: Schema.Schema<I, IE>
  readonly result: Schema.Schema<O, OE>
  readonly estimateCents?: number | ((input: I) => number) | undefined
  readonly attempt: AttemptPolicy
  /**
   * The provider resource of every model call this handler makes that names none itself (`CallOptions.resource`):
   * one declaration for a handler that always calls the same model with the same key.
   *
   * @since 0.4.0
   */
  readonly resource?: string | undefined
  readonly run: (input: I, ctx: HandlerContext) => Effect.Effect<O, unknown, R>
}

/**
 * A registered handler. `leaseMs` is derived from `attempt` once, with `Lease.leaseFor`, so every claim and
 * heartbeat of this handler uses the same lease.
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler<in out I = any, in out O = any, out R = never> {
  readonly type: string
  readonly version: number
  readonly input: Schema.Schema<I, any>
  readonly result: Schema.Schema<O, any>
  readonly estimateCents: number | ((input: I) => number) | undefined
  readonly attempt: AttemptPolicy
  readonly leaseMs: number
  /** The resource of the handler's calls that name none (`HandlerOptions.resource`). @since 0.4.0 */
  readonly resource?: string | undefined
  readonly run: (input: I, ctx: HandlerContext) => Effect.Effect<O, unknown, R>
}

/**
 * Declare a handler. The lease is sized from the attempt policy (see `Lease.ts`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <I, IE, O, OE, R = never>(options: HandlerOptions<I, IE, O, OE, R>): Handler<I, O, R> => ({
  type: options.type,
  version: options.version,
  input: options.input,
  result: options.result,
  estimateCents: options.estimateCents,
  attempt: options.attempt,
  leaseMs: leaseFor(options.attempt),
  ...(options.resource === undefined ? {} : { resource: options.resource }),
  run: options.run
})

/**
 * The expected spend of one attempt for this input, or `undefined` when the handler declares none (the store then
 * uses the largest spend of an earlier attempt).
 *
 * @since 0.1.0
 * @category combinators
 */
export const estimateFor = <I>(handler: Handler<I, any, any>, input: I): number | undefined =>
  typeof handler.estimateCents === "function" ? handler.estimateCents(input) : handler.estimateCents

/**
 * The registry key of a (type, version) pair.
 *
 * @since 0.1.0
 * @category combinators
 */
export const key = (type: string, version: number): string => `${type}@${version}`

/**
 * Handlers indexed by (type, version). Registering two handlers for the same pair is a defect: which one runs
 * must never depend on order.
 *
 * @since 0.1.0
 * @category models
 */
export interface Registry<R> {
  readonly get: (type: string, version: number) => Handler<any, any, R> | undefined
  readonly all: ReadonlyArray<Handler<any, any, R>>
  /** The largest lease of any registered handler (the visibility of a delivery before its handler is known). */
  readonly maxLeaseMs: number
}

/**
 * Build a registry from a list of handlers. Throws on a duplicate (type, version): a configuration bug.
 *
 * @since 0.1.0
 * @category constructors
 */
export const registry = <R>(handlers: ReadonlyArray<Handler<any, any, R>>): Registry<R> => {
  const byKey = new Map<string, Handler<any, any, R>>()
  for (const handler of handlers) {
    const k = key(handler.type, handler.version)
    if (byKey.has(k)) throw new Error(`duplicate handler for ${k}`)
    byKey.set(k, handler)
  }
  return {
    get: (type, version) => byKey.get(key(type, version)),
    all: handlers,
    maxLeaseMs: handlers.reduce((max, handler) => Math.max(max, handler.leaseMs), 0)
  }
}
