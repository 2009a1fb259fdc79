/**
 * `withAiSdk` through the real `ai` package and its `@ai-sdk/openai`, `@ai-sdk/anthropic` and `@ai-sdk/google`
 * providers, pointed at the fake provider: what each call reserves, how it settles, what it tells the fleet limiter,
 * and how its errors and cuts reach the caller.
 */
import { createAnthropic } from "@ai-sdk/anthropic"
import { createGoogleGenerativeAI } from "@ai-sdk/google"
import { createOpenAI } from "@ai-sdk/openai"
import { normalize } from "@slowcall/core/Normalize"
import * as ai from "ai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { aiUsage, withAiSdk } from "../src/AiSdk.js"
import { InvalidCredentialLabel } from "../src/ModelCall.js"
import * as Pricing from "../src/Pricing.js"
import {
  anthropicMessage,
  geminiResponse,
  geminiStream,
  openAiChat,
  openAiChatStream,
  openAiError,
  openAiResponse
} from "./bodies.js"
import { type FakeProvider, startFakeProvider } from "./fakeProvider.js"
import { recordingContext } from "./recordingContext.js"

let fake: FakeProvider
beforeAll(async () => {
  fake = await startFakeProvider()
})
afterAll(() => fake.close())

const openai = () => createOpenAI({ baseURL: `${fake.url}/v1`, apiKey: "sk-test-0123456789abcdef" })
const anthropic = () => createAnthropic({ baseURL: `${fake.url}/v1`, apiKey: "sk-ant-api03-test0123456789" })
const google = () => createGoogleGenerativeAI({ baseURL: `${fake.url}/v1beta`, apiKey: "AIzaSyTEST0123456789abcdefgh" })
const prompt = "Summarise this ticket, please"
const approx = (u: unknown) => Math.ceil(JSON.stringify(u).length / 4)
const costOf = (model: string, usage: Partial<Pricing.Usage>) =>
  Pricing.costCents(Pricing.priceOf(Pricing.defaults, model), {
    inputTokens: 0,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 0,
    ...usage
  })
const until = async (check: () => boolean) => {
  for (let i = 0; i < 1_000 && !check(); i++) await new Promise((r) => setTimeout(r, 5))
  expect(check()).toBe(true)
}
const rateLimited = openAiError(
  "Rate limit reached for gpt-4o on requests per min (RPM).",
  "requests",
  "rate_limit_exceeded"
)

