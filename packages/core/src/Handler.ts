/**
 * Handlers: the code a worker runs for a job type. A handler is registered by `(type, version)`, declares the
 * schemas of its input and result, the shape of one attempt (from which its lease is sized) and, optionally, what
 * an attempt is expected to cost. Its `run` receives a context whose `call` is the only sanctioned way to make a
 * billed model call: the spend is reserved before the call and settled after it, so it is recorded even when the
 * call is interrupted or the worker has lost its lease.
 *
 * @since 0.1.0
 */
import { Data, type Effect, type Schema } from "effect"
import type { StoreError } from "./Errors.js"
import type { JobId } from "./Job.js"
import { type AttemptPolicy, leaseFor } from "./Lease.js"

/**
 * A model call whose estimate would take the job's spend past its budget. Nothing was reserved and nothing was
 * called; the worker ends the job `abandoned(budget)`.
 *
 * @since 0.1.0
 * @category errors
 */
export class BudgetExceeded extends Data.TaggedError("BudgetExceeded")<{
  readonly jobId: JobId
  readonly costCents: number
  readonly estimateCents: number
  readonly budgetCents: number
}> {
  override get message() {
    return `job ${this.jobId}: spend ${this.costCents} + estimate ${this.estimateCents} exceeds budget ${this.budgetCents}`
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
 * interrupted before `run` started (a gate or an admission wait) never asks `costOnInterrupt`: nothing was consumed.
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
  readonly usage?: ((result: A) => CallUsage | undefined) | undefined
}

/**
 * Token usage of one model call as the provider reported it.
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
   * `BudgetExceeded` (nothing called) when the estimate does not fit the budget, with `DeadlineExceeded` (nothing
   * called) when the job's deadline has passed in store time, and with `StoreError` when the reservation cannot be
   * written (nothing called either).
   */
  readonly call: <A, E, R>(
    options: CallOptions<A, E, R>
  ) => Effect.Effect<A, E | BudgetExceeded | DeadlineExceeded | StoreError, R>
}

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
