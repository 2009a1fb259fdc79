/**
 * `withAiSdk` inside real workers on the in-memory backend, against the fake provider: a Promise API worker (the
 * handler's `ctx` as is) and an Effect worker (`ModelCall.tryPromise` makes the context from the Effect handler's).
 * What is checked is what the Store recorded: the job's state, its attempts and error classes, its charges.
 */
import { createOpenAI } from "@ai-sdk/openai"
import { Client, Handler, Store, Transport, Worker } from "@slowcall/core"
import { JobId } from "@slowcall/core/Job"
import { open } from "@slowcall/promise"
import * as ai from "ai"
import { Effect, Layer, Schema, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withAiSdk } from "../src/AiSdk.js"
import * as ModelCall from "../src/ModelCall.js"
import * as Pricing from "../src/Pricing.js"
import { openAiChat, openAiChatStream, openAiError } from "./bodies.js"
import { type FakeProvider, startFakeProvider } from "./fakeProvider.js"

let fake: FakeProvider
beforeAll(async () => {
  fake = await startFakeProvider()
})
afterAll(() => fake.close())

const openai = () => createOpenAI({ baseURL: `${fake.url}/v1`, apiKey: "sk-test-0123456789abcdef" })
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
const sum = (charges: ReadonlyArray<{ readonly amountCents: number }>) =>
  charges.reduce((total, c) => total + c.amountCents, 0)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
/** Polls `check` for up to 20 s (a bound, never a timing assertion). */
const until = async (check: () => boolean | Promise<boolean>) => {
  for (let i = 0; i < 1_000 && !(await check()); i++) await sleep(20)
  expect(await check()).toBe(true)
}
// A heartbeat, which notices a cancel, every 2 s or so; long enough for a loaded machine.
const attempt = { timeoutMs: 6_000 }
const rateLimited = openAiError("Rate limit reached for gpt-4o-mini.", "requests", "rate_limit_exceeded")
/** A chat stream that sends one text chunk and then holds the connection open. */
const heldStream = () => {
  const { events } = openAiChatStream({ usage: false, parts: ["Hel"] })
  fake.reply({ kind: "sse", events: events.slice(0, 1), after: "hold" })
}
/** How much of the stream a handler read, for a test to cancel mid-way. */
const streamed = { deltas: 0 }

