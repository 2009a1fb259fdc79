/**
 * The Limiter conformance suite: one set of tests that every Limiter implementation runs, so all backends keep the
 * same rules (`@slowcall/core/Limits`). Areas: buckets (refill, burst, debt), concurrency permits (fenced by holder,
 * expiry, renewal), release correction, idempotence by call id, pause and resume, the half-open probe, the
 * concurrency cap learned from 429s, the priority share, reads, batches and bad input, and, where the backend declares it, racing callers and shared state.
 *
 * Time is driven by `TestClock`: each test reads the test clock and passes it as `now` to every call, and moves time
 * with `TestClock.adjust`, so refills and permit expiry are exercised on every backend without real sleeps. Every
 * test names its own resources, so one instance of the backend serves the whole suite.
 *
 * @since 0.4.0
 */
import { describe, expect, layer, type Vitest } from "@effect/vitest"
import { InvalidInput } from "@slowcall/core/Errors"
import {
  type Acquire,
  type DefineResult,
  Limiter,
  type LimitItem,
  type LimitResult,
  type Limits,
  type PauseKind,
  type Release,
  type Reply,
  type ResourceState
} from "@slowcall/core/Limiter"
import { Clock, Context, Duration, Effect, Layer, TestClock } from "effect"
import { makeJobFactory } from "./JobFactory.js"

/**
 * What a Limiter declares about itself. Tests that need a capability the backend lacks are not registered, and the
 * suite prints one line naming them.
 *
 * @since 0.4.0
 * @category models
 */
export interface LimiterCapabilities {
  /** Many callers at once (fibers or connections) keep each item atomic: the racing tests run. */
  readonly concurrent: boolean
  /** Two separate builds of the layer see the same resources (a real database): cross-instance tests run. */
  readonly sharedState: boolean
}

/**
 * How a backend runs the suite: a display name, a layer providing `Limiter` (built once for the whole suite), and
 * the declared capabilities.
 *
 * @since 0.4.0
 * @category models
 */
export interface LimiterConformanceOptions {
  /** Shown in the describe block; never used to change behaviour. */
  readonly name: string
  readonly layer: Layer.Layer<Limiter, unknown>
  readonly capabilities: LimiterCapabilities
}

/** A fixed starting point (2026-01-01), as the Store suite's. */
const BASE_TIME = 1_767_225_600_000

const factory = makeJobFactory()

/** A test's own resource, clock and one-item forms of the verbs. */
interface Fixture {
  readonly limiter: Limiter["Type"]
  /** A resource no other test names. */
  readonly resource: string
  /** Another one, for tests that need two. */
  readonly other: string
  readonly now: Effect.Effect<number>
  readonly advance: (ms: number) => Effect.Effect<void>
  readonly define: (limits: Limits, resource?: string) => Effect.Effect<DefineResult, unknown>
  /** Items at the clock's time: the whole reply. */
  readonly apply: (items: ReadonlyArray<LimitItem>) => Effect.Effect<Reply<LimitResult>, unknown>
  /** One item at the clock's time: its result. */
  readonly one: (item: LimitItem) => Effect.Effect<LimitResult, unknown>
  readonly read: (resource?: string) => Effect.Effect<ResourceState, unknown>
  readonly acquire: (callId: string, extra?: Partial<Acquire>) => Acquire
  readonly release: (callId: string, extra?: Partial<Release>) => Release
  readonly pause: (kind: PauseKind, until: number | null, resource?: string) => LimitItem
}

const only = <A>(reply: Reply<A>): A => {
  expect(reply.results).toHaveLength(1)
  return reply.results[0]!
}

