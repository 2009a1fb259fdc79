/**
 * The one implementation of a billed call behind every wrapper: a plain call settles by the response's usage; a
 * stream is handed to the caller at once while the billed call stays open until the stream ends, so the
 * reservation is settled by the usage the stream reported, or, when it was cut or abandoned, by what it consumed.
 *
 * @internal
 */
import type { CallTokens, CallUsage } from "@slowcall/core/Handler"
import { fromHeaders, type RateLimitInfo } from "@slowcall/core/RateLimit"
import {
  type CallOptions,
  credentialLabel,
  InvalidEstimate,
  type ModelCallContext,
  resourceName,
  type WrapOptions
} from "../ModelCall.js"
import * as Pricing from "../Pricing.js"

/** @internal */
export const emptyUsage: Pricing.Usage = { inputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0 }

/** @internal */
export const count = (u: unknown): number => (typeof u === "number" && Number.isFinite(u) && u > 0 ? u : 0)

/** Rough token count of a request's input: four characters a token, the usual rule of thumb. @internal */
export const approxTokens = (u: unknown): number => {
  try {
    return Math.ceil((JSON.stringify(u) ?? "").length / 4)
  } catch {
    return 0
  }
}

/** @internal */
export interface Billing {
  readonly price: (model: string) => Pricing.Price
  readonly estimate: (model: string, params: unknown, inputTokens: number, maxOutput: number | undefined) => number
  /** The resource a call of `model` uses (`resourceName`, or the `resource` option). */
  readonly resource: (model: string) => string
  /** The call's token reservation: the prompt's estimated tokens, the request's output cap or the default. */
  readonly tokens: (inputTokens: number, maxOutput: number | undefined) => CallTokens
}

/**
 * A wrapper's pricing and naming, made where the wrapper is made: a credential label that cannot name a resource
 * throws there (`InvalidCredentialLabel`).
 *
 * @internal
 */
export const billing = (opts: WrapOptions, provider: string): Billing => {
  const table = opts.prices ?? Pricing.defaults
  const price = (model: string) => Pricing.priceOf(table, model, opts.fallbackPrice)
  const credential = credentialLabel(opts.credential ?? "default")
  const named = opts.resource
  return {
    price,
    resource: (model) =>
      typeof named === "string"
        ? named
        : named === undefined
          ? resourceName({ provider, model, credential })
          : named({ provider, model, credential }),
    tokens: (inputTokens, maxOutput) => ({
      input: inputTokens,
      maxOutput: maxOutput ?? opts.defaultMaxOutputTokens ?? 1024
    }),
    estimate: (model, params, inputTokens, maxOutput) => {
      const p = price(model)
      const given =
        typeof opts.estimateCents === "function" ? opts.estimateCents({ model, params }) : opts.estimateCents
      if (given !== undefined) {
        if (typeof given !== "number" || !Number.isFinite(given) || given < 0) throw new InvalidEstimate(model, given)
        return given
      }
      return Pricing.costCents(p, {
        ...emptyUsage,
        inputTokens,
        outputTokens: maxOutput ?? opts.defaultMaxOutputTokens ?? 1024
      })
    }
  }
}

/** The job's signal and the caller's own, as one. @internal */
export const joinSignals = (a: AbortSignal, b: AbortSignal | null | undefined): AbortSignal =>
  b === undefined || b === null ? a : AbortSignal.any([a, b])

/** @internal */
export interface Metered<Chunk> {
  /** Counts a chunk: the usage it reports, or the content it carries when no usage was reported yet. */
  readonly add: (chunk: Chunk) => void
  readonly usage: () => Pricing.Usage
  readonly model: () => string
  /** The reply's headers when the chunks carry them (Gemini's `sdkHttpResponse`). */
  readonly headers?: () => unknown
}

/**
 * A usage's token counts as a span reports them: every input token (uncached, cached and cache writes) and the
 * output tokens.
 *
 * @internal
 */
export const tokenCounts = (usage: Pricing.Usage): { readonly inputTokens: number; readonly outputTokens: number } => ({
  inputTokens: usage.inputTokens + usage.cachedInputTokens + usage.cacheWriteTokens,
  outputTokens: usage.outputTokens
})

/**
 * The SDK's response (`withResponse()` of the OpenAI and Anthropic SDKs) and the rate-limit facts of its headers.
 *
 * @internal
 */
export const withHeaders = async <T>(
  request: PromiseLike<{ readonly data: T; readonly response: { readonly headers: unknown } }>
): Promise<{ readonly data: T; readonly rateLimit: RateLimitInfo | undefined }> => {
  const { data, response } = await request
  return { data, rateLimit: fromHeaders(response.headers) }
}

