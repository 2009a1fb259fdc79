import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { OpCount, watch } from "../src/OpCount.js"

const program = Effect.gen(function* () {
  const fiber = yield* Effect.fork(Effect.forEach([1, 2, 3], (n) => Effect.succeed(n * 2)))
  return yield* Fiber.join(fiber)
})

describe("OpCount", () => {
  it("watch counts every operation and fiber of the program, by kind, and returns what the program returns", () => {
    const count = new OpCount()
    expect(Effect.runSync(watch(program, count))).toEqual([2, 4, 6])
    expect(count.ops).toBeGreaterThan(10)
    expect(count.fibers).toBe(1)
    let byKind = 0
    for (const n of count.byKind.values()) byKind += n
    expect(byKind).toBe(count.ops)
    expect(count.byKind.size).toBeGreaterThan(1)
  })

  it("counts the same for the same program, and nothing outside what it watches", () => {
    const first = new OpCount()
    const second = new OpCount()
    Effect.runSync(watch(program, first))
    Effect.runSync(watch(program, second))
    expect(second.ops).toBe(first.ops)
    const unwatched = new OpCount()
    Effect.runSync(Effect.supervised(program, unwatched))
    // Without operation supervision a supervisor still sees fibers start, but no operation.
    expect(unwatched.ops).toBe(0)
    expect(unwatched.fibers).toBe(1)
  })
})
