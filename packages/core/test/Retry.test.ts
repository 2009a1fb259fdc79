import { describe, expect, it } from "@effect/vitest"
import { Effect, Random } from "effect"
import { policy } from "../src/ErrorClass.js"
import * as Retry from "../src/Retry.js"

const seeded = <A>(seed: string, effect: Effect.Effect<A>) => Effect.withRandom(effect, Random.make(seed))

describe("Retry.ceiling", () => {
  it.each([
    [1, 100, 10_000, 100],
    [2, 100, 10_000, 200],
    [3, 100, 10_000, 400],
    [8, 100, 10_000, 10_000],
    [0, 100, 10_000, 100],
    [-3, 100, 10_000, 100],
    [5_000, 100, 10_000, 10_000],
    [3, 0, 10_000, 0],
    [3, 100, 0, 0]
  ])("attempt %i base %i cap %i -> %i", (attempt, baseMs, capMs, expected) => {
    expect(Retry.ceiling({ attempt, baseMs, capMs })).toBe(expected)
  })
})

describe("Retry.backoff", () => {
  it.effect("stays within [0, min(cap, base * 2^(attempt-1))] and is an integer", () =>
    Effect.gen(function* () {
      for (let attempt = 1; attempt <= 12; attempt++) {
        const options = { attempt, baseMs: 250, capMs: 20_000 }
        const top = Retry.ceiling(options)
        for (let i = 0; i < 50; i++) {
          const d = yield* Retry.backoff(options)
          expect(Number.isInteger(d)).toBe(true)
          expect(d).toBeGreaterThanOrEqual(0)
          expect(d).toBeLessThanOrEqual(top)
        }
      }
    })
  )

  it.effect("uses the whole jitter window (full jitter), not only its top", () =>
    seeded(
      "window",
      Effect.gen(function* () {
        const draws: Array<number> = []
        for (let i = 0; i < 400; i++) draws.push(yield* Retry.backoff({ attempt: 4, baseMs: 100, capMs: 60_000 }))
        expect(Math.min(...draws)).toBeLessThan(100)
        expect(Math.max(...draws)).toBeGreaterThan(700)
        const mean = draws.reduce((a, b) => a + b, 0) / draws.length
        expect(mean).toBeGreaterThan(300)
        expect(mean).toBeLessThan(500)
      })
    )
  )

  it.effect("replays the same delays for the same seed and differs for another", () =>
    Effect.gen(function* () {
      const run = (seed: string) =>
        seeded(
          seed,
          Effect.forEach([1, 2, 3, 4, 5, 6], (attempt) => Retry.backoff({ attempt, baseMs: 1000, capMs: 60_000 }))
        )
      const a = yield* run("seed-1")
      const b = yield* run("seed-1")
      const c = yield* run("seed-2")
      expect(a).toEqual(b)
      expect(a).not.toEqual(c)
    })
  )

  it.effect("is 0 when the window is empty", () =>
    Effect.gen(function* () {
      expect(yield* Retry.backoff({ attempt: 3, baseMs: 0, capMs: 1000 })).toBe(0)
    })
  )
})

describe("Retry.delayFor", () => {
  it.effect("never goes below a Retry-After the class honours", () =>
    seeded(
      "retry-after",
      Effect.gen(function* () {
        for (let attempt = 1; attempt <= 5; attempt++) {
          const d = yield* Retry.delayFor({ errorClass: "rate_limited", retryAfterMs: 30_000 }, attempt)
          expect(d).toBeGreaterThanOrEqual(30_000)
          expect(d).toBeLessThanOrEqual(60_000)
        }
      })
    )
  )

  it.effect("is the backoff when it exceeds the Retry-After", () =>
    Effect.gen(function* () {
      const p = { baseMs: 10_000, capMs: 10_000, honoursRetryAfter: true }
      const seed = "exceeds"
      const jitter = yield* seeded(seed, Retry.backoff({ attempt: 1, baseMs: 10_000, capMs: 10_000 }))
      const d = yield* seeded(seed, Retry.delayFor({ errorClass: "rate_limited", retryAfterMs: 1 }, 1, p))
      expect(d).toBe(Math.max(jitter, 1))
    })
  )

  it.effect("ignores Retry-After when the policy does not honour it", () =>
    seeded(
      "ignore",
      Effect.gen(function* () {
        const p = { ...policy("network"), honoursRetryAfter: false }
        const d = yield* Retry.delayFor({ errorClass: "network", retryAfterMs: 999_999 }, 1, p)
        expect(d).toBeLessThanOrEqual(p.baseMs)
      })
    )
  )

  it.effect("uses the class's default policy", () =>
    seeded(
      "default",
      Effect.gen(function* () {
        const overloaded = policy("overloaded")
        const d = yield* Retry.delayFor({ errorClass: "overloaded" }, 1)
        expect(d).toBeLessThanOrEqual(overloaded.baseMs)
        expect(yield* Retry.delayFor({ errorClass: "auth" }, 3)).toBe(0)
      })
    )
  )
})
