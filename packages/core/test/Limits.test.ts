/**
 * Every exported rule of `Limits.ts`, with its boundary times. States are built with the rules themselves (`define`,
 * `applyItem`) from `Limits.empty`, so each test reads as a short history of one resource.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Acquire, LimitItem, LimitResult, Limits as LimitsType, Release } from "../src/Limiter.js"
import * as Limits from "../src/Limits.js"

const T0 = 1_000_000
const R = "openai:gpt-4.1:key-a"

const acquire = (callId: string, extra: Partial<Acquire> = {}): Acquire => ({
  _tag: "Acquire",
  resource: R,
  callId,
  holder: { jobId: `job-${callId}`, token: 1 },
  leaseMs: 10_000,
  ...extra
})

const release = (callId: string, extra: Partial<Release> = {}): Release => ({
  _tag: "Release",
  resource: R,
  callId,
  holder: { jobId: `job-${callId}`, token: 1 },
  reached: true,
  ...extra
})

/** Applies items one after another at `now`, returning the last state and every result. */
const run = (
  state: Limits.LimitState,
  items: ReadonlyArray<LimitItem>,
  now: number
): { readonly state: Limits.LimitState; readonly results: Array<LimitResult> } => {
  const results: Array<LimitResult> = []
  let s = state
  for (const item of items) {
    const step = Limits.applyItem(s, item, now)
    s = step.state
    results.push(step.result)
  }
  return { state: s, results }
}

const defined = (limits: LimitsType, now = T0) => Limits.define(Limits.empty, limits, now)

const only = (outcome: { readonly results: Array<LimitResult> }): LimitResult => {
  expect(outcome.results).toHaveLength(1)
  return outcome.results[0]!
}

describe("Limits.capacity and levelAt", () => {
  it("holds one second's worth by default, at least 1, and burstSeconds' worth when given", () => {
    expect(Limits.capacity({}, 600)).toBe(10)
    expect(Limits.capacity({}, 30)).toBe(1)
    expect(Limits.capacity({ burstSeconds: 6 }, 600)).toBe(60)
  })

  it("refills continuously at limit / 60000 per ms up to the capacity, and not at all when time stands or goes back", () => {
    const bucket = { level: 2, at: T0 }

    expect(Limits.levelAt(bucket, 600, 10, T0 + 100)).toBe(3)
    expect(Limits.levelAt(bucket, 600, 10, T0 + 60_000)).toBe(10)
    expect(Limits.levelAt(bucket, 600, 10, T0)).toBe(2)
    expect(Limits.levelAt(bucket, 600, 10, T0 - 500)).toBe(2)
    expect(Limits.levelAt({ level: -5, at: T0 }, 600, 10, T0 + 200)).toBe(-3)
  })
})

describe("Limits.define", () => {
  it("starts a new dimension full and drops the bucket of a dimension that loses its limit", () => {
    const first = defined({ requestsPerMinute: 600, inputTokensPerMinute: 60_000 })
    const second = Limits.define(first, { requestsPerMinute: 600 }, T0 + 10)

    expect(first.buckets).toEqual({
      requests: { level: 10, at: T0 },
      inputTokens: { level: 1_000, at: T0 },
      outputTokens: null
    })
    expect(second.buckets.inputTokens).toBeNull()
    expect(second.limits).toEqual({ requestsPerMinute: 600 })
  })

  it("keeps the level refilled under the old limit, clamped to the new capacity", () => {
    const drained = run(defined({ requestsPerMinute: 600 }), [acquire("a", { cost: { requests: 10 } })], T0).state
    const raised = Limits.define(drained, { requestsPerMinute: 6_000 }, T0 + 200)
    const lowered = Limits.define(defined({ requestsPerMinute: 600 }), { requestsPerMinute: 120 }, T0 + 1)

    expect(drained.buckets.requests).toEqual({ level: 0, at: T0 })
    // 200 ms at the old 10/s is 2 requests; the new capacity (100) does not clamp it.
    expect(raised.buckets.requests).toEqual({ level: 2, at: T0 + 200 })
    // A full bucket of 10 under a new capacity of 2.
    expect(lowered.buckets.requests).toEqual({ level: 2, at: T0 + 1 })
  })

  it("stores only the fields that are set, and keeps permits and counters", () => {
    const held = run(defined({ maxConcurrent: 2 }), [acquire("a")], T0).state
    const redefined = Limits.define(held, { maxConcurrent: 3, requestsPerMinute: undefined }, T0 + 1)

    expect(redefined.limits).toEqual({ maxConcurrent: 3 })
    expect(Object.keys(redefined.limits)).toEqual(["maxConcurrent"])
    expect(redefined.permits).toHaveLength(1)
    expect(redefined.counters.grants).toBe(1)
  })
})

