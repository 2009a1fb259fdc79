/**
 * 8 workers x 1,000 jobs on the real server, PgStore + PgTransport, no faults: every job runs exactly once (counted
 * by the fake model), and not a single fenced write is rejected (every attempt row ends `succeeded`).
 *
 * Each worker is the protocol loop the core Worker runs (receive -> claim -> model call with a charge -> fenced
 * complete -> ack; a busy job is deferred until its lease ends, a settled one acked), written out here so the test
 * counts every model call and every rejected fenced write itself.
 *
 * Also: concurrent submits that share one idempotency key, on fresh connections, leave exactly one job; and
 * concurrent sweeps hand each waiting job out once between them.
 */
import { expect, it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Models"
import type { SubmitOptions } from "@slowcall/core/Store"
import type { Delivery } from "@slowcall/core/Transport"
import { Effect, Ref } from "effect"
import { afterAll, describe } from "vitest"
import * as PgStore from "../src/PgStore.js"
import * as PgTransport from "../src/PgTransport.js"
import { DATABASE_URL, dropSchema, holdServer, serverLayer, uniqueSchema } from "./support.js"

holdServer()

const schema = uniqueSchema("conc")
const JOBS = 1_000
const WORKERS = 8
const LEASE_MS = 30_000
const QUEUE = "conc"

afterAll(() => dropSchema(schema))

describe("concurrency on the real server", () => {
  it.live(
    `${WORKERS} workers x ${JOBS} jobs: each job's model call happens exactly once, zero fenced writes rejected`,
    () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const transport = yield* PgTransport.PgTransport
        const calls = new Map<JobId, number>()
        const done = yield* Ref.make(0)
        let fencedRejections = 0
        let duplicates = 0

        const ids: Array<JobId> = []
        for (let i = 0; i < JOBS; i++) ids.push(yield* makeJobId)
        yield* Effect.forEach(
          ids,
          (id, n) =>
            store.submit({
              id,
              queue: QUEUE,
              type: "count",
              version: 1,
              inputHash: `h${n}`,
              input: { n },
              maxAttempts: 3
            }),
          { concurrency: 8, discard: true }
        )

        const handle = (worker: string, delivery: Delivery) =>
          Effect.gen(function* () {
            const claim = yield* store.claim({ jobId: delivery.jobId, owner: worker, leaseMs: LEASE_MS })
            if (claim._tag === "Settled") {
              duplicates++
              return yield* transport.ack({ delivery })
            }
            if (claim._tag !== "Claimed") {
              duplicates++
              return yield* transport.defer({ delivery, delayMs: 100 })
            }
            const token = claim.job.leaseToken
            // The fake model: counts its calls per job, charged on the call id.
            calls.set(delivery.jobId, (calls.get(delivery.jobId) ?? 0) + 1)
            yield* store.charge({
              jobId: delivery.jobId,
              callId: `${delivery.jobId}:${token}:1`,
              token,
              amountCents: 2,
              settled: true
            })
            const completed = yield* Effect.either(store.complete({ jobId: delivery.jobId, token, result: { worker } }))
            if (completed._tag === "Left") {
              fencedRejections++
              return
            }
            yield* transport.ack({ delivery })
            yield* Ref.update(done, (n) => n + 1)
          })

        const started = Date.now()
        const worker = (name: string) =>
          Effect.gen(function* () {
            while ((yield* Ref.get(done)) < JOBS && Date.now() - started < 45_000) {
              const deliveries = yield* transport.receive({ queue: QUEUE, max: 4, visibilityMs: LEASE_MS, waitMs: 200 })
              yield* Effect.forEach(deliveries, (delivery) => handle(name, delivery), { discard: true })
            }
          })
        yield* Effect.all(
          Array.from({ length: WORKERS }, (_, w) => worker(`worker-${w}`)),
          { concurrency: "unbounded" }
        )
        const elapsed = Date.now() - started

        const stats = yield* store.stats({ queue: QUEUE, failedSince: 0 })
        expect(stats.byState.succeeded).toBe(JOBS)
        expect(calls.size).toBe(JOBS)
        expect([...calls.values()].every((count) => count === 1)).toBe(true)
        expect(fencedRejections).toBe(0)
        const jobs = yield* store.list({ queue: QUEUE, limit: JOBS })
        expect(jobs.every((job) => job.attempts === 1 && job.leaseToken === 1 && job.costCents === 2)).toBe(true)
        const outcomes = yield* Effect.forEach(ids, (id) => store.attempts({ jobId: id }), { concurrency: 8 })
        expect(outcomes.every((attempts) => attempts.length === 1 && attempts[0]?.outcome === "succeeded")).toBe(true)
        yield* Effect.log(`${JOBS} jobs by ${WORKERS} workers in ${elapsed} ms; ${duplicates} duplicate deliveries`)
      }).pipe(Effect.provide(PgStore.layer({ connectionString: DATABASE_URL, schema, max: 12 }))),
    60_000
  )
})

