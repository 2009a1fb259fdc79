import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as Canonical from "@slowcall/core/Canonical"
import * as Ids from "@slowcall/core/Ids"
import { Effect } from "effect"
import pg from "pg"

const pool = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:5432/app" })

// An order row and the job that processes it commit together, or not at all.
export const placeOrder = (order: { readonly id: string; readonly text: string }) =>
  Effect.gen(function* () {
    const input = { orderId: order.id }
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
    const client = yield* Effect.promise(() => pool.connect())
    client.on("error", () => {}) // a dead socket must not crash the process; the query below fails instead
    return yield* Effect.gen(function* () {
      yield* Effect.promise(() => client.query("BEGIN"))
      yield* Effect.promise(() => client.query("INSERT INTO orders (id, text) VALUES ($1, $2)", [order.id, order.text]))
      // A batch of one job: Created, or Existing when this order was submitted before (nothing written).
      const { results } = yield* PgStore.submitInTransaction(client, { items: [item] })
      const outcome = results[0]
      if (outcome === undefined || outcome._tag === "KeyReused") return yield* Effect.dieMessage("key reused")
      yield* Effect.promise(() => client.query("COMMIT"))
      return outcome.job
    }).pipe(
      Effect.tapErrorCause(() => Effect.promise(() => client.query("ROLLBACK"))),
      Effect.ensuring(Effect.sync(() => client.release()))
    )
  })