/** What a streaming call needs besides the context. @internal */
export interface StreamRequest<Chunk> {
  readonly estimateCents: number
  readonly price: (model: string) => Pricing.Price
  readonly meter: Metered<Chunk>
  /** Starts the SDK stream with the call's signal; `headers`, when the SDK gives them at once. */
  readonly open: (signal: AbortSignal) => Promise<{ readonly stream: AsyncIterable<Chunk>; readonly headers?: unknown }>
  readonly mapError?: (e: unknown, signal: AbortSignal) => unknown
  /** The caller's own signal, joined into the request: its abort cuts the stream as the job's does. */
  readonly own?: AbortSignal | null | undefined
  /** The provider, for the call's span (`gen_ai.system`); the model is the one the meter saw requested. */
  readonly system: string
  /** The call's resource and token reservation, for the fleet limiter. */
  readonly resource: string
  readonly tokens: CallTokens
  /** The metered usage as the provider counts it against its limits. */
  readonly limitUsage: (usage: Pricing.Usage) => CallUsage
}

/**
 * Runs a streaming request as one billed call. `open` starts the SDK stream with the call's signal; the returned
 * promise gives the caller an iterable over it as soon as it opened (or rejects with what opening threw). The
 * call settles when the iteration ends: by the reported usage at the end, by what was consumed when the stream
 * fails or the caller stops early (which also aborts the request); the iteration returns or throws only once that
 * charge is recorded. The limiter's usage is the metered usage, its
 * rate-limit facts those of the headers the stream opened with.
 *
 * @internal
 */
export const streamCall = <Chunk>(
  ctx: ModelCallContext,
  request: StreamRequest<Chunk>
): Promise<AsyncIterable<Chunk>> =>
  new Promise<AsyncIterable<Chunk>>((resolveStream, rejectStream) => {
    const { meter, price, own, system } = request
    const mapError = request.mapError ?? ((e: unknown) => e)
    let headers: unknown
    let opened = false
    let finish!: () => void
    let fail!: (e: unknown) => void
    const finished = new Promise<void>((resolve, reject) => {
      finish = resolve
      fail = reject
    })
    const consumed = () => Pricing.costCents(price(meter.model()), meter.usage())
    // Resolves once the call's charge is recorded. The iteration ends only after it, so a handler that returns when
    // its loop ends never finishes its job while the charge is still open (the job would keep the estimate).
    let callSettled!: () => void
    const settledCall = new Promise<void>((resolve) => {
      callSettled = resolve
    })
    ctx
      .call(
        async (signal) => {
          let source: AsyncIterable<Chunk>
          try {
            const started = await request.open(signal)
            source = started.stream
            headers = started.headers
          } catch (e) {
            throw mapError(e, signal)
          }
          opened = true
          resolveStream(iterate(source, signal))
          // A stream nobody reads any more must not hold the call open: the job's abort settles it by what it
          // consumed even when no iteration is running to notice.
          const onAbort = () => fail(mapError(new DOMException("the model call was aborted", "AbortError"), signal))
          signal.addEventListener("abort", onAbort, { once: true })
          try {
            await finished
          } finally {
            signal.removeEventListener("abort", onAbort)
          }
          return undefined
        },
        {
          estimateCents: request.estimateCents,
          cost: consumed,
          costOnError: () => (opened ? consumed() : undefined),
          costOnInterrupt: () => (opened ? consumed() : undefined),
          span: { system, model: meter.model(), usage: () => tokenCounts(meter.usage()) },
          resource: request.resource,
          tokens: request.tokens,
          usage: () => request.limitUsage(meter.usage()),
          rateLimit: () => fromHeaders(headers ?? meter.headers?.())
        } satisfies CallOptions<undefined>
      )
      .then(
        () => callSettled(),
        (e: unknown) => {
          // Before the stream opened the caller learns of the failure here; afterwards through the iteration.
          if (!opened) rejectStream(e)
          callSettled()
        }
      )

    async function* iterate(source: AsyncIterable<Chunk>, signal: AbortSignal): AsyncGenerator<Chunk> {
      let settled = false
      try {
        for await (const chunk of source) {
          meter.add(chunk)
          yield chunk
        }
        settled = true
        if (signal.aborted || own?.aborted === true) {
          // Some SDK streams end quietly when their signal aborts: the caller must not take a cut stream for a
          // complete one.
          const aborted = mapError(new DOMException("the model call was aborted", "AbortError"), signal)
          fail(aborted)
          await settledCall
          throw aborted
        }
        finish()
        await settledCall
      } catch (e) {
        if (settled) throw e
        settled = true
        const mapped = mapError(e, signal)
        fail(mapped)
        await settledCall
        throw mapped
      } finally {
        // The caller stopped early (break, return): leaving the inner loop aborted the request; settle by usage.
        if (!settled) {
          finish()
          await settledCall
        }
      }
    }
  })