describe("withAiSdk in a Promise worker", () => {
  const setup = async () => {
    const queue = await open({ url: "memory:", queue: "ai-sdk-promise", watchIntervalMs: 20 })
    const worker = queue.worker({
      concurrency: 1,
      handlers: {
        generate: {
          attempt,
          run: async (_input: unknown, ctx) => {
            const { text } = await withAiSdk(ai, ctx).generateText({ model: openai().chat("gpt-4o"), prompt })
            return { text }
          }
        },
        stream: {
          attempt,
          run: async (_input: unknown, ctx) => {
            const result = await withAiSdk(ai, ctx).streamText({ model: openai().chat("gpt-4o-mini"), prompt })
            let text = ""
            for await (const t of result.textStream) {
              text += t
              streamed.deltas++
            }
            return { text }
          }
        }
      }
    })
    await worker.start()
    return {
      queue,
      [Symbol.asyncDispose]: async () => {
        await worker.stop()
        await queue.close()
      }
    }
  }

  it("generateText: the job succeeds, charged the price table's cost of the usage the reply reported", async () => {
    await using env = await setup()
    fake.reply({ kind: "json", status: 200, body: openAiChat() })
    const { id } = await env.queue.submit("generate", {})
    const job = await env.queue.wait(id, { timeoutMs: 20_000 })
    expect(job).toMatchObject({ state: "succeeded", result: { text: "hi" } })
    const cost = costOf("gpt-4o", { inputTokens: 600, cachedInputTokens: 400, outputTokens: 200 })
    expect(sum(await env.queue.charges(id))).toBeCloseTo(cost, 9)
    expect(job.costCents).toBeCloseTo(cost, 9)
  })

  it("streamText: settled at the stream's end by the usage it reported", async () => {
    await using env = await setup()
    const { events, done } = openAiChatStream({ usage: true })
    fake.reply({ kind: "sse", events: [...events, done] })
    const { id } = await env.queue.submit("stream", {})
    expect(await env.queue.wait(id, { timeoutMs: 20_000 })).toMatchObject({
      state: "succeeded",
      result: { text: "Hello!" }
    })
    const charges = await env.queue.charges(id)
    expect(charges).toHaveLength(1)
    expect(charges[0]?.settled).toBe(true)
    expect(charges[0]?.amountCents).toBeCloseTo(costOf("gpt-4o-mini", { inputTokens: 500, outputTokens: 30 }), 9)
  })

  it("streamText cancelled mid-way: the request is cut, the charge settles at what was received", async () => {
    await using env = await setup()
    streamed.deltas = 0
    heldStream()
    const closed = fake.closedEarly.length
    const { id } = await env.queue.submit("stream", {})
    await until(() => streamed.deltas === 1)
    await env.queue.cancel(id)
    const job = await env.queue.wait(id, { timeoutMs: 20_000 })
    expect(job).toMatchObject({ state: "abandoned", abandonReason: "cancelled" })
    await until(() => fake.closedEarly.length === closed + 1)
    const charges = await env.queue.charges(id)
    expect(charges).toHaveLength(1)
    expect(charges[0]?.settled).toBe(true)
    // the prompt's estimated tokens and one output token for the one delta received
    expect(charges[0]?.amountCents).toBeCloseTo(
      costOf("gpt-4o-mini", { inputTokens: approx([undefined, prompt]), outputTokens: 1 }),
      9
    )
  })

  it("streamText answered 429: the model's resource pauses, the job waits out retry-after without using its attempt, nothing is billed", async () => {
    await using env = await setup()
    fake.reply({ kind: "json", status: 429, headers: { "retry-after": "3" }, body: rateLimited })
    const before = fake.requests.length
    const { id } = await env.queue.submit("stream", {}, { maxAttempts: 3 })
    await until(async () => (await env.queue.attempts(id)).some((a) => a.outcome !== "running"))
    const attempts = await env.queue.attempts(id)
    // The Promise API's memory backend has a fleet limiter and the wrapper names the call's resource: a throttle.
    expect(attempts.map((a) => [a.outcome, a.errorClass])).toEqual([["released", "rate_limited"]])
    const job = await env.queue.get(id)
    expect(job.state).toBe("queued")
    expect(job.attempts - job.attemptsBase).toBe(0)
    // the provider's delay is the pause, measured from the 429 (the settlement comes a few ms after it)
    expect(job.runAfter - job.updatedAt).toBeGreaterThanOrEqual(2_900)
    expect(fake.requests.length - before).toBe(1)
    // a rate-limited call is not billed: its reservation settled at 0
    expect(sum(await env.queue.charges(id))).toBe(0)
  })
})

