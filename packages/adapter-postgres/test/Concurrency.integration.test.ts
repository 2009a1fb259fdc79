/**
 * 8 workers x 1,000 jobs on the real server, no faults: eight core Workers (`Worker.layer`), each on its own PgStore
 * layer (its own pool and LISTEN connection, as separate processes would have), take 1,000 jobs from PgTransport.
 * The fake model counts its calls per job: every job runs exactly once, ends succeeded, and not a single fenced write
 * is rejected (the worker's `slowcall_fenced_writes_rejected_total` does not move, and every attempt row ends
 * `succeeded`).
 *
 * Also: concurrent submits that share one idempotency key, on fresh connections, leave exactly one job; concurrent
 * `claimNext` calls take disjoint jobs (SKIP LOCKED); and concurrent sweeps hand each waiting job out once between
 * them.
 */
import { expect, it } from "@effect/vitest"
import * as Handler from "@slowcall/core/Handler"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import * as Metrics from "@slowcall/core/Metrics"
import type { SubmitItem } from "@slowcall/core/Protocol"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import pg from "pg"
import { afterAll, describe } from "vitest"
import * as PgStore from "../src/PgStore.js"
import { DATABASE_URL, dropSchema, holdServer, only, serverStoreLayer, submitOptions, uniqueSchema } from "./support.js"

holdServer()

const schema = uniqueSchema("conc")
const JOBS = 1_000
const WORKERS = 8
const QUEUE = "conc"
const CENTS = 2

afterAll(() => dropSchema(schema))

describe("concurrency on the real server", () => {
  it.live(
    `${WORKERS} core workers x ${JOBS} jobs: one model call per job, all succeeded, zero fenced writes rejected`,
    () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        // The fake model: counts its calls per job and bills each one.
        const calls = new Map<JobId, number>()
        const count = Handler.make({
          type: "count",
          version: 1,
          input: Schema.Struct({ n: Schema.Number }),
          result: Schema.Struct({ n: Schema.Number }),
          estimateCents: CENTS,
          attempt: { timeoutMs: 20_000 },
          run: (input, ctx) =>
            ctx.call({
              estimateCents: CENTS,
              run: Effect.sync(() => {
                calls.set(ctx.jobId, (calls.get(ctx.jobId) ?? 0) + 1)
                return input
              }),
              cost: () => CENTS
            })
        })
        const workerLayer = (w: number) =>
          Worker.layer({ queue: QUEUE, id: `worker-${w}`, concurrency: 4, handlers: [count] }).pipe(
            Layer.provide(PgStore.layer({ connectionString: DATABASE_URL, schema, migrate: false, max: 3 }))
          )
        const before = yield* Metrics.snapshot
        const metricDelta = (after: Readonly<Record<string, number>>, name: string) =>
          Metrics.read(after, name) - Metrics.read(before, name)

        // Arrange: eight workers waiting on an empty queue, then 1,000 submits while they run.
        const workers = yield* Scope.make()
        yield* Effect.forEach(
          Array.from({ length: WORKERS }, (_, w) => w),
          (w) => Layer.buildWithScope(workerLayer(w), workers),
          { concurrency: "unbounded", discard: true }
        )
        const started = Date.now()
        const ids: Array<JobId> = []
        for (let i = 0; i < JOBS; i++) ids.push(yield* makeJobId)
        const items = ids.map(
          (id, n): SubmitItem => ({
            id,
            queue: QUEUE,
            type: "count",
            version: 1,
            inputHash: `h${n}`,
            input: { n },
            maxAttempts: 3
          })
        )
        // Batches of 25, four at a time: each batch is one statement.
        const batches = Array.from({ length: JOBS / 25 }, (_, b) => items.slice(b * 25, b * 25 + 25))
        const replies = yield* Effect.forEach(batches, (batch) => store.submit({ items: batch }), { concurrency: 4 })
        expect(replies.flatMap((reply) => reply.results).filter((result) => result._tag !== "Created")).toEqual([])

        // Act: wait until every job is settled (bounded), then shut the workers down gracefully.
        const settled = Effect.map(
          store.stats({ queue: QUEUE, failedSince: 0 }),
          (stats) => stats.byState.succeeded + stats.byState.failed + stats.byState.abandoned
        )
        while ((yield* settled) < JOBS && Date.now() - started < 50_000) yield* Effect.sleep("100 millis")
        const elapsed = Date.now() - started
        yield* Scope.close(workers, Exit.void)
        const after = yield* Metrics.snapshot

        // Assert
        const stats = yield* store.stats({ queue: QUEUE, failedSince: 0 })
        expect(stats.byState).toMatchObject({ succeeded: JOBS, queued: 0, running: 0, failed: 0, abandoned: 0 })
        expect(calls.size).toBe(JOBS)
        expect([...calls.values()].filter((n) => n !== 1)).toEqual([])
        expect(metricDelta(after, "slowcall_fenced_writes_rejected_total")).toBe(0)
        expect(metricDelta(after, "slowcall_model_calls_total")).toBe(JOBS)
        expect(metricDelta(after, "slowcall_lease_takeovers_total")).toBe(0)
        expect(metricDelta(after, "slowcall_self_fenced_total")).toBe(0)
        const jobs = yield* store.list({ queue: QUEUE, limit: JOBS })
        expect(jobs).toHaveLength(JOBS)
        expect(jobs.filter((job) => job.attempts !== 1 || job.leaseToken !== 1 || job.costCents !== CENTS)).toEqual([])
        const attempts = yield* Effect.forEach(ids, (id) => store.attempts({ jobId: id }), { concurrency: 8 })
        expect(attempts.filter((rows) => rows.length !== 1 || rows[0]?.outcome !== "succeeded")).toEqual([])
        const duplicates = metricDelta(after, "slowcall_duplicate_deliveries_dropped_total")
        yield* Effect.log(`${JOBS} jobs by ${WORKERS} workers in ${elapsed} ms; ${duplicates} duplicate deliveries`)
      }).pipe(Effect.provide(PgStore.layer({ connectionString: DATABASE_URL, schema, max: 8 }))),
    60_000
  )
})