const makeFixture = Effect.gen(function* () {
  const limiter = yield* Limiter
  const current = yield* Clock.currentTimeMillis
  if (current < BASE_TIME) yield* TestClock.setTime(BASE_TIME)
  yield* TestClock.adjust(Duration.seconds(1))
  const resource = `conf:${factory.uniqueName("r")}:key`
  const other = `conf:${factory.uniqueName("o")}:key`
  const now = Clock.currentTimeMillis
  const apply = (items: ReadonlyArray<LimitItem>) => Effect.flatMap(now, (t) => limiter.apply({ items, now: t }))
  const fixture: Fixture = {
    limiter,
    resource,
    other,
    now,
    advance: (ms) => TestClock.adjust(Duration.millis(ms)),
    define: (limits, name = resource) =>
      Effect.flatMap(now, (t) => Effect.map(limiter.define({ items: [{ resource: name, limits }], now: t }), only)),
    apply,
    one: (item) => Effect.map(apply([item]), only),
    read: (name = resource) =>
      Effect.flatMap(now, (t) =>
        Effect.map(limiter.read({ resources: [name], now: t }), (reply) => {
          expect(reply.resources).toHaveLength(1)
          return reply.resources[0]!
        })
      ),
    acquire: (callId, extra = {}) => ({
      _tag: "Acquire",
      resource,
      callId,
      holder: { jobId: `job-${callId}`, token: 1 },
      leaseMs: 30_000,
      ...extra
    }),
    release: (callId, extra = {}) => ({
      _tag: "Release",
      resource,
      callId,
      holder: { jobId: `job-${callId}`, token: 1 },
      reached: true,
      ...extra
    }),
    pause: (kind, until, name = resource) => ({
      _tag: "Pause",
      resource: name,
      kind,
      until,
      reason: `${kind} in a test`
    })
  }
  return fixture
})

type It = Vitest.MethodsNonLive<Limiter>

const tags = (results: ReadonlyArray<LimitResult>) => results.map((result) => result._tag)

const bucketTests = (it: It) =>
  describe("buckets", () => {
    it.effect("a full bucket admits its capacity at once, then refills continuously", () =>
      Effect.gen(function* () {
        const { define, apply, one, acquire, advance, now } = yield* makeFixture
        yield* define({ requestsPerMinute: 600 })
        const t0 = yield* now

        const burst = yield* apply(Array.from({ length: 11 }, (_, i) => acquire(`c${i}`)))
        yield* advance(250)
        const refilled = yield* apply([acquire("d1"), acquire("d2"), acquire("d3")])

        expect(tags(burst.results)).toEqual([...Array.from({ length: 10 }, () => "Granted"), "Wait"])
        expect(burst.results[10]).toMatchObject({ _tag: "Wait", reason: "requests", until: t0 + 100 })
        // 250 ms at 10 per second is 2.5 requests: two calls, and the third waits for the missing half.
        expect(tags(refilled.results)).toEqual(["Granted", "Granted", "Wait"])
        expect(refilled.results[2]).toMatchObject({ until: t0 + 250 + 50 })
        expect((yield* one(acquire("probe-level", { cost: { requests: 0 } }))).view.buckets.requests).toEqual({
          level: 0.5,
          capacity: 10,
          perMinute: 600
        })
      })
    )

    it.effect("burstSeconds sets the capacity; a bucket never holds less than one call", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, other } = yield* makeFixture
        yield* define({ requestsPerMinute: 60, burstSeconds: 5 })
        yield* define({ requestsPerMinute: 6 }, other)

        const wide = yield* apply(Array.from({ length: 6 }, (_, i) => acquire(`w${i}`)))
        const narrow = yield* apply([acquire("n1", { resource: other }), acquire("n2", { resource: other })])

        expect(tags(wide.results)).toEqual(["Granted", "Granted", "Granted", "Granted", "Granted", "Wait"])
        expect(tags(narrow.results)).toEqual(["Granted", "Wait"])
        expect(narrow.results[1]!.view.buckets.requests).toMatchObject({ capacity: 1, level: 0 })
      })
    )

    it.effect("a call larger than the bucket goes when it is full and leaves debt the next call waits out", () =>
      Effect.gen(function* () {
        const { define, apply, one, acquire, advance, now } = yield* makeFixture
        yield* define({ outputTokensPerMinute: 60_000 })
        const t0 = yield* now

        const big = yield* apply([
          acquire("big", { cost: { outputTokens: 2_500 } }),
          acquire("small", { cost: { outputTokens: 10 } })
        ])
        yield* advance(1_500)
        const stillShort = yield* one(acquire("small", { cost: { outputTokens: 10 } }))
        yield* advance(10)
        const enough = yield* one(acquire("small", { cost: { outputTokens: 10 } }))

        expect(tags(big.results)).toEqual(["Granted", "Wait"])
        expect(big.results[0]!.view.buckets.outputTokens).toMatchObject({ level: -1_500, capacity: 1_000 })
        expect(big.results[1]).toMatchObject({ reason: "outputTokens", until: t0 + 1_510 })
        expect(stillShort).toMatchObject({ _tag: "Wait", until: t0 + 1_510 })
        expect(enough._tag).toBe("Granted")
      })
    )

    it.effect("define keeps the level, clamped to the new capacity, and a new dimension starts full", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, advance } = yield* makeFixture
        yield* define({ requestsPerMinute: 600 })
        yield* apply(Array.from({ length: 8 }, (_, i) => acquire(`c${i}`)))
        yield* advance(100)

        const lowered = yield* define({ requestsPerMinute: 60, inputTokensPerMinute: 6_000 })

        // 2 left + 1 refilled = 3, clamped to the new capacity of 1; input tokens start at their capacity.
        expect(lowered.view.buckets.requests).toEqual({ level: 1, capacity: 1, perMinute: 60 })
        expect(lowered.view.buckets.inputTokens).toEqual({ level: 100, capacity: 100, perMinute: 6_000 })
        expect(lowered.view.permits).toBe(8)
      })
    )
  })

