import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber } from "effect"
import { noSkew, VirtualClock, WorkerClock } from "../src/SimClock.js"
import * as SimRuntime from "../src/SimRuntime.js"

describe("VirtualClock", () => {
  it("fires timers in due order, ties in insertion order, and only moves forward", () => {
    const clock = new VirtualClock(100)
    const fired: Array<string> = []
    clock.schedule(50, () => fired.push("b"))
    clock.schedule(10, () => fired.push("a"))
    clock.schedule(50, () => fired.push("c"))
    const cancelled = clock.schedule(20, () => fired.push("x"))
    cancelled.cancel()
    expect(clock.pending).toBe(3)
    const times: Array<number> = []
    while (clock.fireNext()) times.push(clock.now)
    expect(fired).toEqual(["a", "b", "c"])
    expect(times).toEqual([110, 150, 150])
    expect(clock.fireNext()).toBe(false)
  })

  it("wakeOrAfter ends at the wake-up or the timeout, whichever comes first, and leaves nothing behind", () => {
    const clock = new VirtualClock(0)
    const subscribers = new Set<() => void>()
    const subscribe = (wake: () => void) => {
      subscribers.add(wake)
      return () => subscribers.delete(wake)
    }
    const program = Effect.gen(function* () {
      const woken = yield* Effect.fork(Effect.as(clock.wakeOrAfter(1_000, subscribe), "woken"))
      const timedOut = yield* Effect.fork(Effect.as(clock.wakeOrAfter(50, subscribe), "timed out"))
      yield* Effect.sleep(100)
      expect(yield* Fiber.join(timedOut)).toBe("timed out")
      expect(subscribers.size).toBe(1)
      for (const wake of [...subscribers]) wake()
      expect(yield* Fiber.join(woken)).toBe("woken")
      expect(subscribers.size).toBe(0)
      // A subscription that wakes at once ends the wait without a timer left pending.
      yield* clock.wakeOrAfter(1_000, (wake) => {
        wake()
        return () => subscribers.delete(wake)
      })
      const interrupted = yield* Effect.fork(clock.wakeOrAfter(1_000, subscribe))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(interrupted)
      expect(subscribers.size).toBe(0)
      return clock.now
    })
    const outcome = SimRuntime.run(program, { seed: 1, clock })
    expect(outcome._tag === "Done" && outcome.exit._tag === "Success" ? outcome.exit.value : outcome).toBe(100)
    expect(clock.pending).toBe(0)
  })

  it("drives Effect.sleep through the run loop without real time", () => {
    const clock = new VirtualClock(0)
    const program = Effect.gen(function* () {
      const order: Array<string> = []
      const sleeper = (name: string, ms: number) =>
        Effect.zipRight(
          Effect.sleep(ms),
          Effect.sync(() => order.push(`${name}@${clock.now}`))
        )
      yield* Effect.all([sleeper("slow", 3_600_000), sleeper("fast", 5), sleeper("tie", 5)], {
        concurrency: "unbounded"
      })
      return order
    })
    const outcome = SimRuntime.run(program, { seed: 1, clock })
    expect(outcome._tag).toBe("Done")
    if (outcome._tag === "Done" && outcome.exit._tag === "Success") {
      expect(outcome.exit.value).toEqual(["fast@5", "tie@5", "slow@3600000"])
    } else {
      expect.fail("program did not succeed")
    }
  })

  it("lets an interrupted sleep's timer fire without resuming anything or moving later timers", () => {
    const clock = new VirtualClock(0)
    const program = Effect.gen(function* () {
      const woke: Array<string> = []
      const sleeper = yield* Effect.fork(
        Effect.zipRight(
          clock.sleepMillis(100),
          Effect.sync(() => woke.push("interrupted sleeper"))
        )
      )
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(sleeper)
      yield* clock.sleepThen(
        200,
        Effect.sync(() => woke.push(`next@${clock.now}`))
      )
      return woke
    })
    const outcome = SimRuntime.run(program, { seed: 2, clock })
    expect(outcome._tag === "Done" && outcome.exit._tag === "Success" ? outcome.exit.value : []).toEqual(["next@200"])
    expect(clock.pending).toBe(0)
  })
})

describe("WorkerClock", () => {
  it("reads true time plus offset, drift and a jump, and never wakes after a kill", () => {
    const base = new VirtualClock(1_000)
    const skewed = new WorkerClock(base, { offsetMs: 500, driftPpm: 100_000, jumpAt: 2_000, jumpMs: -300 })
    expect(skewed.unsafeCurrentTimeMillis()).toBe(1_500)
    base.schedule(1_000, () => undefined)
    base.fireNext()
    // 1000 ms later: +10% drift (100 ms) and the jump (-300 ms).
    expect(skewed.unsafeCurrentTimeMillis()).toBe(2_000 + 500 + 100 - 300)
    const plain = new WorkerClock(base, noSkew)
    expect(plain.unsafeCurrentTimeMillis()).toBe(base.now)
  })

  it("holds sleepers until the pause ends and forever once dead", () => {
    const clock = new VirtualClock(0)
    const worker = new WorkerClock(clock, noSkew)
    const program = Effect.gen(function* () {
      worker.pausedUntil = 1_000
      yield* Effect.sleep(10)
      const resumedAt = yield* Clock.currentTimeMillis
      worker.kill()
      return resumedAt
    }).pipe(Effect.withClock(worker))
    const outcome = SimRuntime.run(program, { seed: 3, clock })
    expect(outcome._tag === "Done" && outcome.exit._tag === "Success" ? outcome.exit.value : -1).toBe(1_000)
    const dead = SimRuntime.run(Effect.sleep(5).pipe(Effect.withClock(worker)), { seed: 3, clock })
    expect(dead._tag).toBe("Deadlock")
  })

  it("holds a sleeper whose process is paused at the instant its sleep ends", () => {
    const clock = new VirtualClock(0)
    const worker = new WorkerClock(clock, noSkew)
    // Set before the sleep, this timer fires first at t=10: the process is paused when the sleeper's timer fires.
    clock.schedule(10, () => {
      worker.pausedUntil = 500
    })
    const program = Effect.zipRight(Effect.sleep(10), Clock.currentTimeMillis).pipe(Effect.withClock(worker))
    const outcome = SimRuntime.run(program, { seed: 4, clock })
    expect(outcome._tag === "Done" && outcome.exit._tag === "Success" ? outcome.exit.value : -1).toBe(500)
  })
})