describe("idempotent submit under concurrency on the real server", () => {
  const submitKeyed = (id: JobId, extra: Partial<SubmitItem>) => ({ items: [submitOptions("keys", id, extra)] })

  it.effect("concurrent submits with one request key and one input return one job, exactly one created", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const ids = yield* Effect.all(Array.from({ length: 16 }, () => makeJobId))

      const results = yield* Effect.forEach(
        ids,
        (id) => Effect.map(store.submit(submitKeyed(id, { requestKey: "same-key", inputHash: "same-hash" })), only),
        { concurrency: "unbounded" }
      )

      const jobs = results.flatMap((r) => (r._tag === "KeyReused" ? [] : [r.job.id]))
      expect(jobs).toHaveLength(16)
      expect(new Set(jobs).size).toBe(1)
      expect(results.filter((r) => r._tag === "Created")).toHaveLength(1)
      expect(results.filter((r) => r._tag === "Existing")).toHaveLength(15)
      expect(yield* store.list({ queue: "keys", limit: 100 })).toHaveLength(1)
    }).pipe(Effect.provide(serverStoreLayer(uniqueSchema("keys1"), { max: 16 })))
  )

  it.effect("concurrent submits with one key and other inputs: one job, the rest IdempotencyKeyReused naming it", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const ids = yield* Effect.all(Array.from({ length: 12 }, () => makeJobId))

      const results = yield* Effect.forEach(
        ids,
        (id, n) => Effect.map(store.submit(submitKeyed(id, { requestKey: "k2", inputHash: `hash-${n}` })), only),
        { concurrency: "unbounded" }
      )

      const created = results.flatMap((r) => (r._tag === "Created" ? [r.job.id] : []))
      expect(created).toHaveLength(1)
      const reused = results.filter((r) => r._tag === "KeyReused")
      expect(reused).toHaveLength(11)
      for (const r of reused) expect(r).toMatchObject({ requestKey: "k2", existingJobId: created[0] })
      expect(yield* store.list({ queue: "keys", limit: 100 })).toHaveLength(1)
    }).pipe(Effect.provide(serverStoreLayer(uniqueSchema("keys2"), { max: 12 })))
  )
})

describe("sweeps under concurrency on the real server", () => {
  it.effect("sweepers running at once hand each waiting job out once between them", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const t0 = yield* store.now
      const ids: Array<JobId> = []
      for (let n = 0; n < 40; n++) ids.push(yield* makeJobId)
      yield* store.submit({ items: ids.map((id) => submitOptions("sweeps", id)), now: t0 })

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
    }).pipe(Effect.provide(serverStoreLayer(uniqueSchema("sweeps"), { max: 8 })))
  )
})

describe("claimNext under concurrency on the real server", () => {
  it.effect("claimers running at once take disjoint jobs, each claimed once, in priority order per claimer", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const ids: Array<JobId> = []
      for (let n = 0; n < 60; n++) ids.push(yield* makeJobId)
      yield* store.submit({ items: ids.map((id, n) => submitOptions("next", id, { priority: n % 3 })) })

      const replies = yield* Effect.all(
        Array.from({ length: 6 }, (_, w) =>
          store.claimNext({ queue: "next", max: 15, owner: `w${w}`, leaseMs: 60_000 })
        ),
        { concurrency: "unbounded" }
      )

      const claimed = replies.flatMap((reply) => reply.results)
      expect(claimed.every((result) => result._tag === "Claimed" && result.job.leaseToken === 1)).toBe(true)
      expect(claimed).toHaveLength(60)
      expect(new Set(claimed.map((result) => result.job.id))).toEqual(new Set(ids))
      for (const reply of replies) {
        const priorities = reply.results.map((result) => result.job.priority)
        expect(priorities).toEqual([...priorities].sort((a, b) => b - a))
      }
      expect((yield* store.stats({ queue: "next", failedSince: 0 })).byState.running).toBe(60)
    }).pipe(Effect.provide(serverStoreLayer(uniqueSchema("next"), { max: 8 })))
  )
})