describe("Limits.admission through Acquire", () => {
  it("grants while live permits stay below maxConcurrent, then waits until the earliest permit's end", () => {
    const outcome = run(
      defined({ maxConcurrent: 2 }),
      [acquire("a", { leaseMs: 5_000 }), acquire("b", { leaseMs: 3_000 }), acquire("c")],
      T0
    )

    expect(outcome.results.map((r) => r._tag)).toEqual(["Granted", "Granted", "Wait"])
    expect(outcome.results[2]).toMatchObject({ reason: "concurrency", until: T0 + 3_000, view: { permits: 2 } })
  })

  it("counts a permit live through its end and frees its slot just after", () => {
    const held = run(defined({ maxConcurrent: 1 }), [acquire("a", { leaseMs: 1_000 })], T0).state

    expect(only(run(held, [acquire("b")], T0 + 1_000))._tag).toBe("Wait")
    expect(only(run(held, [acquire("b")], T0 + 1_000.5))._tag).toBe("Granted")
  })

  it("takes the cost from every bucket and waits for the refill of what is missing", () => {
    const limits = { requestsPerMinute: 600, inputTokensPerMinute: 60_000, outputTokensPerMinute: 6_000 }
    const first = run(defined(limits), [acquire("a", { cost: { inputTokens: 400, outputTokens: 100 } })], T0)
    const second = run(first.state, [acquire("b", { cost: { inputTokens: 700, outputTokens: 10 } })], T0)

    expect(only(first).view?.buckets).toEqual({
      requests: { level: 9, capacity: 10, perMinute: 600 },
      inputTokens: { level: 600, capacity: 1_000, perMinute: 60_000 },
      outputTokens: { level: 0, capacity: 100, perMinute: 6_000 }
    })
    // Input lacks 100 tokens (100 ms at 1/ms), output lacks 10 (100 ms at 0.1/ms): the first missing names it.
    expect(only(second)).toMatchObject({ _tag: "Wait", reason: "inputTokens", until: T0 + 100 })
    expect(second.state.buckets).toEqual(first.state.buckets)
  })

  it("reports the latest of the missing dimensions' refill times", () => {
    const limits = { requestsPerMinute: 60, outputTokensPerMinute: 600 }
    const drained = run(defined(limits), [acquire("a", { cost: { outputTokens: 10 } })], T0).state
    const waiting = only(run(drained, [acquire("b", { cost: { outputTokens: 10 } })], T0 + 500))

    // Requests: 0.5 of 1 after 500 ms, 1 at T0 + 1000. Output: 5 of 10 after 500 ms, the 10 asked for at T0 + 1000
    // too. The reason is the first dimension without room, the time the latest.
    expect(waiting).toMatchObject({ _tag: "Wait", reason: "requests", until: T0 + 1_000 })
  })

  it("admits a call larger than the bucket when the bucket is full, leaving debt that delays the next", () => {
    const outcome = run(
      defined({ inputTokensPerMinute: 60_000 }),
      [acquire("big", { cost: { inputTokens: 3_000 } }), acquire("next", { cost: { inputTokens: 1 } })],
      T0
    )
    const later = only(run(outcome.state, [acquire("late", { cost: { inputTokens: 5_000 } })], T0 + 2_999))

    expect(outcome.results[0]?._tag).toBe("Granted")
    expect(outcome.state.buckets.inputTokens).toEqual({ level: -2_000, at: T0 })
    expect(outcome.results[1]).toMatchObject({ _tag: "Wait", reason: "inputTokens", until: T0 + 2_001 })
    // The oversized call needs a full bucket: -2000 + 2999 = 999 of 1000.
    expect(later).toMatchObject({ _tag: "Wait", until: T0 + 3_000 })
  })

  it("does not check a bucket the call takes nothing from, even in debt", () => {
    const indebted = run(
      defined({ inputTokensPerMinute: 60_000 }),
      [acquire("a", { cost: { inputTokens: 5_000 } })],
      T0
    )

    expect(only(run(indebted.state, [acquire("b", { cost: { inputTokens: 0 } })], T0))._tag).toBe("Granted")
  })

  it("keeps the priority share for important calls: in every bucket and in the concurrency cap", () => {
    const limits = {
      maxConcurrent: 4,
      requestsPerMinute: 600,
      priorityShare: { minPriority: 1, share: 0.25 }
    }
    const low = (id: string) => acquire(id, { priority: 0 })
    const high = (id: string) => acquire(id, { priority: 1 })
    const outcome = run(defined(limits), [low("l1"), low("l2"), low("l3"), low("l4"), high("h1"), high("h2")], T0)

    // Low calls may hold 3 of the 4 permits; the fourth is the reserved one, and a high call takes it.
    expect(outcome.results.map((r) => r._tag)).toEqual(["Granted", "Granted", "Granted", "Wait", "Granted", "Wait"])
    expect(outcome.results[3]).toMatchObject({ reason: "concurrency" })

    const buckets = run(defined({ requestsPerMinute: 600, priorityShare: { minPriority: 5, share: 0.5 } }), [], T0)
    const lows = run(buckets.state, ["a", "b", "c", "d", "e", "f"].map(low), T0)
    const highs = run(
      lows.state,
      ["g", "h", "i", "j", "k", "l"].map((id) => acquire(id, { priority: 5 })),
      T0
    )

    // Low calls leave half of the 10 requests; high calls may use them.
    expect(lows.results.map((r) => r._tag)).toEqual(["Granted", "Granted", "Granted", "Granted", "Granted", "Wait"])
    expect(lows.results[5]).toMatchObject({ reason: "requests", until: T0 + 100 })
    expect(highs.results.map((r) => r._tag)).toEqual(["Granted", "Granted", "Granted", "Granted", "Granted", "Wait"])
  })

  it("returns the existing grant for a repeated Acquire of the same call and holder, taking nothing more", () => {
    const first = run(defined({ requestsPerMinute: 600, maxConcurrent: 1 }), [acquire("a")], T0)
    const again = run(first.state, [acquire("a")], T0 + 5)
    const otherHolder = run(first.state, [acquire("a", { holder: { jobId: "job-a", token: 2 } })], T0 + 5)

    expect(only(again)).toMatchObject({ _tag: "Granted", permitUntil: T0 + 10_000, probe: false })
    expect(again.state.buckets).toEqual(first.state.buckets)
    expect(again.state.counters.grants).toBe(1)
    expect(only(otherHolder)).toMatchObject({ _tag: "Wait", reason: "concurrency" })
  })

  it("counts grants and waits by reason", () => {
    const outcome = run(defined({ maxConcurrent: 1 }), [acquire("a"), acquire("b"), acquire("c")], T0)

    expect(outcome.state.counters.grants).toBe(1)
    expect(outcome.state.counters.waits).toEqual({
      concurrency: 2,
      requests: 0,
      inputTokens: 0,
      outputTokens: 0,
      probe: 0
    })
  })
})

