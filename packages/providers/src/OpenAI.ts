/**
 * `withOpenAI`: an OpenAI client whose model calls are billed calls of a slowcall job. Covers
 * `chat.completions.create` (plain and streaming) and `responses.create` (plain and streaming).
 *
 * @since 0.1.0
 */
import type OpenAISdk from "openai"
import {
  approxTokens,
  billing,
  count,
  emptyUsage,
  joinSignals,
  type Metered,
  streamCall,
  tokenCounts,
  withHeaders
} from "./internal/billing.js"
import type { ModelCallContext, WrapOptions } from "./ModelCall.js"
import * as Pricing from "./Pricing.js"

type Chat = OpenAISdk.Chat.Completions.ChatCompletion
type ChatChunk = OpenAISdk.Chat.Completions.ChatCompletionChunk
type ChatParams = OpenAISdk.Chat.Completions.ChatCompletionCreateParamsNonStreaming
type ChatStreamParams = OpenAISdk.Chat.Completions.ChatCompletionCreateParamsStreaming
type Resp = OpenAISdk.Responses.Response
type RespEvent = OpenAISdk.Responses.ResponseStreamEvent
type RespParams = OpenAISdk.Responses.ResponseCreateParamsNonStreaming
type RespStreamParams = OpenAISdk.Responses.ResponseCreateParamsStreaming
type RequestOptions = NonNullable<Parameters<OpenAISdk["chat"]["completions"]["create"]>[1]>

/**
 * The wrapped calls. Each returns a plain Promise; a streaming call resolves, once the stream opened, to an async
 * iterable of the SDK's chunks or events.
 *
 * @since 0.1.0
 * @category models
 */
export interface OpenAICalls {
  readonly chat: {
    readonly completions: {
      create(params: ChatParams, options?: RequestOptions): Promise<Chat>
      create(params: ChatStreamParams, options?: RequestOptions): Promise<AsyncIterable<ChatChunk>>
    }
  }
  readonly responses: {
    create(params: RespParams, options?: RequestOptions): Promise<Resp>
    create(params: RespStreamParams, options?: RequestOptions): Promise<AsyncIterable<RespEvent>>
  }
}

/**
 * Usage of a chat completion in the form `Pricing` bills: `prompt_tokens` includes the tokens read from and written
 * to the prompt cache, which are taken out and counted at their own rates; `completion_tokens` includes reasoning
 * tokens.
 *
 * @since 0.1.0
 * @category combinators
 */
export const chatUsage = (u: OpenAISdk.CompletionUsage | null | undefined): Pricing.Usage => {
  if (u === null || u === undefined) return emptyUsage
  const cached = count(u.prompt_tokens_details?.cached_tokens)
  const written = count(u.prompt_tokens_details?.cache_write_tokens)
  return {
    inputTokens: Math.max(0, count(u.prompt_tokens) - cached - written),
    cachedInputTokens: cached,
    cacheWriteTokens: written,
    outputTokens: count(u.completion_tokens)
  }
}

/**
 * Usage of a Responses API response in the form `Pricing` bills (same split as `chatUsage`).
 *
 * @since 0.1.0
 * @category combinators
 */
export const responseUsage = (u: OpenAISdk.Responses.ResponseUsage | null | undefined): Pricing.Usage => {
  if (u === null || u === undefined) return emptyUsage
  const cached = count(u.input_tokens_details?.cached_tokens)
  const written = count(u.input_tokens_details?.cache_write_tokens)
  return {
    inputTokens: Math.max(0, count(u.input_tokens) - cached - written),
    cachedInputTokens: cached,
    cacheWriteTokens: written,
    outputTokens: count(u.output_tokens)
  }
}

/**
 * Wraps an OpenAI client: every call of the returned `OpenAICalls` goes through `ctx.call` with the estimate
 * reserved first, the call's signal passed to the SDK request (joined with the caller's own `signal` option), and
 * the cost settled from the response's usage at the model's price. A model with no price fails with
 * `PriceNotFound` before any request. A chat stream asks for usage (`stream_options.include_usage`) and settles
 * when it ends; a cut or abandoned stream settles by what it consumed (reported usage, else the prompt's estimated
 * tokens and one output token per content chunk). Errors are the SDK's own, unchanged: `normalize` classes them.
 *
 * For the fleet limiter each call names its resource `openai:<model>:<credential>` (see `ModelCall.resourceName`),
 * reserves the prompt's estimated tokens and the request's output cap, reports the reply's usage (every input token,
 * cached or not, since OpenAI counts them all against its limits) and the `x-ratelimit-*` headers of the reply.
 *
 * @since 0.1.0
 * @category constructors
 */
