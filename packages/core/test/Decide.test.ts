import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as Decide from "../src/Decide.js"

const base: Decide.DecideInput = {
  p99Ms: 5_000,
  hops: [{ name: "lb", timeoutMs: 60_000 }],
  userWaiting: true,
  outlivesSession: false,
  resultNeededNow: true
}

const decided = (input: Partial<Decide.DecideInput>): Decide.Decision =>
  Either.getOrThrowWith(Decide.decide({ ...base, ...input }), (e) => e)

describe("Decide.decide", () => {
  it("p99 exactly T/2 is async (within-2x)", () => {
    const d = decided({ p99Ms: 30_000 })
    expect(d.mode).toBe("async")
    expect(d.rule).toBe("within-2x")
    expect(d.ratio).toBe(0.5)
    expect(d.marginMs).toBe(0)
  })

  it("p99 one millisecond under T/2 with a user waiting is sync-stream (well-under)", () => {
    const d = decided({ p99Ms: 29_999 })
    expect(d.mode).toBe("sync-stream")
    expect(d.rule).toBe("well-under")
    expect(d.marginMs).toBe(1)
  })

  it("45 s against a 60 s hop is async", () => {
    const d = decided({ p99Ms: 45_000 })
    expect(d.mode).toBe("async")
    expect(d.rule).toBe("within-2x")
    expect(d.ratio).toBe(0.75)
    expect(d.marginMs).toBe(-15_000)
  })

  it("5 s against a 60 s hop with a user waiting is sync with streaming", () => {
    const d = decided({ p99Ms: 5_000 })
    expect(d).toMatchObject({ mode: "sync-stream", rule: "well-under", p99Ms: 5_000, marginMs: 25_000 })
    expect(d.shortestHop).toEqual({ name: "lb", timeoutMs: 60_000 })
  })

  it("work that outlives the session is async however fast, before every other rule", () => {
    const d = decided({ p99Ms: 50, outlivesSession: true, resultNeededNow: false })
    expect(d.mode).toBe("async")
    expect(d.rule).toBe("outlives-session")
  })

  it("a result needed later is async, before the timeout rule", () => {
    const d = decided({ p99Ms: 50_000, resultNeededNow: false })
    expect(d.mode).toBe("async")
    expect(d.rule).toBe("result-later")
  })

  it("nobody waiting, result needed now, p99 well under: async under result-later, and says why", () => {
    const d = decided({ p99Ms: 1_000, userWaiting: false })
    expect(d.mode).toBe("async")
    expect(d.rule).toBe("result-later")
    expect(d.reasons[0]).toMatch(/Nobody is waiting/)
  })

  it("nobody waiting and p99 over T/2 is still within-2x", () => {
    expect(decided({ p99Ms: 40_000, userWaiting: false }).rule).toBe("within-2x")
  })

  it("takes the shortest of several hops (first one on a tie)", () => {
    const d = decided({
      p99Ms: 16_000,
      hops: [
        { name: "cdn", timeoutMs: 100_000 },
        { name: "lb", timeoutMs: 30_000 },
        { name: "client", timeoutMs: 30_000 },
        { name: "server", timeoutMs: 60_000 }
      ]
    })
    expect(d.shortestHop).toEqual({ name: "lb", timeoutMs: 30_000 })
    expect(d.mode).toBe("async")
    expect(d.ratio).toBeCloseTo(16 / 30, 10)
  })

  it("reasons start with one sentence and state the numbers", () => {
    const d = decided({ p99Ms: 45_000 })
    expect(d.reasons[0]).toMatch(/^The p99 of 45s is within 2x of the shortest hop timeout, lb \(1m\)/)
    expect(d.reasons.join("\n")).toContain("T/2 = 30s")
  })

  it("a p99 past the shortest hop itself says so, and the margin states which side of T/2 it is on", () => {
    const d = decided({ p99Ms: 70_000 })
    expect(d.rule).toBe("within-2x")
    expect(d.reasons[0]).toMatch(/at or past the shortest hop timeout itself/)
    expect(d.reasons).toContain("margin: 40s over T/2")
    expect(decided({ p99Ms: 30_000 }).reasons).toContain("margin: none, the p99 is exactly T/2")
    expect(decided({ p99Ms: 20_000 }).reasons).toContain("margin: 10s under T/2")
  })

  it("no hops is a NoHops error", () => {
    const r = Decide.decide({ ...base, hops: [] })
    expect(Either.isLeft(r)).toBe(true)
    if (Either.isLeft(r)) expect(r.left._tag).toBe("NoHops")
  })

  it.each([
    { p99Ms: -1 },
    { p99Ms: Number.NaN },
    { p99Ms: Number.POSITIVE_INFINITY },
    { hops: [{ name: "lb", timeoutMs: 0 }] },
    { hops: [{ name: "lb", timeoutMs: -5 }] }
  ])("rejects %o", (patch) => {
    const r = Decide.decide({ ...base, ...patch })
    expect(Either.isLeft(r) && r.left._tag).toBe("InvalidDecideInput")
  })
})

