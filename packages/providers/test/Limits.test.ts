/**
 * What the wrappers tell the fleet limiter, through the real SDKs against the fake provider: each call's resource
 * (`provider:model:credential`, or the user's own), its token reservation (the prompt's characters / 4, the request's
 * output cap), the usage the reply reported as the provider counts it, and the rate-limit facts of the reply's
 * headers.
 */
import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withAnthropic } from "../src/Anthropic.js"
import { withGemini } from "../src/Gemini.js"
import { InvalidCredentialLabel, resourceName } from "../src/ModelCall.js"
import { withOpenAI } from "../src/OpenAI.js"
import {
  anthropicMessage,
  anthropicStream,
  geminiResponse,
  geminiStream,
  openAiChat,
  openAiChatStream,
  openAiResponse
} from "./bodies.js"
import { type FakeProvider, startFakeProvider } from "./fakeProvider.js"
import { recordingContext } from "./recordingContext.js"

let fake: FakeProvider
beforeAll(async () => {
  fake = await startFakeProvider()
})
afterAll(() => fake.close())

const openai = () => new OpenAI({ apiKey: "sk-test-0123456789abcdef", baseURL: `${fake.url}/v1`, maxRetries: 0 })
const anthropic = () => new Anthropic({ apiKey: "sk-ant-api03-test0123456789", baseURL: fake.url, maxRetries: 0 })
const gemini = () => new GoogleGenAI({ apiKey: "AIzaSyTEST0123456789abcdefgh", httpOptions: { baseUrl: fake.url } })
const messages = [{ role: "user" as const, content: "Summarise this ticket, please" }]
const approx = (u: unknown) => Math.ceil(JSON.stringify(u).length / 4)

// As OpenAI sends them on every reply (the rate-limit guide's example), one request left.
const openAiHeaders = {
  "x-ratelimit-limit-requests": "60",
  "x-ratelimit-limit-tokens": "150000",
  "x-ratelimit-remaining-requests": "1",
  "x-ratelimit-remaining-tokens": "149984",
  "x-ratelimit-reset-requests": "1s",
  "x-ratelimit-reset-tokens": "6m0s"
}
const openAiLimits = {
  requests: { limit: 60, remaining: 1, resetMs: 1_000 },
  tokens: { limit: 150_000, remaining: 149_984, resetMs: 360_000 }
}
// As Anthropic sends them, the input-token limit exhausted until 30 s after the reply's Date.
const anthropicHeaders = {
  date: "Thu, 01 Jan 2026 00:00:00 GMT",
  "anthropic-ratelimit-requests-limit": "50",
  "anthropic-ratelimit-requests-remaining": "49",
  "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:01Z",
  "anthropic-ratelimit-input-tokens-limit": "30000",
  "anthropic-ratelimit-input-tokens-remaining": "0",
  "anthropic-ratelimit-input-tokens-reset": "2026-01-01T00:00:30Z",
  "anthropic-ratelimit-output-tokens-limit": "8000",
  "anthropic-ratelimit-output-tokens-remaining": "7700",
  "anthropic-ratelimit-output-tokens-reset": "2026-01-01T00:00:02Z"
}
const anthropicLimits = {
  requests: { limit: 50, remaining: 49, resetMs: 1_000 },
  inputTokens: { limit: 30_000, remaining: 0, resetMs: 30_000 },
  outputTokens: { limit: 8_000, remaining: 7_700, resetMs: 2_000 }
}

describe("withOpenAI: what the limiter reads", () => {
  it("chat: resource openai:model:default, the prompt's tokens and max_tokens reserved, usage and headers read", async () => {
    // Arrange
    fake.reply({ kind: "json", status: 200, body: openAiChat(), headers: openAiHeaders })
    const ctx = recordingContext()
    // Act
    await withOpenAI(openai(), ctx).chat.completions.create({ model: "gpt-4o", messages, max_tokens: 100 })
    // Assert
    expect(ctx.calls[0]).toMatchObject({
      resource: "openai:gpt-4o:default",
      tokens: { input: approx(messages), maxOutput: 100 },
      // OpenAI counts every prompt token against its limits, cached or not.
      usage: { inputTokens: 1_000, outputTokens: 200 },
      rateLimit: openAiLimits
    })
  })

  it("chat stream: the headers it opened with, the usage it reported at its end", async () => {
    const { events, done } = openAiChatStream({ usage: true })
    fake.reply({ kind: "sse", events: [...events, done], headers: openAiHeaders })
    const ctx = recordingContext()
    const stream = await withOpenAI(openai(), ctx, { credential: "key-a" }).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      max_completion_tokens: 64,
      stream: true
    })
    for await (const _ of stream) {
      // read to the end
    }
    await ctx.idle()
    expect(ctx.calls[0]).toMatchObject({
      resource: "openai:gpt-4o-mini:key-a",
      tokens: { input: approx(messages), maxOutput: 64 },
      usage: { inputTokens: 500, outputTokens: 30 },
      rateLimit: openAiLimits
    })
  })

  it("responses: no output cap reserves defaultMaxOutputTokens; the resource may be named by hand", async () => {
    fake.reply({ kind: "json", status: 200, body: openAiResponse(), headers: openAiHeaders })
    const ctx = recordingContext()
    await withOpenAI(openai(), ctx, {
      defaultMaxOutputTokens: 512,
      credential: "prod",
      resource: ({ provider, model, credential }) =>
        `${provider}:${model.split("-").slice(0, 2).join("-")}:${credential}`
    }).responses.create({ model: "gpt-4.1-mini", input: "hello" })
    expect(ctx.calls[0]).toMatchObject({
      resource: "openai:gpt-4.1:prod",
      tokens: { input: approx([undefined, "hello"]), maxOutput: 512 },
      usage: { inputTokens: 2_000, outputTokens: 100 },
      rateLimit: openAiLimits
    })
  })
})