describe("Limits: release correction", () => {
  const tokens = { requestsPerMinute: 600, inputTokensPerMinute: 60_000, outputTokensPerMinute: 60_000 }
  const reserved = () =>
    run(defined(tokens), [acquire("a", { cost: { inputTokens: 500, outputTokens: 800 } })], T0).state

  it("gives the whole reservation back, request included, when the call never reached the provider", () => {
    const outcome = run(reserved(), [release("a", { reached: false })], T0)

    expect(only(outcome)._tag).toBe("Released")
    expect(outcome.state.buckets).toEqual(defined(tokens).buckets)
    expect(outcome.state.permits).toEqual([])
  })

  it("gives back reserved - actual per token dimension once reached, and nothing for the request", () => {
    const outcome = run(reserved(), [release("a", { usage: { inputTokens: 450, outputTokens: 100 } })], T0)

    expect(outcome.state.buckets).toEqual({
      requests: { level: 9, at: T0 },
      inputTokens: { level: 550, at: T0 },
      outputTokens: { level: 900, at: T0 }
    })
  })

  it("takes more when the call used more than it reserved (debt), and nothing back when usage is unknown", () => {
    const over = run(reserved(), [release("a", { usage: { inputTokens: 1_600 } })], T0)

    expect(over.state.buckets.inputTokens).toEqual({ level: -600, at: T0 })
    expect(over.state.buckets.outputTokens).toEqual({ level: 200, at: T0 })
  })

  it("never fills a bucket above its capacity", () => {
    const outcome = run(reserved(), [release("a", { reached: false })], T0 + 60_000)

    expect(outcome.state.buckets.inputTokens).toEqual({ level: 1_000, at: T0 + 60_000 })
  })

  it("frees the permit only for its exact holder, and a second release changes nothing", () => {
    const stale = run(reserved(), [release("a", { holder: { jobId: "job-a", token: 0 }, reached: false })], T0)
    const twice = run(reserved(), [release("a", { reached: false }), release("a", { reached: false })], T0)

    expect(only(stale)._tag).toBe("NotHeld")
    expect(stale.state.permits).toHaveLength(1)
    expect(stale.state.buckets).toEqual(reserved().buckets)
    expect(twice.results.map((r) => r._tag)).toEqual(["Released", "NotHeld"])
    expect(twice.state.buckets).toEqual(defined(tokens).buckets)
  })

  it("corrects the buckets once for a permit that lapsed, until it is forgotten", () => {
    const lapsed = run(reserved(), [release("a", { reached: false })], T0 + 20_000)
    const forgotten = run(
      reserved(),
      [release("a", { reached: false })],
      T0 + 10_000 + Limits.defaults.permitRetentionMs + 1
    )

    expect(only(lapsed)._tag).toBe("Released")
    expect(only(forgotten)._tag).toBe("NotHeld")
  })
})