const permitTests = (it: It) =>
  describe("concurrency permits", () => {
    it.effect("live permits never exceed maxConcurrent; Wait says until the earliest permit ends", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, now } = yield* makeFixture
        yield* define({ maxConcurrent: 2 })
        const t0 = yield* now

        const reply = yield* apply([acquire("a", { leaseMs: 9_000 }), acquire("b", { leaseMs: 4_000 }), acquire("c")])

        expect(tags(reply.results)).toEqual(["Granted", "Granted", "Wait"])
        expect(reply.results[0]).toMatchObject({ permitUntil: t0 + 9_000, probe: false })
        expect(reply.results[2]).toMatchObject({ reason: "concurrency", until: t0 + 4_000, view: { permits: 2 } })
      })
    )

    it.effect("a permit is fenced by its holder: a stale token can neither release nor renew it", () =>
      Effect.gen(function* () {
        const { define, one, acquire, release, resource } = yield* makeFixture
        yield* define({ maxConcurrent: 1 })
        yield* one(acquire("a", { holder: { jobId: "job-a", token: 2 } }))

        const staleRelease = yield* one(release("a", { holder: { jobId: "job-a", token: 1 } }))
        const staleRenew = yield* one({
          _tag: "Renew",
          resource,
          callId: "a",
          holder: { jobId: "job-a", token: 1 },
          leaseMs: 60_000
        })
        const blocked = yield* one(acquire("b"))
        const released = yield* one(release("a", { holder: { jobId: "job-a", token: 2 } }))

        expect(staleRelease._tag).toBe("NotHeld")
        expect(staleRenew._tag).toBe("NotHeld")
        expect(blocked._tag).toBe("Wait")
        expect(released).toMatchObject({ _tag: "Released", view: { permits: 0 } })
      })
    )

    it.effect("a crashed holder's permit comes back when it lapses; renewals keep a live one", () =>
      Effect.gen(function* () {
        const { define, one, acquire, advance, resource, now } = yield* makeFixture
        yield* define({ maxConcurrent: 1 })
        yield* one(acquire("crashed", { leaseMs: 1_000 }))
        yield* advance(1_000)
        const atEnd = yield* one(acquire("next"))
        yield* advance(1)
        const after = yield* one(acquire("next", { leaseMs: 2_000 }))
        yield* advance(1_500)
        const renewed = yield* one({
          _tag: "Renew",
          resource,
          callId: "next",
          holder: { jobId: "job-next", token: 1 },
          leaseMs: 2_000
        })
        yield* advance(1_000)
        const stillHeld = yield* one(acquire("third"))
        const t = yield* now

        expect(atEnd._tag).toBe("Wait")
        expect(after._tag).toBe("Granted")
        expect(renewed).toMatchObject({ _tag: "Renewed", permitUntil: t - 1_000 + 2_000 })
        expect(stillHeld).toMatchObject({ _tag: "Wait", reason: "concurrency", until: t + 1_000 })
      })
    )

    it.effect("a lapsed permit cannot be renewed, but its release still corrects the buckets once", () =>
      Effect.gen(function* () {
        const { define, apply, one, acquire, release, advance, resource } = yield* makeFixture
        yield* define({ maxConcurrent: 1, inputTokensPerMinute: 60_000 })
        yield* one(acquire("a", { leaseMs: 1_000, cost: { inputTokens: 1_000 } }))
        yield* advance(1_001)

        const renew = yield* one({
          _tag: "Renew",
          resource,
          callId: "a",
          holder: { jobId: "job-a", token: 1 },
          leaseMs: 5_000
        })
        const taken = yield* one(acquire("b", { cost: { inputTokens: 1_000 } }))
        const releases = yield* apply([release("a", { reached: false }), release("a", { reached: false })])

        expect(renew._tag).toBe("NotHeld")
        expect(taken).toMatchObject({ _tag: "Granted", view: { buckets: { inputTokens: { level: 0 } } } })
        expect(tags(releases.results)).toEqual(["Released", "NotHeld"])
        expect(releases.results[0]!.view).toMatchObject({ permits: 1, buckets: { inputTokens: { level: 1_000 } } })
      })
    )
  })

