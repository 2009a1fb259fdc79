/**
 * A worker's helper loops start on first need: at most once each, interrupted (and waited for) by `stop`, and never
 * running after it. Attempt fibers start interruptible in the worker's runtime, and shutdown can wait for them or stop them.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FiberRef, RuntimeFlags } from "effect"
import { make, makeHelpers } from "../src/internal/worker/fibers.js"

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

describe("worker attempt fibers", () => {
  const interruptibleNow = Effect.withFiberRuntime<boolean>((_, status) =>
    Effect.succeed(RuntimeFlags.interruption(status.runtimeFlags))
  )
  const mark = FiberRef.unsafeMake("worker start")

  it.effect("start interruptible, in the runtime given, inheriting nothing from the step that starts them", () =>
    Effect.gen(function* () {
      // Read inside an uninterruptible region, as a layer may build the worker.
      const runtime = yield* Effect.uninterruptible(Effect.runtime<never>())
      const fibers = make(runtime)
      const seen: Array<{ readonly interruptible: boolean; readonly mark: string }> = []
      const report = Effect.zipWith(interruptibleNow, FiberRef.get(mark), (interruptible, value) => {
        seen.push({ interruptible, mark: value })
      })
      // Started from an uninterruptible step whose fiber has moved the ref on.
      yield* Effect.uninterruptible(Effect.locally(fibers.run(report), mark, "dispatching step"))
      expect(fibers.size()).toBe(1)
      yield* fibers.awaitEmpty
      expect(seen).toEqual([{ interruptible: true, mark: "worker start" }])
      expect(fibers.size()).toBe(0)
    })
  )

  it.effect("interruptAll stops what is left and waits for it", () =>
    Effect.gen(function* () {
      const fibers = make(yield* Effect.runtime<never>())
      let ended = 0
      yield* fibers.run(
        Effect.ensuring(
          Effect.never,
          Effect.sync(() => ended++)
        )
      )
      yield* fibers.run(
        Effect.ensuring(
          Effect.never,
          Effect.sync(() => ended++)
        )
      )
      yield* settle
      expect(fibers.size()).toBe(2)
      yield* fibers.interruptAll
      expect(ended).toBe(2)
      expect(fibers.size()).toBe(0)
    })
  )
})