describe("Limits: permits expire and renew", () => {
  it("gives a lapsed permit's slot back to the next Acquire", () => {
    const held = run(defined({ maxConcurrent: 1 }), [acquire("a", { leaseMs: 1_000 })], T0).state

    expect(only(run(held, [acquire("b")], T0 + 1_001))._tag).toBe("Granted")
  })

  it("renews only the exact holder's live permit, and never a lapsed one", () => {
    const held = run(defined({ maxConcurrent: 1 }), [acquire("a", { leaseMs: 1_000 })], T0).state
    const renew = (holderToken: number, now: number) =>
      only(
        run(
          held,
          [
            {
              _tag: "Renew",
              resource: R,
              callId: "a",
              holder: { jobId: "job-a", token: holderToken },
              leaseMs: 5_000
            }
          ],
          now
        )
      )

    expect(renew(1, T0 + 1_000)).toMatchObject({ _tag: "Renewed", permitUntil: T0 + 6_000 })
    expect(renew(2, T0 + 500)._tag).toBe("NotHeld")
    expect(renew(1, T0 + 1_001)._tag).toBe("NotHeld")
  })
})

describe("Limits: pause and half-open", () => {
  const pause = (kind: "rate_limited" | "quota_exhausted" | "manual", until: number | null): LimitItem => ({
    _tag: "Pause",
    resource: R,
    kind,
    until,
    reason: `${kind} seen`
  })

  it("answers Paused while the pause is in force, taking nothing and counting it", () => {
    const outcome = run(defined({ requestsPerMinute: 600 }), [pause("rate_limited", T0 + 2_000), acquire("a")], T0)

    expect(outcome.results[1]).toMatchObject({ _tag: "Paused", until: T0 + 2_000, kind: "rate_limited" })
    expect(outcome.state.buckets.requests).toEqual({ level: 10, at: T0 })
    expect(outcome.state.counters).toMatchObject({ paused: 1, pauses: { rate_limited: 1 } })
  })

  it("admits one probe once the pause ends, makes the others wait for it, and opens when it returns", () => {
    const paused = run(defined({}), [pause("rate_limited", T0 + 2_000)], T0).state
    const probing = run(paused, [acquire("probe", { leaseMs: 4_000 }), acquire("other")], T0 + 2_000)
    const closed = run(probing.state, [release("probe"), acquire("other")], T0 + 2_500)

    expect(probing.results[0]).toMatchObject({ _tag: "Granted", probe: true, view: { halfOpen: true, pause: null } })
    expect(probing.results[1]).toMatchObject({ _tag: "Wait", reason: "probe", until: T0 + 6_000 })
    expect(closed.results[1]).toMatchObject({ _tag: "Granted", probe: false, view: { halfOpen: false } })
  })

  it("stays half-open when the probe never reached the provider, and when its permit lapses", () => {
    const paused = run(defined({}), [pause("rate_limited", T0)], T0).state
    const probing = run(paused, [acquire("p1", { leaseMs: 1_000 })], T0 + 1)
    const unreached = run(probing.state, [release("p1", { reached: false }), acquire("p2")], T0 + 2)
    const lapsed = run(probing.state, [acquire("p3")], T0 + 1_002)

    expect(unreached.results[1]).toMatchObject({ _tag: "Granted", probe: true })
    expect(lapsed.results[0]).toMatchObject({ _tag: "Granted", probe: true })
  })

  it("keeps the pause that ends later; one without an end wins; rate_limited yields at the same end", () => {
    const at = (kind: "rate_limited" | "quota_exhausted" | "manual", until: number | null, since = T0) => ({
      kind,
      until,
      reason: kind,
      since
    })

    expect(Limits.mergePause(null, at("manual", null))).toEqual(at("manual", null))
    expect(Limits.mergePause(at("rate_limited", T0 + 5), at("rate_limited", T0 + 9, T0 + 1))).toEqual(
      at("rate_limited", T0 + 9, T0 + 1)
    )
    expect(Limits.mergePause(at("rate_limited", T0 + 9), at("rate_limited", T0 + 5, T0 + 1))).toEqual(
      at("rate_limited", T0 + 9)
    )
    expect(Limits.mergePause(at("quota_exhausted", null), at("rate_limited", T0 + 9))).toEqual(
      at("quota_exhausted", null)
    )
    expect(Limits.mergePause(at("manual", T0 + 9), at("rate_limited", T0 + 9, T0 + 1))).toEqual(at("manual", T0 + 9))
    expect(Limits.mergePause(at("rate_limited", T0 + 9), at("manual", T0 + 9, T0 + 1))).toEqual(
      at("manual", T0 + 9, T0 + 1)
    )
    expect(Limits.mergePause(at("manual", null), at("quota_exhausted", null, T0 + 1))).toEqual(
      at("quota_exhausted", null, T0 + 1)
    )
  })

  it("pauses a quota until resumed; resume opens fully and says whether it was paused", () => {
    const paused = run(defined({}), [pause("quota_exhausted", null)], T0).state
    const stillPaused = only(run(paused, [acquire("a")], T0 + 86_400_000))
    const resumed = Limits.resume(paused, T0 + 1)
    const again = Limits.resume(resumed.state, T0 + 2)

    expect(stillPaused).toMatchObject({ _tag: "Paused", until: null, kind: "quota_exhausted" })
    expect(resumed.wasPaused).toBe(true)
    expect(resumed.state.pause).toBeNull()
    expect(resumed.state.halfOpen).toBe(false)
    expect(again.wasPaused).toBe(false)
    expect(only(run(resumed.state, [acquire("b")], T0 + 3))).toMatchObject({ _tag: "Granted", probe: false })
  })

  it("a new pause ends a half-open state; its own end makes the resource half-open again", () => {
    const halfOpen = Limits.advance(run(defined({}), [pause("rate_limited", T0 + 1)], T0).state, T0 + 1)
    const repaused = run(halfOpen, [pause("rate_limited", T0 + 10)], T0 + 1).state

    expect(halfOpen.halfOpen).toBe(true)
    expect(repaused.halfOpen).toBe(false)
    expect(Limits.view(repaused, T0 + 10)).toMatchObject({ pause: null, halfOpen: true })
  })
})

