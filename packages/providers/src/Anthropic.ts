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
  tokenCounts
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
 * Wraps an Anthropic client: every `messages.create` goes through `ctx.call` with the estimate reserved first, the
 * call's signal passed to the SDK request, and the cost settled from the usage at the model's price
 * (`PriceNotFound` before any request for a model with no price). A stream settles when it ends, from the
 * `message_start` usage (input and cache) and the last `message_delta` usage (output, cumulative); a cut or
 * abandoned stream settles by the usage reported so far, or one output token per text delta when no delta carried
 * usage yet. Errors are the SDK's own, unchanged.
 *
 * @since 0.1.0
 * @category constructors
 */
export const withAnthropic = (client: AnthropicSdk, ctx: ModelCallContext, opts: WrapOptions = {}): AnthropicCalls => {
  const bill = billing(opts)
  const create = async (params: Params | StreamParams, options?: RequestOptions): Promise<unknown> => {
    const inputTokens = approxTokens([params.system, params.messages])
    const estimateCents = bill.estimate(params.model, params, inputTokens, params.max_tokens)
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
      return streamCall(
        ctx,
        estimateCents,
        bill.price,
        meter,
        (signal) => client.messages.create(params, withSignal(signal)),
        undefined,
        options?.signal,
        "anthropic"
      )
    }
    return ctx.call((signal) => client.messages.create(params, withSignal(signal)), {
      estimateCents,
      cost: (r: Message) => Pricing.costCents(bill.price(r.model || params.model), messageUsage(r.usage)),
      span: { system: "anthropic", model: params.model, usage: (r: Message) => tokenCounts(messageUsage(r.usage)) }
    })
  }
  return { messages: { create: create as AnthropicCalls["messages"]["create"] } }
}
