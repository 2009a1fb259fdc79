import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric, TestClock } from "effect"
import * as Metrics from "../src/Metrics.js"
import * as StoreModule from "../src/Store.js"
import { Store } from "../src/Store.js"

const submit = (store: Store["Type"], n: number, priority: number) =>
  store.submit({
    id: `01890a5d-ac96-774b-bcce-b302099a80${String(n).padStart(2, "0")}` as never,
    queue: "metrics",
    type: "t",
    version: 1,
    inputHash: `h${n}`,
    input: n,
    priority,
    maxAttempts: 1
  })

describe("Metrics", () => {
  it.scoped("refresh sets the population gauges from the store's stats", () =>
    Effect.gen(function* () {
      const store = yield* StoreModule.makeMemory
      yield* submit(store, 1, 0)
      yield* TestClock.adjust(1_000)
      yield* submit(store, 2, 5)
      yield* submit(store, 3, 5)
      const failing = yield* submit(store, 4, 0)
      yield* store.claim({ jobId: failing.job.id, owner: "w", leaseMs: 1_000 })
      yield* store.fail({ jobId: failing.job.id, token: 1, errorClass: "server_error", error: "500" })
      yield* TestClock.adjust(2_000)

      yield* Metrics.refresh({ queue: "metrics", windowMs: 120_000 }).pipe(Effect.provideService(Store, store))

      const snap = yield* Metrics.snapshot
      expect(Metrics.read(snap, "slowcall_jobs", { state: "queued" })).toBe(3)
      expect(Metrics.read(snap, "slowcall_jobs", { state: "failed" })).toBe(1)
      expect(Metrics.read(snap, "slowcall_jobs", { state: "running" })).toBe(0)
      expect(Metrics.read(snap, "slowcall_oldest_queued_age_ms", { priority: "0" })).toBe(3_000)
      expect(Metrics.read(snap, "slowcall_oldest_queued_age_ms", { priority: "5" })).toBe(2_000)
      // One failure in a 2-minute window: 0.5 per minute.
      expect(Metrics.read(snap, "slowcall_dead_letter_rate_per_minute")).toBe(0.5)
    })
  )

  it.scoped("poll refreshes on its interval until the scope closes", () =>
    Effect.gen(function* () {
      const store = yield* StoreModule.makeMemory
      yield* Metrics.poll({ queue: "metrics", intervalMs: 1_000 }).pipe(Effect.provideService(Store, store))
      yield* TestClock.adjust(10)
      expect(Metrics.read(yield* Metrics.snapshot, "slowcall_jobs", { state: "queued" })).toBe(0)

      yield* submit(store, 9, 0)
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