describe("Decide.parseDuration / formatDuration", () => {
  it.each([
    ["45s", 45_000],
    ["1500ms", 1_500],
    ["2m", 120_000],
    ["1m30s", 90_000],
    ["1.5s", 1_500],
    [" 60S ", 60_000],
    ["1h", 3_600_000]
  ])("%s -> %i ms", (text, ms) => {
    expect(Decide.parseDuration(text)).toEqual(Either.right(ms))
  })

  it.each([
    ["45", "45 what? (45s, 45000ms)"],
    [" 250 ", "250 what? (250s, 250000ms)"],
    ["1.5", "1.5 what? (1.5s, 1500ms)"],
    ["0.001", "0.001 what? (0.001s, 1ms)"]
  ])("a number without a unit, %j, is refused with a question, not read as milliseconds", (text, message) => {
    const r = Decide.parseDuration(text)
    expect(Either.isLeft(r) && r.left).toMatchObject({ _tag: "InvalidDuration", reason: "no-unit", message })
  })

  it.each(["", "abc", "-5s", "5 s", "5x", "s", "1m-3s", "-45"])("rejects %j", (text) => {
    const r = Decide.parseDuration(text)
    expect(Either.isLeft(r) && r.left).toMatchObject({ _tag: "InvalidDuration", reason: "malformed" })
    expect(Either.isLeft(r) && r.left.message).toBe(
      `${JSON.stringify(text.trim())} is not a duration (45s, 1500ms, 2m, 1m30s)`
    )
  })

  it.each([
    [1_500, "1.5s"],
    [45_000, "45s"],
    [120_000, "2m"],
    [90_000, "1m30s"],
    [250, "250ms"]
  ])("%i ms -> %s", (ms, text) => {
    expect(Decide.formatDuration(ms)).toBe(text)
  })
})

describe("Decide.percentile", () => {
  const samples = Array.from({ length: 100 }, (_, i) => 100 - i)

  it.each([
    [0.5, 50],
    [0.99, 99],
    [1, 100],
    [0, 1],
    [0.01, 1],
    [0.011, 2]
  ])("q=%d -> %d (nearest rank)", (q, expected) => {
    expect(Decide.percentile(samples, q)).toBe(expected)
  })

  it("does not sort its input and is NaN for no samples", () => {
    const copy = [...samples]
    Decide.percentile(samples, 0.9)
    expect(samples).toEqual(copy)
    expect(Decide.percentile([], 0.5)).toBeNaN()
  })
})

describe("Decide.effectiveP99", () => {
  const run = (input: Partial<Decide.EffectiveP99Input>) =>
    Either.getOrThrowWith(
      Decide.effectiveP99({ samples: [1_000], timeoutMs: 10_000, retries: 0, seed: 1, trials: 2_000, ...input }),
      (e) => e
    )
  const mixed = [...Array.from({ length: 90 }, () => 2_000), ...Array.from({ length: 10 }, () => 40_000)]

  it("is deterministic: same seed, same answer; another seed may differ", () => {
    const a = run({ samples: mixed, timeoutMs: 20_000, retries: 2, backoffMs: 1_000, seed: 42 })
    const b = run({ samples: mixed, timeoutMs: 20_000, retries: 2, backoffMs: 1_000, seed: 42 })
    expect(a).toEqual(b)
    const others = [1, 2, 3, 4, 5].map((seed) =>
      run({ samples: mixed, timeoutMs: 20_000, retries: 2, backoffMs: 1_000, seed })
    )
    expect(new Set(others.map((o) => o.timeoutRate)).size).toBeGreaterThan(1)
  })

  it("with no timeouts and no retries equals the sample distribution", () => {
    const r = run({ samples: [100, 200, 300, 400], timeoutMs: 1_000 })
    expect(r.timeoutRate).toBe(0)
    expect([100, 200, 300, 400]).toContain(r.p50Ms)
    expect(r.p99Ms).toBe(400)
    expect(r.trials).toBe(2_000)
  })

  it("a sample over the timeout costs the timeout, and all-timeouts without a fallback count in timeoutRate", () => {
    const r = run({ samples: [50_000], timeoutMs: 10_000, retries: 2 })
    expect(r.timeoutRate).toBe(1)
    expect(r.p50Ms).toBe(30_000)
    expect(r.p99Ms).toBe(30_000)
  })

  it("a sample exactly at the timeout is a success", () => {
    const r = run({ samples: [10_000], timeoutMs: 10_000, retries: 3 })
    expect(r.timeoutRate).toBe(0)
    expect(r.p99Ms).toBe(10_000)
  })

  it("adds the fallback's latency when retries run out", () => {
    const r = run({ samples: [50_000], timeoutMs: 10_000, retries: 1, fallbackP99Ms: 3_000 })
    expect(r.p99Ms).toBe(23_000)
  })

  it("adds backoff between attempts, bounded by the full-jitter window", () => {
    const r = run({ samples: [50_000], timeoutMs: 1_000, retries: 2, backoffMs: 1_000 })
    // 3 timeouts (3 s) plus jitter in [0, 1 s) and [0, 2 s)
    expect(r.p50Ms).toBeGreaterThan(3_000)
    expect(r.p99Ms).toBeLessThan(6_000)
  })

  it("retries turn a 10% timeout tail into a longer p99 than the raw samples", () => {
    const raw = Decide.percentile(mixed, 0.99)
    const r = run({ samples: mixed, timeoutMs: 20_000, retries: 1, seed: 7, trials: 10_000 })
    expect(raw).toBe(40_000)
    // p(two timeouts) = 1% -> the p99 lands on timeout + success (22 s) or two timeouts (40 s)
    expect([22_000, 40_000]).toContain(r.p99Ms)
    expect(r.timeoutRate).toBeGreaterThan(0.005)
    expect(r.timeoutRate).toBeLessThan(0.015)
  })

  it.each([
    { samples: [] },
    { samples: [-1] },
    { timeoutMs: 0 },
    { retries: -1 },
    { backoffMs: -1 },
    { fallbackP99Ms: Number.NaN },
    { trials: 0 },
    { seed: Number.NaN }
  ])("rejects %o", (patch) => {
    const r = Decide.effectiveP99({ samples: [1], timeoutMs: 10, retries: 0, seed: 1, ...patch })
    expect(Either.isLeft(r) && r.left._tag).toBe("InvalidDecideInput")
  })
})
