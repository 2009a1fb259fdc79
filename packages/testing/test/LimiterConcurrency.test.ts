/**
 * The concurrent property of the Limiter catches what the sequential one cannot: a Limiter that reads a resource,
 * lets other calls run, then writes what it computed from the old state (check, then act) agrees with the model call
 * by call, and loses a race for the last permit as soon as two acquires overlap.
 */
import { describe, expect, it } from "@effect/vitest"
import type { InvalidInput } from "@slowcall/core/Errors"
import { Limiter } from "@slowcall/core/Limiter"
import * as Limits from "@slowcall/core/Limits"
import { Effect, Layer } from "effect"
import { check } from "../src/LimiterConcurrency.js"
import { check as checkSequential } from "../src/LimiterProperty.js"

/** The memory Limiter's `apply` with a pause between reading the states and writing the new ones. */
const checkThenAct = Layer.effect(
  Limiter,
  Effect.gen(function* () {
    const memory = new Map<string, Limits.LimitState>()
    const clock = yield* Effect.clock
    const now = (given: number | undefined) => given ?? clock.unsafeCurrentTimeMillis()
    /** Input checked first, as every Limiter does: the only fault here is the window inside `apply`. */
    const checked = <A, E, R>(problem: InvalidInput | undefined, effect: Effect.Effect<A, E, R>) =>
      problem === undefined ? effect : Effect.fail(problem)
    const limiter: Limiter["Type"] = {
      define: (options) =>
        checked(
          Limits.checkDefine(options),
          Effect.sync(() => {
            const t = now(options.now)
            return {
              now: t,
              results: options.items.map((item) => {
                const state = Limits.define(memory.get(item.resource) ?? Limits.empty, item.limits, t)
                memory.set(item.resource, state)
                return { _tag: "Defined" as const, view: Limits.view(state, t) }
              })
            }
          })
        ),
      apply: (options) =>
        checked(
          Limits.checkApply(options),
          Effect.gen(function* () {
            const t = now(options.now)
            const read = new Map(memory)
            yield* Effect.yieldNow()
            const results = options.items.map((item) => {
              const step = Limits.applyItem(read.get(item.resource) ?? Limits.empty, item, t)
              read.set(item.resource, step.state)
              memory.set(item.resource, step.state)
              return step.result
            })
            return { now: t, results }
          })
        ),
      resume: (options) =>
        checked(
          Limits.checkResume(options),
          Effect.sync(() => {
            const t = now(options.now)
            return {
              now: t,
              results: options.items.map((item) => {
                const step = Limits.resume(memory.get(item.resource) ?? Limits.empty, t)
                memory.set(item.resource, step.state)
                return { _tag: "Resumed" as const, wasPaused: step.wasPaused, view: Limits.view(step.state, t) }
              })
            }
          })
        ),
      read: (options) =>
        checked(
          Limits.checkRead(options),
          Effect.sync(() => {
            const t = now(options.now)
            const names = options.resources ?? [...memory.keys()].sort()
            return { now: t, resources: names.map((r) => Limits.describe(r, memory.get(r) ?? Limits.empty, t)) }
          })
        )
    }
    return limiter
  })
)

describe("LimiterConcurrency", () => {
  it("a check-then-act Limiter passes the sequential property", async () => {
    const result = await checkSequential({
      name: "check-then-act",
      layer: checkThenAct,
      freshPerRun: true,
      numRuns: 50
    })

    expect(result.runs).toBe(50)
  }, 60_000)

  it("a check-then-act Limiter fails the concurrent property on its first scenario, naming the batch", async () => {
    const failure = await check({
      name: "check-then-act",
      layer: checkThenAct,
      freshPerRun: true,
      numRuns: 5,
      shrink: false
    }).then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error.message : String(error))
    )

    expect(failure).toContain("found a history that no order of its calls explains")
    expect(failure).toContain("No order of this batch of 16 Limiter calls")
  }, 60_000)
})
