/**
 * Batch summarisation fan-out: 2,000 support tickets summarised overnight. The work outlives any session, so the
 * batch is the unit: one job per item, all submitted in one bulk write, each with an idempotency key derived from
 * the batch and the item, so submitting the batch again (a retried cron run, a double click) creates nothing twice.
 * Progress is a count of the batch's jobs by state, read from the Store.
 *
 * Run: npx tsx examples/batch-summarize.ts
 */
import * as Client from "@slowcall/core/Client"
import * as Decide from "@slowcall/core/Decide"
import * as Handler from "@slowcall/core/Handler"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Either, Layer, Random, Schedule, Schema } from "effect"
import * as Model from "./lib/simulatedModel.js"

const batchId = "tickets-2026-11-28"
const items = 2_000
const queue = "batch"
const model: Model.ModelOptions = {
  medianMs: 4,
  tailRate: 0.01,
  tailFactor: 10,
  rateLimitRate: 0.02,
  centsPerCall: 0.1
}

const summarize = Handler.make({
  type: "ticket.summarize",
  version: 1,
  input: Schema.Struct({ batchId: Schema.String, ticket: Schema.Int, text: Schema.String }),
  result: Schema.Struct({ ticket: Schema.Int, summary: Schema.String }),
  attempt: { timeoutMs: 30_000 },
  estimateCents: model.centsPerCall,
  run: (input, ctx) =>
    ctx
      .call({
        estimateCents: model.centsPerCall,
        run: Model.call(model, input.text, (text) => text.split(":")[0] ?? text),
        cost: (reply) => reply.costCents,
        costOnError: (error) => (error.status === 429 ? 0 : undefined)
      })
      .pipe(Effect.map((reply) => ({ ticket: input.ticket, summary: reply.text })))
})

/**
 * Submits every item of the batch in one bulk write; returns how many jobs were created (0 for a batch already
 * submitted: each item's key names its job, so the repeat is `Existing` and publishes nothing).
 */
const submitBatch = Effect.gen(function* () {
  const client = yield* Client.Client
  const { results } = yield* client.submitMany(
    Array.from({ length: items }, (_, i) => i + 1).map((ticket) => ({
      queue,
      type: "ticket.summarize",
      input: { batchId, ticket, text: `Ticket ${ticket}: customer reports issue number ${ticket % 37}` },
      requestKey: `${batchId}:${ticket}`,
      maxAttempts: 5
    }))
  )
  return results.filter((r) => r._tag === "Created").length
})

const progress = Effect.gen(function* () {
  const client = yield* Client.Client
  const { stats } = yield* client.stats({ queue })
  return stats.byState
})

const program = Effect.gen(function* () {
  const decision = Decide.decide({
    p99Ms: 3_000,
    hops: [{ name: "platform", timeoutMs: 60_000 }],
    userWaiting: false,
    outlivesSession: true,
    resultNeededNow: false
  })
  if (Either.isRight(decision)) console.log(`decide: ${decision.right.mode} (${decision.right.rule})`)

  const created = yield* submitBatch
  console.log(`submitted batch ${batchId}: ${created} jobs created`)
  const again = yield* submitBatch
  console.log(`submitted the same batch again: ${again} jobs created`)

  yield* progress.pipe(
    Effect.tap((s) =>
      Effect.sync(() =>
        console.log(`  queued ${s.queued}, running ${s.running}, succeeded ${s.succeeded}, failed ${s.failed}`)
      )
    ),
    Effect.repeat({
      schedule: Schedule.spaced("500 millis"),
      until: (s) => s.queued + s.running === 0
    })
  )

  const byState = yield* progress
  const client = yield* Client.Client
  const done = yield* client.list({ queue, state: "succeeded", limit: items })
  const cost = done.reduce((sum, job) => sum + job.costCents, 0)
  const retried = done.filter((job) => job.attempts > 1).length
  console.log(
    `batch done: ${byState.succeeded} succeeded, ${byState.failed} failed, ${retried} needed a retry, ` +
      `total cost ${cost.toFixed(1)} cents`
  )
  if (byState.succeeded !== items) return yield* Effect.fail(new Error("the batch did not complete"))
})

const Infra = Layer.merge(Store.layerMemory, Transport.layerMemory())
const App = Layer.merge(
  Client.layer,
  Worker.layer({ queue, handlers: [summarize], concurrency: 32, retry: { baseMs: 10, capMs: 100 } })
).pipe(Layer.provideMerge(Infra))

Effect.runPromise(program.pipe(Effect.provide(App), Effect.withRandom(Random.make("batch-example")))).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