const releaseTests = (it: It) =>
  describe("release correction", () => {
    const limits = { requestsPerMinute: 600, inputTokensPerMinute: 60_000, outputTokensPerMinute: 60_000 }
    const cost = { inputTokens: 300, outputTokens: 800 }

    it.effect("a call that never reached the provider gives everything back, the request too", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, release } = yield* makeFixture
        yield* define(limits)

        const reply = yield* apply([acquire("a", { cost }), release("a", { reached: false })])

        expect(reply.results[1]!.view.buckets).toEqual({
          requests: { level: 10, capacity: 10, perMinute: 600 },
          inputTokens: { level: 1_000, capacity: 1_000, perMinute: 60_000 },
          outputTokens: { level: 1_000, capacity: 1_000, perMinute: 60_000 }
        })
      })
    )

    it.effect("reached with usage: each token bucket gets reserved - actual back, possibly negative", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, release } = yield* makeFixture
        yield* define(limits)

        const reply = yield* apply([
          acquire("a", { cost }),
          release("a", { usage: { inputTokens: 500, outputTokens: 120 } })
        ])

        expect(reply.results[1]!.view.buckets).toMatchObject({
          requests: { level: 9 },
          inputTokens: { level: 500 },
          outputTokens: { level: 880 }
        })
      })
    )

    it.effect("reached without usage: the reservation stands", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, release } = yield* makeFixture
        yield* define(limits)

        const reply = yield* apply([acquire("a", { cost }), release("a", { usage: { outputTokens: 800 } })])

        expect(reply.results[1]!.view.buckets).toMatchObject({
          requests: { level: 9 },
          inputTokens: { level: 700 },
          outputTokens: { level: 200 }
        })
      })
    )
  })

const idempotenceTests = (it: It) =>
  describe("idempotence by call id", () => {
    it.effect("a repeated Acquire returns the first grant and takes nothing more; a second Release is NotHeld", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, release, advance, read } = yield* makeFixture
        yield* define({ maxConcurrent: 1, requestsPerMinute: 60 })
        const first = yield* apply([acquire("a")])
        yield* advance(10)

        const again = yield* apply([acquire("a")])
        const releases = yield* apply([release("a"), release("a")])
        const state = yield* read()

        expect(again.results[0]).toMatchObject({
          _tag: "Granted",
          permitUntil: (first.results[0] as { permitUntil: number }).permitUntil
        })
        expect(tags(releases.results)).toEqual(["Released", "NotHeld"])
        expect(state.counters.grants).toBe(1)
        expect(state.view.buckets.requests?.level).toBeCloseTo(10 / 1_000, 9)
      })
    )
  })

const pauseTests = (it: It) =>
  describe("pause and resume", () => {
    it.effect("a pause stops every Acquire until its end; a later pause extends it, an earlier one does not", () =>
      Effect.gen(function* () {
        const { apply, one, acquire, pause, advance, now } = yield* makeFixture
        const t0 = yield* now

        const paused = yield* apply([pause("rate_limited", t0 + 2_000), acquire("a")])
        const extended = yield* one(pause("rate_limited", t0 + 5_000))
        const notShortened = yield* one(pause("rate_limited", t0 + 3_000))
        yield* advance(4_999)
        const stillPaused = yield* one(acquire("a"))

        expect(paused.results).toMatchObject([
          { _tag: "Paused", until: t0 + 2_000, kind: "rate_limited" },
          { _tag: "Paused", until: t0 + 2_000, kind: "rate_limited" }
        ])
        expect(extended).toMatchObject({ until: t0 + 5_000 })
        expect(notShortened).toMatchObject({ until: t0 + 5_000 })
        expect(stillPaused).toMatchObject({ _tag: "Paused", until: t0 + 5_000 })
      })
    )

    it.effect("a spend cap pauses until resumed, and outranks a rate limit; resume opens fully", () =>
      Effect.gen(function* () {
        const { apply, one, acquire, pause, advance, limiter, resource, now, read } = yield* makeFixture
        const t0 = yield* now

        const reply = yield* apply([pause("quota_exhausted", null), pause("rate_limited", t0 + 1_000)])
        yield* advance(86_400_000)
        const dayLater = yield* one(acquire("a"))
        const resumed = only(yield* limiter.resume({ items: [{ resource }], now: yield* now }))
        const again = only(yield* limiter.resume({ items: [{ resource }], now: yield* now }))
        const open = yield* one(acquire("a"))
        const state = yield* read()

        expect(reply.results[1]).toMatchObject({ _tag: "Paused", until: null, kind: "quota_exhausted" })
        expect(dayLater).toMatchObject({ _tag: "Paused", until: null, kind: "quota_exhausted" })
        expect(resumed).toMatchObject({ _tag: "Resumed", wasPaused: true, view: { pause: null, halfOpen: false } })
        expect(again.wasPaused).toBe(false)
        expect(open).toMatchObject({ _tag: "Granted", probe: false })
        expect(state.counters).toMatchObject({ paused: 1, pauses: { quota_exhausted: 1, rate_limited: 1, manual: 0 } })
      })
    )
  })

