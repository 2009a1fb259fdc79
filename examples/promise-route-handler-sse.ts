/**
 * A Next.js-style route handler, `GET(request: Request): Promise<Response>`, that streams a job's changes as
 * Server-Sent Events from `queue.watch`: one `event: job` per change, the stream ending with the terminal state.
 * The row stays the truth: a client that lost the stream reads the job again or reconnects. When the client goes
 * away, the request's signal aborts and the watch is released (`break` stops its polling). The example calls the
 * handler in-process, reads the stream, and checks it.
 *
 * Run: npx tsx examples/promise-route-handler-sse.ts (DATABASE_URL defaults to the local Postgres)
 */
import assert from "node:assert/strict"
import { NotFound, open, type Queue } from "@slowcall/promise"
import { databaseUrl, dropSchema, uniqueSchema } from "./lib/promiseDb.js"

const schema = uniqueSchema("sse")
const queue: Queue = await open({ url: databaseUrl, schema, queue: "sse", watchIntervalMs: 50 })

/** app/jobs/[id]/events/route.ts in a Next.js app: the same function, given the request. */
export async function GET(request: Request): Promise<Response> {
  const id = new URL(request.url).searchParams.get("id") ?? ""
  try {
    await queue.get(id)
  } catch (error) {
    if (error instanceof NotFound) return new Response("no such job", { status: 404 })
    return new Response("bad job id", { status: 400 })
  }
  const encoder = new TextEncoder()
  // Pulled one change at a time; a cancelled stream (the client went away) returns the iterator, which stops the
  // watch's polling at once.
  const changes = queue.watch(id)[Symbol.asyncIterator]()
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await changes.next()
      if (next.done) return controller.close()
      const job = next.value
      const data = { state: job.state, progress: job.progress, result: job.result }
      controller.enqueue(encoder.encode(`id: ${job.updatedAt}\nevent: job\ndata: ${JSON.stringify(data)}\n\n`))
    },
    async cancel() {
      await changes.return?.()
    }
  })
  request.signal.addEventListener("abort", () => void changes.return?.(), { once: true })
  return new Response(body, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" }
  })
}

/** The `data` of every `event: job` in an SSE body. */
const events = (text: string) =>
  text
    .split("\n\n")
    .filter((chunk) => chunk.includes("event: job"))
    .map((chunk) =>
      JSON.parse(
        chunk
          .split("\n")
          .find((line) => line.startsWith("data: "))!
          .slice(6)
      )
    )

const worker = queue.worker({
  handlers: {
    draft: {
      attempt: { timeoutMs: 5_000 },
      run: async (input: { topic: string }, ctx) => {
        for (const step of [0.25, 0.5, 0.75]) {
          await ctx.progress(step)
          await new Promise((resolve) => setTimeout(resolve, 700))
        }
        return { draft: `A note on ${input.topic}` }
      }
    }
  }
})

try {
  await worker.start()
  const { id } = await queue.submit("draft", { topic: "queues" })

  const response = await GET(new Request(`http://localhost/jobs/events?id=${id}`))
  assert.equal(response.status, 200)
  assert.equal(response.headers.get("content-type"), "text/event-stream")
  const seen = events(await response.text())
  const last = seen.at(-1)
  assert.equal(last.state, "succeeded")
  assert.deepEqual(last.result, { draft: "A note on queues" })
  assert.ok(seen.length >= 2, "the stream carried the changes before the end")
  assert.ok(
    seen.some((event) => event.state === "running"),
    "a running state was streamed"
  )

  // A client that disconnects: the stream is cancelled, the watch released, the job goes on.
  const other = await queue.submit("draft", { topic: "leases" })
  const abort = new AbortController()
  const cut = await GET(new Request(`http://localhost/jobs/events?id=${other.id}`, { signal: abort.signal }))
  const reader = cut.body!.getReader()
  const first = new TextDecoder().decode((await reader.read()).value)
  abort.abort()
  await reader.cancel()
  assert.match(first, /event: job/)
  const finished = await queue.wait(other.id, { timeoutMs: 30_000 })
  assert.equal(finished.state, "succeeded")

  assert.equal(
    (await GET(new Request("http://localhost/jobs/events?id=01890000-0000-7000-8000-000000000000"))).status,
    404
  )
  console.log(`streamed ${seen.length} events ending in ${last.state}; a cut stream left its job to finish`)
} finally {
  await queue.close()
  await dropSchema(schema)
}
