/**
 * The OpenAI SDK inside a Promise worker: the handler calls `chat.completions.create` on a real `openai` client
 * wrapped by `withOpenAI`, so the call is a billed call of the job. The estimate is reserved before the request, the
 * job's abort signal reaches the request, and the reservation settles at the cost of the usage the reply reported,
 * at your own price for the model. The client points at a local fake of the chat completions endpoint started here
 * (no API key, no network), which answers with usage numbers as OpenAI does.
 *
 * Run: npx tsx examples/promise-openai.ts (DATABASE_URL defaults to the local Postgres)
 */
import assert from "node:assert/strict"
import { open } from "@slowcall/promise"
import { Pricing, withOpenAI } from "@slowcall/providers"
import OpenAI from "openai"
import { startFakeModelServer } from "./lib/fakeModelServer.js"
import { databaseUrl, dropSchema, uniqueSchema } from "./lib/promiseDb.js"

// What the fake reports for each call: 2,000 prompt tokens, 500 of them served from the prompt cache, 400 out.
const usage = {
  prompt_tokens: 2_000,
  completion_tokens: 400,
  total_tokens: 2_400,
  prompt_tokens_details: { cached_tokens: 500 }
}
const fake = await startFakeModelServer("/v1/chat/completions", (body) => {
  const messages = body.messages as ReadonlyArray<{ content: string }>
  const words = (messages.at(-1)?.content ?? "").split(/\s+/).filter((w) => w.length > 0)
  return {
    json: {
      id: "chatcmpl-example",
      object: "chat.completion",
      created: 1_764_633_600,
      model: "gpt-4o-mini-2024-07-18",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: `${words.length} words, starting "${words[0]}"`, refusal: null },
          finish_reason: "stop",
          logprobs: null
        }
      ],
      usage
    }
  }
})

// Your contract's price for the model, in US cents per million tokens, over the package's defaults.
const prices = Pricing.withPrices({
  "gpt-4o-mini": { inputCentsPerMTok: 15, cachedInputCentsPerMTok: 7.5, outputCentsPerMTok: 60 }
})
// Always maxRetries: 0: the job retries, within its budget and its lease.
const client = new OpenAI({ apiKey: "sk-example-local", baseURL: `${fake.url}/v1`, maxRetries: 0 })

const schema = uniqueSchema("openai")
const queue = await open({ url: databaseUrl, schema, queue: "openai", watchIntervalMs: 50 })
const worker = queue.worker({
  handlers: {
    summarize: {
      attempt: { timeoutMs: 10_000 },
      run: async (input: { text: string }, ctx) => {
        const completion = await withOpenAI(client, ctx, { prices }).chat.completions.create({
          model: "gpt-4o-mini",
          max_tokens: 200,
          messages: [
            { role: "system", content: "Summarise in one line." },
            { role: "user", content: input.text }
          ]
        })
        return { summary: completion.choices[0]?.message.content ?? "", tokens: completion.usage?.total_tokens ?? 0 }
      }
    }
  }
})

try {
  await worker.start()
  const { id } = await queue.submit(
    "summarize",
    { text: "Durable jobs keep slow model calls safe" },
    { budgetCents: 1 }
  )
  const job = await queue.wait(id, { timeoutMs: 20_000 })
  await worker.stop()

  assert.equal(job.state, "succeeded")
  assert.deepEqual(job.result, { summary: '7 words, starting "Durable"', tokens: 2_400 })
  // 1,500 uncached input x 15 + 500 cached x 7.5 + 400 output x 60, per million tokens
  const expected = (1_500 * 15 + 500 * 7.5 + 400 * 60) / 1_000_000
  assert.ok(Math.abs(job.costCents - expected) < 1e-9, `cost ${job.costCents}, expected ${expected}`)
  const charges = await queue.charges(id)
  assert.equal(charges.length, 1, "one billed call")
  assert.equal(charges[0]?.settled, true)
  assert.equal(fake.requests.length, 1, "one request reached the provider")
  console.log(`summary: ${JSON.stringify(job.result)}`)
  console.log(`recorded cost: ${job.costCents} cents (${charges.length} settled charge)`)
} finally {
  await queue.close()
  await fake.close()
  await dropSchema(schema)
}
