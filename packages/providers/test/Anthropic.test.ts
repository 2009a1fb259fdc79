import Anthropic from "@anthropic-ai/sdk"
import { normalize } from "@slowcall/core/Normalize"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withAnthropic } from "../src/Anthropic.js"
import { PriceNotFound, withPrices } from "../src/Pricing.js"
import { anthropicError, anthropicMessage, anthropicStream } from "./bodies.js"
import { type FakeProvider, startFakeProvider } from "./fakeProvider.js"
import { recordingContext } from "./recordingContext.js"

let fake: FakeProvider
beforeAll(async () => {
  fake = await startFakeProvider()
})
afterAll(() => fake.close())

const fetched: Array<AbortSignal | null | undefined> = []
const client = () =>
  new Anthropic({
    apiKey: "sk-ant-api03-test0123456789",
    baseURL: fake.url,
    maxRetries: 0,
    timeout: 2_000,
    fetch: (url: string | URL | Request, init?: RequestInit) => {
      fetched.push(init?.signal)
      return fetch(url, init)
    }
  })
const params = { model: "claude-sonnet-4-5", max_tokens: 200, messages: [{ role: "user" as const, content: "hello" }] }

describe("withAnthropic: messages.create", () => {
  it("reserves the estimate, passes the call's signal to fetch, settles by usage with cache reads and writes", async () => {
    // Arrange
    fake.reply({ kind: "json", status: 200, body: anthropicMessage() })
    const ctx = recordingContext()
    fetched.length = 0
    // Act
    const m = await withAnthropic(client(), ctx).messages.create(params)
    // Assert
    expect(m.content[0]).toMatchObject({ type: "text", text: "hi" })
    const inputTokens = Math.ceil(JSON.stringify([undefined, params.messages]).length / 4)
    expect(ctx.calls[0]?.estimateCents).toBeCloseTo((inputTokens * 300 + 200 * 1500) / 1e6, 9)
    // claude-sonnet-4-5: 1000 x 300 + 2000 writes x 375 + 3000 reads x 30 + 300 x 1500
    expect(ctx.calls[0]).toMatchObject({ outcome: "success", settledCents: 1.59 })
    // The span counts every input token: uncached, cache writes and cache reads.
    expect(ctx.calls[0]?.span).toEqual({
      system: "anthropic",
      model: params.model,
      inputTokens: 6000,
      outputTokens: 300
    })
  })

  it("the job's abort reaches the SDK's fetch: APIUserAbortError, classed cancelled", async () => {
    fake.reply({ kind: "stall" })
    const ctx = recordingContext()
    fetched.length = 0
    const pending = withAnthropic(client(), ctx).messages.create(params)
    while (fetched.length === 0) await new Promise((r) => setTimeout(r, 5))
    expect(fetched[0]?.aborted).toBe(false)
    ctx.abort()
    const error = await pending.catch((e: unknown) => e)
    expect(fetched[0]?.aborted).toBe(true)
    expect(error).toBeInstanceOf(Anthropic.APIUserAbortError)
    expect(normalize(error).errorClass).toBe("cancelled")
    expect(ctx.calls[0]?.outcome).toBe("interrupt")
  })

  it("an overridden price replaces the default", async () => {
    fake.reply({ kind: "json", status: 200, body: anthropicMessage() })
    const ctx = recordingContext()
    const prices = withPrices({ "claude-sonnet-4-5": { inputCentsPerMTok: 1, outputCentsPerMTok: 2 } })
    await withAnthropic(client(), ctx, { prices }).messages.create(params)
    // (1000 + 2000 + 3000) x 1 + 300 x 2
    expect(ctx.calls[0]?.settledCents).toBe(0.0066)
  })

  it("an unknown model is PriceNotFound before any request", async () => {
    const ctx = recordingContext()
    const before = fake.requests.length
    await expect(withAnthropic(client(), ctx).messages.create({ ...params, model: "claude-next" })).rejects.toThrow(
      PriceNotFound
    )
    expect(fake.requests.length).toBe(before)
  })

  it("a stream settles by message_start input and the last message_delta output", async () => {
    fake.reply({ kind: "sse", events: anthropicStream({ end: true }) })
    const ctx = recordingContext()
    const stream = await withAnthropic(client(), ctx).messages.create({ ...params, stream: true })
    const types: Array<string> = []
    for await (const e of stream) types.push(e.type)
    await ctx.idle()
    expect(types.at(-1)).toBe("message_stop")
    // 800 x 300 + 50 x 1500
    expect(ctx.calls[0]).toMatchObject({ outcome: "success", settledCents: 0.315 })
  })

  it("a cut stream settles by what it consumed: reported input, one token per text delta", async () => {
    fake.reply({ kind: "sse", events: anthropicStream({ end: false }), after: "cut" })
    const ctx = recordingContext()
    const stream = await withAnthropic(client(), ctx).messages.create({ ...params, stream: true })
    const error = await (async () => {
      for await (const _ of stream) {
        // consume
      }
    })().catch((e: unknown) => e)
    await ctx.idle()
    expect(error).toBeInstanceOf(Error)
    expect(["network", "unknown"]).toContain(normalize(error).errorClass)
    // 800 x 300 + 2 x 1500
    expect(ctx.calls[0]).toMatchObject({ outcome: "error", settledCents: 0.243 })
  })

  it("a stream the job aborts is settled by costOnInterrupt and classed cancelled", async () => {
    fake.reply({ kind: "sse", events: anthropicStream({ end: false }), after: "hold" })
    const ctx = recordingContext()
    const stream = await withAnthropic(client(), ctx).messages.create({ ...params, stream: true })
    const it0 = stream[Symbol.asyncIterator]()
    for (let i = 0; i < 4; i++) await it0.next()
    ctx.abort()
    const error = await it0.next().then(
      () => undefined,
      (e: unknown) => e
    )
    await ctx.idle()
    expect(normalize(error).errorClass).toBe("cancelled")
    expect(ctx.calls[0]).toMatchObject({ outcome: "interrupt", settledCents: 0.243 })
  })

  it("an overloaded 529 is the SDK's error, settled through costOnError", async () => {
    fake.reply({ kind: "json", status: 529, body: anthropicError("overloaded_error", "Overloaded") })
    const ctx = recordingContext()
    const error = await withAnthropic(client(), ctx)
      .messages.create(params)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.APIError)
    expect(normalize(error).errorClass).toBe("overloaded")
    expect(ctx.calls[0]?.outcome).toBe("error")
  })
})
