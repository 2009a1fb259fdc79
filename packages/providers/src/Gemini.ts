/**
 * `withGemini`: a Google Gen AI client whose `models.generateContent` and `models.generateContentStream` calls are
 * billed calls of a slowcall job.
 *
 * @since 0.1.0
 */
import type { GenerateContentParameters, GenerateContentResponse, GoogleGenAI } from "@google/genai"
import { fromHeaders } from "@slowcall/core/RateLimit"
import { approxTokens, billing, count, emptyUsage, type Metered, streamCall, tokenCounts } from "./internal/billing.js"
import { ClientTimeout, type ModelCallContext, type WrapOptions } from "./ModelCall.js"
import * as Pricing from "./Pricing.js"

type UsageMetadata = GenerateContentResponse["usageMetadata"]

/**
 * The wrapped calls. `generateContentStream` resolves, once the stream opened, to an async iterable of the
 * response chunks.
 *
 * @since 0.1.0
 * @category models
 */
export interface GeminiCalls {
  readonly models: {
    generateContent(params: GenerateContentParameters): Promise<GenerateContentResponse>
    generateContentStream(params: GenerateContentParameters): Promise<AsyncIterable<GenerateContentResponse>>
  }
}

/**
 * Usage metadata in the form `Pricing` bills: `promptTokenCount` includes the cached tokens, which are taken out and
 * counted at the cached rate; thinking tokens (`thoughtsTokenCount`) are output.
 *
 * @since 0.1.0
 * @category combinators
 */
export const geminiUsage = (u: UsageMetadata | null | undefined): Pricing.Usage => {
  if (u === null || u === undefined) return emptyUsage
  const cached = count(u.cachedContentTokenCount)
  return {
    inputTokens: Math.max(0, count(u.promptTokenCount) - cached),
    cachedInputTokens: cached,
    cacheWriteTokens: 0,
    outputTokens: count(u.candidatesTokenCount) + count(u.thoughtsTokenCount)
  }
}

const isAbortError = (e: unknown): boolean =>
  typeof e === "object" && e !== null && (e as { name?: unknown }).name === "AbortError"

/**
 * The Gemini SDK throws the same `AbortError` for its own `httpOptions.timeout` and for an aborted `abortSignal`.
 * The signals decide: the call's (the job's) or the caller's own `abortSignal` aborted means a user abort (left as is:
 * `cancelled`); neither aborted means the SDK's timer fired (`ClientTimeout`: `timeout`).
 */
const timeoutOrAbort = (e: unknown, signal: AbortSignal, own: AbortSignal | undefined): unknown =>
  isAbortError(e) && !signal.aborted && own?.aborted !== true ? new ClientTimeout("gemini", { cause: e }) : e

/**
 * Wraps a Gemini client: every call goes through `ctx.call` with the estimate reserved first, the call's signal
 * set as `config.abortSignal` (joined with the caller's own), and the cost settled from `usageMetadata` at the
 * model's price (`PriceNotFound` before any request for a model with no price). A stream settles when it ends by
 * the last chunk's usage; a cut or abandoned one by the last usage seen (every chunk carries the running count).
 * The SDK's client timeout becomes `ClientTimeout`; other errors are the SDK's own.
 *
 * For the fleet limiter each call names its resource `google:<model>:<credential>` (see `ModelCall.resourceName`;
 * `google`, as the AI SDK's `@ai-sdk/google` names it, so both name one resource), reserves the prompt's estimated
 * tokens and `maxOutputTokens`, and reports the reply's usage (Gemini sends no rate-limit headers; a 429's
 * `RetryInfo` reaches the limiter through `normalize`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const withGemini = (client: GoogleGenAI, ctx: ModelCallContext, opts: WrapOptions = {}): GeminiCalls => {
  const bill = billing(opts, "google")
  const prepare = (params: GenerateContentParameters) => {
    const inputTokens = approxTokens([params.config?.systemInstruction, params.contents])
    const maxOutput = params.config?.maxOutputTokens
    const estimateCents = bill.estimate(params.model, params, inputTokens, maxOutput)
    const resource = bill.resource(params.model)
    const tokens = bill.tokens(inputTokens, maxOutput)
    const withSignal = (signal: AbortSignal): GenerateContentParameters => {
      const own = params.config?.abortSignal
      return { ...params, config: { ...params.config, abortSignal: own ? AbortSignal.any([signal, own]) : signal } }
    }
    return { inputTokens, estimateCents, resource, tokens, withSignal }
  }
  return {
    models: {
      generateContent: async (params) => {
        const { estimateCents, resource, tokens, withSignal } = prepare(params)
        return ctx.call(
          (signal) =>
            client.models.generateContent(withSignal(signal)).catch((e: unknown) => {
              throw timeoutOrAbort(e, signal, params.config?.abortSignal)
            }),
          {
            estimateCents,
            cost: (r) => Pricing.costCents(bill.price(r.modelVersion || params.model), geminiUsage(r.usageMetadata)),
            span: { system: "gemini", model: params.model },
            resource,
            tokens,
            usage: (r) => tokenCounts(geminiUsage(r.usageMetadata)),
            rateLimit: (r) => fromHeaders(r.sdkHttpResponse?.headers)
          }
        )
      },
      generateContentStream: async (params) => {
        const { estimateCents, inputTokens, resource, tokens, withSignal } = prepare(params)
        let last: Pricing.Usage | undefined
        let chunks = 0
        let model = params.model
        let headers: unknown
        const meter: Metered<GenerateContentResponse> = {
          add: (c) => {
            chunks++
            if (c.usageMetadata) last = geminiUsage(c.usageMetadata)
            if (c.modelVersion) model = c.modelVersion
            headers ??= c.sdkHttpResponse?.headers
          },
          usage: () => last ?? { ...emptyUsage, inputTokens, outputTokens: chunks },
          model: () => model,
          headers: () => headers
        }
        return streamCall(ctx, {
          estimateCents,
          price: bill.price,
          meter,
          open: async (signal) => ({ stream: await client.models.generateContentStream(withSignal(signal)) }),
          mapError: (e, signal) => timeoutOrAbort(e, signal, params.config?.abortSignal),
          own: params.config?.abortSignal,
          system: "gemini",
          resource,
          tokens,
          limitUsage: tokenCounts
        })
      }
    }
  }
}