const halfOpenTests = (it: It) =>
  describe("half-open", () => {
    it.effect("after a rate-limit pause one probe goes; the others wait for it; its return opens the resource", () =>
      Effect.gen(function* () {
        const { apply, one, acquire, release, pause, advance, now } = yield* makeFixture
        const t0 = yield* now
        yield* one(pause("rate_limited", t0 + 2_000))
        yield* advance(2_000)

        const probing = yield* apply([acquire("probe", { leaseMs: 10_000 }), acquire("b"), acquire("c")])
        const closed = yield* apply([release("probe"), acquire("b"), acquire("c")])

        expect(probing.results[0]).toMatchObject({ _tag: "Granted", probe: true, view: { halfOpen: true } })
        expect(probing.results.slice(1)).toMatchObject([
          { _tag: "Wait", reason: "probe", until: t0 + 12_000 },
          { _tag: "Wait", reason: "probe", until: t0 + 12_000 }
        ])
        expect(closed.results.slice(1)).toMatchObject([
          { _tag: "Granted", probe: false },
          { _tag: "Granted", probe: false, view: { halfOpen: false } }
        ])
      })
    )

    it.effect("a probe that never reached the provider, or whose permit lapsed, lets the next call be the probe", () =>
      Effect.gen(function* () {
        const { apply, one, acquire, release, pause, advance, now } = yield* makeFixture
        yield* one(pause("rate_limited", yield* now))
        yield* advance(1)

        const first = yield* apply([
          acquire("p1", { leaseMs: 500 }),
          release("p1", { reached: false }),
          acquire("p2", { leaseMs: 500 })
        ])
        yield* advance(501)
        const afterLapse = yield* one(acquire("p3"))

        expect(first.results).toMatchObject([
          { _tag: "Granted", probe: true },
          { _tag: "Released", view: { halfOpen: true } },
          { _tag: "Granted", probe: true }
        ])
        expect(afterLapse).toMatchObject({ _tag: "Granted", probe: true })
      })
    )
  })

