/**
 * The wrappers end to end: a real `@slowcall/promise` worker, on embedded PGlite and on the Postgres server, runs
 * handlers that call the real `openai`, `@anthropic-ai/sdk` and `@google/genai` clients wrapped by `withOpenAI`,
 * `withAnthropic` and `withGemini`, against the local fake provider. What is checked is what the Store recorded:
 * the job's charges against the price table's cost of the usage the fake returned, the attempts and their error
 * classes, and how many requests the fake saw.
 */
import { randomUUID } from "node:crypto"
import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import type { Query } from "@slowcall/core/Query"
import type { Store } from "@slowcall/core/Store"
import { messageOf, Transport } from "@slowcall/core/Transport"
import { Backend, type Handlers, open, type Queue } from "@slowcall/promise"
import { type Context, Effect, Exit, Layer, Scope } from "effect"
import OpenAI from "openai"
import pg from "pg"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { withAnthropic } from "../src/Anthropic.js"
import { withGemini } from "../src/Gemini.js"
import { withOpenAI } from "../src/OpenAI.js"
import * as Pricing from "../src/Pricing.js"
import { anthropicError, anthropicStream, geminiStream, openAiChat, openAiChatStream, openAiError } from "./bodies.js"
import { type FakeProvider, startFakeProvider } from "./fakeProvider.js"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const pgSchema = `providers_e2e_${randomUUID().replaceAll("-", "").slice(0, 12)}`

