/**
 * A batch's budget under concurrent reservations, on the real server (each call its own connection from the pool)
 * and on PGlite: twelve items of one batch reserve at once, one call each and some in calls of three, against room
 * for ten. The batch row's lock serialises the statements, so exactly ten reservations land, the batch's cost is
 * exactly its budget, and every refused item has no ledger row. And on the server, a statement whose snapshot a
 * concurrent writer of the same reservation made stale runs again instead of refusing a reservation that exists.
 */
import { expect, layer } from "@effect/vitest"
import { type BatchId, BatchStore } from "@slowcall/core/Batch"
import { makeJobId } from "@slowcall/core/Ids"
import { Query } from "@slowcall/core/Query"
import { Store } from "@slowcall/core/Store"
import { Effect, Fiber, type Layer } from "effect"
import pg from "pg"
import type * as PgStore from "../src/PgStore.js"
import { DATABASE_URL, holdServer, pgliteStoreLayer, serverStoreLayer, submitOptions, uniqueSchema } from "./support.js"

holdServer()

const backends: ReadonlyArray<{ readonly name: string; readonly layer: () => Layer.Layer<PgStore.PgStore, unknown> }> =
  [
    { name: "postgres server", layer: () => serverStoreLayer(uniqueSchema("bbudget")) },
    { name: "pglite", layer: () => pgliteStoreLayer() }
  ]

/**
 * A charge whose statement took its snapshot before another transaction wrote the same reservation and released the
 * job row: the statement must not judge the reservation as new (it exists) and refuse it against a batch cost that
 * already holds it. It runs again with a fresh snapshot and answers the reservation as written.
 */
const schema = uniqueSchema("bbstale")
layer(serverStoreLayer(schema) as Layer.Layer<PgStore.PgStore | Store | Query | BatchStore, unknown>, {
  timeout: 60_000
})("postgres server, a snapshot made stale by a concurrent charge", (it) => {
  it.scoped("the repeat of a reservation written meanwhile is answered Charged, not refused", () =>
    Effect.gen(function* () {
      const store = yield* Store
      const query = yield* Query
      const batches = yield* BatchStore
      const queue = `bbstale-${(yield* makeJobId).slice(-8)}`
      const batchId = (yield* makeJobId) as string as BatchId
      yield* batches.open({ spec: { id: batchId, queue, fingerprint: "b1:one", size: 1, budgetCents: 5 } })
      const jobId = yield* makeJobId
      yield* batches.add({ batchId, offset: 0, items: [submitOptions(queue, jobId)] })
      const other = new pg.Client({ connectionString: DATABASE_URL })
      yield* Effect.acquireRelease(
        Effect.promise(() => other.connect()),
        () => Effect.promise(() => other.end())
      )
      const run = (text: string, params: ReadonlyArray<unknown> = []) =>
        Effect.promise(() => other.query(text, [...params]))

      // Another writer holds the job row; our reservation's statement starts (its snapshot) and waits for it.
      yield* run("BEGIN")
      yield* run(`SELECT id FROM "${schema}".jobs WHERE id = $1 FOR UPDATE`, [jobId])
      const charging = yield* Effect.fork(
        store.charge({ items: [{ jobId, callId: "c1", token: 0, amountCents: 3, settled: false }] })
      )
      // Until the statement waits for this connection's row lock (its snapshot taken), at most 5 s.
      const waiting = Effect.map(
        run("SELECT 1 FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))"),
        (result) => result.rows.length > 0
      )
      for (let tries = 0; tries < 250 && !(yield* waiting); tries++) {
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      }
      expect(yield* waiting).toBe(true)
      // The other writer records the same reservation (a repeat that got there first) and lets go of the row.
      yield* run(
        `INSERT INTO "${schema}".charges (job_id, call_id, token, amount_cents, settled, applied_delta_cents,
          created_at, updated_at) VALUES ($1, 'c1', 0, 3, false, 3, now(), now())`,
        [jobId]
      )
      yield* run(
        `UPDATE "${schema}".jobs SET cost_cents = cost_cents + 3,
          updated_at = greatest(now(), updated_at + interval '1 microsecond') WHERE id = $1`,
        [jobId]
      )
      yield* run("COMMIT")

      const reply = yield* Fiber.join(charging)
      expect(reply.results).toEqual([{ _tag: "Charged", costCents: 3 }])
      expect((yield* query.charges({ jobId })).map((row) => [row.callId, row.amountCents])).toEqual([["c1", 3]])
      expect((yield* batches.get({ batchId }))?.costCents).toBe(3)
    })
  )
})

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
