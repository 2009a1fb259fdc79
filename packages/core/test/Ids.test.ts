import { describe, expect, it } from "@effect/vitest"
import { Effect, Random, Schema, TestClock } from "effect"
import { jobIdMillis, makeId, makeJobId } from "../src/Ids.js"
import { JobId } from "../src/Job.js"

const seeded = <A>(seed: string, effect: Effect.Effect<A>) => Effect.withRandom(effect, Random.make(seed))

describe("makeJobId", () => {
  it.effect("is a UUID v7 carrying the clock's milliseconds, version 7 and variant 10", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_767_225_600_123)
      const id = yield* makeJobId
      expect(Schema.is(JobId)(id)).toBe(true)
      expect(id[14]).toBe("7")
      expect("89ab").toContain(id[19])
      expect(jobIdMillis(id)).toBe(1_767_225_600_123)
      expect(id.slice(0, 13)).toBe("019b76da-a87b")
    })
  )

  it.effect("is deterministic under a seeded Random and the TestClock", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_700_000_000_000)
      const a = yield* seeded("seed-1", Effect.all([makeJobId, makeJobId, makeJobId]))
      const b = yield* seeded("seed-1", Effect.all([makeJobId, makeJobId, makeJobId]))
      const c = yield* seeded("seed-2", Effect.all([makeJobId, makeJobId, makeJobId]))
      expect(a).toEqual(b)
      expect(new Set(a).size).toBe(3)
      expect(c).not.toEqual(a)
    })
  )

  it.effect("sorts by creation time", () =>
    Effect.gen(function* () {
      const ids: Array<string> = []
      for (let i = 0; i < 50; i++) {
        yield* TestClock.adjust(i * 37 + 1)
        ids.push(yield* makeJobId)
      }
      expect([...ids].sort()).toEqual(ids)
    })
  )

  it.effect("uses every random bit position over many ids", () =>
    Effect.gen(function* () {
      const ids = yield* seeded("spread", Effect.all(Array.from({ length: 400 }, () => makeJobId)))
      for (const position of [15, 16, 17, 20, 21, 22, 24, 30, 35]) {
        expect(new Set(ids.map((id) => id[position])).size).toBeGreaterThan(8)
      }
      expect(new Set(ids.map((id) => id[19]))).toEqual(new Set(["8", "9", "a", "b"]))
    })
  )
})

describe("makeId", () => {
  it.effect("is the prefix and 20 hex digits, deterministic under a seed", () =>
    Effect.gen(function* () {
      const a = yield* seeded("x", makeId("call"))
      const b = yield* seeded("x", makeId("call"))
      expect(a).toMatch(/^call_[0-9a-f]{20}$/)
      expect(a).toBe(b)
      expect(yield* seeded("y", makeId("call"))).not.toBe(a)
    })
  )
})
