import { normalize } from "@slowcall/core/Normalize"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { InvalidEstimate } from "../src/ModelCall.js"
import { withOpenAI } from "../src/OpenAI.js"
import { PriceNotFound } from "../src/Pricing.js"
import { openAiChat, openAiChatStream, openAiResponse, openAiResponseStream } from "./bodies.js"
import { type FakeProvider, startFakeProvider } from "./fakeProvider.js"
import { recordingContext } from "./recordingContext.js"

let fake: FakeProvider
beforeAll(async () => {
  fake = await startFakeProvider()
})
afterAll(() => fake.close())

const fetched: Array<AbortSignal | null | undefined> = []
const client = () =>
  new OpenAI({
    apiKey: "sk-test-0123456789abcdef",
    baseURL: `${fake.url}/v1`,
    maxRetries: 0,
    timeout: 2_000,
    fetch: (url: string | URL | Request, init?: RequestInit) => {
      fetched.push(init?.signal)
      return fetch(url, init)
    }
  })
const messages = [{ role: "user" as const, content: "hello" }]

describe("withOpenAI: chat.completions.create", () => {
  it("reserves the estimate, passes the call's signal to fetch, settles by usage (cached tokens at their rate)", async () => {
    // Arrange
    fake.reply({ kind: "json", status: 200, body: openAiChat() })
    const ctx = recordingContext()
    fetched.length = 0
    // Act
    const r = await withOpenAI(client(), ctx).chat.completions.create({ model: "gpt-4o", messages, max_tokens: 100 })
    // Assert
    expect(r.choices[0]?.message.content).toBe("hi")
    expect(ctx.calls).toHaveLength(1)
    const call = ctx.calls[0]!
    // estimate: ceil(JSON(messages).length / 4) input tokens + 100 output tokens at gpt-4o's price
    const inputTokens = Math.ceil(JSON.stringify(messages).length / 4)
    expect(call.estimateCents).toBeCloseTo((inputTokens * 250 + 100 * 1000) / 1e6, 9)
    // gpt-4o: 600 input x 250 + 400 cached x 125 + 200 output x 1000 (cents per million tokens)
    expect(call).toMatchObject({ outcome: "success", settledCents: 0.4 })
    // The span counts every input token, cached or not.
    expect(call.span).toEqual({ system: "openai", model: "gpt-4o", inputTokens: 1000, outputTokens: 200 })
    expect(fetched).toHaveLength(1)
  })

  it("the job's abort reaches the SDK's fetch: APIUserAbortError, classed cancelled, settled as interrupted", async () => {
    fake.reply({ kind: "stall" })
    const ctx = recordingContext()
    fetched.length = 0
    const pending = withOpenAI(client(), ctx).chat.completions.create({ model: "gpt-4o", messages })
    while (fetched.length === 0) await new Promise((r) => setTimeout(r, 5))
    expect(fetched[0]?.aborted).toBe(false)
    ctx.abort()
    const error = await pending.catch((e: unknown) => e)
    expect(fetched[0]?.aborted).toBe(true)
    expect(error).toBeInstanceOf(OpenAI.APIUserAbortError)
    expect(normalize(error).errorClass).toBe("cancelled")
    expect(ctx.calls[0]).toMatchObject({ outcome: "interrupt", settledCents: ctx.calls[0]?.estimateCents })
  })

  it("a model with no price fails with PriceNotFound before any request; a fallback price serves", async () => {
    const ctx = recordingContext()
    const before = fake.requests.length
    await expect(
      withOpenAI(client(), ctx).chat.completions.create({ model: "my-finetune", messages })
    ).rejects.toBeInstanceOf(PriceNotFound)
    expect(ctx.calls).toHaveLength(0)
    expect(fake.requests.length).toBe(before)
    fake.reply({ kind: "json", status: 200, body: openAiChat({ model: "my-finetune" }) })
    const fallbackPrice = { inputCentsPerMTok: 100, outputCentsPerMTok: 100 }
    await withOpenAI(client(), ctx, { fallbackPrice, estimateCents: 7 }).chat.completions.create({
      model: "my-finetune",
      messages
    })
    // cached tokens default to the input price: (600 + 400 + 200) x 100
    expect(ctx.calls[0]).toMatchObject({ estimateCents: 7, settledCents: 0.12 })
  })

  it("a negative or non-finite estimate is InvalidEstimate before any request", async () => {
    const ctx = recordingContext()
    const before = fake.requests.length
    for (const estimateCents of [-1, Number.NaN, () => Number.POSITIVE_INFINITY]) {
      await expect(
        withOpenAI(client(), ctx, { estimateCents }).chat.completions.create({ model: "gpt-4o", messages })
      ).rejects.toBeInstanceOf(InvalidEstimate)
    }
    expect(ctx.calls).toHaveLength(0)
    expect(fake.requests.length).toBe(before)
  })

  it("an HTTP error settles through costOnError and is the SDK's own error", async () => {
    fake.reply({
      kind: "json",
      status: 429,
      headers: { "retry-after": "2" },
      body: { error: { message: "Rate limit reached", type: "requests", code: "rate_limit_exceeded", param: null } }
    })
    const ctx = recordingContext()
    const error = await withOpenAI(client(), ctx)
      .chat.completions.create({ model: "gpt-4o", messages })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.RateLimitError)
    expect(normalize(error)).toMatchObject({ errorClass: "rate_limited", retryAfterMs: 2_000 })
    expect(ctx.calls[0]?.outcome).toBe("error")
  })

  it("a stream asks for usage and settles by it when the stream ends", async () => {
    const { events, done } = openAiChatStream({ usage: true })
    fake.reply({ kind: "sse", events: [...events, done] })
    const ctx = recordingContext()
    const stream = await withOpenAI(client(), ctx).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true
    })
    let text = ""
    for await (const c of stream) text += c.choices[0]?.delta.content ?? ""
    await ctx.idle()
    expect(text).toBe("Hello!")
    expect(JSON.parse(fake.requests.at(-1)!.body).stream_options).toEqual({ include_usage: true })
    // gpt-4o-mini: 500 x 15 + 30 x 60
    expect(ctx.calls[0]).toMatchObject({ outcome: "success", settledCents: 0.0093 })
    // A stream's span reads the usage the stream reported at its end.
    expect(ctx.calls[0]?.span).toEqual({ system: "openai", model: "gpt-4o-mini", inputTokens: 500, outputTokens: 30 })
  })

  it("a cut stream settles by what it consumed: the prompt's estimate and one token per content chunk", async () => {
    const { events } = openAiChatStream({ usage: false })
    fake.reply({ kind: "sse", events, after: "cut" })
    const ctx = recordingContext()
    const stream = await withOpenAI(client(), ctx).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true
    })
    const seen: Array<string> = []
    const error = await (async () => {
      for await (const c of stream) seen.push(c.choices[0]?.delta.content ?? "")
    })().catch((e: unknown) => e)
    await ctx.idle()
    expect(error).toBeInstanceOf(Error)
    expect(seen.join("")).toBe("Hello!")
    const inputTokens = Math.ceil(JSON.stringify(messages).length / 4)
    expect(ctx.calls[0]?.outcome).toBe("error")
    expect(ctx.calls[0]?.settledCents).toBeCloseTo((inputTokens * 15 + 3 * 60) / 1e6, 9)
  })

  it("a stream the job aborts settles by what it consumed (costOnInterrupt), and normalize says cancelled", async () => {
    const { events } = openAiChatStream({ usage: false, parts: ["a"] })
    // A stream that never ends: the fake writes one chunk and keeps the connection open.
    fake.reply({ kind: "sse", events: events.slice(0, 1), after: "hold" })
    const ctx = recordingContext()
    const stream = await withOpenAI(client(), ctx).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true
    })
    const it0 = stream[Symbol.asyncIterator]()
    await it0.next()
    ctx.abort()
    const error = await it0.next().catch((e: unknown) => e)
    await ctx.idle()
    expect(ctx.calls[0]?.outcome).toBe("interrupt")
    const inputTokens = Math.ceil(JSON.stringify(messages).length / 4)
    expect(ctx.calls[0]?.settledCents).toBeCloseTo((inputTokens * 15 + 1 * 60) / 1e6, 9)
    expect(normalize(error).errorClass).toBe("cancelled")
  })

  it("a stream the caller's own signal aborts fails too (the SDK would end it quietly)", async () => {
    const { events } = openAiChatStream({ usage: false, parts: ["a"] })
    fake.reply({ kind: "sse", events: events.slice(0, 1), after: "hold" })
    const ctx = recordingContext()
    const own = new AbortController()
    const stream = await withOpenAI(client(), ctx).chat.completions.create(
      { model: "gpt-4o-mini", messages, stream: true },
      { signal: own.signal }
    )
    const it0 = stream[Symbol.asyncIterator]()
    await it0.next()
    own.abort()
    const error = await it0.next().then(
      () => undefined,
      (e: unknown) => e
    )
    await ctx.idle()
    expect(normalize(error).errorClass).toBe("cancelled")
    expect(ctx.calls[0]?.outcome).toBe("error")
  })

  it("a caller that stops reading early settles by what it consumed", async () => {
    const { events, done } = openAiChatStream({ usage: true })
    fake.reply({ kind: "sse", events: [...events, done] })
    const ctx = recordingContext()
    const stream = await withOpenAI(client(), ctx).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true
    })
    for await (const _ of stream) break
    await ctx.idle()
    const inputTokens = Math.ceil(JSON.stringify(messages).length / 4)
    expect(ctx.calls[0]).toMatchObject({ outcome: "success" })
    expect(ctx.calls[0]?.settledCents).toBeCloseTo((inputTokens * 15 + 1 * 60) / 1e6, 9)
  })

  it("a stream that fails to open rejects the create call with the SDK's error", async () => {
    fake.reply({
      kind: "json",
      status: 401,
      body: {
        error: {
          message: "Incorrect API key provided: sk-test-****",
          type: "invalid_request_error",
          code: "invalid_api_key",
          param: null
        }
      }
    })
    const ctx = recordingContext()
    const error = await withOpenAI(client(), ctx)
      .chat.completions.create({ model: "gpt-4o-mini", messages, stream: true })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError)
    expect(ctx.calls[0]?.outcome).toBe("error")
    expect(ctx.calls[0]?.settledCents).toBe(ctx.calls[0]?.estimateCents)
  })
})

describe("withOpenAI: responses.create", () => {
  it("settles by the response's usage", async () => {
    fake.reply({ kind: "json", status: 200, body: openAiResponse() })
    const ctx = recordingContext()
    const r = await withOpenAI(client(), ctx).responses.create({
      model: "gpt-4.1",
      input: "hello",
      max_output_tokens: 50
    })
    expect(r.output_text).toBe("hi")
    // gpt-4.1: 1000 x 200 + 1000 cached x 50 + 100 x 800
    expect(ctx.calls[0]).toMatchObject({ outcome: "success", settledCents: 0.33 })
  })

  it("a stream settles by the usage of response.completed", async () => {
    fake.reply({ kind: "sse", events: openAiResponseStream() })
    const ctx = recordingContext()
    const stream = await withOpenAI(client(), ctx).responses.create({ model: "gpt-4.1", input: "hello", stream: true })
    const types: Array<string> = []
    for await (const e of stream) types.push(e.type)
    await ctx.idle()
    expect(types).toEqual(["response.created", "response.output_text.delta", "response.completed"])
    expect(ctx.calls[0]).toMatchObject({ outcome: "success", settledCents: 0.33 })
  })
})
