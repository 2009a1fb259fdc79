import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric, TestClock } from "effect"
import * as Limiter from "../src/Limiter.js"
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
      expect(Metrics.read(snap, "slowcall_oldest_queued_age_seconds", { priority: "0" })).toBe(3)
      expect(Metrics.read(snap, "slowcall_oldest_queued_age_seconds", { priority: "5" })).toBe(2)
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

  it.scoped("refresh sets spend per queue, tenant, type and state, and waiting jobs per type; gone groups read 0", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const done = yield* submitOne(t.store, { queue: "spend", type: "sum", tenant: "acme", maxAttempts: 1 })
      yield* claimOne(t.store, done.id, "w", 1_000)
      yield* t.store.charge({ items: [{ jobId: done.id, callId: "c", token: 1, amountCents: 4, settled: true }] })
      yield* settleOne(t.store, done.id, 1, { _tag: "Complete", result: null })
      yield* submitOne(t.store, { queue: "spend", type: "embed", version: 2 })
      yield* TestClock.adjust(1_500)

      yield* t.provide(Metrics.refresh({ queue: "spend", spendWindowMs: 60_000 }))

      const snap = yield* Metrics.snapshot
      const spendTags = { queue: "spend", tenant: "acme", type: "sum", state: "succeeded" }
      expect(Metrics.read(snap, "slowcall_spend_cents", spendTags)).toBe(4)
      expect(Metrics.read(snap, "slowcall_waiting_jobs", { type: "embed", version: "2" })).toBe(1)
      expect(Metrics.read(snap, "slowcall_oldest_waiting_age_seconds", { type: "embed", version: "2" })).toBe(1.5)

      // A minute later the charge is out of the spend window and nothing waits once the job is claimed.
      yield* TestClock.adjust(60_000)
      const waiting = yield* t.provide(Effect.flatMap(Query, (q) => q.list({ queue: "spend", state: "queued" })))
      yield* claimOne(t.store, waiting[0]!.id, "w", 60_000)
      yield* t.provide(Metrics.refresh({ queue: "spend", spendWindowMs: 60_000 }))

      const later = yield* Metrics.snapshot
      expect(Metrics.read(later, "slowcall_spend_cents", spendTags)).toBe(0)
      expect(Metrics.read(later, "slowcall_waiting_jobs", { type: "embed", version: "2" })).toBe(0)
    })
  )

  it("renderSamples writes gauges in the exposition format, label values escaped", () => {
    const text = Metrics.renderSamples([
      { name: "slowcall_jobs", tags: { state: "queued" }, value: 2 },
      { name: "slowcall_spend_cents", tags: { type: 'a"b\\c\nd' }, value: 1.5 },
      { name: "slowcall_jobs", tags: { state: "failed" }, value: 0 }
    ])
    expect(text).toBe(
      [
        "# HELP slowcall_jobs jobs per state, from the store",
        "# TYPE slowcall_jobs gauge",
        'slowcall_jobs{state="failed"} 0',
        'slowcall_jobs{state="queued"} 2',
        "# HELP slowcall_spend_cents spend over the spend window, per queue, tenant, type and state",
        "# TYPE slowcall_spend_cents gauge",
        'slowcall_spend_cents{type="a\\"b\\\\c\\nd"} 1.5',
        ""
      ].join("\n")
    )
  })

  it.effect(
    "resourceSamples: permits, buckets, pause kinds and the store's counters of each resource, with HELP text",
    () =>
      Effect.gen(function* () {
        const limiter = yield* Limiter.makeMemory
        const resource = "openai:gpt-4.1:org/key-a"
        const holder = { jobId: "job-1", token: 1 }
        yield* limiter.define({ now: 0, items: [{ resource, limits: { maxConcurrent: 1, requestsPerMinute: 60 } }] })
        yield* limiter.apply({
          now: 0,
          items: [
            { _tag: "Acquire", resource, callId: "c1", holder, leaseMs: 60_000 },
            { _tag: "Acquire", resource, callId: "c2", holder: { jobId: "job-2", token: 1 }, leaseMs: 60_000 },
            { _tag: "Pause", resource, kind: "rate_limited", until: 5_000, reason: "429" },
            { _tag: "Acquire", resource, callId: "c3", holder: { jobId: "job-3", token: 1 }, leaseMs: 60_000 }
          ]
        })
        const read = yield* limiter.read({ now: 1_000 })
        const samples = Metrics.resourceSamples(read)
        const value = (name: string, tags: Record<string, string> = {}) =>
          samples.find((s) => s.name === name && Object.entries(tags).every(([k, v]) => s.tags[k] === v))?.value

        expect(value("slowcall_resource_permits_in_use")).toBe(1)
        expect(value("slowcall_resource_max_concurrent")).toBe(1)
        // 60 a minute refills one a second: taken at 0, full again at 1 s.
        expect(value("slowcall_resource_bucket_level", { dimension: "requests" })).toBe(1)
        expect(value("slowcall_resource_bucket_capacity", { dimension: "requests" })).toBe(1)
        expect(samples.some((s) => s.tags.dimension === "inputTokens")).toBe(false)
        expect(value("slowcall_resource_paused", { kind: "rate_limited" })).toBe(1)
        expect(value("slowcall_resource_paused", { kind: "manual" })).toBe(0)
        expect(value("slowcall_resource_half_open")).toBe(0)
        expect(value("slowcall_resource_grants_total")).toBe(1)
        expect(value("slowcall_resource_waits_total", { reason: "concurrency" })).toBe(1)
        expect(value("slowcall_resource_paused_acquires_total")).toBe(1)
        expect(value("slowcall_resource_pauses_total", { kind: "rate_limited" })).toBe(1)
        for (const sample of samples) expect(sample.tags.resource).toBe(resource)

        const text = Metrics.renderSamples(samples)
        expect(text).toContain("# TYPE slowcall_resource_pauses_total counter")
        expect(text).toContain("# TYPE slowcall_resource_bucket_level gauge")
        expect(text).toContain(
          "# HELP slowcall_resource_pauses_total pauses of the resource per kind: rate_limited and quota_exhausted are the 429s the fleet reported"
        )
        expect(text).toContain(
          'slowcall_resource_waits_total{reason="concurrency",resource="openai:gpt-4.1:org/key-a"} 1'
        )
        // Every name has its HELP text, none falls back to the name.
        for (const name of new Set(samples.map((s) => s.name))) expect(Metrics.resourceHelp[name]).toMatch(/\w+ \w+/)
      })
  )

  it.effect("resourceSamples: the cap learned from a 429 beside the declared one, no sample until one is learned", () =>
    Effect.gen(function* () {
      const limiter = yield* Limiter.makeMemory
      const resource = "anthropic:sonnet:key-b"
      const holder = (jobId: string) => ({ jobId, token: 1 })
      yield* limiter.define({ now: 0, items: [{ resource, limits: { maxConcurrent: 4 } }] })
      yield* limiter.apply({
        now: 0,
        items: ["a", "b", "c"].map((id) => ({
          _tag: "Acquire" as const,
          resource,
          callId: id,
          holder: holder(id),
          leaseMs: 60_000
        }))
      })
      const before = Metrics.resourceSamples(yield* limiter.read({ now: 1_000 }))

      // The provider refused the third call with a 429: the two beside it are what it takes.
      const released = yield* limiter.apply({
        now: 1_000,
        items: [{ _tag: "Release", resource, callId: "c", holder: holder("c"), reached: true, rateLimited: true }]
      })
      const after = Metrics.resourceSamples(yield* limiter.read({ now: 2_000 }))

      expect(released.results[0]).toMatchObject({ _tag: "Released", view: { learnedConcurrent: 2 } })
      expect(before.some((s) => s.name === "slowcall_resource_learned_concurrent")).toBe(false)
      expect(before.find((s) => s.name === "slowcall_resource_max_concurrent")?.value).toBe(4)
      const learned = after.filter((s) => s.name === "slowcall_resource_learned_concurrent")
      expect(learned).toEqual([{ name: "slowcall_resource_learned_concurrent", tags: { resource }, value: 2 }])
      expect(after.find((s) => s.name === "slowcall_resource_max_concurrent")?.value).toBe(4)
      const text = Metrics.renderSamples(after)
      expect(text).toContain("# TYPE slowcall_resource_learned_concurrent gauge")
      expect(text).toContain(
        "# HELP slowcall_resource_learned_concurrent the cap on concurrent calls the fleet learned from the provider's 429s; the lower of it and max_concurrent is in force (absent: none learned)"
      )
      expect(text).toContain('slowcall_resource_learned_concurrent{resource="anthropic:sonnet:key-b"} 2')
    })
  )
})
