/**
 * The seam between a provider wrapper and the job system: `ModelCallContext` is what a handler's context offers for a
 * billed call (the Promise facade's `ctx` has this shape, so it is passed as is), `ClientTimeout` is what a
 * wrapper throws when the SDK's own timeout, not the job, ended a call, and `resourceName` is how a wrapper names the
 * provider resource a call uses for the fleet limiter.
 *
 * @since 0.1.0
 */
import { type CallTokens, type CallUsage, fromPromise, type HandlerContext } from "@slowcall/core/Handler"
import type { RateLimitInfo } from "@slowcall/core/RateLimit"
import { redact } from "@slowcall/core/Redact"
import { Cause, type Effect, Exit, Option } from "effect"
import type { Price, PriceTable } from "./Pricing.js"

/**
 * Options of one billed call. `estimateCents` is reserved before the call starts; the reservation is then settled
 * with `cost(result)` on success, `costOnError(error)` when the call failed, or `costOnInterrupt()` when the job's
 * signal ended it. An `undefined` from either of the last two leaves the decision to the context (its per-class
 * default). `span` names the provider and model and reads the token counts for the call's trace span (the
 * OpenTelemetry GenAI attributes), when the context traces.
 *
 * `resource`, `tokens`, `usage` and `rateLimit` are what the worker's fleet limiter reads (the core's
 * `Handler.CallOptions` says how): the resource the call uses (see `resourceName`), the tokens it reserves (the
 * prompt's characters / 4 as input, the request's output cap), the usage the provider reported as it counts it
 * against its limits (also the span's usage when `span.usage` is absent), and what the reply's headers said about
 * the limits.
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
  /** @since 0.4.0 */
  readonly resource?: string
  /** @since 0.4.0 */
  readonly tokens?: CallTokens
  /** @since 0.4.0 */
  readonly usage?: (result: T) => CallUsage | undefined
  /** @since 0.4.0 */
  readonly rateLimit?: (result: T) => RateLimitInfo | undefined
}

/**
 * A model call as its trace span describes it: `system` (`gen_ai.system`: `openai`, `anthropic`, `gemini`), `model`
 * (`gen_ai.request.model`) and `usage`, the token counts of the result (`gen_ai.usage.input_tokens`, every input
 * token, cached or not, and `gen_ai.usage.output_tokens`); absent, the call's own `usage` serves.
 *
 * @since 0.1.0
 * @category models
 */
export interface CallSpan<T> {
  readonly system: string
  readonly model: string
  readonly usage?: (result: T) => { readonly inputTokens: number; readonly outputTokens: number }
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
 * Runs Promise code that makes wrapped model calls (`withOpenAI`, `withAiSdk`, ...) inside an Effect handler: `f` gets
 * a `ModelCallContext` made from the handler's context, whose every `call` is one `ctx.call` of the attempt (reserved,
 * gated, settled by the core, with the limiter's fields passed on). Its `signal` aborts when this effect is
 * interrupted (the attempt stopped: cancel, deadline, lost lease, shutdown), and the call in flight is then cut and
 * settled by its `costOnInterrupt`; the effect ends only once every call it started has settled. Fails with what `f`
 * threw: the SDK's error, or the core's `BudgetExceeded` / `DeadlineExceeded` (the worker then abandons the job for
 * that reason) or `StoreError` when a call could not start.
 *
 * @since 0.4.0
 * @category combinators
 */
export const tryPromise = <A>(
  ctx: HandlerContext,
  f: (model: ModelCallContext) => Promise<A>
): Effect.Effect<A, unknown> =>
  fromPromise(ctx, (scope) =>
    f({
      signal: scope.signal,
      call: async <T>(fn: (signal: AbortSignal) => Promise<T>, options: CallOptions<T>): Promise<T> => {
        if (scope.signal.aborted) throw new DOMException("the attempt was stopped before the call", "AbortError")
        const exit = await scope.call(fn, options)
        if (Exit.isSuccess(exit)) return exit.value
        const failure = Cause.failureOption(exit.cause)
        if (Option.isSome(failure)) throw failure.value
        if (Cause.isInterruptedOnly(exit.cause)) throw new DOMException("the model call was cut", "AbortError")
        throw Cause.squash(exit.cause)
      }
    })
  )

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
 * A label of an API key that cannot name a resource: empty, longer than 64 characters, with a character outside
 * `[A-Za-z0-9._@+-]`, or shaped like a secret (a label names the key, it is never the key). Raised where the wrapper
 * is made, so no call ran.
 *
 * @since 0.4.0
 * @category errors
 */
export class InvalidCredentialLabel extends Error {
  readonly _tag = "InvalidCredentialLabel"
  constructor(readonly reason: "form" | "secret") {
    super(
      reason === "secret"
        ? "the credential option is a label for the API key (such as key-a), never the key itself"
        : "a credential label is 1..64 characters of [A-Za-z0-9._@+-]"
    )
    this.name = "InvalidCredentialLabel"
  }
}

/**
 * What names a call's resource: the provider (`openai`, `anthropic`, `google`, or for the AI SDK its provider id up
 * to the first dot), the requested model, and the label of the API key.
 *
 * @since 0.4.0
 * @category models
 */
export interface ResourceCall {
  readonly provider: string
  readonly model: string
  readonly credential: string
}

/**
 * The resource naming rule: `provider:model:credential`, e.g. `openai:gpt-4.1:key-a`. Calls of the same model through
 * the same key share the provider's limits, so they name the same resource, whether they go through `withOpenAI` or
 * the AI SDK's `@ai-sdk/openai`. Providers that pool several models in one limit (Anthropic's model classes) or share
 * a limit across keys of one organisation are named by hand with the `resource` option.
 *
 * @since 0.4.0
 * @category combinators
 */
export const resourceName = (call: ResourceCall): string => `${call.provider}:${call.model}:${call.credential}`

const labelForm = /^[A-Za-z0-9._@+-]{1,64}$/

/**
 * `label` when it can be a credential label, else `InvalidCredentialLabel`.
 *
 * @since 0.4.0
 * @category constructors
 */
export const credentialLabel = (label: string): string => {
  if (typeof label !== "string" || !labelForm.test(label)) throw new InvalidCredentialLabel("form")
  if (redact(label) !== label) throw new InvalidCredentialLabel("secret")
  return label
}

/**
 * Options every wrapper takes. `prices` is the table (default `Pricing.defaults`); `fallbackPrice` serves a model
 * the table lacks (else `PriceNotFound` before the call); `estimateCents` replaces the wrapper's own estimate
 * (input characters / 4 as tokens plus the request's output cap, at the model's price). `credential` and `resource`
 * name the resource of each call for the fleet limiter (see `resourceName`).
 *
 * @since 0.1.0
 * @category models
 */
export interface WrapOptions {
  readonly prices?: PriceTable
  readonly fallbackPrice?: Price
  readonly estimateCents?: number | ((request: { readonly model: string; readonly params: unknown }) => number)
  /** Output tokens assumed by the estimate and the token reservation when the request sets no cap. Default 1024. */
  readonly defaultMaxOutputTokens?: number
  /**
   * A label of the API key the client uses (`key-a`, `prod-eu`), the third part of the resource name. Never the key
   * itself: a label shaped like a secret is refused. Default `default`.
   *
   * @since 0.4.0
   */
  readonly credential?: string
  /**
   * Your own resource name instead of `provider:model:credential`: fixed, or computed from the call (e.g. one resource
   * for every dated version of a model, or for the model class a provider limits as one).
   *
   * @since 0.4.0
   */
  readonly resource?: string | ((call: ResourceCall) => string)
}