const learnedTests = (it: It) =>
  describe("learned concurrency", () => {
    it.effect("a 429 lowers the cap to the calls in flight beside it; calls that end well raise it slowly", () =>
      Effect.gen(function* () {
        const { apply, acquire, release } = yield* makeFixture
        yield* apply([acquire("a"), acquire("b"), acquire("c")])

        const lowered = yield* apply([release("c", { rateLimited: true }), acquire("d")])
        const raises: Array<LimitResult> = []
        // Two in flight fill the learned cap of 2: each call that ends well beside another counts, 20 raise it.
        for (let i = 0; i < 20; i++) {
          const round = yield* apply([release(i === 0 ? "a" : `r${i - 1}`), acquire(`r${i}`)])
          raises.push(round.results[0]!)
        }
        const raised = yield* apply([acquire("x"), acquire("y")])

        expect(lowered.results).toMatchObject([
          { _tag: "Released", view: { maxConcurrent: null, learnedConcurrent: 2, permits: 2 } },
          { _tag: "Wait", reason: "concurrency" }
        ])
        expect(raises[18]).toMatchObject({ view: { learnedConcurrent: 2 } })
        expect(raises[19]).toMatchObject({ view: { learnedConcurrent: 3 } })
        expect(raised.results).toMatchObject([
          { _tag: "Granted", view: { permits: 3 } },
          { _tag: "Wait", reason: "concurrency" }
        ])
      })
    )

    it.effect("the cap in force is the lower of the declared and the learned; reaching the declared forgets it", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, release, limiter, resource, now } = yield* makeFixture
        yield* define({ maxConcurrent: 2 })
        yield* apply([acquire("a"), acquire("b")])

        const lowered = yield* apply([
          release("b", { rateLimited: true }),
          acquire("c"),
          release("a", { reached: false, rateLimited: true })
        ])
        const rounds: Array<LimitResult> = []
        for (let i = 0; i < 10; i++) {
          const round = yield* apply([acquire(`r${i}`), release(`r${i}`)])
          rounds.push(round.results[1]!)
        }
        const { resources } = yield* limiter.read({ resources: [resource], now: yield* now })

        expect(lowered.results).toMatchObject([
          { _tag: "Released", view: { maxConcurrent: 2, learnedConcurrent: 1 } },
          { _tag: "Wait", reason: "concurrency" },
          // Never reached the provider: teaches nothing.
          { _tag: "Released", view: { learnedConcurrent: 1, permits: 0 } }
        ])
        expect(rounds[8]).toMatchObject({ view: { learnedConcurrent: 1 } })
        expect(rounds[9]).toMatchObject({ view: { maxConcurrent: 2, learnedConcurrent: null } })
        expect(resources[0]!.view).toMatchObject({ maxConcurrent: 2, learnedConcurrent: null })
      })
    )

    it.effect("a define forgets a learned cap at or above its new declared cap, and keeps one below", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, release } = yield* makeFixture
        yield* apply([acquire("a"), acquire("b"), acquire("c")])
        yield* apply([release("c", { rateLimited: true })])

        const above = yield* define({ maxConcurrent: 5 })
        const at = yield* define({ maxConcurrent: 2 })

        expect(above).toMatchObject({ view: { maxConcurrent: 5, learnedConcurrent: 2 } })
        expect(at).toMatchObject({ view: { maxConcurrent: 2, learnedConcurrent: null } })
      })
    )
  })

const shareTests = (it: It) =>
  describe("priority share", () => {
    it.effect("calls below minPriority leave the reserved share of permits and of every bucket", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, other } = yield* makeFixture
        yield* define({ maxConcurrent: 4, priorityShare: { minPriority: 1, share: 0.25 } })
        yield* define({ requestsPerMinute: 600, priorityShare: { minPriority: 2, share: 0.5 } }, other)

        const permits = yield* apply([
          acquire("l1"),
          acquire("l2"),
          acquire("l3"),
          acquire("l4"),
          acquire("h1", { priority: 1 }),
          acquire("h2", { priority: 3 })
        ])
        const requests = yield* apply([
          ...["a", "b", "c", "d", "e", "f"].map((id) => acquire(id, { resource: other, priority: 1 })),
          acquire("g", { resource: other, priority: 2 })
        ])

        expect(tags(permits.results)).toEqual(["Granted", "Granted", "Granted", "Wait", "Granted", "Wait"])
        expect(tags(requests.results)).toEqual([
          "Granted",
          "Granted",
          "Granted",
          "Granted",
          "Granted",
          "Wait",
          "Granted"
        ])
        expect(requests.results[6]!.view.priorityShare).toEqual({ minPriority: 2, share: 0.5 })
      })
    )
  })

