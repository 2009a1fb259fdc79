/**
 * Network faults between the adapter and a real server, injected by the TCP fault proxy: connection resets in the
 * middle of a claim and of a settle, and a black hole that only query timeouts get out of. Outcome checked every
 * time: no job lost, no second model call for a job while a lease on it lives, no lease stuck longer than one
 * lease period.
 */
import { expect, it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import type { Query } from "@slowcall/core/Query"
import * as FaultProxy from "@slowcall/testing/FaultProxy"
import { Effect } from "effect"
import { afterAll, beforeAll, describe } from "vitest"
import * as PgStore from "../src/PgStore.js"
import { type ModelCall, runJobs } from "./faultHarness.js"
import { DATABASE_URL, dropSchema, holdServer, submitOne, uniqueSchema } from "./support.js"

holdServer()

const schema = uniqueSchema("faults")
const LEASE_MS = 2_000
const SLACK_MS = 1_500
/** The client-side statement limit of the faulty layer: a statement sent into a black hole fails after it. */
const QUERY_TIMEOUT_MS = 1_500

let proxy: FaultProxy.FaultProxy

beforeAll(async () => {
  const url = new URL(DATABASE_URL)
  proxy = await FaultProxy.start({ targetHost: url.hostname, targetPort: Number(url.port || 5432) })
})

afterAll(async () => {
  await proxy.close()
  await dropSchema(schema)
})

/** The store through the proxy: short timeouts so a black hole turns into errors instead of hangs. */
const faultyLayer = () =>
  PgStore.layer({
    connectionString: proxy.url(DATABASE_URL),
    schema,
    queryTimeoutMs: QUERY_TIMEOUT_MS,
    connectionTimeoutMs: 1_500,
    max: 4,
    migrate: false
  })

const directLayer = () => PgStore.layer({ connectionString: DATABASE_URL, schema })

const submitJobs = (queue: string, count: number) =>
  Effect.gen(function* () {
    const store = yield* PgStore.PgStore
    const ids: Array<JobId> = []
    for (let i = 0; i < count; i++) {
      const id = yield* makeJobId
      yield* submitOne(store, {
        id,
        queue,
        type: "fault.echo",
        version: 1,
        inputHash: `h${i}`,
        input: { i },
        maxAttempts: 10
      })
      ids.push(id)
    }
    return ids
  })

/**
 * Every job succeeded; model calls of one job never overlap a live lease; no lease outlived one period, or (when the
 * network was gone past the lease's end) one statement timeout after the network came back at `healedAt`.
 */
const checkOutcome = (store: Query["Type"], ids: ReadonlyArray<JobId>, calls: ReadonlyArray<ModelCall>, healedAt = 0) =>
  Effect.gen(function* () {
    for (const id of ids) {
      const job = yield* store.get({ jobId: id })
      expect(job.state, `job ${id}`).toBe("succeeded")
      const attempts = yield* store.attempts({ jobId: id })
      const mine = calls.filter((call) => call.jobId === id).sort((a, b) => a.token - b.token)
      // At most one model call per claim, and every call was made under a claim the store granted.
      expect(new Set(mine.map((call) => call.token)).size).toBe(mine.length)
      for (const call of mine) expect(attempts.some((attempt) => attempt.token === call.token)).toBe(true)
      for (let i = 1; i < attempts.length; i++) {
        const previous = attempts[i - 1]!
        const next = attempts[i]!
        // A new claim only after the previous lease ended...
        expect(next.startedAt).toBeGreaterThanOrEqual(previous.startedAt + LEASE_MS)
        // ...and not much later than that: a lease whose holder vanished is taken over within one period, or, when
        // no claim could reach the store at that time, as soon as a statement can again.
        if (previous.outcome === "expired") {
          const due = Math.max(previous.startedAt + LEASE_MS, healedAt + QUERY_TIMEOUT_MS)
          expect(next.startedAt).toBeLessThanOrEqual(due + SLACK_MS)
        }
      }
      // A second call on a job starts only after the lease of the first call's claim has ended.
      for (let i = 1; i < mine.length; i++) {
        const earlier = attempts.find((attempt) => attempt.token === mine[i - 1]!.token)!
        expect(mine[i]!.start).toBeGreaterThanOrEqual(earlier.startedAt + LEASE_MS - 50)
      }
    }
  })

describe("faults between the adapter and the server", () => {
  it.live(
    "connection reset mid-claim: the claim may have applied, its reply is lost; the lease is taken over after it ends",
    () =>
      Effect.gen(function* () {
        const ids = yield* submitJobs("reset-claim", 20).pipe(Effect.provide(directLayer()))
        const rule = proxy.addResetRule({
          match: (chunk) => chunk.includes("slowcall:claim"),
          when: "after",
          times: 3
        })
        const before = proxy.addResetRule({
          match: (chunk) => chunk.includes("slowcall:claim"),
          when: "before",
          times: 2
        })
        const report = yield* Effect.gen(function* () {
          const store = yield* PgStore.PgStore
          return yield* runJobs(store, ids, { workers: 4, leaseMs: LEASE_MS, callMs: 20 })
        }).pipe(Effect.provide(faultyLayer()))
        expect(rule.fired()).toBe(3)
        expect(before.fired()).toBe(2)
        expect(report.storeErrors).toBeGreaterThanOrEqual(5)
        yield* Effect.flatMap(PgStore.PgStore, (store) => checkOutcome(store, ids, report.calls)).pipe(
          Effect.provide(directLayer())
        )
      }),
    60_000
  )

  it.live(
    "connection reset mid-settle: a lost reply after commit is recognised, a lost request is retried",
    () =>
      Effect.gen(function* () {
        const ids = yield* submitJobs("reset-complete", 20).pipe(Effect.provide(directLayer()))
        const after = proxy.addResetRule({
          match: (chunk) => chunk.includes("slowcall:settle"),
          when: "after",
          times: 3
        })
        const before = proxy.addResetRule({
          match: (chunk) => chunk.includes("slowcall:settle"),
          when: "before",
          times: 3
        })
        const report = yield* Effect.gen(function* () {
          const store = yield* PgStore.PgStore
          return yield* runJobs(store, ids, { workers: 4, leaseMs: LEASE_MS, callMs: 20 })
        }).pipe(Effect.provide(faultyLayer()))
        expect(after.fired()).toBe(3)
        expect(before.fired()).toBe(3)
        // No model call was repeated: every job was called exactly once.
        expect(report.calls).toHaveLength(ids.length)
        yield* Effect.flatMap(PgStore.PgStore, (store) => checkOutcome(store, ids, report.calls)).pipe(
          Effect.provide(directLayer())
        )
      }),
    60_000
  )

  it.live(
    "black hole: statements time out instead of hanging, and work resumes when the network returns",
    () =>
      Effect.gen(function* () {
        const ids = yield* submitJobs("blackhole", 40).pipe(Effect.provide(directLayer()))
        let healedAt = Number.POSITIVE_INFINITY
        const report = yield* Effect.gen(function* () {
          const store = yield* PgStore.PgStore
          const healer = yield* Effect.fork(
            Effect.gen(function* () {
              yield* Effect.sleep("150 millis")
              proxy.setBlackhole(true)
              yield* Effect.sleep("3 seconds")
              proxy.setBlackhole(false)
              healedAt = Date.now()
            })
          )
          const result = yield* runJobs(store, ids, { workers: 4, leaseMs: LEASE_MS, callMs: 30 })
          yield* healer.await
          return result
        }).pipe(Effect.provide(faultyLayer()))
        expect(report.storeErrors).toBeGreaterThan(0)
        expect(healedAt).toBeLessThan(Number.POSITIVE_INFINITY)
        yield* Effect.flatMap(PgStore.PgStore, (store) => checkOutcome(store, ids, report.calls, healedAt)).pipe(
          Effect.provide(directLayer())
        )
      }),
    60_000
  )

  it.live("latency: every statement is slower, nothing else changes", () =>
    Effect.gen(function* () {
      const ids = yield* submitJobs("latency", 10).pipe(Effect.provide(directLayer()))
      proxy.setLatency(30)
      const report = yield* Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        return yield* runJobs(store, ids, { workers: 2, leaseMs: LEASE_MS, callMs: 5 })
      }).pipe(Effect.provide(faultyLayer()), Effect.ensuring(Effect.sync(() => proxy.setLatency(0))))
      expect(report.calls).toHaveLength(ids.length)
      expect(report.fencedRejections).toBe(0)
      yield* Effect.flatMap(PgStore.PgStore, (store) => checkOutcome(store, ids, report.calls)).pipe(
        Effect.provide(directLayer())
      )
    })
  )
})
