/**
 * Transactional enqueue on Postgres: an order row and the job that summarises it are committed in the same
 * transaction, so there is no window in which the order exists without its job (or the job without its order).
 * A second order fails after its job was submitted; the rollback removes both. Runs on embedded PGlite, no server
 * needed.
 *
 * Run: npx tsx examples/transactional-enqueue.ts
 */
import { PGlite } from "@electric-sql/pglite"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as Canonical from "@slowcall/core/Canonical"
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import * as Ids from "@slowcall/core/Ids"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Layer, Option, Random, Schema, Stream } from "effect"
import * as Model from "./lib/simulatedModel.js"

const model: Model.ModelOptions = { medianMs: 30, centsPerCall: 0.5 }

const summarizeOrder = Handler.make({
  type: "order.summarize",
  version: 1,
  input: Schema.Struct({ orderId: Schema.String, text: Schema.String }),
  result: Schema.Struct({ orderId: Schema.String, summary: Schema.String }),
  attempt: { timeoutMs: 10_000 },
  estimateCents: model.centsPerCall,
  run: (input, ctx) =>
    ctx
      .call({
        estimateCents: model.centsPerCall,
        run: Model.call(model, input.text, (text) => `${text.split(" ").slice(0, 4).join(" ")}...`),
        cost: (reply) => reply.costCents
      })
      .pipe(Effect.map((reply) => ({ orderId: input.orderId, summary: reply.text })))
})

/**
 * Inserts the order and submits its job inside one transaction. `failAfterSubmit` simulates an error in the
 * business logic after the job was written: the whole transaction rolls back.
 */
const placeOrder = (db: PGlite, order: { readonly id: string; readonly text: string }, failAfterSubmit: boolean) =>
  Effect.gen(function* () {
    const input = { orderId: order.id, text: order.text }
    const item = {
      id: yield* Ids.makeJobId,
      queue: "orders",
      type: "order.summarize",
      version: 1,
      requestKey: `order:${order.id}`,
      inputHash: yield* Canonical.inputHash(input),
      input,
      maxAttempts: 3
    }
    return yield* Effect.tryPromise(() =>
      db.transaction(async (tx) => {
        await tx.query("INSERT INTO orders (id, text) VALUES ($1, $2)", [order.id, order.text])
        // A batch of one job; its outcome is Created, or Existing when this order was submitted before.
        const { results } = await Effect.runPromise(PgStore.submitInTransaction(tx, { items: [item] }))
        const outcome = results[0]
        if (outcome === undefined || outcome._tag === "KeyReused") throw new Error(`order ${order.id}: key reused`)
        if (failAfterSubmit) throw new Error(`payment declined for ${order.id}`)
        return outcome.job
      })
    ).pipe(
      Effect.map(Option.some),
      Effect.catchAll((error) =>
        Effect.sync(() => {
          console.log(`order ${order.id}: rolled back (${error.cause instanceof Error ? error.cause.message : error})`)
          return Option.none()
        })
      )
    )
  })

const count = (db: PGlite, sql: string) =>
  Effect.promise(() => db.query<{ n: number }>(sql)).pipe(Effect.map((r) => Number(r.rows[0]?.n ?? 0)))

const program = (db: PGlite) =>
  Effect.gen(function* () {
    yield* Effect.promise(() => db.exec("CREATE TABLE orders (id text PRIMARY KEY, text text NOT NULL)"))

    const placed = yield* placeOrder(
      db,
      { id: "A-1", text: "Two standing desks and a monitor arm, deliver Friday" },
      false
    )
    yield* placeOrder(db, { id: "B-2", text: "One chair, express" }, true)

    const orders = yield* count(db, "SELECT count(*)::int AS n FROM orders")
    const jobs = yield* count(db, "SELECT count(*)::int AS n FROM slowcall.jobs")
    console.log(`after both transactions: ${orders} order(s), ${jobs} job(s)`)

    if (Option.isNone(placed)) return yield* Effect.fail(new Error("order A-1 should have committed"))
    const client = yield* Client.Client
    const final = yield* client.watch(placed.value.id, { intervalMs: 20 }).pipe(Stream.runLast)
    if (Option.isNone(final) || final.value.state !== "succeeded") {
      return yield* Effect.fail(new Error("the job of order A-1 did not succeed"))
    }
    console.log(`order A-1: job ${final.value.state}, result ${JSON.stringify(final.value.result)}`)
    const orphans = yield* client.list({ queue: "orders", limit: 100 })
    if (orders !== 1 || jobs !== 1 || orphans.length !== 1) {
      return yield* Effect.fail(new Error("expected exactly one order and one job"))
    }
    console.log("every committed order has its job; the rolled-back order left nothing behind")
  })

const main = Effect.gen(function* () {
  const db = yield* Effect.acquireRelease(
    Effect.promise(() => PGlite.create()),
    (db) => Effect.promise(() => db.close())
  )
  const App = Layer.merge(Client.layer, Worker.layer({ queue: "orders", handlers: [summarizeOrder] })).pipe(
    Layer.provideMerge(PgStore.layerPglite({ db, pollMs: 50 }))
  )
  yield* program(db).pipe(Effect.provide(App))
})

Effect.runPromise(main.pipe(Effect.scoped, Effect.withRandom(Random.make("transactional-example")))).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