describe("withAnthropic: what the limiter reads", () => {
  it("usage as Anthropic counts it (cache reads left out), the span still counts every input token", async () => {
    fake.reply({ kind: "json", status: 200, body: anthropicMessage(), headers: anthropicHeaders })
    const ctx = recordingContext()
    const params = { model: "claude-sonnet-4-5", max_tokens: 300, system: "Be brief.", messages }
    await withAnthropic(anthropic(), ctx, { resource: "anthropic:sonnet:key-b" }).messages.create(params)
    expect(ctx.calls[0]).toMatchObject({
      resource: "anthropic:sonnet:key-b",
      tokens: { input: approx(["Be brief.", messages]), maxOutput: 300 },
      // 1000 uncached + 2000 cache writes; the 3000 cache reads do not count against the input-token limit.
      usage: { inputTokens: 3_000, outputTokens: 300 },
      span: { inputTokens: 6_000, outputTokens: 300 },
      rateLimit: anthropicLimits
    })
  })

  it("stream: the headers it opened with, the usage of message_start and the last message_delta", async () => {
    fake.reply({ kind: "sse", events: anthropicStream({ end: true }), headers: anthropicHeaders })
    const ctx = recordingContext()
    const stream = await withAnthropic(anthropic(), ctx).messages.create({
      model: "claude-haiku-4-5",
      max_tokens: 80,
      messages,
      stream: true
    })
    for await (const _ of stream) {
      // read to the end
    }
    await ctx.idle()
    expect(ctx.calls[0]).toMatchObject({
      resource: "anthropic:claude-haiku-4-5:default",
      tokens: { input: approx([undefined, messages]), maxOutput: 80 },
      usage: { inputTokens: 800, outputTokens: 50 },
      rateLimit: anthropicLimits
    })
  })
})

describe("withGemini: what the limiter reads", () => {
  it("resource google:model:credential, maxOutputTokens reserved, usage with thinking tokens as output", async () => {
    fake.reply({ kind: "json", status: 200, body: geminiResponse() })
    const ctx = recordingContext()
    await withGemini(gemini(), ctx, { credential: "project-1" }).models.generateContent({
      model: "gemini-2.5-flash",
      contents: "hello",
      config: { maxOutputTokens: 100 }
    })
    expect(ctx.calls[0]).toMatchObject({
      resource: "google:gemini-2.5-flash:project-1",
      tokens: { input: approx([undefined, "hello"]), maxOutput: 100 },
      usage: { inputTokens: 1_000, outputTokens: 150 }
    })
    // Gemini sends no rate-limit headers: nothing to report on success.
    expect(ctx.calls[0]?.rateLimit).toBeUndefined()
  })

  it("stream: the last chunk's usage", async () => {
    fake.reply({ kind: "sse", events: geminiStream({ end: true }) })
    const ctx = recordingContext()
    const stream = await withGemini(gemini(), ctx).models.generateContentStream({
      model: "gemini-2.5-flash",
      contents: "hello"
    })
    for await (const _ of stream) {
      // read to the end
    }
    await ctx.idle()
    expect(ctx.calls[0]).toMatchObject({
      resource: "google:gemini-2.5-flash:default",
      tokens: { input: approx([undefined, "hello"]), maxOutput: 1024 },
      usage: { inputTokens: 600, outputTokens: 12 }
    })
  })
})

describe("credential labels", () => {
  it("the naming rule", () => {
    expect(resourceName({ provider: "openai", model: "gpt-4.1", credential: "key-a" })).toBe("openai:gpt-4.1:key-a")
  })

  it("a label that is a key, or that cannot be one segment of a name, is refused where the wrapper is made", () => {
    const before = fake.requests.length
    const ctx = recordingContext()
    for (const [credential, reason] of [
      ["sk-proj-AbCdEfGhIjKlMnOp0123", "secret"],
      ["sk-ant-api03-ZyXwVuTsRq0123", "secret"],
      ["AIzaSyD-0123456789abcdefghij", "secret"],
      ["key a", "form"],
      ["team:key", "form"],
      ["", "form"],
      ["k".repeat(65), "form"]
    ] as const) {
      const made = () => withOpenAI(openai(), ctx, { credential })
      expect(made, credential).toThrow(InvalidCredentialLabel)
      expect(() => withAnthropic(anthropic(), ctx, { credential })).toThrow(InvalidCredentialLabel)
      expect(() => withGemini(gemini(), ctx, { credential })).toThrow(InvalidCredentialLabel)
      try {
        made()
      } catch (e) {
        expect((e as InvalidCredentialLabel).reason).toBe(reason)
        // The message never repeats the key.
        expect((e as Error).message).not.toContain(credential || "\u0000")
      }
    }
    expect(ctx.calls).toHaveLength(0)
    expect(fake.requests.length).toBe(before)
  })
})
