import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric, TestClock } from "effect"
import * as Metrics from "../src/Metrics.js"
import { Query } from "../src/Query.js"
import * as StoreModule from "../src/Store.js"
import { Store } from "../src/Store.js"
import { claimOne, settleOne, submitOne } from "./fixtures.js"

const setup = Effect.map(StoreModule.makeMemory, ({ query, store }) => ({
  store,
  submit: (priority: number) => submitOne(store, { queue: "metrics", priority, maxAttempts: 1 }),
  provide: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.provideService(Store, store), Effect.provideService(Query, query))
}))

describe("Metrics", () => {
  it.scoped("refresh sets the population gauges from the query's stats, at store time", () =>
    Effect.gen(function* () {
      const t = yield* setup
      yield* t.submit(0)
      yield* TestClock.adjust(1_000)
      yield* t.submit(5)
      yield* t.submit(5)
      const failing = yield* t.submit(0)
      yield* claimOne(t.store, failing.id, "w", 1_000)
      yield* t.store.charge({ items: [{ jobId: failing.id, callId: "c", token: 1, amountCents: 7, settled: true }] })
      yield* settleOne(t.store, failing.id, 1, { _tag: "Fail", errorClass: "server_error", error: "500" })
      yield* TestClock.adjust(2_000)

      yield* t.provide(Metrics.refresh({ queue: "metrics", windowMs: 120_000 }))

      const snap = yield* Metrics.snapshot
      expect(Metrics.read(snap, "slowcall_jobs", { state: "queued" })).toBe(3)
      expect(Metrics.read(snap, "slowcall_jobs", { state: "failed" })).toBe(1)
      expect(Metrics.read(snap, "slowcall_jobs", { state: "running" })).toBe(0)
      expect(Metrics.read(snap, "slowcall_oldest_queued_age_ms", { priority: "0" })).toBe(3_000)
      expect(Metrics.read(snap, "slowcall_oldest_queued_age_ms", { priority: "5" })).toBe(2_000)
      expect(Metrics.read(snap, "slowcall_cost_cents", { error_class: "server_error" })).toBe(7)
      // One failure in a 2-minute window: 0.5 per minute.
      expect(Metrics.read(snap, "slowcall_dead_letter_rate_per_minute")).toBe(0.5)
    })
  )

  it.scoped("poll refreshes on its interval until the scope closes", () =>
    Effect.gen(function* () {
      const t = yield* setup
      yield* t.provide(Metrics.poll({ queue: "metrics", intervalMs: 1_000 }))
      yield* TestClock.adjust(10)
      expect(Metrics.read(yield* Metrics.snapshot, "slowcall_jobs", { state: "queued" })).toBe(0)

      yield* t.submit(0)
      yield* TestClock.adjust(1_000)

      expect(Metrics.read(yield* Metrics.snapshot, "slowcall_jobs", { state: "queued" })).toBe(1)
    })
  )

  it.effect("prometheus renders counters and tagged gauges with their types", () =>
    Effect.gen(function* () {
      yield* Metric.increment(Metrics.leaseTakeovers)
      yield* Metric.set(Metric.tagged(Metrics.costCents, "error_class", 'we"ird'), 12)

      const text = yield* Metrics.prometheus

      expect(text).toContain("# TYPE slowcall_lease_takeovers_total counter\n")
      expect(text).toMatch(/^slowcall_lease_takeovers_total [1-9]\d*$/m)
      expect(text).toContain("# TYPE slowcall_cost_cents gauge\n")
      expect(text).toContain('slowcall_cost_cents{error_class="we\\"ird"} 12\n')
      expect(text.split("\n").filter((line) => line.startsWith("# TYPE slowcall_cost_cents ")).length).toBe(1)
    })
  )
})