describe("withAiSdk: generateText", () => {
  it("one billed call: estimate reserved, signal passed, cost from usage, what the limiter reads", async () => {
    // Arrange
    fake.reply({
      kind: "json",
      status: 200,
      body: openAiChat(),
      headers: { "x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499" }
    })
    const ctx = recordingContext()
    const before = fake.requests.length
    // Act
    const { text } = await withAiSdk(ai, ctx).generateText({
      model: openai().chat("gpt-4o"),
      prompt,
      maxOutputTokens: 100
    })
    // Assert
    expect(text).toBe("hi")
    expect(fake.requests.length - before).toBe(1)
    expect(JSON.parse(fake.requests.at(-1)!.body)).toMatchObject({ model: "gpt-4o", max_tokens: 100 })
    const inputTokens = approx([undefined, prompt])
    expect(ctx.calls).toHaveLength(1)
    expect(ctx.calls[0]?.estimateCents).toBeCloseTo(costOf("gpt-4o", { inputTokens, outputTokens: 100 }), 9)
    // gpt-4o: 600 input + 400 cached + 200 output, priced by the snapshot that answered (gpt-4o-2024-08-06)
    expect(ctx.calls[0]).toMatchObject({
      outcome: "success",
      settledCents: costOf("gpt-4o", { inputTokens: 600, cachedInputTokens: 400, outputTokens: 200 }),
      resource: "openai:gpt-4o:default",
      tokens: { input: inputTokens, maxOutput: 100 },
      usage: { inputTokens: 1_000, outputTokens: 200 },
      span: { system: "openai", model: "gpt-4o", inputTokens: 1_000, outputTokens: 200 },
      rateLimit: { requests: { limit: 500, remaining: 499 } }
    })
  })

  it("the job's abort reaches the request: cancelled, settled as interrupted", async () => {
    fake.reply({ kind: "stall" })
    const ctx = recordingContext()
    const closed = fake.closedEarly.length
    const requests = fake.requests.length
    const pending = withAiSdk(ai, ctx).generateText({ model: openai().chat("gpt-4o"), prompt })
    await until(() => fake.requests.length === requests + 1)
    ctx.abort()
    const error = await pending.catch((e: unknown) => e)
    await until(() => fake.closedEarly.length === closed + 1)
    expect(normalize(error).errorClass).toBe("cancelled")
    expect(ctx.calls[0]?.outcome).toBe("interrupt")
  })

  it("the Responses API, Anthropic and Gemini models: each provider's usage, resource and price", async () => {
    const ctx = recordingContext()
    const llm = withAiSdk(ai, ctx, { credential: "key-a" })
    fake.reply({ kind: "json", status: 200, body: openAiResponse() })
    await llm.generateText({ model: openai()("gpt-4.1"), prompt })
    fake.reply({ kind: "json", status: 200, body: anthropicMessage() })
    await llm.generateText({
      model: anthropic()("claude-sonnet-4-5"),
      system: "Be brief.",
      prompt,
      maxOutputTokens: 300
    })
    fake.reply({ kind: "json", status: 200, body: geminiResponse() })
    await llm.generateText({ model: google()("gemini-2.5-flash"), prompt })
    expect(ctx.calls.map((c) => c.resource)).toEqual([
      "openai:gpt-4.1:key-a",
      "anthropic:claude-sonnet-4-5:key-a",
      "google:gemini-2.5-flash:key-a"
    ])
    // gpt-4.1: 1000 input + 1000 cached + 100 output (reasoning included)
    expect(ctx.calls[0]).toMatchObject({
      settledCents: costOf("gpt-4.1", { inputTokens: 1_000, cachedInputTokens: 1_000, outputTokens: 100 }),
      usage: { inputTokens: 2_000, outputTokens: 100 }
    })
    // Anthropic: 1000 uncached, 2000 cache writes, 3000 cache reads; its limit leaves the reads out, the span not.
    expect(ctx.calls[1]).toMatchObject({
      settledCents: costOf("claude-sonnet-4-5", {
        inputTokens: 1_000,
        cacheWriteTokens: 2_000,
        cachedInputTokens: 3_000,
        outputTokens: 300
      }),
      tokens: { input: approx(["Be brief.", prompt]), maxOutput: 300 },
      usage: { inputTokens: 3_000, outputTokens: 300 },
      span: { system: "anthropic", inputTokens: 6_000, outputTokens: 300 }
    })
    // Gemini: 500 input + 500 cached + 100 output + 50 thinking
    expect(ctx.calls[2]).toMatchObject({
      settledCents: costOf("gemini-2.5-flash", { inputTokens: 500, cachedInputTokens: 500, outputTokens: 150 }),
      tokens: { maxOutput: 1024 },
      usage: { inputTokens: 1_000, outputTokens: 150 }
    })
  })

  it("a 429: the AI SDK's APICallError, unchanged, normalized rate_limited with its retry-after; no retry of its own", async () => {
    fake.reply({
      kind: "json",
      status: 429,
      headers: { "retry-after": "2", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s" },
      body: rateLimited
    })
    const ctx = recordingContext()
    const before = fake.requests.length
    const error = await withAiSdk(ai, ctx)
      .generateText({ model: openai().chat("gpt-4o"), prompt })
      .catch((e: unknown) => e)
    expect(ai.APICallError.isInstance(error)).toBe(true)
    expect(normalize(error)).toMatchObject({
      errorClass: "rate_limited",
      retryAfterMs: 2_000,
      rateLimit: { retryAfterMs: 2_000, requests: { remaining: 0, resetMs: 1_000 } }
    })
    // maxRetries 0 unless set: the job retries, not the AI SDK.
    expect(fake.requests.length - before).toBe(1)
    expect(ctx.calls[0]?.outcome).toBe("error")
  })

  it("a model with no price fails with PriceNotFound before any request; a bad credential label where it is made", async () => {
    const ctx = recordingContext()
    const before = fake.requests.length
    const llm = withAiSdk(ai, ctx)
    await expect(llm.generateText({ model: openai().chat("my-finetune"), prompt })).rejects.toBeInstanceOf(
      Pricing.PriceNotFound
    )
    await expect(llm.streamText({ model: openai().chat("my-finetune"), prompt })).rejects.toBeInstanceOf(
      Pricing.PriceNotFound
    )
    expect(() => withAiSdk(ai, ctx, { credential: "sk-proj-AbCdEfGhIjKl0123" })).toThrow(InvalidCredentialLabel)
    expect(ctx.calls).toHaveLength(0)
    expect(fake.requests.length).toBe(before)
  })
})

describe("withAiSdk: generateObject", () => {
  it("the object parsed from the reply, the call billed by its usage", async () => {
    fake.reply({ kind: "json", status: 200, body: openAiChat({ content: '{"title":"Refund","urgent":true}' }) })
    const ctx = recordingContext()
    const { object } = await withAiSdk(ai, ctx).generateObject({
      model: openai().chat("gpt-4o"),
      schema: ai.jsonSchema<{ title: string; urgent: boolean }>({
        type: "object",
        properties: { title: { type: "string" }, urgent: { type: "boolean" } },
        required: ["title", "urgent"],
        additionalProperties: false
      }),
      prompt
    })
    expect(object).toEqual({ title: "Refund", urgent: true })
    expect(ctx.calls[0]).toMatchObject({
      outcome: "success",
      settledCents: costOf("gpt-4o", { inputTokens: 600, cachedInputTokens: 400, outputTokens: 200 }),
      resource: "openai:gpt-4o:default",
      usage: { inputTokens: 1_000, outputTokens: 200 }
    })
  })
})

describe("withAiSdk: streamText", () => {
  it("settles at the stream's end by its usage; the headers it opened with go to the limiter", async () => {
    const { events, done } = openAiChatStream({ usage: true })
    fake.reply({ kind: "sse", events: [...events, done], headers: { "x-ratelimit-remaining-tokens": "29000" } })
    const ctx = recordingContext()
    const chunks: Array<string> = []
    const result = await withAiSdk(ai, ctx).streamText({
      model: openai().chat("gpt-4o-mini"),
      prompt,
      maxOutputTokens: 64,
      onChunk: ({ chunk }) => {
        chunks.push(chunk.type)
      }
    })
    let text = ""
    for await (const t of result.textStream) text += t
    await ctx.idle()
    expect(text).toBe("Hello!")
    expect(await result.text).toBe("Hello!")
    // The caller's own callbacks still run.
    expect(chunks).toEqual(["text-delta", "text-delta", "text-delta"])
    expect(ctx.calls).toHaveLength(1)
    expect(ctx.calls[0]).toMatchObject({
      outcome: "success",
      settledCents: costOf("gpt-4o-mini", { inputTokens: 500, outputTokens: 30 }),
      resource: "openai:gpt-4o-mini:default",
      tokens: { input: approx([undefined, prompt]), maxOutput: 64 },
      usage: { inputTokens: 500, outputTokens: 30 },
      rateLimit: { tokens: { remaining: 29_000 } }
    })
  })

  it("textStream ends and the result's promises settle only once the call's charge is recorded", async () => {
    const { events, done } = openAiChatStream({ usage: true })
    fake.reply({ kind: "sse", events: [...events, done] })
    const ctx = recordingContext({ settleDelayMs: 50 })
    const result = await withAiSdk(ai, ctx).streamText({ model: openai().chat("gpt-4o-mini"), prompt })
    for await (const _ of result.textStream) {
      // consume
    }
    // No ctx.idle(): a handler that returns here must not leave the charge open.
    const settled = costOf("gpt-4o-mini", { inputTokens: 500, outputTokens: 30 })
    expect(ctx.calls[0]).toMatchObject({ outcome: "success", settledCents: settled })

    fake.reply({ kind: "sse", events: [...events, done] })
    const again = recordingContext({ settleDelayMs: 50 })
    const second = await withAiSdk(ai, again).streamText({ model: openai().chat("gpt-4o-mini"), prompt })
    expect(await second.text).toBe("Hello!")
    expect(again.calls[0]).toMatchObject({ outcome: "success", settledCents: settled })
  })

  it("a stream nobody reads still settles at its end", async () => {
    fake.reply({ kind: "sse", events: geminiStream({ end: true }) })
    const ctx = recordingContext()
    await withAiSdk(ai, ctx).streamText({ model: google()("gemini-2.5-flash"), prompt })
    await ctx.idle()
    expect(ctx.calls[0]).toMatchObject({
      outcome: "success",
      settledCents: costOf("gemini-2.5-flash", { inputTokens: 600, outputTokens: 12 }),
      resource: "google:gemini-2.5-flash:default"
    })
  })

  it("cancelled mid-way by the job: the request is cut, textStream throws, settled at what was received", async () => {
    const { events } = openAiChatStream({ usage: false, parts: ["Hel"] })
    // One text chunk, then the connection stays open.
    fake.reply({ kind: "sse", events: events.slice(0, 1), after: "hold" })
    const ctx = recordingContext()
    const closed = fake.closedEarly.length
    const result = await withAiSdk(ai, ctx).streamText({ model: openai().chat("gpt-4o-mini"), prompt })
    const reader = result.textStream[Symbol.asyncIterator]()
    expect(await reader.next()).toEqual({ done: false, value: "Hel" })
    ctx.abort()
    const error = await (async () => {
      for (let r = await reader.next(); !r.done; r = await reader.next()) {
        // drain
      }
    })().catch((e: unknown) => e)
    await ctx.idle()
    await until(() => fake.closedEarly.length === closed + 1)
    expect(normalize(error).errorClass).toBe("cancelled")
    expect(ctx.calls[0]?.outcome).toBe("interrupt")
    // the prompt's estimated tokens and one output token for the one delta received
    expect(ctx.calls[0]?.settledCents).toBeCloseTo(
      costOf("gpt-4o-mini", { inputTokens: approx([undefined, prompt]), outputTokens: 1 }),
      9
    )
  })

  it("cut by the caller's own abortSignal: textStream throws too, so a cut stream is never taken for a whole one", async () => {
    const { events } = openAiChatStream({ usage: false, parts: ["Hel"] })
    fake.reply({ kind: "sse", events: events.slice(0, 1), after: "hold" })
    const ctx = recordingContext()
    const own = new AbortController()
    const result = await withAiSdk(ai, ctx).streamText({
      model: openai().chat("gpt-4o-mini"),
      prompt,
      abortSignal: own.signal
    })
    const seen: Array<string> = []
    const error = await (async () => {
      for await (const t of result.textStream) {
        seen.push(t)
        own.abort()
      }
    })().catch((e: unknown) => e)
    await ctx.idle()
    expect(seen).toEqual(["Hel"])
    expect(normalize(error).errorClass).toBe("cancelled")
    expect(ctx.calls[0]?.outcome).toBe("error")
    expect(ctx.calls[0]?.settledCents).toBeCloseTo(
      costOf("gpt-4o-mini", { inputTokens: approx([undefined, prompt]), outputTokens: 1 }),
      9
    )
  })

  it("a connection cut mid-way: textStream throws what broke it (network), settled at what was received", async () => {
    const { events } = openAiChatStream({ usage: false, parts: ["Hel", "lo"] })
    fake.reply({ kind: "sse", events: events.slice(0, 2), after: "cut" })
    const ctx = recordingContext()
    const result = await withAiSdk(ai, ctx).streamText({ model: openai().chat("gpt-4o-mini"), prompt })
    const seen: Array<string> = []
    const error = await (async () => {
      for await (const t of result.textStream) seen.push(t)
    })().catch((e: unknown) => e)
    await ctx.idle()
    expect(seen).toEqual(["Hel", "lo"])
    expect(normalize(error).errorClass).toBe("network")
    expect(ctx.calls[0]?.outcome).toBe("error")
    expect(ctx.calls[0]?.settledCents).toBeCloseTo(
      costOf("gpt-4o-mini", { inputTokens: approx([undefined, prompt]), outputTokens: 2 }),
      9
    )
  })

  it("a 429: textStream throws the APICallError, the result's promises reject with it, normalized with retry-after", async () => {
    fake.reply({ kind: "json", status: 429, headers: { "retry-after": "3" }, body: rateLimited })
    const ctx = recordingContext()
    const errors: Array<unknown> = []
    const result = await withAiSdk(ai, ctx).streamText({
      model: openai().chat("gpt-4o-mini"),
      prompt,
      onError: ({ error }) => {
        errors.push(error)
      }
    })
    const thrown = await (async () => {
      for await (const _ of result.textStream) {
        // no text comes
      }
    })().catch((e: unknown) => e)
    const rejected = await Promise.resolve(result.text).catch((e: unknown) => e)
    await ctx.idle()
    expect(ai.APICallError.isInstance(thrown)).toBe(true)
    expect(rejected).toBe(thrown)
    expect(errors).toEqual([thrown])
    expect(normalize(thrown)).toMatchObject({ errorClass: "rate_limited", retryAfterMs: 3_000 })
    // The billed call failed with the same error; nothing was received, so its class decides what it cost.
    expect(ctx.calls[0]).toMatchObject({ outcome: "error", error: thrown })
  })
})

describe("aiUsage", () => {
  it("input without cache reads and writes, from the details or the older cachedInputTokens", () => {
    expect(
      aiUsage({
        inputTokens: 6_000,
        inputTokenDetails: { noCacheTokens: 1_000, cacheReadTokens: 3_000, cacheWriteTokens: 2_000 },
        outputTokens: 300,
        outputTokenDetails: { textTokens: 300, reasoningTokens: undefined },
        totalTokens: 6_300
      })
    ).toEqual({ inputTokens: 1_000, cachedInputTokens: 3_000, cacheWriteTokens: 2_000, outputTokens: 300 })
    expect(
      aiUsage({
        inputTokens: 100,
        inputTokenDetails: { noCacheTokens: undefined, cacheReadTokens: undefined, cacheWriteTokens: undefined },
        cachedInputTokens: 40,
        outputTokens: 5,
        outputTokenDetails: { textTokens: undefined, reasoningTokens: undefined },
        totalTokens: 105
      })
    ).toEqual({ inputTokens: 60, cachedInputTokens: 40, cacheWriteTokens: 0, outputTokens: 5 })
    expect(aiUsage(undefined)).toEqual({ inputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0 })
  })
})