describe("Limits.learn: the concurrency cap learned from 429s", () => {
  const grant = (state: Limits.LimitState, ids: ReadonlyArray<string>, now = T0) =>
    run(
      state,
      ids.map((id) => acquire(id)),
      now
    ).state

  it("lowers the cap to the calls still in flight beside a refused one, at least 1, with none declared", () => {
    const four = grant(defined({}), ["a", "b", "c", "d"])
    const first = run(four, [release("c", { rateLimited: true })], T0 + 1)
    const second = run(first.state, [release("d", { rateLimited: true }), acquire("e")], T0 + 2)
    const alone = run(grant(defined({}), ["x"]), [release("x", { rateLimited: true })], T0 + 1)

    expect(only(first)).toMatchObject({ _tag: "Released", view: { maxConcurrent: null, learnedConcurrent: 3 } })
    expect(second.state.learned).toEqual({ maxConcurrent: 2, successes: 0 })
    expect(second.results[1]).toMatchObject({ _tag: "Wait", reason: "concurrency", until: T0 + 10_000 })
    expect(alone.state.learned).toEqual({ maxConcurrent: 1, successes: 0 })
  })

  it("never raises the cap on a 429, and learns nothing from a call that never reached the provider", () => {
    const lowered = run(grant(defined({}), ["a", "b"]), [release("b", { rateLimited: true })], T0 + 1).state
    const more = grant(lowered, [], T0 + 2)
    const lapsedBeside = run(
      grant(more, ["c"], T0 + 20_000),
      [release("a", { rateLimited: true }), release("c", { reached: false, rateLimited: true })],
      T0 + 20_001
    )

    expect(lowered.learned).toEqual({ maxConcurrent: 1, successes: 0 })
    // `a` had lapsed: `c` alone was in flight beside it, and min(1, 1) keeps the cap; the unreached one teaches nothing.
    expect(lapsedBeside.state.learned).toEqual({ maxConcurrent: 1, successes: 0 })
  })

  it("raises the cap by one after raiseAfter * cap calls ended well with the cap in use, and only then", () => {
    let state = run(grant(defined({}), ["a", "b"]), [release("b", { rateLimited: true })], T0 + 1).state
    state = run(state, [release("a")], T0 + 2).state
    expect(state.learned).toEqual({ maxConcurrent: 1, successes: 1 })
    for (let i = 1; i < Limits.defaults.raiseAfter; i++) {
      state = run(state, [acquire(`c${i}`), release(`c${i}`)], T0 + 10 + i).state
    }
    expect(state.learned).toEqual({ maxConcurrent: 2, successes: 0 })
    // One call at a time no longer fills a cap of two: nothing counts.
    state = run(state, [acquire("d"), release("d")], T0 + 100).state
    expect(state.learned).toEqual({ maxConcurrent: 2, successes: 0 })
    state = run(state, [acquire("e"), acquire("f"), release("e")], T0 + 101).state
    expect(state.learned).toEqual({ maxConcurrent: 2, successes: 1 })
  })

  it("keeps the cap in force at the lower of the declared and the learned; forgets it at the declared cap", () => {
    const declared = grant(defined({ maxConcurrent: 4 }), ["a", "b", "c", "d"])
    const lowered = run(declared, [release("d", { rateLimited: true })], T0 + 1)
    // Three in flight at a declared cap of 4: the cap in force is 3, so a third call beside two waits.
    const wait = run(lowered.state, [release("c"), acquire("e"), acquire("f")], T0 + 2)
    const full = run(grant(defined({ maxConcurrent: 2 }), ["a", "b"]), [release("b", { rateLimited: true })], T0)
    const highRefused = run(grant(defined({ maxConcurrent: 2 }), ["a", "b"]), [release("a", { rateLimited: true })], T0)

    expect(only(lowered)).toMatchObject({ view: { maxConcurrent: 4, learnedConcurrent: 3 } })
    expect(wait.results[1]).toMatchObject({ _tag: "Granted" })
    expect(wait.results[2]).toMatchObject({ _tag: "Wait", reason: "concurrency" })
    expect(full.state.learned).toEqual({ maxConcurrent: 1, successes: 0 })
    expect(highRefused.state.learned).toEqual({ maxConcurrent: 1, successes: 0 })
    let raised = full.state
    for (let i = 0; i < Limits.defaults.raiseAfter; i++) raised = run(raised, [release("a")], T0 + 1).state
    expect(raised.learned).toEqual({ maxConcurrent: 1, successes: 1 })
    for (let i = 0; i < Limits.defaults.raiseAfter; i++) {
      raised = run(raised, [acquire(`r${i}`), release(`r${i}`)], T0 + 2 + i).state
    }
    expect(raised.learned).toBeNull()
    expect(Limits.view(raised, T0 + 100)).toMatchObject({ maxConcurrent: 2, learnedConcurrent: null })
  })

  it("a define keeps the learned cap below its new declared cap and forgets it at or above", () => {
    const learned = run(grant(defined({}), ["a", "b", "c"]), [release("c", { rateLimited: true })], T0 + 1).state

    expect(Limits.define(learned, { maxConcurrent: 5 }, T0 + 2).learned).toEqual({ maxConcurrent: 2, successes: 0 })
    expect(Limits.define(learned, { requestsPerMinute: 60 }, T0 + 2).learned).toEqual({
      maxConcurrent: 2,
      successes: 0
    })
    expect(Limits.define(learned, { maxConcurrent: 2 }, T0 + 2).learned).toBeNull()
  })

  it("a probe after a 429 waits for a free slot under the learned cap", () => {
    const pause: LimitItem = { _tag: "Pause", resource: R, kind: "rate_limited", until: T0 + 1_000, reason: "429" }
    const refused = run(grant(defined({}), ["a", "b"]), [pause, release("b", { rateLimited: true })], T0 + 1)
    const after = run(refused.state, [acquire("probe")], T0 + 1_000)
    const freed = run(after.state, [release("a"), acquire("probe")], T0 + 1_500)

    expect(after.results[0]).toMatchObject({ _tag: "Wait", reason: "concurrency", view: { halfOpen: true } })
    expect(freed.results[1]).toMatchObject({ _tag: "Granted", probe: true })
  })
})

