/**
 * A worker's helper loops start on first need: at most once each, interrupted (and waited for) by `stop`, and never
 * running after it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeHelpers } from "../src/internal/workerFibers.js"

/** A helper loop that counts its rounds, yielding between them, and notes when it ends. */
const counting = () => {
  const state = { rounds: 0, ended: 0 }
  const loop = Effect.forever(
    Effect.zipRight(
      Effect.sync(() => state.rounds++),
      Effect.yieldNow()
    )
  ).pipe(Effect.ensuring(Effect.sync(() => state.ended++)))
  return { state, loop }
}

const settle = Effect.repeatN(Effect.yieldNow(), 20)

describe("worker helpers", () => {
  it.effect("a helper runs only once asked, and asking again starts no second fiber", () =>
    Effect.gen(function* () {
      const helpers = makeHelpers(yield* Effect.runtime<never>())
      const { state, loop } = counting()
      const start = helpers.start(loop)
      yield* settle
      expect(state.rounds).toBe(0)
      expect(helpers.started()).toBe(0)

      start()
      start()
      yield* settle
      expect(helpers.started()).toBe(1)
      const rounds = state.rounds
      expect(rounds).toBeGreaterThan(0)
      // One fiber: it takes one round per yield of this fiber, not two.
      yield* settle
      expect(state.rounds - rounds).toBeLessThanOrEqual(22)
      yield* helpers.stop
    })
  )

  it.effect("stop interrupts every started helper and waits for its finalizers", () =>
    Effect.gen(function* () {
      const helpers = makeHelpers(yield* Effect.runtime<never>())
      const a = counting()
      const b = counting()
      helpers.start(a.loop)()
      helpers.start(b.loop)()
      yield* settle
      yield* helpers.stop
      expect([a.state.ended, b.state.ended]).toEqual([1, 1])
      const rounds = [a.state.rounds, b.state.rounds]
      yield* settle
      expect([a.state.rounds, b.state.rounds]).toEqual(rounds)
    })
  )

  it.effect("a helper asked for after stop never gets to run on", () =>
    Effect.gen(function* () {
      const helpers = makeHelpers(yield* Effect.runtime<never>())
      yield* helpers.stop
      const { state, loop } = counting()
      helpers.start(loop)()
      yield* settle
      const rounds = state.rounds
      expect(rounds).toBeLessThanOrEqual(1)
      yield* settle
      expect(state.rounds).toBe(rounds)
      expect(helpers.started()).toBe(0)
    })
  )
})