export const withOpenAI = (client: OpenAISdk, ctx: ModelCallContext, opts: WrapOptions = {}): OpenAICalls => {
  const bill = billing(opts, "openai")

  const chatCreate = async (params: ChatParams | ChatStreamParams, options?: RequestOptions): Promise<unknown> => {
    const inputTokens = approxTokens(params.messages)
    const maxOutput = params.max_completion_tokens ?? params.max_tokens ?? undefined
    const estimateCents = bill.estimate(params.model, params, inputTokens, maxOutput)
    const resource = bill.resource(params.model)
    const tokens = bill.tokens(inputTokens, maxOutput)
    if (params.stream === true) {
      const streamParams: ChatStreamParams = {
        ...params,
        stream_options: { ...params.stream_options, include_usage: true }
      }
      let reported: Pricing.Usage | undefined
      let chunks = 0
      let model = params.model
      const meter: Metered<ChatChunk> = {
        add: (c) => {
          if (typeof c.model === "string" && c.model.length > 0) model = c.model
          if (c.usage) reported = chatUsage(c.usage)
          if (c.choices.some((ch) => typeof ch.delta?.content === "string" && ch.delta.content.length > 0)) chunks++
        },
        usage: () => reported ?? { ...emptyUsage, inputTokens, outputTokens: chunks },
        model: () => model
      }
      return streamCall(ctx, {
        estimateCents,
        price: bill.price,
        meter,
        open: async (signal) => {
          const { data, response } = await client.chat.completions
            .create(streamParams, { ...options, signal: joinSignals(signal, options?.signal) })
            .withResponse()
          return { stream: data, headers: response.headers }
        },
        own: options?.signal,
        system: "openai",
        resource,
        tokens,
        limitUsage: tokenCounts
      })
    }
    const reply = await ctx.call(
      (signal) =>
        withHeaders(
          client.chat.completions
            .create(params, { ...options, signal: joinSignals(signal, options?.signal) })
            .withResponse()
        ),
      {
        estimateCents,
        cost: (r) => Pricing.costCents(bill.price(r.data.model || params.model), chatUsage(r.data.usage)),
        span: { system: "openai", model: params.model },
        resource,
        tokens,
        usage: (r) => tokenCounts(chatUsage(r.data.usage)),
        rateLimit: (r) => r.rateLimit
      }
    )
    return reply.data
  }

  const responsesCreate = async (params: RespParams | RespStreamParams, options?: RequestOptions): Promise<unknown> => {
    const model = typeof params.model === "string" ? params.model : ""
    const inputTokens = approxTokens([params.instructions, params.input])
    const maxOutput = params.max_output_tokens ?? undefined
    const estimateCents = bill.estimate(model, params, inputTokens, maxOutput)
    const resource = bill.resource(model)
    const tokens = bill.tokens(inputTokens, maxOutput)
    if (params.stream === true) {
      let reported: Pricing.Usage | undefined
      let deltas = 0
      let seenModel = model
      const meter: Metered<RespEvent> = {
        add: (e) => {
          if (e.type === "response.output_text.delta") deltas++
          if ("response" in e && e.response !== undefined) {
            if (typeof e.response.model === "string" && e.response.model.length > 0) seenModel = e.response.model
            if (e.response.usage) reported = responseUsage(e.response.usage)
          }
        },
        usage: () => reported ?? { ...emptyUsage, inputTokens, outputTokens: deltas },
        model: () => seenModel
      }
      return streamCall(ctx, {
        estimateCents,
        price: bill.price,
        meter,
        open: async (signal) => {
          const { data, response } = await client.responses
            .create(params, { ...options, signal: joinSignals(signal, options?.signal) })
            .withResponse()
          return { stream: data, headers: response.headers }
        },
        own: options?.signal,
        system: "openai",
        resource,
        tokens,
        limitUsage: tokenCounts
      })
    }
    const reply = await ctx.call(
      (signal) =>
        withHeaders(
          client.responses.create(params, { ...options, signal: joinSignals(signal, options?.signal) }).withResponse()
        ),
      {
        estimateCents,
        cost: (r) => Pricing.costCents(bill.price(r.data.model || model), responseUsage(r.data.usage)),
        span: { system: "openai", model },
        resource,
        tokens,
        usage: (r) => tokenCounts(responseUsage(r.data.usage)),
        rateLimit: (r) => r.rateLimit
      }
    )
    return reply.data
  }

  return {
    chat: { completions: { create: chatCreate as OpenAICalls["chat"]["completions"]["create"] } },
    responses: { create: responsesCreate as OpenAICalls["responses"]["create"] }
  }
}
