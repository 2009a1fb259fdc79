/**
 * `inOrder`: the worker's way to run a round's effects one after another. It must keep `Effect.all`'s sequential
 * meaning (order, the first failure stops the rest, values discarded) whatever the number of effects.
 * `masked`: `Effect.uninterruptibleMask` without its steps in an uninterruptible fiber; it must keep the mask's
 * meaning from either kind of caller. `catchFailure`: `Effect.catchAll` without its step on success; it must end as
 * `catchAll` does for every cause.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, FiberId, Metric, RuntimeFlags, RuntimeFlagsPatch } from "effect"
import { AbstractSupervisor } from "effect/Supervisor"
import { catchFailure, countThen, inOrder, masked } from "../src/internal/steps.js"

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

/** Whether the fiber running this is interruptible right now. */
const interruptibleNow = Effect.withFiberRuntime<boolean>((_, status) =>
  Effect.succeed(RuntimeFlags.interruption(status.runtimeFlags))
)

describe("steps.masked", () => {
  it.effect("from an interruptible fiber: the body is uninterruptible, restore gives interruptibility back", () =>
    Effect.gen(function* () {
      const seen = yield* masked((restore) =>
        Effect.all([interruptibleNow, restore(interruptibleNow), interruptibleNow])
      )
      expect(seen).toEqual([false, true, false])
    })
  )

  it.effect("from an uninterruptible fiber: the body and its restore both stay uninterruptible", () =>
    Effect.gen(function* () {
      const seen = yield* Effect.uninterruptible(
        masked((restore) => Effect.all([interruptibleNow, restore(interruptibleNow)]))
      )
      expect(seen).toEqual([false, false])
      // And the caller's region is as it was afterwards.
      expect(
        yield* Effect.uninterruptible(
          Effect.zipRight(
            masked(() => Effect.void),
            interruptibleNow
          )
        )
      ).toBe(false)
      expect(
        yield* Effect.zipRight(
          masked(() => Effect.void),
          interruptibleNow
        )
      ).toBe(true)
    })
  )

  it.live("an interruption sent while the body runs waits for the body's end; one sent in restore stops it", () =>
    Effect.gen(function* () {
      const ended: Array<string> = []
      const latch = yield* Deferred.make<void>()
      const guarded = yield* Effect.fork(
        masked(() =>
          Effect.zipRight(
            Deferred.succeed(latch, undefined),
            Effect.zipRight(
              Effect.sleep("10 millis"),
              Effect.sync(() => ended.push("body"))
            )
          )
        )
      )
      yield* Deferred.await(latch)
      yield* Fiber.interrupt(guarded)
      expect(ended).toEqual(["body"])

      const started = yield* Deferred.make<void>()
      const restored = yield* Effect.fork(
        masked((restore) =>
          Effect.zipRight(
            restore(Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)),
            Effect.sync(() => ended.push("after restore"))
          ).pipe(Effect.onInterrupt(() => Effect.sync(() => ended.push("interrupted"))))
        )
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(restored)
      expect(ended).toEqual(["body", "interrupted"])
    })
  )
})

describe("steps.catchFailure", () => {
  const handled = (error: string) => Effect.succeed(`caught ${error}`)
  const causes: ReadonlyArray<Cause.Cause<string>> = [
    Cause.fail("boom"),
    Cause.die(new Error("defect")),
    Cause.interrupt(FiberId.none),
    Cause.sequential(Cause.fail("first"), Cause.fail("second")),
    Cause.parallel(Cause.fail("typed"), Cause.die("and a defect")),
    Cause.sequential(Cause.fail("typed"), Cause.interrupt(FiberId.none))
  ]

  it.effect("ends as Effect.catchAll would, for a success and for every kind of cause", () =>
    Effect.gen(function* () {
      expect(yield* catchFailure(Effect.succeed("value"), handled)).toBe("value")
      for (const cause of causes) {
        const ours = yield* Effect.exit(catchFailure(Effect.failCause(cause), handled))
        const effects = yield* Effect.exit(Effect.catchAll(Effect.failCause(cause), handled))
        expect(ours).toEqual(effects)
      }
      expect(yield* catchFailure(Effect.fail("boom"), handled)).toBe("caught boom")
    })
  )

  it.effect("takes one step fewer than Effect.catchAll when the effect succeeds", () =>
    Effect.gen(function* () {
      const count = (effect: Effect.Effect<unknown>) =>
        Effect.gen(function* () {
          let ops = 0
          const supervisor = new (class extends AbstractSupervisor<void> {
            readonly value = Effect.void
            override onEffect(): void {
              ops++
            }
          })()
          yield* Effect.withRuntimeFlagsPatch(
            Effect.supervised(effect, supervisor),
            RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision)
          )
          return ops
        })
      const ours = yield* count(catchFailure(Effect.succeed(1), handled))
      const effects = yield* count(Effect.catchAll(Effect.succeed(1), handled))
      expect(ours).toBe(effects - 1)
    })
  )
})

describe("steps.countThen", () => {
  it.effect("adds to the counter under the fiber's metric labels, as Metric.incrementBy does, then runs next", () =>
    Effect.gen(function* () {
      const ours = Metric.counter("steps_test_count_then")
      const effects = Metric.counter("steps_test_increment_by")
      const value = yield* Effect.tagMetrics(
        Effect.zipRight(Metric.incrementBy(effects, 3), countThen(ours, 3, Effect.succeed("next"))),
        "queue",
        "q1"
      )
      expect(value).toBe("next")
      const labelled = (counter: typeof ours) => Metric.value(Metric.tagged(counter, "queue", "q1"))
      expect((yield* labelled(ours)).count).toBe(3)
      expect((yield* labelled(ours)).count).toBe((yield* labelled(effects)).count)
      // Nothing under other labels.
      expect((yield* Metric.value(ours)).count).toBe(0)
    })
  )
})
