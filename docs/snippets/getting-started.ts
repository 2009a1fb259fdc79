import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Layer, Schema, Stream } from "effect"

// A handler: the code a worker runs for one (type, version). `attempt` sizes the lease; `estimateCents` lets a
// budget refuse an attempt before any model call.
const summarize = Handler.make({
  type: "summarize",
  version: 1,
  input: Schema.Struct({ text: Schema.String }),
  result: Schema.Struct({ summary: Schema.String }),
  attempt: { timeoutMs: 60_000, retries: 1 },
  estimateCents: 2,
  run: (input, ctx) =>
    ctx.call({
      estimateCents: 2,
      // Your model call goes here: this stand-in answers after 100 ms so the file runs as it is.
      run: Effect.succeed({ summary: input.text.slice(0, 40), costCents: 1.4 }).pipe(Effect.delay("100 millis")),
      cost: (reply) => reply.costCents
    })
})

// The in-memory Store and Transport; swap in an adapter's layers for production.
const Infra = Layer.merge(Store.layerMemory, Transport.layerMemory())
const App = Layer.merge(Client.layer, Worker.layer({ queue: "docs", handlers: [summarize] })).pipe(
  Layer.provideMerge(Infra)
)

const program = Effect.gen(function* () {
  const client = yield* Client.Client
  const { job } = yield* client.submit({
    queue: "docs",
    type: "summarize",
    input: { text: "A long document about leases, fencing tokens and budgets." },
    requestKey: "doc-42",
    budgetCents: 10
  })
  // Follow the job record until it is terminal (polling the Store, the source of truth) while the worker runs it.
  return yield* client.watch(job.id, { intervalMs: 50 }).pipe(Stream.runLast, Effect.flatten)
})

const job = await Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(App)))
console.log(job.state, job.result, `${job.costCents} cents`)
