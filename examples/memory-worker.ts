/**
 * A complete slowcall setup in one process, on the in-memory Store and Transport: a handler that makes a billed
 * (fake) model call, a worker, a sweeper, and a client that submits jobs and watches them to the end.
 *
 * The fake model fails its first call with an HTTP 500, so the first job shows a retry with backoff; a job
 * submitted twice with the same idempotency key runs once; a job whose budget cannot cover one call is abandoned
 * before any call is made.
 *
 * Run: npx tsx examples/memory-worker.ts
 */
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import * as Store from "@slowcall/core/Store"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Transport from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Layer, Schema, Stream } from "effect"

// A stand-in for a provider SDK: ~50 ms per call, 1 cent per 10 input characters, the first call fails.
let modelCalls = 0
const fakeModel = (text: string) =>
  Effect.gen(function* () {
    modelCalls++
    yield* Effect.sleep("50 millis")
    if (modelCalls === 1) return yield* Effect.fail({ status: 500, message: "upstream error" })
    return { summary: text.split(" ").slice(0, 4).join(" ") + "...", cents: Math.ceil(text.length / 10) }
  })

const summarize = Handler.make({
  type: "summarize",
  version: 1,
  input: Schema.Struct({ text: Schema.String }),
  result: Schema.Struct({ summary: Schema.String }),
  estimateCents: (input) => Math.ceil(input.text.length / 10),
  attempt: { timeoutMs: 2_000, retries: 0 },
  run: (input, ctx) =>
    Effect.map(
      ctx.call({
        estimateCents: Math.ceil(input.text.length / 10),
        run: fakeModel(input.text),
        cost: (reply) => reply.cents
      }),
      (reply) => ({ summary: reply.summary })
    )
})

const text = "Slow model calls belong in durable background jobs when the caller cannot wait for them."

const program = Effect.gen(function* () {
  const client = yield* Client.Client
  const first = yield* client.submit({ queue: "docs", type: "summarize", input: { text }, requestKey: "doc-1" })
  const repeat = yield* client.submit({ queue: "docs", type: "summarize", input: { text }, requestKey: "doc-1" })
  const poor = yield* client.submit({ queue: "docs", type: "summarize", input: { text }, budgetCents: 2 })

  const outcomes = yield* Effect.forEach([first.job.id, poor.job.id], (id) =>
    client.watch(id, { intervalMs: 20 }).pipe(Stream.runLast, Effect.flatten)
  )
  return {
    sameJobForRepeatedKey: repeat.job.id === first.job.id && !repeat.created,
    modelCalls,
    jobs: outcomes.map((job) => ({
      state: job.state,
      abandonReason: job.abandonReason,
      attempts: job.attempts,
      costCents: job.costCents,
      result: job.result
    }))
  }
})

const Backend = Layer.merge(Store.layerMemory, Transport.layerMemory())
const Runtime = Layer.mergeAll(
  Client.layer,
  Worker.layer({ queue: "docs", concurrency: 2, handlers: [summarize], retry: { baseMs: 100, capMs: 200 } }),
  Sweeper.layer({ intervalMs: 1_000 })
).pipe(Layer.provideMerge(Backend))

const outcome = await Effect.runPromise(
  Effect.scoped(Effect.provide(program, Runtime)).pipe(Effect.timeout("20 seconds"))
)
console.log(JSON.stringify(outcome, null, 2))
const [done, abandoned] = outcome.jobs
if (!outcome.sameJobForRepeatedKey || done?.state !== "succeeded" || abandoned?.abandonReason !== "budget") {
  process.exitCode = 1
}
