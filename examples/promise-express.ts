/**
 * An Express 5 API in front of a slowcall queue: `POST /summaries` submits a job and answers 202 with its id at once
 * (the model call may take minutes; no request waits for it), `GET /summaries/:id` is what the client polls: the
 * job's state, progress and result, with a `Retry-After` while it is still running. An `Idempotency-Key` header makes
 * a retried POST return the same job. The example starts the server on 127.0.0.1:0, makes the requests itself,
 * checks the answers and exits.
 *
 * Run: npx tsx examples/promise-express.ts (DATABASE_URL defaults to the local Postgres)
 */
import assert from "node:assert/strict"
import type { AddressInfo } from "node:net"
import { InvalidInput, KeyReused, NotFound, open } from "@slowcall/promise"
import express from "express"
import * as z from "zod"
import { databaseUrl, dropSchema, uniqueSchema } from "./lib/promiseDb.js"

const schema = uniqueSchema("express")
const queue = await open({ url: databaseUrl, schema, queue: "summaries", watchIntervalMs: 50 })
const worker = queue.worker({
  concurrency: 2,
  handlers: {
    summarize: {
      input: z.object({ text: z.string().min(1) }),
      attempt: { timeoutMs: 10_000 },
      run: async (input: { text: string }, ctx) => {
        await ctx.progress(0.5)
        // Stands in for the provider's SDK call; pass `signal` to it so a cancel stops the request.
        return ctx.call(
          async (signal) => {
            await new Promise((resolve) => setTimeout(resolve, 200))
            signal.throwIfAborted()
            return { summary: input.text.split(".")[0] ?? input.text }
          },
          { estimateCents: 3 }
        )
      }
    }
  }
})

const app = express()
app.use(express.json())
app.post("/summaries", async (req, res) => {
  try {
    const key = req.get("Idempotency-Key")
    const submitted = await queue.submit("summarize", req.body, key === undefined ? {} : { key })
    res
      .status(submitted.created ? 202 : 200)
      .location(`/summaries/${submitted.id}`)
      .json({ id: submitted.id })
  } catch (error) {
    if (error instanceof InvalidInput) res.status(400).json({ error: error.message, issues: error.issues })
    else if (error instanceof KeyReused) res.status(409).json({ error: error.message })
    else throw error
  }
})
app.get("/summaries/:id", async (req, res) => {
  try {
    const job = await queue.get(req.params.id)
    const terminal = job.state === "succeeded" || job.state === "failed" || job.state === "abandoned"
    if (!terminal) res.set("Retry-After", "1")
    res.json({ id: job.id, state: job.state, progress: job.progress, result: job.result, error: job.errorClass })
  } catch (error) {
    if (error instanceof NotFound || error instanceof InvalidInput) res.status(404).json({ error: "no such job" })
    else throw error
  }
})

await worker.start()
const server = app.listen(0, "127.0.0.1")
await new Promise<void>((resolve) => server.once("listening", () => resolve()))
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

try {
  const post = (body: unknown, key?: string) =>
    fetch(`${base}/summaries`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) },
      body: JSON.stringify(body)
    })

  const created = await post({ text: "Queues change who waits. Not what it costs." }, "req-1")
  assert.equal(created.status, 202)
  const { id } = (await created.json()) as { id: string }
  assert.equal(created.headers.get("location"), `/summaries/${id}`)

  const retried = await post({ text: "Queues change who waits. Not what it costs." }, "req-1")
  assert.equal(retried.status, 200)
  assert.equal(((await retried.json()) as { id: string }).id, id)
  assert.equal((await post({ text: "other" }, "req-1")).status, 409)
  assert.equal((await post({ text: "" })).status, 400)

  let polls = 0
  let body: { state: string; result: unknown } = { state: "queued", result: null }
  for (;;) {
    const polled = await fetch(`${base}/summaries/${id}`)
    body = (await polled.json()) as typeof body
    polls += 1
    if (body.state === "succeeded" || body.state === "failed" || body.state === "abandoned") break
    assert.equal(polled.headers.get("retry-after"), "1")
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.equal(body.state, "succeeded")
  assert.deepEqual(body.result, { summary: "Queues change who waits" })
  assert.equal((await fetch(`${base}/summaries/not-a-job`)).status, 404)
  console.log(`POST -> 202 ${id}; polled ${polls} time(s); result: ${JSON.stringify(body.result)}`)
} finally {
  await new Promise((resolve) => server.close(resolve))
  await queue.close()
  await dropSchema(schema)
}
