/**
 * `PgStore.purge` on the real server and on PGlite: finished jobs created before the cutoff go with every row of
 * theirs (attempts, charges) and their request key; queued and running jobs, younger finished jobs and, when asked,
 * dead letters stay; chunks are bounded and oldest first.
 */

import { expect, it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import type { SubmitItem } from "@slowcall/core/Protocol"
import { Context, Effect, Layer } from "effect"
import { describe } from "vitest"
import { makeStatements } from "../src/internal/statements.js"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import { DATABASE_URL, dropSchema, holdServer, only, submitOne, submitOptions, uniqueSchema } from "./support.js"

holdServer()

const backends = [
  {
    name: "server",
    layer: (schema: string) =>
      Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropSchema(schema)))).pipe(
        Layer.provideMerge(PgStore.layerFromDriver({ schema })),
        Layer.provideMerge(PgDriver.layer({ connectionString: DATABASE_URL }))
      )
  },
  {
    name: "pglite",
    layer: (schema: string) => PgStore.layerFromDriver({ schema }).pipe(Layer.provideMerge(PgDriver.layerPglite()))
  }
] as const

const item = (queue: string, extra: Partial<SubmitItem> = {}) =>
  Effect.map(makeJobId, (id) => submitOptions(queue, id, { maxAttempts: 1, ...extra }))

for (const backend of backends) {
  describe(`purge: ${backend.name}`, () => {
    it.live("deletes old finished jobs and every row of theirs; live, young and (when asked) dead ones stay", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const schema = uniqueSchema("purge")
          const context = yield* Layer.build(backend.layer(schema))
          const store = Context.get(context, PgStore.PgStore)
          const driver = Context.get(context, PgDriver.PgDriver)
          const q = "purge"
          const t0 = (yield* store.now) - 60_000
          // Old: created at t0. done and dead are finished, cancelled is abandoned, waiting stays queued, busy runs.
          const done = yield* item(q, { requestKey: "k-done" })
          const dead = yield* item(q)
          const cancelled = yield* item(q)
          const waiting = yield* item(q)
          const busy = yield* item(q)
          yield* store.submit({ items: [done, dead, cancelled, waiting, busy], now: t0 })
          const claimed = yield* store.claim({
            items: [done, dead, busy].map((j) => ({ jobId: j.id, owner: "w", leaseMs: 600_000 }))
          })
          const [t1, t2] = claimed.results.map((r) => (r._tag === "Claimed" ? r.job.leaseToken : -1))
          yield* store.charge({
            items: [
              { jobId: done.id, callId: "c1", token: t1!, amountCents: 3, settled: true },
              { jobId: dead.id, callId: "c2", token: t2!, amountCents: 5, settled: true }
            ]
          })
          yield* store.settle({
            items: [
              { jobId: done.id, token: t1!, outcome: { _tag: "Complete", result: { ok: true } } },
              { jobId: dead.id, token: t2!, outcome: { _tag: "Fail", errorClass: "auth", error: "401" } }
            ]
          })
          yield* store.cancel({ items: [{ jobId: cancelled.id }] })
          // Young: finished too, but created after the cutoff.
          const young = yield* item(q)
          yield* submitOne(store, young)
          const youngClaim = only(yield* store.claim({ items: [{ jobId: young.id, owner: "w", leaseMs: 600_000 }] }))
          yield* store.settle({
            items: [
              {
                jobId: young.id,
                token: youngClaim._tag === "Claimed" ? youngClaim.job.leaseToken : -1,
                outcome: { _tag: "Complete", result: null }
              }
            ]
          })
          const cutoff = t0 + 30_000
          const count = (table: string, ids: ReadonlyArray<string>) =>
            Effect.promise(() =>
              driver.query<{ n: number }>(
                `SELECT count(*)::int AS n FROM "${schema}".${table} WHERE job_id = ANY($1::uuid[])`,
                [ids]
              )
            ).pipe(Effect.map((rows) => rows[0]!.n))
          const rowsBefore = {
            attempts: yield* count("attempts", [done.id, dead.id]),
            charges: yield* count("charges", [done.id, dead.id])
          }

          // Bounded chunks, oldest first: one at a time, dead letters kept.
          const first = yield* store.purge({
            queue: q,
            createdBefore: cutoff,
            states: ["succeeded", "abandoned"],
            limit: 1
          })
          const second = yield* store.purge({
            queue: q,
            createdBefore: cutoff,
            states: ["succeeded", "abandoned"],
            limit: 1
          })
          const third = yield* store.purge({ queue: q, createdBefore: cutoff, states: ["succeeded", "abandoned"] })
          const deadLetters = yield* store.deadLetters({ queue: q })
          const otherQueue = yield* store.purge({ queue: "elsewhere", createdBefore: cutoff })
          const last = yield* store.purge({ queue: q, createdBefore: cutoff })
          const again = yield* store.purge({ queue: q, createdBefore: cutoff })

          expect(rowsBefore).toEqual({ attempts: 2, charges: 2 })
          expect([...first, ...second].sort()).toEqual([done.id, cancelled.id].sort())
          expect(first).toHaveLength(1)
          expect(third).toEqual([])
          expect(deadLetters.jobs.map((j) => j.id)).toEqual([dead.id])
          expect(otherQueue).toEqual([])
          expect(last).toEqual([dead.id])
          expect(again).toEqual([])
          expect({
            attempts: yield* count("attempts", [done.id, dead.id]),
            charges: yield* count("charges", [done.id, dead.id])
          }).toEqual({ attempts: 0, charges: 0 })
          for (const gone of [done, dead, cancelled]) {
            expect(yield* Effect.flip(store.get({ jobId: gone.id }))).toMatchObject({ _tag: "JobNotFound" })
          }
          const left = yield* store.list({ queue: q, limit: null })
          expect(left.map((j) => [j.id, j.state]).sort()).toEqual(
            [
              [waiting.id, "queued"],
              [busy.id, "running"],
              [young.id, "succeeded"]
            ].sort()
          )
          expect((yield* store.deadLetters({ queue: q })).jobs).toEqual([])
          const stats = yield* store.stats({ queue: q, failedSince: 0 })
          expect(stats.byState).toEqual({ queued: 1, running: 1, succeeded: 1, failed: 0, abandoned: 0 })

          // The purged job's request key is free: the same key makes a new job, as on a store that never had it;
          // sent again, the key answers with that new job.
          const retry = { ...(yield* item(q, { requestKey: "k-done" })), inputHash: done.inputHash }
          const resubmitted = only(yield* store.submit({ items: [retry] }))
          const repeat = only(yield* store.submit({ items: [{ ...retry, id: yield* makeJobId }] }))
          expect(resubmitted._tag === "Created" ? resubmitted.job.id : resubmitted._tag).toBe(retry.id)
          expect(retry.id).not.toBe(done.id)
          expect(repeat._tag === "Existing" ? repeat.job.id : repeat._tag).toBe(retry.id)
        })
      )
    )

    it.live("reads the finished jobs' index: a chunk does not walk the live jobs older than the cutoff", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const schema = uniqueSchema("purge_plan")
          const context = yield* Layer.build(backend.layer(schema))
          const driver = Context.get(context, PgDriver.PgDriver)
          const rows = yield* Effect.promise(() =>
            driver.query<{ "QUERY PLAN": string }>(`EXPLAIN ${makeStatements(schema).purge}`, [
              "q",
              Date.now(),
              ["succeeded"],
              1000
            ])
          )
          expect(rows.map((row) => row["QUERY PLAN"]).join("\n")).toContain("finished_entries_created")
        })
      )
    )
  })
}
