/**
 * `cycle` on the Postgres adapter, on the real server and on PGlite: what the shared conformance suite cannot reach,
 * because only here can a part fail inside the database after an earlier part has written. The parts share one
 * transaction, so such a failure takes the earlier parts' writes with it.
 */
import { describe, expect, layer } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import { Effect } from "effect"
import * as PgStore from "../src/PgStore.js"
import {
  holdServer,
  only,
  pgliteStoreLayer,
  serverStoreLayer,
  submitOne,
  submitOptions,
  uniqueSchema
} from "./support.js"

holdServer()

const backends = [
  { name: "postgres server", layer: serverStoreLayer(uniqueSchema("cycle")) },
  { name: "pglite in memory", layer: pgliteStoreLayer() }
]

for (const backend of backends) {
  describe(backend.name, () => {
    layer(backend.layer)((it) => {
      it.effect("a part the database refuses rolls back the parts before it", () =>
        Effect.gen(function* () {
          const store = yield* PgStore.PgStore
          const cycle = store.cycle
          if (cycle === undefined) throw new Error("the Postgres store has no cycle")
          const queue = `cycle-${yield* makeJobId}`
          const job = yield* submitOne(store, submitOptions(queue, yield* makeJobId))
          const claimed = only(yield* store.claim({ items: [{ jobId: job.id, owner: "w", leaseMs: 60_000 }] }))
          if (claimed._tag !== "Claimed") throw new Error(`expected Claimed, got ${claimed._tag}`)
          const token = claimed.job.leaseToken
          const waiting = yield* submitOne(store, submitOptions(queue, yield* makeJobId))

          // A lease no timestamp can hold: the claim part's statement fails in the database on the waiting job,
          // after the settle and charge parts' statements have written within the same transaction.
          const error = yield* Effect.flip(
            cycle({
              settle: [{ jobId: job.id, token, outcome: { _tag: "Complete", result: "done" } }],
              charge: [{ jobId: job.id, callId: "call-1", token, amountCents: 4, settled: true }],
              claimNext: { queue, max: 1, owner: "w", leaseMs: 1e300 }
            })
          )

          expect(error._tag).toBe("StoreError")
          const after = yield* store.get({ jobId: job.id })
          expect(after).toEqual(claimed.job)
          expect(yield* store.charges({ jobId: job.id })).toEqual([])
          expect(yield* store.get({ jobId: waiting.id })).toEqual(waiting)

          // The same cycle with a lease that fits applies every part.
          const reply = yield* cycle({
            settle: [{ jobId: job.id, token, outcome: { _tag: "Complete", result: "done" } }],
            charge: [{ jobId: job.id, callId: "call-1", token, amountCents: 4, settled: true }],
            claimNext: { queue, max: 1, owner: "w", leaseMs: 60_000 }
          })
          expect(reply.settle.map((result) => result._tag)).toEqual(["Settled"])
          expect(reply.charge).toEqual([{ _tag: "Charged", costCents: 4 }])
          expect(reply.claimNext.map((result) => result._tag === "Claimed" && result.job.id)).toEqual([waiting.id])
          expect(yield* store.get({ jobId: job.id })).toMatchObject({ state: "succeeded", costCents: 4 })
        })
      )
    })
  })
}