let fake: FakeProvider
beforeAll(async () => {
  fake = await startFakeProvider()
})
afterAll(async () => {
  await fake.close()
  // This file's own schema only.
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`)
  await client.end()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const until = async (check: () => boolean | Promise<boolean>, timeoutMs = 20_000) => {
  const end = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not reached in time")
    await sleep(20)
  }
}

const openai = () => new OpenAI({ apiKey: "sk-test-0123456789abcdef", baseURL: `${fake.url}/v1`, maxRetries: 0 })
const anthropic = () => new Anthropic({ apiKey: "sk-ant-api03-test0123456789", baseURL: fake.url, maxRetries: 0 })
const gemini = () => new GoogleGenAI({ apiKey: "AIzaSyTEST0123456789abcdefgh", httpOptions: { baseUrl: fake.url } })
const messages = [{ role: "user" as const, content: "hello" }]
const costOf = (model: string, usage: Partial<Pricing.Usage>) =>
  Pricing.costCents(Pricing.priceOf(Pricing.defaults, model), {
    inputTokens: 0,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 0,
    ...usage
  })
const sum = (charges: ReadonlyArray<{ readonly amountCents: number }>) =>
  charges.reduce((total, c) => total + c.amountCents, 0)

/**
 * A 10 s call: an 11 s lease, renewed (and a cancel noticed) about every 3.7 s. A 2 s call's 3 s lease ran out, or
 * failed the worker's lease gate, when a loaded machine slowed PGlite's round trips, and the job ran twice.
 */
const attempt = { timeoutMs: 10_000 }

const handlers: Handlers = {
  "openai-chat": {
    attempt,
    run: async (_input: unknown, ctx) => {
      const r = await withOpenAI(openai(), ctx).chat.completions.create({ model: "gpt-4o", messages, max_tokens: 100 })
      return { text: r.choices[0]?.message.content ?? null }
    }
  },
  "anthropic-message": {
    attempt,
    run: async (_input: unknown, ctx) => {
      const r = await withAnthropic(anthropic(), ctx).messages.create({
        model: "claude-sonnet-4-5",
        max_tokens: 100,
        messages
      })
      return { text: r.content[0]?.type === "text" ? r.content[0].text : null }
    }
  },
  "gemini-content": {
    attempt,
    run: async (_input: unknown, ctx) => {
      const r = await withGemini(gemini(), ctx).models.generateContent({
        model: "gemini-2.5-flash",
        contents: "hello",
        config: { maxOutputTokens: 100 }
      })
      return { text: r.text ?? null }
    }
  },
  "openai-stream": {
    attempt,
    run: async (_input: unknown, ctx) => {
      const stream = await withOpenAI(openai(), ctx).chat.completions.create({
        model: "gpt-4o-mini",
        messages,
        stream: true
      })
      let text = ""
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
      return { text }
    }
  },
  "gemini-stream": {
    attempt,
    run: async (_input: unknown, ctx) => {
      const stream = await withGemini(gemini(), ctx).models.generateContentStream({
        model: "gemini-2.5-flash",
        contents: "hello"
      })
      let text = ""
      for await (const chunk of stream) text += chunk.text ?? ""
      return { text }
    }
  },
  "anthropic-stream": {
    attempt,
    run: async (_input: unknown, ctx) => {
      const stream = await withAnthropic(anthropic(), ctx).messages.create({
        model: "claude-sonnet-4-5",
        max_tokens: 100,
        messages,
        stream: true
      })
      let deltas = 0
      for await (const event of stream) {
        if (event.type === "content_block_delta") {
          deltas += 1
          streamed.deltas = deltas
        }
      }
      return { deltas }
    }
  }
}
/** How far the Anthropic stream handler read, for the test to cancel mid-stream. */
const streamed = { deltas: 0 }

const suite = (name: string, spec: () => { readonly url: string; readonly schema?: string }) => {
  describe(`provider SDKs through the Promise worker: ${name}`, () => {
    const opened: Array<{ queue: Queue; scope: Scope.CloseableScope; stop: () => Promise<void> }> = []

    const setup = async () => {
      const { url, schema } = spec()
      const queueName = `providers-${randomUUID().slice(0, 8)}`
      const scope = Effect.runSync(Scope.make())
      const context = (await Effect.runPromise(
        Layer.buildWithScope(Backend.layer({ url, queue: queueName, schema }), scope)
      )) as Context.Context<Store | Query | Transport>
      const queue = await open({ queue: queueName, layer: Layer.succeedContext(context), watchIntervalMs: 20 })
      const worker = queue.worker({ handlers, concurrency: 1 })
      opened.push({ queue, scope, stop: () => worker.stop() })
      const publish = (job: Parameters<typeof messageOf>[0], times: number) =>
        Effect.runPromise(
          Effect.provide(
            Effect.flatMap(Transport, (t) =>
              t.publish({ queue: queueName, items: Array.from({ length: times }, () => ({ message: messageOf(job) })) })
            ),
            context
          )
        )
      return { queue, worker, publish }
    }

    afterEach(async () => {
      for (const { queue, scope, stop } of opened.splice(0)) {
        await stop()
        await queue.close()
        await Effect.runPromise(Scope.close(scope, Exit.void))
      }
    })

    it("each SDK's call is charged the price table's cost of the usage the fake returned, cached tokens too", async () => {
      const { queue, worker } = await setup()
      await worker.start()

      fake.reply({ kind: "json", status: 200, body: openAiChat() })
      const a = await queue.submit("openai-chat", {})
      const doneA = await queue.wait(a.id, { timeoutMs: 20_000 })
      expect(doneA).toMatchObject({ state: "succeeded", result: { text: "hi" } })
      // openAiChat: 1000 prompt tokens of which 400 cached, 200 completion
      const costA = costOf("gpt-4o", { inputTokens: 600, cachedInputTokens: 400, outputTokens: 200 })
      expect(sum(await queue.charges(a.id))).toBeCloseTo(costA, 9)
      expect(doneA.costCents).toBeCloseTo(costA, 9)

      fake.reply({
        kind: "json",
        status: 200,
        body: {
          id: "msg_01",
          type: "message",
          role: "assistant",
          model: "claude-sonnet-4-5-20250929",
          content: [{ type: "text", text: "salut" }],
          stop_reason: "end_turn",
          stop_sequence: null,
          usage: {
            input_tokens: 900,
            cache_creation_input_tokens: 100,
            cache_read_input_tokens: 2_000,
            output_tokens: 80
          }
        }
      })
      const b = await queue.submit("anthropic-message", {})
      expect(await queue.wait(b.id, { timeoutMs: 20_000 })).toMatchObject({
        state: "succeeded",
        result: { text: "salut" }
      })
      const costB = costOf("claude-sonnet-4-5", {
        inputTokens: 900,
        cacheWriteTokens: 100,
        cachedInputTokens: 2_000,
        outputTokens: 80
      })
      expect(sum(await queue.charges(b.id))).toBeCloseTo(costB, 9)

      fake.reply({
        kind: "json",
        status: 200,
        body: {
          candidates: [{ content: { role: "model", parts: [{ text: "hallo" }] }, finishReason: "STOP", index: 0 }],
          usageMetadata: {
            promptTokenCount: 1_500,
            cachedContentTokenCount: 1_000,
            candidatesTokenCount: 40,
            thoughtsTokenCount: 60,
            totalTokenCount: 1_600
          },
          modelVersion: "gemini-2.5-flash"
        }
      })
      const c = await queue.submit("gemini-content", {})
      expect(await queue.wait(c.id, { timeoutMs: 20_000 })).toMatchObject({
        state: "succeeded",
        result: { text: "hallo" }
      })
      const costC = costOf("gemini-2.5-flash", { inputTokens: 500, cachedInputTokens: 1_000, outputTokens: 100 })
      expect(sum(await queue.charges(c.id))).toBeCloseTo(costC, 9)
    })

    it("a streamed call (OpenAI, Gemini) settles at the end of the stream, by the usage it reported", async () => {
      const { queue, worker } = await setup()
      await worker.start()
      const { events, done } = openAiChatStream({ usage: true })
      fake.reply({ kind: "sse", events: [...events, done] })
      const { id } = await queue.submit("openai-stream", {})
      const job = await queue.wait(id, { timeoutMs: 20_000 })
      expect(job).toMatchObject({ state: "succeeded", result: { text: "Hello!" } })
      const charges = await queue.charges(id)
      expect(charges).toHaveLength(1)
      expect(charges[0]?.settled).toBe(true)
      // openAiChatStream's usage chunk: 500 prompt tokens, 30 completion tokens
      expect(charges[0]?.amountCents).toBeCloseTo(costOf("gpt-4o-mini", { inputTokens: 500, outputTokens: 30 }), 9)

      fake.reply({ kind: "sse", events: geminiStream({ end: true }) })
      const gem = await queue.submit("gemini-stream", {})
      expect(await queue.wait(gem.id, { timeoutMs: 20_000 })).toMatchObject({
        state: "succeeded",
        result: { text: "Hello!" }
      })
      const gemCharges = await queue.charges(gem.id)
      expect(gemCharges).toHaveLength(1)
      // geminiStream's last chunk: a running total of 600 prompt tokens and 12 candidate tokens
      expect(gemCharges[0]?.amountCents).toBeCloseTo(
        costOf("gemini-2.5-flash", { inputTokens: 600, outputTokens: 12 }),
        9
      )
    })

    it("cancelling the job mid-stream aborts the SDK request and settles by what was consumed", async () => {
      const { queue, worker } = await setup()
      await worker.start()
      streamed.deltas = 0
      // message_start (800 input tokens), a block start and two text deltas, then the connection stays open.
      fake.reply({ kind: "sse", events: anthropicStream({ end: false }), after: "hold" })
      const closedBefore = fake.closedEarly.length
      const { id } = await queue.submit("anthropic-stream", {})
      await until(() => streamed.deltas === 2)
      await queue.cancel(id)
      const job = await queue.wait(id, { timeoutMs: 20_000 })
      expect(job).toMatchObject({ state: "abandoned", abandonReason: "cancelled" })
      await until(() => fake.closedEarly.length === closedBefore + 1)
      expect(fake.closedEarly.at(-1)?.path).toBe("/v1/messages")
      const charges = await queue.charges(id)
      expect(charges).toHaveLength(1)
      expect(charges[0]?.settled).toBe(true)
      // consumed: message_start's input usage and one output token per text delta read
      expect(charges[0]?.amountCents).toBeCloseTo(costOf("claude-sonnet-4-5", { inputTokens: 800, outputTokens: 2 }), 9)
    })

    it("a 429 with retry-after pauses the model's resource: the job waits that delay without using its attempt", async () => {
      const { queue, worker } = await setup()
      fake.reply({
        kind: "json",
        status: 429,
        headers: { "retry-after": "2" },
        body: openAiError("Rate limit reached for gpt-4o", "requests", "rate_limit_exceeded")
      })
      const before = fake.requests.length
      const { id } = await queue.submit("openai-chat", {})
      await worker.start()
      await until(async () => (await queue.attempts(id)).some((a) => a.outcome === "released"))
      const failedAt = Date.now()
      const throttled = await queue.get(id)
      expect(throttled.state).toBe("queued")
      // the wrapper names the call's resource, so the worker paused it for the server's delay and the job waits it out
      // (measured from the 429: the settlement comes a few ms after it)
      expect(throttled.runAfter - throttled.updatedAt).toBeGreaterThanOrEqual(1_900)
      expect(throttled.attempts - throttled.attemptsBase).toBe(0)
      fake.reply({ kind: "json", status: 200, body: openAiChat() })
      const job = await queue.wait(id, { timeoutMs: 20_000 })
      expect(job.state).toBe("succeeded")
      expect(Date.now() - failedAt).toBeGreaterThanOrEqual(1_500)
      const attempts = await queue.attempts(id)
      expect(attempts.map((a) => [a.outcome, a.errorClass])).toEqual([
        ["released", "rate_limited"],
        ["succeeded", null]
      ])
      expect(job.attempts - job.attemptsBase).toBe(1)
      expect(fake.requests.length - before).toBe(2)
      // a rate-limited call bills nothing: the charges are the successful call's cost
      const cost = costOf("gpt-4o", { inputTokens: 600, cachedInputTokens: 400, outputTokens: 200 })
      expect(sum(await queue.charges(id))).toBeCloseTo(cost, 9)
    })

    it("a 401 fails the job as auth without a retry", async () => {
      const { queue, worker } = await setup()
      fake.reply({
        kind: "json",
        status: 401,
        body: anthropicError("authentication_error", "invalid x-api-key")
      })
      const before = fake.requests.length
      const { id } = await queue.submit("anthropic-message", {}, { maxAttempts: 3 })
      await worker.start()
      const job = await queue.wait(id, { timeoutMs: 20_000 })
      expect(job).toMatchObject({ state: "failed", errorClass: "auth" })
      const attempts = await queue.attempts(id)
      expect(attempts.map((a) => [a.outcome, a.errorClass])).toEqual([["failed", "auth"]])
      expect(fake.requests.length - before).toBe(1)
    })

    it("a duplicate delivery, before or after the job succeeded, makes no second model call", async () => {
      const { queue, worker, publish } = await setup()
      fake.reply({ kind: "json", status: 200, body: openAiChat() })
      const before = fake.requests.length
      const { id, job } = await queue.submit("openai-chat", {})
      await publish(job, 2)
      await worker.start()
      expect((await queue.wait(id, { timeoutMs: 20_000 })).state).toBe("succeeded")
      await publish(job, 1)
      await sleep(500)
      expect(fake.requests.length - before).toBe(1)
      expect(await queue.attempts(id)).toHaveLength(1)
      const charges = await queue.charges(id)
      expect(charges).toHaveLength(1)
      expect(sum(charges)).toBeCloseTo(
        costOf("gpt-4o", { inputTokens: 600, cachedInputTokens: 400, outputTokens: 200 }),
        9
      )
    })
  })
}

suite("PGlite", () => ({ url: "pglite:memory" }))
suite("Postgres server", () => ({ url: databaseUrl, schema: pgSchema }))
