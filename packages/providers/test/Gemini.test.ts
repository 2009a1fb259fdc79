import { GoogleGenAI } from "@google/genai"
import { normalize } from "@slowcall/core/Normalize"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withGemini } from "../src/Gemini.js"
import { ClientTimeout } from "../src/ModelCall.js"
import { PriceNotFound } from "../src/Pricing.js"
import { geminiResponse, geminiStream } from "./bodies.js"
import { type FakeProvider, startFakeProvider } from "./fakeProvider.js"
import { recordingContext } from "./recordingContext.js"

let fake: FakeProvider
beforeAll(async () => {
  fake = await startFakeProvider()
})
afterAll(() => fake.close())

const client = (timeout = 2_000) =>
  new GoogleGenAI({ apiKey: "AIzaSyTEST0123456789abcdefgh", httpOptions: { baseUrl: fake.url, timeout } })
const params = { model: "gemini-2.5-flash", contents: "hello", config: { maxOutputTokens: 100 } }

describe("withGemini: models.generateContent", () => {
  it("reserves the estimate and settles by usageMetadata (cached and thinking tokens)", async () => {
    // Arrange
    fake.reply({ kind: "json", status: 200, body: geminiResponse() })
    const ctx = recordingContext()
    // Act
    const r = await withGemini(client(), ctx).models.generateContent(params)
    // Assert
    expect(r.text).toBe("hi")
    expect(fake.requests.at(-1)?.path).toContain("gemini-2.5-flash:generateContent")
    const inputTokens = Math.ceil(JSON.stringify([undefined, "hello"]).length / 4)
    expect(ctx.calls[0]?.estimateCents).toBeCloseTo((inputTokens * 30 + 100 * 250) / 1e6, 9)
    // gemini-2.5-flash: 500 x 30 + 500 cached x 3 + (100 + 50 thinking) x 250
    expect(ctx.calls[0]).toMatchObject({ outcome: "success", settledCents: 0.054 })
    // The span counts every input token (cached too) and the output Gemini bills, thinking included.
    expect(ctx.calls[0]?.span).toEqual({ system: "gemini", model: params.model, inputTokens: 1000, outputTokens: 150 })
  })

  it("the job's abort reaches the request: cancelled, settled by costOnInterrupt", async () => {
    fake.reply({ kind: "stall" })
    const ctx = recordingContext()
    const pending = withGemini(client(), ctx).models.generateContent(params)
    await new Promise((r) => setTimeout(r, 50))
    ctx.abort()
    const error = await pending.catch((e: unknown) => e)
    expect(normalize(error).errorClass).toBe("cancelled")
    expect(ctx.calls[0]?.outcome).toBe("interrupt")
  })

  it("the SDK's own timeout becomes ClientTimeout: timeout, retryable", async () => {
    fake.reply({ kind: "stall" })
    const ctx = recordingContext()
    const error = await withGemini(client(100), ctx)
      .models.generateContent(params)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ClientTimeout)
    expect(normalize(error)).toMatchObject({ errorClass: "timeout", retryable: true })
    expect(ctx.calls[0]?.outcome).toBe("error")
  })

  it("the caller's own abortSignal is a user abort too, not a timeout", async () => {
    fake.reply({ kind: "stall" })
    const ctx = recordingContext()
    const own = new AbortController()
    const pending = withGemini(client(), ctx).models.generateContent({
      ...params,
      config: { ...params.config, abortSignal: own.signal }
    })
    await new Promise((r) => setTimeout(r, 50))
    own.abort()
    const error = await pending.catch((e: unknown) => e)
    expect(error).not.toBeInstanceOf(ClientTimeout)
    expect(normalize(error).errorClass).toBe("cancelled")
  })

  it("an unknown model is PriceNotFound before any request", async () => {
    const ctx = recordingContext()
    await expect(withGemini(client(), ctx).models.generateContent({ ...params, model: "gemini-9" })).rejects.toThrow(
      PriceNotFound
    )
    expect(ctx.calls).toHaveLength(0)
  })
})