describe("batch writes under concurrency on the real server", () => {
  it.effect("batches that name the same jobs in different orders queue behind each other, never deadlock", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const ids: Array<JobId> = []
      for (let n = 0; n < 40; n++) ids.push(yield* makeJobId)
      yield* store.submit({ items: ids.map((id) => submitOptions("orders", id)) })
      const claims = yield* store.claim({ items: ids.map((jobId) => ({ jobId, owner: "w", leaseMs: 60_000 })) })
      expect(claims.results.every((result) => result._tag === "Claimed")).toBe(true)
      // Eight orders of the same 40 jobs: rotations, half of them reversed.
      const orders = Array.from({ length: 8 }, (_, k) => {
        const rotated = [...ids.slice(k * 5), ...ids.slice(0, k * 5)]
        return k % 2 === 0 ? rotated : rotated.reverse()
      })

      const rounds = yield* Effect.forEach(
        Array.from({ length: 5 }, (_, round) => round),
        () =>
          Effect.all(
            orders.map((order) =>
              Effect.either(
                store.heartbeat({ items: order.map((jobId) => ({ jobId, token: 1, leaseMs: 60_000, progress: 0.5 })) })
              )
            ),
            { concurrency: "unbounded" }
          )
      )

      const replies = rounds.flat()
      expect(replies.filter((reply) => reply._tag === "Left")).toEqual([])
      const renewed = replies.flatMap((reply) => (reply._tag === "Right" ? reply.right.results : []))
      expect(renewed).toHaveLength(5 * 8 * 40)
      expect(renewed.every((result) => result._tag === "Renewed")).toBe(true)
    }).pipe(Effect.provide(serverStoreLayer(uniqueSchema("orders"), { max: 8 })))
  )
})

describe("a claim racing a charge on the real server", () => {
  const raceSchema = uniqueSchema("race")
  afterAll(() => dropSchema(raceSchema))

  it.live("a charge that commits while a claim waits for the row is seen by the claim's estimate too", () =>
    Effect.gen(function* () {
      const store = yield* PgStore.PgStore
      const id = yield* makeJobId
      // Budget 6; once a call of 4 is on its ledger, the fallback estimate of the next attempt is 4 and 4 + 4 > 6.
      yield* store.submit({ items: [submitOptions("race", id, { budgetCents: 6 })] })
      const other = new pg.Client({ connectionString: DATABASE_URL })
      yield* Effect.promise(() => other.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => other.end()))
      // A charge of 4 in another transaction, as the charge statement writes it (ledger row and job spend), left
      // open so that the claim below takes its snapshot before the charge commits and then waits for the row.
      yield* Effect.promise(async () => {
        await other.query("BEGIN")
        await other.query(
          `UPDATE ${raceSchema}.jobs SET cost_cents = cost_cents + 4, updated_at = updated_at + interval '1 millisecond'
           WHERE id = $1`,
          [id]
        )
        await other.query(
          `INSERT INTO ${raceSchema}.charges (job_id, call_id, token, amount_cents, settled, applied_delta_cents,
             created_at, updated_at) VALUES ($1, 'call-0', 0, 4, true, 4, now(), now())`,
          [id]
        )
      })
      const claim = yield* Effect.fork(store.claim({ items: [{ jobId: id, owner: "w", leaseMs: 60_000 }] }))
      // Until the claim waits for the row lock the open transaction holds.
      yield* Effect.promise(async () => {
        for (let n = 0; n < 200; n++) {
          // Inside a transaction the activity view is read once and kept, unless cleared.
          await other.query("SELECT pg_stat_clear_snapshot()")
          const waiting = await other.query(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%slowcall:claim%' AND query LIKE $1",
            [`%${raceSchema}%`]
          )
          if (waiting.rowCount !== null && waiting.rowCount > 0) return
          await new Promise((resolve) => setTimeout(resolve, 25))
        }
        throw new Error("the claim never waited for the row")
      })
      yield* Effect.promise(() => other.query("COMMIT"))
      const result = only(yield* Effect.flatten(claim.await))
      // The only order that explains a claim that returns the spend of 4: the charge first, so the estimate is 4
      // and the job is settled for its budget. Before the fix the claim ran the job on the snapshot's estimate of 0.
      expect(result._tag).toBe("Settled")
      if (result._tag === "Settled") {
        expect(result.job).toMatchObject({ state: "abandoned", abandonReason: "budget", costCents: 4 })
      }
    }).pipe(Effect.scoped, Effect.provide(serverStoreLayer(raceSchema, { max: 4 })))
  )
})
