/**
 * The seam between a provider wrapper and the job system: `ModelCallContext` is what a handler's context offers for a
 * billed call (the Promise facade's `ctx` has this shape, so it is passed as is), and `ClientTimeout` is what a
 * wrapper throws when the SDK's own timeout, not the job, ended a call.
 *
 * @since 0.1.0
 */
import type { Price, PriceTable } from "./Pricing.js"

/**
 * Options of one billed call. `estimateCents` is reserved before the call starts; the reservation is then settled
 * with `cost(result)` on success, `costOnError(error)` when the call failed, or `costOnInterrupt()` when the job's
 * signal ended it. An `undefined` from either of the last two leaves the decision to the context (its per-class
 * default). `span` names the provider and model and reads the token counts for the call's trace span (the
 * OpenTelemetry GenAI attributes), when the context traces.
 *
 * @since 0.1.0
 * @category models
 */
export interface CallOptions<T> {
  readonly estimateCents: number
  readonly cost?: (result: T) => number
  readonly costOnError?: (error: unknown) => number | undefined
  readonly costOnInterrupt?: () => number | undefined
  readonly span?: CallSpan<T>
}

/**
 * A model call as its trace span describes it: `system` (`gen_ai.system`: `openai`, `anthropic`, `gemini`), `model`
 * (`gen_ai.request.model`) and `usage`, the token counts of the result (`gen_ai.usage.input_tokens`, every input
 * token, cached or not, and `gen_ai.usage.output_tokens`).
 *
 * @since 0.1.0
 * @category models
 */
export interface CallSpan<T> {
  readonly system: string
  readonly model: string
  readonly usage: (result: T) => { readonly inputTokens: number; readonly outputTokens: number }
}

/**
 * What a wrapper needs from a job's handler context. `signal` aborts when the job is cancelled or its lease is
 * lost; `call` runs `fn` with a signal that aborts at least then, and records the call's spend as `CallOptions`
 * says. The structural twin of the Promise facade's handler context.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelCallContext {
  readonly signal: AbortSignal
  call<T>(fn: (signal: AbortSignal) => Promise<T>, opts: CallOptions<T>): Promise<T>
}

/**
 * The SDK's client timeout ended the call (the job's signal did not). Its `name` is `TimeoutError`, so
 * `normalize` classes it `timeout` (retryable, possibly billed) rather than `cancelled`. `cause` is what the SDK
 * threw. The Gemini SDK reports its own timeout as the same `AbortError` as a user abort; its wrapper tells the two
 * apart by the signal it passed and throws this for the timeout.
 *
 * @since 0.1.0
 * @category errors
 */
export class ClientTimeout extends Error {
  readonly _tag = "ClientTimeout"
  constructor(
    readonly provider: string,
    options: { readonly cause: unknown }
  ) {
    super(`${provider} client timeout: the SDK ended the request before a reply`, options)
    this.name = "TimeoutError"
  }
}

/**
 * An estimate that cannot be reserved: the `estimateCents` option (or what its function returned) is negative, not
 * finite or not a number. Raised before the call, so nothing was spent.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidEstimate extends Error {
  readonly _tag = "InvalidEstimate"
  constructor(
    readonly model: string,
    readonly estimate: unknown
  ) {
    super(`estimate for "${model}" must be a finite number of cents >= 0, got ${String(estimate)}`)
    this.name = "InvalidEstimate"
  }
}

/**
 * Options every wrapper takes. `prices` is the table (default `Pricing.defaults`); `fallbackPrice` serves a model
 * the table lacks (else `PriceNotFound` before the call); `estimateCents` replaces the wrapper's own estimate
 * (input characters / 4 as tokens plus the request's output cap, at the model's price).
 *
 * @since 0.1.0
 * @category models
 */
export interface WrapOptions {
  readonly prices?: PriceTable
  readonly fallbackPrice?: Price
  readonly estimateCents?: number | ((request: { readonly model: string; readonly params: unknown }) => number)
  /** Output tokens assumed by the estimate when the request sets no cap. Default 1024. */
  readonly defaultMaxOutputTokens?: number
}
