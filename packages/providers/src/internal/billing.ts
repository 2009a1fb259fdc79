/**
 * The one implementation of a billed call behind every wrapper: a plain call settles by the response's usage; a
 * stream is handed to the caller at once while the billed call stays open until the stream ends, so the
 * reservation is settled by the usage the stream reported, or, when it was cut or abandoned, by what it consumed.
 *
 * @internal
 */
import { InvalidEstimate, type ModelCallContext, type WrapOptions } from "../ModelCall.js"
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
}

/** @internal */
export const billing = (opts: WrapOptions): Billing => {
  const table = opts.prices ?? Pricing.defaults
  const price = (model: string) => Pricing.priceOf(table, model, opts.fallbackPrice)
  return {
    price,
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
 * Runs a streaming request as one billed call. `open` starts the SDK stream with the call's signal; the returned
 * promise gives the caller an iterable over it as soon as it opened (or rejects with what opening threw). The
 * call settles when the iteration ends: by the reported usage at the end, by what was consumed when the stream
 * fails or the caller stops early (which also aborts the request).
 *
 * @internal
 */
export const streamCall = <Chunk>(
  ctx: ModelCallContext,
  estimateCents: number,
  price: (model: string) => Pricing.Price,
  meter: Metered<Chunk>,
  open: (signal: AbortSignal) => Promise<AsyncIterable<Chunk>>,
  mapError: (e: unknown, signal: AbortSignal) => unknown = (e) => e,
  /** The caller's own signal, joined into the request: its abort cuts the stream as the job's does. */
  own?: AbortSignal | null,
  /** The provider, for the call's span (`gen_ai.system`); the model is the one the meter saw requested. */
  system?: string
): Promise<AsyncIterable<Chunk>> =>
  new Promise<AsyncIterable<Chunk>>((resolveStream, rejectStream) => {
    let opened = false
    let finish!: () => void
    let fail!: (e: unknown) => void
    const finished = new Promise<void>((resolve, reject) => {
      finish = resolve
      fail = reject
    })
    const consumed = () => Pricing.costCents(price(meter.model()), meter.usage())
    ctx
      .call(
        async (signal) => {
          let source: AsyncIterable<Chunk>
          try {
            source = await open(signal)
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
          estimateCents,
          cost: consumed,
          costOnError: () => (opened ? consumed() : undefined),
          costOnInterrupt: () => (opened ? consumed() : undefined),
          ...(system === undefined
            ? {}
            : { span: { system, model: meter.model(), usage: () => tokenCounts(meter.usage()) } })
        }
      )
      .catch((e: unknown) => {
        // Before the stream opened the caller learns of the failure here; afterwards through the iteration.
        if (!opened) rejectStream(e)
      })

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
          throw aborted
        }
        finish()
      } catch (e) {
        if (settled) throw e
        settled = true
        const mapped = mapError(e, signal)
        fail(mapped)
        throw mapped
      } finally {
        // The caller stopped early (break, return): leaving the inner loop aborted the request; settle by usage.
        if (!settled) finish()
      }
    }
  })
