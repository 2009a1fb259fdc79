/**
 * `withAnthropic`: an Anthropic client whose `messages.create` calls (plain and streaming) are billed calls of a
 * slowcall job.
 *
 * @since 0.1.0
 */
import type AnthropicSdk from "@anthropic-ai/sdk"
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

type Message = AnthropicSdk.Messages.Message
type Event = AnthropicSdk.Messages.RawMessageStreamEvent
type Params = AnthropicSdk.Messages.MessageCreateParamsNonStreaming
type StreamParams = AnthropicSdk.Messages.MessageCreateParamsStreaming
type RequestOptions = NonNullable<Parameters<AnthropicSdk["messages"]["create"]>[1]>
type RawUsage = {
  readonly input_tokens?: number | null
  readonly output_tokens?: number | null
  readonly cache_creation_input_tokens?: number | null
  readonly cache_read_input_tokens?: number | null
}

/**
 * The wrapped calls. A streaming call resolves, once the stream opened, to an async iterable of the raw events.
 *
 * @since 0.1.0
 * @category models
 */
export interface AnthropicCalls {
  readonly messages: {
    create(params: Params, options?: RequestOptions): Promise<Message>
    create(params: StreamParams, options?: RequestOptions): Promise<AsyncIterable<Event>>
  }
}

/**
 * Usage of a message in the form `Pricing` bills. Anthropic's `input_tokens` already excludes cache reads and
 * writes, which come as their own counts.
 *
 * @since 0.1.0
 * @category combinators
 */
export const messageUsage = (u: RawUsage | null | undefined): Pricing.Usage =>
  u === null || u === undefined
    ? emptyUsage
    : {
        inputTokens: count(u.input_tokens),
        cachedInputTokens: count(u.cache_read_input_tokens),
        cacheWriteTokens: count(u.cache_creation_input_tokens),
        outputTokens: count(u.output_tokens)
      }

/**
 * A message's token counts as Anthropic counts them against its limits: input tokens are the uncached ones and the
 * cache writes (cache reads do not count towards the input-token limit), output tokens all of them.
 *
 * @since 0.4.0
 * @category combinators
 */
export const limitCounts = (usage: Pricing.Usage): { readonly inputTokens: number; readonly outputTokens: number } => ({
  inputTokens: usage.inputTokens + usage.cacheWriteTokens,
  outputTokens: usage.outputTokens
})

/**
 * Wraps an Anthropic client: every `messages.create` goes through `ctx.call` with the estimate reserved first, the
 * call's signal passed to the SDK request, and the cost settled from the usage at the model's price
 * (`PriceNotFound` before any request for a model with no price). A stream settles when it ends, from the
 * `message_start` usage (input and cache) and the last `message_delta` usage (output, cumulative); a cut or
 * abandoned stream settles by the usage reported so far, or one output token per text delta when no delta carried
 * usage yet. Errors are the SDK's own, unchanged.
 *
 * For the fleet limiter each call names its resource `anthropic:<model>:<credential>` (see
 * `ModelCall.resourceName`), reserves the prompt's estimated tokens and `max_tokens`, reports the usage as Anthropic
 * counts it against its input-token limit (`input_tokens` plus cache writes: cache reads do not count; the span
 * still reports every input token) and the `anthropic-ratelimit-*` headers of the reply.
 *
 * @since 0.1.0
 * @category constructors
 */
export const withAnthropic = (client: AnthropicSdk, ctx: ModelCallContext, opts: WrapOptions = {}): AnthropicCalls => {
  const bill = billing(opts, "anthropic")
  const create = async (params: Params | StreamParams, options?: RequestOptions): Promise<unknown> => {
    const inputTokens = approxTokens([params.system, params.messages])
    const estimateCents = bill.estimate(params.model, params, inputTokens, params.max_tokens)
    const resource = bill.resource(params.model)
    const tokens = bill.tokens(inputTokens, params.max_tokens)
    const withSignal = (signal: AbortSignal): RequestOptions => ({
      ...options,
      signal: joinSignals(signal, options?.signal)
    })
    if (params.stream === true) {
      let start: Pricing.Usage | undefined
      let output: number | undefined
      let deltas = 0
      let model: string = params.model
      const meter: Metered<Event> = {
        add: (e) => {
          if (e.type === "message_start") {
            start = messageUsage(e.message.usage)
            if (e.message.model) model = e.message.model
          } else if (e.type === "message_delta") {
            output = count(e.usage.output_tokens)
            const later = messageUsage(e.usage)
            if (start !== undefined && later.inputTokens > 0) start = { ...later, outputTokens: 0 }
          } else if (e.type === "content_block_delta") {
            deltas++
          }
        },
        usage: () => ({
          ...(start ?? { ...emptyUsage, inputTokens }),
          outputTokens: output ?? deltas
        }),
        model: () => model
      }
      return streamCall(ctx, {
        estimateCents,
        price: bill.price,
        meter,
        open: async (signal) => {
          const { data, response } = await client.messages.create(params, withSignal(signal)).withResponse()
          return { stream: data, headers: response.headers }
        },
        own: options?.signal,
        system: "anthropic",
        resource,
        tokens,
        limitUsage: limitCounts
      })
    }
    const reply = await ctx.call(
      (signal) => withHeaders(client.messages.create(params, withSignal(signal)).withResponse()),
      {
        estimateCents,
        cost: (r) => Pricing.costCents(bill.price(r.data.model || params.model), messageUsage(r.data.usage)),
        span: { system: "anthropic", model: params.model, usage: (r) => tokenCounts(messageUsage(r.data.usage)) },
        resource,
        tokens,
        usage: (r) => limitCounts(messageUsage(r.data.usage)),
        rateLimit: (r) => r.rateLimit
      }
    )
    return reply.data
  }
  return { messages: { create: create as AnthropicCalls["messages"]["create"] } }
}