describe("withGemini: models.generateContentStream", () => {
  it("settles by the last chunk's usage when the stream ends", async () => {
    fake.reply({ kind: "sse", events: geminiStream({ end: true }) })
    const ctx = recordingContext()
    const stream = await withGemini(client(), ctx).models.generateContentStream(params)
    let text = ""
    for await (const c of stream) text += c.text ?? ""
    await ctx.idle()
    expect(text).toBe("Hello!")
    // 600 x 30 + 12 x 250
    expect(ctx.calls[0]).toMatchObject({ outcome: "success", settledCents: 0.021 })
  })

  it("the loop ends only once the call's charge is recorded, however long recording takes", async () => {
    fake.reply({ kind: "sse", events: geminiStream({ end: true }) })
    const ctx = recordingContext({ settleDelayMs: 50 })
    const stream = await withGemini(client(), ctx).models.generateContentStream(params)
    for await (const _ of stream) {
      // consume
    }
    // No ctx.idle(): a handler that returns here must not leave the charge open.
    expect(ctx.calls[0]).toMatchObject({ outcome: "success", settledCents: 0.021 })
  })

  it("a cut stream settles by the last usage seen", async () => {
    fake.reply({ kind: "sse", events: geminiStream({ end: false }), after: "cut" })
    const ctx = recordingContext()
    const stream = await withGemini(client(), ctx).models.generateContentStream(params)
    const error = await (async () => {
      for await (const _ of stream) {
        // consume
      }
    })().catch((e: unknown) => e)
    await ctx.idle()
    expect(error).toBeInstanceOf(Error)
    // 600 x 30 + 9 x 250
    expect(ctx.calls[0]).toMatchObject({ outcome: "error", settledCents: 0.02025 })
  })

  it("a stream the job aborts is cancelled and settled by what it consumed", async () => {
    fake.reply({ kind: "sse", events: geminiStream({ end: false }), after: "hold" })
    const ctx = recordingContext()
    const stream = await withGemini(client(), ctx).models.generateContentStream(params)
    const it0 = stream[Symbol.asyncIterator]()
    await it0.next()
    await it0.next()
    ctx.abort()
    const error = await it0.next().then(
      () => undefined,
      (e: unknown) => e
    )
    await ctx.idle()
    expect(normalize(error).errorClass).toBe("cancelled")
    expect(ctx.calls[0]).toMatchObject({ outcome: "interrupt", settledCents: 0.02025 })
  })
})

describe("withGemini: the signal", () => {
  it("reaches the SDK's fetch, and the job's abort aborts it", async () => {
    fake.reply({ kind: "stall" })
    const seen: Array<AbortSignal | null | undefined> = []
    const recorded = new GoogleGenAI({
      apiKey: "AIzaSyTEST0123456789abcdefgh",
      httpOptions: {
        baseUrl: fake.url,
        timeout: 5_000,
        fetch: (url: string | URL | Request, init?: RequestInit) => {
          seen.push(init?.signal)
          return fetch(url, init)
        }
      }
    })
    const ctx = recordingContext()
    const pending = withGemini(recorded, ctx).models.generateContent(params)
    while (seen.length === 0) await new Promise((r) => setTimeout(r, 5))
    expect(seen[0]?.aborted).toBe(false)
    ctx.abort()
    const error = await pending.catch((e: unknown) => e)
    expect(seen[0]?.aborted).toBe(true)
    expect(error).not.toBeInstanceOf(ClientTimeout)
    expect(normalize(error).errorClass).toBe("cancelled")
  })
})

describe("withGemini: a stream nobody reads", () => {
  it("is settled by the job's abort even with no iteration running", async () => {
    fake.reply({ kind: "sse", events: geminiStream({ end: false }), after: "hold" })
    const ctx = recordingContext()
    await withGemini(client(), ctx).models.generateContentStream(params)
    ctx.abort()
    await ctx.idle()
    // nothing consumed: the prompt's estimated tokens at the input price, no output
    const inputTokens = Math.ceil(JSON.stringify([undefined, "hello"]).length / 4)
    expect(ctx.calls[0]?.outcome).toBe("interrupt")
    expect(ctx.calls[0]?.settledCents).toBeCloseTo((inputTokens * 30) / 1e6, 9)
  })
})