describe("Limits.advance, view and describe", () => {
  it("forgets permits retention after their end, and only then", () => {
    const held = run(defined({}), [acquire("a", { leaseMs: 1_000 })], T0).state
    const edge = T0 + 1_000 + Limits.defaults.permitRetentionMs

    expect(Limits.advance(held, edge).permits).toHaveLength(1)
    expect(Limits.advance(held, edge + 0.001).permits).toHaveLength(0)
  })

  it("describes live permits in order, with the pause in force and the counters", () => {
    const state = run(
      defined({ maxConcurrent: 5 }),
      [
        acquire("b", { leaseMs: 2_000, tenant: "t1", priority: 3 }),
        acquire("a", { leaseMs: 2_000 }),
        acquire("c", { leaseMs: 1_000 }),
        acquire("gone", { leaseMs: 1 }),
        { _tag: "Pause", resource: R, kind: "manual", until: T0 + 9_000, reason: "maintenance" }
      ],
      T0
    ).state
    const described = Limits.describe(R, state, T0 + 10)

    expect(described.permits.map((p) => p.callId)).toEqual(["c", "a", "b"])
    expect(described.permits[2]).toEqual({
      callId: "b",
      holder: { jobId: "job-b", token: 1 },
      tenant: "t1",
      priority: 3,
      permitUntil: T0 + 2_000,
      probe: false
    })
    expect(described.pause).toEqual({ kind: "manual", until: T0 + 9_000, reason: "maintenance", since: T0 })
    expect(described.view).toMatchObject({ permits: 3, maxConcurrent: 5, pause: { kind: "manual" } })
    expect(described.counters.grants).toBe(4)
    expect(Limits.describe(R, state, T0 + 9_000).pause).toBeNull()
  })
})