const readTests = (it: It) =>
  describe("read", () => {
    it.effect("describes limits, live permits in order, the pause with its reason, and counters", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, advance, read, resource, now } = yield* makeFixture
        yield* define({ maxConcurrent: 3, requestsPerMinute: 600, burstSeconds: 2 })
        const t0 = yield* now
        yield* apply([
          acquire("late", { leaseMs: 5_000, tenant: "tenant-a", priority: 2 }),
          acquire("early", { leaseMs: 1_000 }),
          acquire("gone", { leaseMs: 10 }),
          acquire("over"),
          { _tag: "Pause", resource, kind: "manual", until: t0 + 60_000, reason: "provider maintenance" }
        ])
        yield* advance(100)

        const state = yield* read()

        expect(state).toMatchObject({
          resource,
          limits: { maxConcurrent: 3, requestsPerMinute: 600, burstSeconds: 2 },
          pause: { kind: "manual", until: t0 + 60_000, reason: "provider maintenance", since: t0 },
          counters: {
            grants: 3,
            waits: { concurrency: 1, requests: 0, inputTokens: 0, outputTokens: 0, probe: 0 },
            paused: 0,
            pauses: { manual: 1, rate_limited: 0, quota_exhausted: 0 }
          }
        })
        expect(state.permits).toEqual([
          {
            callId: "early",
            holder: { jobId: "job-early", token: 1 },
            tenant: null,
            priority: 0,
            permitUntil: t0 + 1_000,
            probe: false
          },
          {
            callId: "late",
            holder: { jobId: "job-late", token: 1 },
            tenant: "tenant-a",
            priority: 2,
            permitUntil: t0 + 5_000,
            probe: false
          }
        ])
        expect(state.view).toEqual({
          permits: 2,
          maxConcurrent: 3,
          learnedConcurrent: null,
          buckets: { requests: { level: 18, capacity: 20, perMinute: 600 }, inputTokens: null, outputTokens: null },
          priorityShare: null,
          pause: { kind: "manual", until: t0 + 60_000 },
          halfOpen: false
        })
      })
    )

    it.effect("a resource no write named reads as unlimited; every resource a write named is listed", () =>
      Effect.gen(function* () {
        const { limiter, one, acquire, resource, other, now } = yield* makeFixture
        const unknown = `conf:${factory.uniqueName("never")}:key`
        yield* one(acquire("a"))
        yield* limiter.resume({ items: [{ resource: other }], now: yield* now })

        const named = yield* limiter.read({ resources: [unknown], now: yield* now })
        const all = yield* limiter.read({ now: yield* now })

        expect(named.resources).toEqual([
          {
            resource: unknown,
            limits: {},
            view: {
              permits: 0,
              maxConcurrent: null,
              learnedConcurrent: null,
              buckets: { requests: null, inputTokens: null, outputTokens: null },
              priorityShare: null,
              pause: null,
              halfOpen: false
            },
            pause: null,
            permits: [],
            counters: {
              grants: 0,
              waits: { concurrency: 0, requests: 0, inputTokens: 0, outputTokens: 0, probe: 0 },
              paused: 0,
              pauses: { rate_limited: 0, quota_exhausted: 0, manual: 0 }
            }
          }
        ])
        const names = all.resources.map((state) => state.resource)
        expect(names).toContain(resource)
        expect(names).toContain(other)
        expect(names).not.toContain(unknown)
        expect(names).toEqual([...names].sort())
      })
    )
  })

const batchTests = (it: It) =>
  describe("batches, store time and bad input", () => {
    it.effect("items apply in order across resources, each seeing the writes before it", () =>
      Effect.gen(function* () {
        const { define, apply, acquire, release, other } = yield* makeFixture
        yield* define({ maxConcurrent: 1 })
        yield* define({ maxConcurrent: 1 }, other)

        const reply = yield* apply([
          acquire("a"),
          acquire("x", { resource: other }),
          acquire("b"),
          release("a"),
          acquire("b"),
          acquire("y", { resource: other })
        ])

        expect(tags(reply.results)).toEqual(["Granted", "Granted", "Wait", "Released", "Granted", "Wait"])
      })
    )

    it.effect("without `now` the backend's own clock is store time, and the reply says which", () =>
      Effect.gen(function* () {
        const { limiter, resource } = yield* makeFixture

        const reply = yield* limiter.apply({
          items: [
            {
              _tag: "Acquire",
              resource,
              callId: "own-clock",
              holder: { jobId: "job", token: 1 },
              leaseMs: 7_000
            }
          ]
        })

        expect(reply.results[0]).toMatchObject({ _tag: "Granted", permitUntil: reply.now + 7_000 })
      })
    )

    it.effect("bad input fails the whole call with InvalidInput and writes nothing", () =>
      Effect.gen(function* () {
        const { limiter, define, acquire, read, resource, now } = yield* makeFixture
        yield* define({ maxConcurrent: 1 })
        const t = yield* now

        const badItem = yield* Effect.flip(
          limiter.apply({ items: [acquire("a"), acquire("b", { cost: { inputTokens: Number.NaN } })], now: t })
        )
        const badResource = yield* Effect.flip(
          limiter.apply({ items: [acquire("a"), acquire("b", { resource: "not a resource" })], now: t })
        )
        const badLimits = yield* Effect.flip(
          limiter.define({
            items: [
              { resource, limits: { maxConcurrent: 5 } },
              { resource, limits: { requestsPerMinute: -1 } }
            ],
            now: t
          })
        )
        const badResume = yield* Effect.flip(limiter.resume({ items: [{ resource: "" }], now: t }))
        const state = yield* read()

        expect(badItem).toBeInstanceOf(InvalidInput)
        expect(badItem).toMatchObject({ path: "items[1].cost.inputTokens" })
        expect(badResource).toMatchObject({ _tag: "InvalidInput", path: "items[1].resource" })
        expect(badLimits).toMatchObject({ _tag: "InvalidInput", path: "items[1].limits.requestsPerMinute" })
        expect(badResume).toMatchObject({ _tag: "InvalidInput", path: "items[0].resource" })
        expect(state.limits).toEqual({ maxConcurrent: 1 })
        expect(state.permits).toEqual([])
        expect(state.counters.grants).toBe(0)
      })
    )
  })

