/**
 * `inOrder`: the worker's way to run a round's effects one after another. It must keep `Effect.all`'s sequential
 * meaning (order, the first failure stops the rest, values discarded) whatever the number of effects.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { inOrder } from "../src/internal/steps.js"

const noting = (seen: Array<number>, n: number) => Effect.sync(() => seen.push(n))

describe("steps.inOrder", () => {
  it.effect("runs none, one, or many effects in the order given, and yields void", () =>
    Effect.gen(function* () {
      const seen: Array<number> = []
      expect(yield* inOrder<never, never>([])).toBeUndefined()
      expect(yield* inOrder([Effect.as(noting(seen, 1), "value")])).toBeUndefined()
      expect(yield* inOrder([noting(seen, 2), noting(seen, 3), noting(seen, 4)])).toBeUndefined()
      expect(seen).toEqual([1, 2, 3, 4])
    })
  )

  it.effect("stops at the first failure: later effects do not run", () =>
    Effect.gen(function* () {
      const seen: Array<number> = []
      const exit = yield* Effect.exit(inOrder([noting(seen, 1), Effect.fail("boom"), noting(seen, 2)]))
      expect(exit).toEqual(Exit.fail("boom"))
      expect(seen).toEqual([1])
      expect(yield* Effect.exit(inOrder([Effect.fail("alone")]))).toEqual(Exit.fail("alone"))
    })
  )

  it.effect("builds nothing to run until run: each effect runs when its turn comes", () =>
    Effect.gen(function* () {
      const seen: Array<number> = []
      const program = inOrder([noting(seen, 1), noting(seen, 2)])
      expect(seen).toEqual([])
      yield* program
      yield* program
      expect(seen).toEqual([1, 2, 1, 2])
    })
  )
})