describe("Limits: input checks", () => {
  it("accepts the resource ids of the form provider:model:credential and rejects others", () => {
    expect(Limits.isResource("openai:gpt-4.1:key-a")).toBe(true)
    expect(Limits.isResource("anthropic/claude@org+ws_1.x")).toBe(true)
    expect(Limits.isResource("")).toBe(false)
    expect(Limits.isResource("a b")).toBe(false)
    expect(Limits.isResource("x".repeat(201))).toBe(false)
    expect(Limits.isResource("{tag}")).toBe(false)
  })

  it("rejects negative, zero, fractional or non-finite limits with the path of the field", () => {
    const problem = (limits: LimitsType) => Limits.checkDefine({ items: [{ resource: R, limits }] })

    expect(problem({ maxConcurrent: 4, requestsPerMinute: 500, burstSeconds: 2 })).toBeUndefined()
    expect(problem({ maxConcurrent: 0 })?.path).toBe("items[0].limits.maxConcurrent")
    expect(problem({ maxConcurrent: 1.5 })?.path).toBe("items[0].limits.maxConcurrent")
    expect(problem({ requestsPerMinute: -1 })?.path).toBe("items[0].limits.requestsPerMinute")
    expect(problem({ inputTokensPerMinute: Number.NaN })?.path).toBe("items[0].limits.inputTokensPerMinute")
    expect(problem({ outputTokensPerMinute: Number.POSITIVE_INFINITY })?.path).toBe(
      "items[0].limits.outputTokensPerMinute"
    )
    expect(problem({ burstSeconds: 0 })?.path).toBe("items[0].limits.burstSeconds")
    expect(problem({ priorityShare: { minPriority: 1, share: 1 } })?.path).toBe("items[0].limits.priorityShare.share")
    expect(problem({ priorityShare: { minPriority: Number.NaN, share: 0.2 } })?.path).toBe(
      "items[0].limits.priorityShare.minPriority"
    )
  })

  it("rejects bad items of apply, naming the item and the field", () => {
    const problem = (item: LimitItem) => Limits.checkApply({ items: [acquire("ok"), item] })?.path

    expect(problem(acquire("x"))).toBeUndefined()
    expect(problem(acquire("x", { resource: "bad id" }))).toBe("items[1].resource")
    expect(problem(acquire("x", { leaseMs: 0 }))).toBe("items[1].leaseMs")
    expect(problem(acquire("x", { cost: { inputTokens: -5 } }))).toBe("items[1].cost.inputTokens")
    expect(problem(acquire("x", { cost: { requests: Number.NaN } }))).toBe("items[1].cost.requests")
    expect(problem(acquire("x", { priority: Number.NaN }))).toBe("items[1].priority")
    expect(problem(acquire("", {}))).toBe("items[1].callId")
    expect(problem(acquire("x", { holder: { jobId: "j", token: -1 } }))).toBe("items[1].holder.token")
    expect(problem(release("x", { usage: { outputTokens: -1 } }))).toBe("items[1].usage.outputTokens")
    expect(problem(release("x", { rateLimited: "yes" as unknown as boolean }))).toBe("items[1].rateLimited")
    expect(problem({ _tag: "Pause", resource: R, kind: "manual", until: Number.NaN, reason: "" })).toBe(
      "items[1].until"
    )
    expect(problem({ _tag: "Pause", resource: R, kind: "manual", until: null, reason: "x".repeat(1_001) })).toBe(
      "items[1].reason"
    )
    expect(Limits.checkApply({ items: [], now: Number.NaN })?.path).toBe("now")
    expect(Limits.checkResume({ items: [{ resource: "" }] })?.path).toBe("items[0].resource")
    expect(Limits.checkRead({ resources: [R, "no spaces allowed"] })?.path).toBe("resources[1]")
  })
})