const racingTests = (it: It) =>
  describe("racing callers", () => {
    it.effect("16 concurrent Acquires of one resource with maxConcurrent 4: exactly 4 granted", () =>
      Effect.gen(function* () {
        const { limiter, define, acquire, read, now } = yield* makeFixture
        yield* define({ maxConcurrent: 4 })
        const t = yield* now

        const results = yield* Effect.all(
          Array.from({ length: 16 }, (_, i) => Effect.map(limiter.apply({ items: [acquire(`c${i}`)], now: t }), only)),
          { concurrency: "unbounded" }
        )
        const state = yield* read()

        expect(results.filter((r) => r._tag === "Granted")).toHaveLength(4)
        expect(results.filter((r) => r._tag === "Wait")).toHaveLength(12)
        expect(state.permits).toHaveLength(4)
        expect(state.counters).toMatchObject({ grants: 4, waits: { concurrency: 12 } })
      })
    )

    it.effect("racing releases of one permit: exactly one Released, and the buckets corrected once", () =>
      Effect.gen(function* () {
        const { limiter, define, one, acquire, release, read, now } = yield* makeFixture
        yield* define({ inputTokensPerMinute: 60_000 })
        yield* one(acquire("a", { cost: { inputTokens: 900 } }))
        const t = yield* now

        const results = yield* Effect.all(
          Array.from({ length: 8 }, () =>
            Effect.map(limiter.apply({ items: [release("a", { usage: { inputTokens: 100 } })], now: t }), only)
          ),
          { concurrency: "unbounded" }
        )
        const state = yield* read()

        expect(results.filter((r) => r._tag === "Released")).toHaveLength(1)
        expect(state.view.buckets.inputTokens?.level).toBe(900)
      })
    )
  })

const sharedTests = (it: It, options: LimiterConformanceOptions) =>
  describe("shared state", () => {
    it.effect("two builds of the backend keep one concurrency cap and one pause", () =>
      Effect.gen(function* () {
        const { define, one, acquire, pause, now } = yield* makeFixture
        yield* define({ maxConcurrent: 1 })
        const t = yield* now
        yield* one(acquire("first"))
        yield* one(pause("rate_limited", t + 5_000))

        const second = yield* Effect.scoped(
          Effect.gen(function* () {
            const context = yield* Layer.build(options.layer)
            const otherInstance = Context.get(context, Limiter)
            return only(yield* otherInstance.apply({ items: [acquire("second")], now: t + 1 }))
          })
        )

        expect(second).toMatchObject({ _tag: "Paused", until: t + 5_000, view: { permits: 1 } })
      })
    )
  })

/**
 * Registers the Limiter conformance suite (vitest `describe`/`it` blocks) for one backend under one layer.
 *
 * @since 0.4.0
 * @category testing
 */
export const LimiterConformance = (options: LimiterConformanceOptions): void => {
  const notRun: Array<string> = []
  layer(options.layer)(`LimiterConformance: ${options.name}`, (it) => {
    bucketTests(it)
    permitTests(it)
    releaseTests(it)
    idempotenceTests(it)
    pauseTests(it)
    halfOpenTests(it)
    learnedTests(it)
    shareTests(it)
    readTests(it)
    batchTests(it)
    if (options.capabilities.concurrent) racingTests(it)
    else notRun.push("racing callers (not concurrent)")
    if (options.capabilities.sharedState) sharedTests(it, options)
    else notRun.push("shared state (one instance per build)")
    if (notRun.length > 0) console.info(`[LimiterConformance: ${options.name}] not run: ${notRun.join("; ")}`)
  })
}
