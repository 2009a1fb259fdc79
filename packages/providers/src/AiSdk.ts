/**
 * `withAiSdk`: the Vercel AI SDK's `generateText`, `streamText` and `generateObject` as billed calls of a slowcall
 * job, for any model the AI SDK drives (`@ai-sdk/openai`, `@ai-sdk/anthropic`, `@ai-sdk/google`, ...).
 *
 * @since 0.4.0
 */
import type { CallUsage } from "@slowcall/core/Handler"
import { fromHeaders, type RateLimitInfo } from "@slowcall/core/RateLimit"
import type * as Ai from "ai"
import { limitCounts } from "./Anthropic.js"
import { approxTokens, billing, count, emptyUsage, joinSignals, tokenCounts } from "./internal/billing.js"
import { credentialLabel, type ModelCallContext, type WrapOptions } from "./ModelCall.js"
import * as Pricing from "./Pricing.js"

/**
 * The AI SDK functions the wrapper calls: pass the `ai` module itself (`import * as ai from "ai"`). Taking them from
 * the caller keeps `ai` an optional peer: the version the application installed (6 or 7) is the one that runs.
 *
 * @since 0.4.0
 * @category models
 */
export interface AiSdkFunctions {
  readonly generateText: typeof Ai.generateText
  readonly streamText: typeof Ai.streamText
  readonly generateObject: typeof Ai.generateObject
}

/**
 * The wrapped functions, with the AI SDK's own options and results. `streamText` resolves once the billed call
 * started (its estimate reserved), to the AI SDK's `StreamTextResult`.
 *
 * @since 0.4.0
 * @category models
 */
export interface AiSdkCalls {
  readonly generateText: typeof Ai.generateText
  readonly streamText: <
    TOOLS extends Ai.ToolSet,
    OUTPUT extends Ai.OutputInterface = Ai.OutputInterface<string, string, never>
  >(
    options: Parameters<typeof Ai.streamText<TOOLS, OUTPUT>>[0]
  ) => Promise<Ai.StreamTextResult<TOOLS, OUTPUT>>
  readonly generateObject: typeof Ai.generateObject
}

/**
 * An AI SDK usage in the form `Pricing` bills: the input tokens without the cache reads and writes, which are
 * counted at their own rates (`inputTokenDetails`, or the older `cachedInputTokens`); output tokens include reasoning.
 *
 * @since 0.4.0
 * @category combinators
 */
export const aiUsage = (u: Ai.LanguageModelUsage | null | undefined): Pricing.Usage => {
  if (u === null || u === undefined) return emptyUsage
  const cached = count(u.inputTokenDetails?.cacheReadTokens ?? u.cachedInputTokens)
  const written = count(u.inputTokenDetails?.cacheWriteTokens)
  const uncached = u.inputTokenDetails?.noCacheTokens
  return {
    inputTokens: uncached === undefined ? Math.max(0, count(u.inputTokens) - cached - written) : count(uncached),
    cachedInputTokens: cached,
    cacheWriteTokens: written,
    outputTokens: count(u.outputTokens)
  }
}

/** A model's own name, without a gateway's `provider/` prefix. */
const ownName = (modelId: string): string => modelId.slice(modelId.lastIndexOf("/") + 1)

/** What a call's model says about itself: the provider id (`openai.chat`) and the model id. */
const modelOf = (model: Ai.LanguageModel): { readonly provider: string; readonly modelId: string } =>
  typeof model === "string" ? { provider: "gateway", modelId: model } : model

/** The options every wrapped function reads; the rest go to the AI SDK as given. */
interface CallShape {
  readonly model: Ai.LanguageModel
  readonly system?: unknown
  readonly prompt?: unknown
  readonly messages?: unknown
  readonly maxOutputTokens?: number | undefined
  readonly maxRetries?: number | undefined
  readonly abortSignal?: AbortSignal | undefined
}

