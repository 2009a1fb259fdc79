/**
 * A batch's budget under concurrent reservations, on the real server (each call its own connection from the pool)
 * and on PGlite: twelve items of one batch reserve at once, one call each and some in calls of three, against room
 * for ten. The batch row's lock serialises the statements, so exactly ten reservations land, the batch's cost is
 * exactly its budget, and every refused item has no ledger row.
 */
import { expect, layer } from "@effect/vitest"
import { type BatchId, BatchStore } from "@slowcall/core/Batch"
import { makeJobId } from "@slowcall/core/Ids"
import { Query } from "@slowcall/core/Query"
import { Store } from "@slowcall/core/Store"
import { Effect, type Layer } from "effect"
import type * as PgStore from "../src/PgStore.js"
import { holdServer, pgliteStoreLayer, serverStoreLayer, submitOptions, uniqueSchema } from "./support.js"

holdServer()

const backends: ReadonlyArray<{ readonly name: string; readonly layer: () => Layer.Layer<PgStore.PgStore, unknown> }> =
  [
    { name: "postgres server", layer: () => serverStoreLayer(uniqueSchema("bbudget")) },
    { name: "pglite", layer: () => pgliteStoreLayer() }
  ]

for (const backend of backends) {
  layer(backend.layer() as Layer.Layer<PgStore.PgStore | Store | Query | BatchStore, unknown>, { timeout: 60_000 })(
    backend.name,
    (it) => {
      it.effect("twelve items reserving at once against room for ten: exactly ten land", () =>
        Effect.gen(function* () {
          const store = yield* Store
          const query = yield* Query
          const batches = yield* BatchStore
          const queue = `bbudget-${(yield* makeJobId).slice(-8)}`
          const batchId = (yield* makeJobId) as string as BatchId
          yield* batches.open({ spec: { id: batchId, queue, fingerprint: "b1:twelve", size: 12, budgetCents: 10 } })
          const ids = yield* Effect.all(Array.from({ length: 12 }, () => makeJobId))
          yield* batches.add({ batchId, offset: 0, items: ids.map((id) => submitOptions(queue, id)) })
          const reserve = (jobId: (typeof ids)[number]) => ({
            jobId,
            callId: "c1",
            token: 0,
            amountCents: 1,
            settled: false
          })
          // Six calls of one item and two of three, all at once.
          const calls = [
            ...ids.slice(0, 6).map((id) => [reserve(id)]),
            ids.slice(6, 9).map(reserve),
            ids.slice(9, 12).map(reserve)
          ]

          const replies = yield* Effect.all(
            calls.map((items) => store.charge({ items })),
            { concurrency: "unbounded" }
          )

          const results = replies.flatMap((reply) => reply.results)
          expect(results.filter((r) => r._tag === "Charged")).toHaveLength(10)
          const refused = results.flatMap((r) => (r._tag === "BatchBudgetExceeded" ? [r] : []))
          expect(refused).toHaveLength(2)
          for (const r of refused) expect([r.batchId, r.batchCostCents, r.budgetCents]).toEqual([batchId, 10, 10])
          expect((yield* batches.get({ batchId }))?.costCents).toBe(10)
          const ledgers = yield* Effect.forEach(ids, (jobId) => query.charges({ jobId }))
          expect(ledgers.filter((rows) => rows.length === 1)).toHaveLength(10)
          for (const r of refused) expect(yield* query.charges({ jobId: r.jobId })).toEqual([])
        })
      )
    }
  )
}
