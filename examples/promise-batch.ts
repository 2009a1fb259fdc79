/**
 * A plain Node script processing a batch: 40 documents summarised by a worker with four slots. Each item's
 * idempotency key comes from the batch and the item, so running the script's submit again (a retried cron run)
 * creates nothing twice. Every item has a budget; one costs more than its budget allows and is abandoned without a
 * model call. Progress is a count of the batch's jobs by state, read from the Store.
 *
 * Run: npx tsx examples/promise-batch.ts (DATABASE_URL defaults to the local Postgres)
 */
import assert from "node:assert/strict"
import { open } from "@slowcall/promise"
import { databaseUrl, dropSchema, uniqueSchema } from "./lib/promiseDb.js"

const batch = "docs-2026-12-02"
const size = 40
const schema = uniqueSchema("batch")
const queue = await open({ url: databaseUrl, schema, queue: "batch", watchIntervalMs: 50 })
let modelCalls = 0
const worker = queue.worker({
  concurrency: 4,
  handlers: {
    summarize: {
      attempt: { timeoutMs: 5_000 },
      run: async (input: { doc: number; words: number }, ctx) =>
        ctx.call(
          async () => {
            modelCalls += 1
            await new Promise((resolve) => setTimeout(resolve, 20))
            return { doc: input.doc, summary: `doc ${input.doc}: ${input.words} words` }
          },
          // A long document is estimated at more than the batch's per-item budget: refused before the call.
          { estimateCents: input.words > 1_000 ? 10 : 1, cost: () => 1 }
        )
    }
  }
})

const items = Array.from({ length: size }, (_, doc) => ({
  type: "summarize",
  input: { doc, words: doc === 7 ? 5_000 : 200 + doc },
  key: `${batch}:${doc}`,
  budgetCents: 5
}))

try {
  const first = await queue.submitMany(items)
  const again = await queue.submitMany(items)
  assert.equal(first.filter((r) => r.status === "created").length, size)
  assert.equal(again.filter((r) => r.status === "existing").length, size, "a second run creates nothing")

  await worker.start()
  const counts = async () => {
    const jobs = await queue.list({ limit: null })
    const by: Record<string, number> = {}
    for (const job of jobs) by[job.state] = (by[job.state] ?? 0) + 1
    return by
  }
  for (;;) {
    const by = await counts()
    if ((by.succeeded ?? 0) + (by.abandoned ?? 0) + (by.failed ?? 0) === size) break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  await worker.stop()

  const by = await counts()
  const jobs = await queue.list({ limit: null })
  const spent = jobs.reduce((sum, job) => sum + job.costCents, 0)
  const refused = jobs.find((job) => job.state === "abandoned")
  assert.deepEqual(by, { succeeded: size - 1, abandoned: 1 })
  assert.equal(refused?.abandonReason, "budget")
  assert.deepEqual(refused?.input, { doc: 7, words: 5_000 })
  assert.equal(modelCalls, size - 1, "one model call per summarised item, none for the refused one")
  assert.equal(spent, size - 1)
  console.log(`batch ${batch}: ${by.succeeded} summarised, ${by.abandoned} refused by budget, ${spent} cents spent`)
} finally {
  await queue.close()
  await dropSchema(schema)
}
