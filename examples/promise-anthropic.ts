/**
 * The Anthropic SDK inside a Promise worker, streaming: the handler reads a `messages.create({ stream: true })`
 * stream from a real `@anthropic-ai/sdk` client wrapped by `withAnthropic`. The stream is handed over at once; the
 * billed call stays open until the stream ends and then settles by the usage the stream reported (input and cache
 * reads from `message_start`, output from the last `message_delta`), at the package's default price for the model.
 * The client points at a local fake of the messages endpoint started here (no API key, no network).
 *
 * Run: npx tsx examples/promise-anthropic.ts (DATABASE_URL defaults to the local Postgres)
 */
import assert from "node:assert/strict"
import Anthropic from "@anthropic-ai/sdk"
import { open } from "@slowcall/promise"
import { Pricing, withAnthropic } from "@slowcall/providers"
import { startFakeModelServer } from "./lib/fakeModelServer.js"
import { databaseUrl, dropSchema, uniqueSchema } from "./lib/promiseDb.js"

const model = "claude-haiku-4-5"
// What the fake reports: 1,200 fresh input tokens, 4,000 read from the prompt cache, 90 output tokens.
const startUsage = {
  input_tokens: 1_200,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 4_000,
  output_tokens: 1
}
const fake = await startFakeModelServer("/v1/messages", (body) => {
  const question = (body.messages as ReadonlyArray<{ content: string }>).at(-1)?.content ?? ""
  const parts = ["Yes: ", `"${question}" `, "is answered."]
  return {
    events: [
      {
        event: "message_start",
        data: {
          type: "message_start",
          message: {
            id: "msg_example",
            type: "message",
            role: "assistant",
            model: `${model}-20251001`,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: startUsage
          }
        }
      },
      {
        event: "content_block_start",
        data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
      },
      ...parts.map((text) => ({
        event: "content_block_delta",
        data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } }
      })),
      { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
      {
        event: "message_delta",
        data: {
          type: "message_delta",
          delta: { stop_reason: "end_turn", stop_sequence: null },
          usage: { output_tokens: 90 }
        }
      },
      { event: "message_stop", data: { type: "message_stop" } }
    ]
  }
})

// Always maxRetries: 0: the job retries, within its budget and its lease.
const client = new Anthropic({ apiKey: "sk-ant-example-local", baseURL: fake.url, maxRetries: 0 })

const schema = uniqueSchema("anthropic")
const queue = await open({ url: databaseUrl, schema, queue: "anthropic", watchIntervalMs: 50 })
const worker = queue.worker({
  handlers: {
    answer: {
      attempt: { timeoutMs: 10_000 },
      run: async (input: { question: string }, ctx) => {
        const stream = await withAnthropic(client, ctx).messages.create({
          model,
          max_tokens: 300,
          messages: [{ role: "user", content: input.question }],
          stream: true
        })
        let text = ""
        for await (const event of stream) {
          if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text
        }
        return { text }
      }
    }
  }
})

try {
  await worker.start()
  const { id } = await queue.submit("answer", { question: "Is a streamed call billed?" }, { budgetCents: 5 })
  const job = await queue.wait(id, { timeoutMs: 20_000 })
  await worker.stop()

  assert.equal(job.state, "succeeded")
  assert.deepEqual(job.result, { text: 'Yes: "Is a streamed call billed?" is answered.' })
  // 1,200 input + 4,000 cache reads + 90 output at the default claude-haiku-4-5 price
  const expected = Pricing.costCents(Pricing.priceOf(Pricing.defaults, model), {
    inputTokens: 1_200,
    cachedInputTokens: 4_000,
    cacheWriteTokens: 0,
    outputTokens: 90
  })
  assert.ok(expected > 0)
  assert.ok(Math.abs(job.costCents - expected) < 1e-9, `cost ${job.costCents}, expected ${expected}`)
  const charges = await queue.charges(id)
  assert.equal(charges.length, 1, "one billed call for the whole stream")
  assert.equal(charges[0]?.settled, true)
  assert.equal(fake.requests.length, 1, "one request reached the provider")
  console.log(`answer: ${JSON.stringify(job.result)}`)
  console.log(`recorded cost: ${job.costCents} cents (${charges.length} settled charge, at the end of the stream)`)
} finally {
  await queue.close()
  await fake.close()
  await dropSchema(schema)
}