interface StreamCallbacks {
  readonly onChunk?: ((event: { readonly chunk: { readonly type: string } }) => unknown) | undefined
  readonly onError?: ((event: { readonly error: unknown }) => unknown) | undefined
  readonly onAbort?: ((event: unknown) => unknown) | undefined
  readonly onStepFinish?:
    | ((event: {
        readonly usage: Ai.LanguageModelUsage
        readonly response: { readonly modelId?: string; readonly headers?: Record<string, string> }
      }) => unknown)
    | undefined
  readonly onFinish?:
    | ((event: {
        readonly totalUsage: Ai.LanguageModelUsage
        readonly response: { readonly modelId?: string; readonly headers?: Record<string, string> }
      }) => unknown)
    | undefined
}

const sum = (a: Pricing.Usage, b: Pricing.Usage): Pricing.Usage => ({
  inputTokens: a.inputTokens + b.inputTokens,
  cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
  cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
  outputTokens: a.outputTokens + b.outputTokens
})

const aborted = () => new DOMException("the model call was aborted", "AbortError")

/**
 * The AI SDK rejects an aborted request with the signal's reason (whatever it is) or an `APICallError` around it; the
 * caller gets an `AbortError` (`cancelled`) when the job's signal or its own cut the call.
 */
const cutOr = (e: unknown, signal: AbortSignal, own: AbortSignal | undefined): unknown =>
  signal.aborted || own?.aborted === true ? aborted() : e

/**
 * The stream result the caller gets: the AI SDK's own, except that a failed or cut stream is not taken for a complete
 * one. `textStream` throws, once its text ends, the provider's error (the one `normalize` classes: a 429 with its
 * retry-after) or an `AbortError`; each promise of the result (`text`, `usage`, `totalUsage`, `steps`, ...) rejects
 * with that error instead of the AI SDK's `NoOutputGeneratedError`. `fullStream` is the AI SDK's, error parts
 * included. Methods run on the AI SDK's object itself. `failure` is what the call ended with, `undefined` while it
 * runs or when it completed. `textStream` ends and each promise settles only once the call's charge is recorded
 * (`settled`), so a handler that returns at the end of its stream never leaves the charge open.
 */
const guarded = <R extends object>(result: R, failure: () => unknown, settled: Promise<void>): R =>
  new Proxy(result, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target)
      if (key === "textStream") return failing(value as AsyncIterable<string>, failure, settled)
      if (value instanceof Promise) {
        return value.then(
          async (v: unknown) => {
            await settled
            return v
          },
          async (e: unknown) => {
            await settled
            throw failure() ?? e
          }
        )
      }
      if (typeof value === "function") return value.bind(target)
      return value
    }
  })

async function* failing(
  source: AsyncIterable<string>,
  failure: () => unknown,
  settled: Promise<void>
): AsyncGenerator<string> {
  try {
    yield* source
  } catch (e) {
    await settled
    throw failure() ?? e
  }
  await settled
  const e = failure()
  if (e !== undefined) throw e
}

/**
 * Wraps the AI SDK: each call of the returned functions is one billed call of the job (`ctx.call`) with
 *
 * - the estimate reserved first: the prompt (`system`, `prompt`, `messages`) at four characters a token plus
 *   `maxOutputTokens` (or `defaultMaxOutputTokens`, 1024), at the model's price (`PriceNotFound` before any request
 *   for a model with no price, or your own `estimateCents`);
 * - the call's signal passed as `abortSignal` (joined with your own), and `maxRetries: 0` unless you set it, since
 *   retries belong to the job;
 * - the cost settled from the result's usage at the price of the model that answered (`totalUsage` of every step of
 *   a `generateText` or `streamText`, `usage` of a `generateObject`);
 * - for the fleet limiter, the resource `<provider>:<model>:<credential>`, where the provider is the model's provider
 *   id up to its first dot (`openai.chat` is `openai`, `google.generative-ai` is `google`; a gateway model id string
 *   is `gateway`), so the same model and key name the same resource here and through `withOpenAI`; the prompt's
 *   tokens and the output cap reserved; the usage as the provider counts it (Anthropic leaves cache reads out); and
 *   the rate-limit facts of the response headers.
 *
 * A `streamText` call settles when the stream ends: by its `totalUsage`; when it fails or is cut (the job's signal,
 * your own `abortSignal`), by what it received (the usage of its finished steps, else the prompt's estimate, and one
 * output token per text or reasoning delta since). The AI SDK reads the stream to its end even when you stop reading
 * `textStream` early, so a stream you leave settles at its full usage: pass your own `abortSignal` to stop it. Your
 * `onChunk`, `onError`, `onAbort`, `onStepFinish` and `onFinish` still run. A failed stream throws its error from
 * `textStream` and rejects the result's promises with it (see `AiSdkCalls`), so the job sees a 429 as a 429.
 *
 * @since 0.4.0
 * @category constructors
 */