describe("withAiSdk in an Effect worker, through ModelCall.tryPromise", () => {
  const Empty = Schema.Struct({})
  const Text = Schema.Struct({ text: Schema.String })
  const generate = Handler.make({
    type: "generate",
    version: 1,
    input: Empty,
    result: Text,
    attempt,
    run: (_input, ctx) =>
      ModelCall.tryPromise(ctx, async (model) => {
        const { text } = await withAiSdk(ai, model).generateText({ model: openai().chat("gpt-4o"), prompt })
        return { text }
      })
  })
  const stream = Handler.make({
    type: "stream",
    version: 1,
    input: Empty,
    result: Text,
    attempt,
    run: (_input, ctx) =>
      ModelCall.tryPromise(ctx, async (model) => {
        const result = await withAiSdk(ai, model).streamText({ model: openai().chat("gpt-4o-mini"), prompt })
        let text = ""
        for await (const t of result.textStream) {
          text += t
          streamed.deltas++
        }
        return { text }
      })
  })

  /** Runs `body` with a client and a worker of the two handlers on the in-memory Store and Transport. */
  const withWorker = <A>(body: (client: Client.Client["Type"]) => Effect.Effect<A, unknown>) =>
    Effect.flatMap(Client.Client, body).pipe(
      Effect.provide(
        Layer.mergeAll(Client.layer, Worker.layer({ queue: "ai-sdk-effect", handlers: [generate, stream] })).pipe(
          Layer.provideMerge(Layer.merge(Store.layerMemory, Transport.layerMemory()))
        )
      ),
      Effect.scoped,
      Effect.runPromise
    )
  const settled = (client: Client.Client["Type"], id: JobId) =>
    client.watch(id, { intervalMs: 20 }).pipe(
      Stream.filter((j) => j.state !== "queued" && j.state !== "running"),
      Stream.runHead,
      Effect.flatten
    )

  it("generateText: the job succeeds, charged the cost of the usage the reply reported", async () => {
    fake.reply({ kind: "json", status: 200, body: openAiChat() })
    const { job, charges } = await withWorker((client) =>
      Effect.gen(function* () {
        const { job } = yield* client.submit({ queue: "ai-sdk-effect", type: "generate", input: {} })
        return { job: yield* settled(client, job.id), charges: yield* client.charges(job.id) }
      })
    )
    const cost = costOf("gpt-4o", { inputTokens: 600, cachedInputTokens: 400, outputTokens: 200 })
    expect(job).toMatchObject({ state: "succeeded", result: { text: "hi" } })
    expect(sum(charges)).toBeCloseTo(cost, 9)
  })

  it("streamText cancelled mid-way: the request is cut, the charge settles at what was received", async () => {
    streamed.deltas = 0
    heldStream()
    const closed = fake.closedEarly.length
    const { job, charges } = await withWorker((client) =>
      Effect.gen(function* () {
        const { job } = yield* client.submit({ queue: "ai-sdk-effect", type: "stream", input: {} })
        yield* Effect.promise(() => until(() => streamed.deltas === 1))
        yield* client.cancel(job.id)
        return { job: yield* settled(client, job.id), charges: yield* client.charges(job.id) }
      })
    )
    expect(job).toMatchObject({ state: "abandoned", abandonReason: "cancelled" })
    await until(() => fake.closedEarly.length === closed + 1)
    expect(charges).toHaveLength(1)
    expect(charges[0]?.settled).toBe(true)
    expect(charges[0]?.amountCents).toBeCloseTo(
      costOf("gpt-4o-mini", { inputTokens: approx([undefined, prompt]), outputTokens: 1 }),
      9
    )
  })

  it("streamText answered 429: the attempt is rate_limited and the retry waits for retry-after", async () => {
    fake.reply({ kind: "json", status: 429, headers: { "retry-after": "3" }, body: rateLimited })
    const before = fake.requests.length
    const { job, attempts } = await withWorker((client) =>
      Effect.gen(function* () {
        const { job } = yield* client.submit({ queue: "ai-sdk-effect", type: "stream", input: {}, maxAttempts: 3 })
        const id = JobId.make(job.id)
        yield* Effect.promise(() =>
          until(async () => (await Effect.runPromise(client.attempts(id))).some((a) => a.outcome !== "running"))
        )
        return { job: yield* client.get(id), attempts: yield* client.attempts(id) }
      })
    )
    expect(attempts.map((a) => [a.outcome, a.errorClass])).toEqual([["retried", "rate_limited"]])
    expect(job.state).toBe("queued")
    // Measured from the settlement's store time (the attempt's end), not from `updatedAt`: two writes in one
    // millisecond bump `updatedAt` a microsecond past it (`Protocol.bump`).
    expect(job.runAfter - (attempts[0]?.endedAt ?? Number.NaN)).toBeGreaterThanOrEqual(3_000)
    expect(fake.requests.length - before).toBe(1)
  })
})