describe("idempotent submit under concurrency on the real server", () => {
  const submitOptions = (id: JobId, extra: Partial<SubmitOptions>): SubmitOptions => ({
    id,
    queue: "keys",
    type: "t",
    version: 1,
    inputHash: `h-${id}`,
    input: { text: "doc" },
    maxAttempts: 3,
    ...extra
  })

  it.effect("concurrent submits with one request key and one input return one job, exactly one created", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const ids = yield* Effect.all(Array.from({ length: 16 }, () => makeJobId))

      const results = yield* Effect.forEach(
        ids,
        (id) => store.submit(submitOptions(id, { requestKey: "same-key", inputHash: "same-hash" })),
        { concurrency: "unbounded" }
      )

      expect(new Set(results.map((r) => r.job.id)).size).toBe(1)
      expect(results.filter((r) => r.created)).toHaveLength(1)
      expect(yield* store.list({ queue: "keys", limit: 100 })).toHaveLength(1)
    }).pipe(Effect.provide(serverLayer(uniqueSchema("keys1"), { max: 16 })))
  )

  it.effect("concurrent submits with one key and other inputs: one job, the rest IdempotencyKeyReused naming it", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const ids = yield* Effect.all(Array.from({ length: 12 }, () => makeJobId))

      const results = yield* Effect.forEach(
        ids,
        (id, n) => Effect.either(store.submit(submitOptions(id, { requestKey: "k2", inputHash: `hash-${n}` }))),
        { concurrency: "unbounded" }
      )

      const created = results.flatMap((r) => (r._tag === "Right" && r.right.created ? [r.right.job.id] : []))
      expect(created).toHaveLength(1)
      for (const r of results) {
        if (r._tag === "Left") expect(r.left).toMatchObject({ _tag: "IdempotencyKeyReused", existingJobId: created[0] })
      }
      expect(results.filter((r) => r._tag === "Left")).toHaveLength(11)
      expect(yield* store.list({ queue: "keys", limit: 100 })).toHaveLength(1)
    }).pipe(Effect.provide(serverLayer(uniqueSchema("keys2"), { max: 12 })))
  )
})

describe("sweeps under concurrency on the real server", () => {
  it.effect("sweepers running at once hand each waiting job out once between them", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const t0 = yield* store.now
      const ids: Array<JobId> = []
      for (let n = 0; n < 40; n++) {
        const id = yield* makeJobId
        yield* store.submit({
          id,
          queue: "sweeps",
          type: "t",
          version: 1,
          inputHash: `h${n}`,
          input: { n },
          maxAttempts: 3,
          now: t0
        })
        ids.push(id)
      }

      const results = yield* Effect.all(
        Array.from({ length: 4 }, () =>
          store.sweep({ queue: "sweeps", republishAfterMs: 30_000, limit: 15, now: t0 + 60_000 })
        ),
        { concurrency: "unbounded" }
      )

      const handedOut = results.flatMap((result) => result.stale.map((job) => job.id))
      expect(handedOut).toHaveLength(40)
      expect(new Set(handedOut)).toEqual(new Set(ids))
      const again = yield* store.sweep({ queue: "sweeps", republishAfterMs: 30_000, now: t0 + 60_000 })
      expect(again.stale).toEqual([])
    }).pipe(Effect.provide(serverLayer(uniqueSchema("sweeps"), { max: 8 })))
  )
})