export const withAiSdk = (ai: AiSdkFunctions, ctx: ModelCallContext, opts: WrapOptions = {}): AiSdkCalls => {
  // Checked where the wrapper is made, as the SDK wrappers do; the billing of each provider is made on first use.
  credentialLabel(opts.credential ?? "default")
  const bills = new Map<string, ReturnType<typeof billing>>()
  const prepare = (options: CallShape) => {
    const { provider, modelId } = modelOf(options.model)
    const family = provider.split(".")[0] || provider
    let bill = bills.get(family)
    if (bill === undefined) {
      bill = billing(opts, family)
      bills.set(family, bill)
    }
    // A gateway id (`openai/gpt-4o`) is priced by its model's own name.
    const priceKey = ownName(modelId)
    const inputTokens = approxTokens([options.system, options.prompt ?? options.messages])
    const estimateCents = bill.estimate(priceKey, options, inputTokens, options.maxOutputTokens)
    const price = bill.price
    return {
      inputTokens,
      estimateCents,
      resource: bill.resource(modelId),
      tokens: bill.tokens(inputTokens, options.maxOutputTokens),
      span: { system: family, model: modelId },
      // The model that answered (a dated snapshot) when the table knows it, else the one asked for.
      cost: (answered: string | undefined, usage: Pricing.Usage) => {
        let p: Pricing.Price | undefined
        if (answered !== undefined && answered.length > 0) {
          try {
            p = price(ownName(answered))
          } catch {
            p = undefined
          }
        }
        return Pricing.costCents(p ?? price(priceKey), usage)
      },
      limitUsage: (usage: Pricing.Usage): CallUsage =>
        family === "anthropic" ? limitCounts(usage) : tokenCounts(usage),
      settings: (signal: AbortSignal) => ({
        maxRetries: 0,
        ...options,
        abortSignal: joinSignals(signal, options.abortSignal)
      })
    }
  }

  const generate =
    <R>(
      run: (options: CallShape) => Promise<R>,
      read: (result: R) => {
        readonly usage: Ai.LanguageModelUsage
        readonly modelId: string | undefined
        readonly headers: Record<string, string> | undefined
      }
    ) =>
    async (options: CallShape): Promise<R> => {
      const call = prepare(options)
      return ctx.call(
        (signal) =>
          run(call.settings(signal)).catch((e: unknown) => {
            throw cutOr(e, signal, options.abortSignal)
          }),
        {
          estimateCents: call.estimateCents,
          cost: (r) => call.cost(read(r).modelId, aiUsage(read(r).usage)),
          span: { ...call.span, usage: (r) => tokenCounts(aiUsage(read(r).usage)) },
          resource: call.resource,
          tokens: call.tokens,
          usage: (r) => call.limitUsage(aiUsage(read(r).usage)),
          rateLimit: (r) => fromHeaders(read(r).headers)
        }
      )
    }

  const generateText = generate(
    (options) => ai.generateText(options as Parameters<typeof Ai.generateText>[0]),
    (r) => ({ usage: r.totalUsage, modelId: r.response?.modelId, headers: r.response?.headers })
  )
  const generateObject = generate(
    (options) => (ai.generateObject as (o: CallShape) => Promise<Ai.GenerateObjectResult<unknown>>)(options),
    (r) => ({ usage: r.usage, modelId: r.response?.modelId, headers: r.response?.headers })
  )

  const streamText = (options: CallShape & StreamCallbacks): Promise<unknown> =>
    new Promise((resolveResult, rejectResult) => {
      let call: ReturnType<typeof prepare>
      try {
        call = prepare(options)
      } catch (e) {
        rejectResult(e)
        return
      }
      let started = false
      let failure: unknown
      let cut = false
      let streamError: unknown
      let finished: Pricing.Usage | undefined
      let steps: Pricing.Usage | undefined
      let deltas = 0
      let modelId: string | undefined
      let headers: Record<string, string> | undefined
      const receivedAny = () => finished !== undefined || steps !== undefined || deltas > 0
      const received = (): Pricing.Usage =>
        finished ??
        sum(steps ?? { ...emptyUsage, inputTokens: call.inputTokens }, { ...emptyUsage, outputTokens: deltas })
      const consumed = () => call.cost(modelId, received())
      let callSettled!: () => void
      const settled = new Promise<void>((resolve) => {
        callSettled = resolve
      })
      ctx
        .call(
          async (signal) => {
            const result = ai.streamText({
              ...call.settings(signal),
              onChunk: async (event: { readonly chunk: { readonly type: string } }) => {
                if (event.chunk.type === "text-delta" || event.chunk.type === "reasoning-delta") deltas++
                await options.onChunk?.(event)
              },
              onError: async (event: { readonly error: unknown }) => {
                // A read cut by the job's signal or the caller's own reaches the AI SDK as an error: it is a cut.
                if (signal.aborted || options.abortSignal?.aborted === true) cut = true
                else failure ??= event.error
                await options.onError?.(event)
              },
              onAbort: async (event: unknown) => {
                cut = true
                await options.onAbort?.(event)
              },
              onStepFinish: async (event: Parameters<NonNullable<StreamCallbacks["onStepFinish"]>>[0]) => {
                steps = sum(steps ?? emptyUsage, aiUsage(event.usage))
                deltas = 0
                modelId = event.response.modelId ?? modelId
                headers = event.response.headers ?? headers
                await options.onStepFinish?.(event)
              },
              onFinish: async (event: Parameters<NonNullable<StreamCallbacks["onFinish"]>>[0]) => {
                finished = aiUsage(event.totalUsage)
                modelId = event.response.modelId ?? modelId
                headers = event.response.headers ?? headers
                await options.onFinish?.(event)
              }
            } as unknown as Parameters<typeof Ai.streamText>[0])
            started = true
            const stopped = () => cut || signal.aborted || options.abortSignal?.aborted === true
            const ended = () => failure ?? (stopped() ? aborted() : undefined)
            resolveResult(guarded(result, ended, settled))
            // Reads the stream to its end (the AI SDK tees it for the caller's own reading). A stream that broke
            // (a connection cut mid-way) rejects it without an error part.
            await Promise.resolve(result.totalUsage).catch((e: unknown) => {
              streamError = e
            })
            const end = ended()
            if (end !== undefined) throw end
            if (streamError !== undefined) throw streamError
            return undefined
          },
          {
            estimateCents: call.estimateCents,
            cost: consumed,
            // Nothing received: the request may not have reached the provider, or it refused it (a 429); the error's
            // class decides, or the reservation stays as the record.
            costOnError: () => (receivedAny() ? consumed() : undefined),
            costOnInterrupt: () => (receivedAny() ? consumed() : undefined),
            span: { ...call.span, usage: () => tokenCounts(received()) },
            resource: call.resource,
            tokens: call.tokens,
            usage: () => call.limitUsage(received()),
            rateLimit: (): RateLimitInfo | undefined => fromHeaders(headers)
          }
        )
        .then(
          () => callSettled(),
          (e: unknown) => {
            // Before the stream started the caller learns of the failure here; afterwards through the result.
            if (!started) rejectResult(e)
            callSettled()
          }
        )
    })

  return {
    generateText: generateText as unknown as AiSdkCalls["generateText"],
    streamText: streamText as unknown as AiSdkCalls["streamText"],
    generateObject: generateObject as unknown as AiSdkCalls["generateObject"]
  }
}
