import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, GlobalValue, Random } from "effect"
import * as SimRuntime from "../src/SimRuntime.js"

const racers = Effect.gen(function* () {
  const log: Array<number> = []
  yield* Effect.all(
    Array.from({ length: 8 }, (_, i) =>
      Effect.gen(function* () {
        yield* Effect.yieldNow()
        log.push(i)
        yield* Effect.yieldNow()
        log.push(i + 10)
      })
    ),
    { concurrency: "unbounded" }
  )
  return { log, draw: yield* Random.nextInt }
})

const successOf = <A>(outcome: SimRuntime.RunOutcome<A, never>): A => {
  if (outcome._tag !== "Done" || outcome.exit._tag !== "Success") throw new Error(`run ended ${outcome._tag}`)
  return outcome.exit.value
}

describe("SimRuntime.run", () => {
  it("replays the same interleaving and the same randomness from the same seed", () => {
    const first = successOf(SimRuntime.run(racers, { seed: 42 }))
    const second = successOf(SimRuntime.run(racers, { seed: 42 }))
    expect(second).toEqual(first)
    expect(first.log).toHaveLength(16)
  })

  it("explores other interleavings under other seeds", () => {
    const logs = new Set<string>()
    for (let seed = 0; seed < 20; seed++) logs.add(JSON.stringify(successOf(SimRuntime.run(racers, { seed })).log))
    expect(logs.size).toBeGreaterThan(1)
  })

  it("reports an exact deadlock when nothing can run and no timer is pending", () => {
    const program = Effect.gen(function* () {
      const never = yield* Deferred.make<void>()
      yield* Deferred.await(never)
    })
    const outcome = SimRuntime.run(program, { seed: 1 })
    expect(outcome._tag).toBe("Deadlock")
  })

  it("stops a livelock at the step limit", () => {
    const outcome = SimRuntime.run(Effect.forever(Effect.yieldNow()), { seed: 1, maxSteps: 1_000 })
    expect(outcome._tag).toBe("StepLimit")
  })

  it("leaves no fiber of a finished run in Effect's process-wide set of root fibers", () => {
    const scope = GlobalValue.globalValue(Symbol.for("effect/FiberScope/Global"), () => ({})) as {
      roots: Set<unknown>
    }
    const roots = scope.roots
    const before = roots.size
    let during: Set<unknown> | undefined
    // A daemon that blocks forever, like the fiber of a crashed simulated process.
    const program = Effect.gen(function* () {
      const never = yield* Deferred.make<void>()
      yield* Effect.forkDaemon(Deferred.await(never))
      yield* Effect.forkDaemon(Deferred.await(never))
      during = scope.roots
    })
    const outcome = SimRuntime.run(program, { seed: 1 })
    const deadlocked = SimRuntime.run(Effect.flatMap(Deferred.make<void>(), Deferred.await), { seed: 1 })
    expect(outcome._tag).toBe("Done")
    expect(deadlocked._tag).toBe("Deadlock")
    // The run's daemon fibers (the two blocked ones) went into a set of the run's own, never into
    // the process-wide one, which the scope holds again afterwards.
    expect(during).not.toBe(roots)
    expect(during?.size).toBe(2)
    expect(scope.roots).toBe(roots)
    expect(roots.size).toBe(before)
  })
})
