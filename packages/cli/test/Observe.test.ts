import { describe, expect, it } from "@effect/vitest"
import * as Store from "@slowcall/core/Store"
import { makeJobFactory } from "@slowcall/testing/JobFactory"
import { Effect, Logger } from "effect"
import { observe } from "../src/internal/observe.js"

/** Runs `effect` with a logger that keeps each message, and returns them with its result. */
const logged = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    const logger = Logger.make(({ message }) => {
      lines.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
    })
    const result = yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    return { lines, result }
  })

describe("the observed Store", () => {
  it.effect("logs a failed attempt whether it was settled by settle or by a cycle's settle part", () =>
    Effect.gen(function* () {
      const memory = yield* Store.makeMemory
      const store = observe(memory.store)
      const factory = makeJobFactory()
      const items = [yield* factory.submitItem({ queue: "q" }), yield* factory.submitItem({ queue: "q" })]
      yield* store.submit({ items })
      const claimed = yield* store.claimNext({ queue: "q", max: 2, owner: "w", leaseMs: 30_000 })
      const [first, second] = claimed.results.map((result) => result.job)
      const fail = { _tag: "Fail", errorClass: "auth", error: "bad key" } as const

      const viaSettle = yield* logged(
        store.settle({ items: [{ jobId: first!.id, token: first!.leaseToken, outcome: fail }] })
      )
      const viaCycle = yield* logged(
        store.cycle!({ settle: [{ jobId: second!.id, token: second!.leaseToken, outcome: fail }] })
      )

      expect(viaCycle.result.settle.map((result) => result._tag)).toEqual(["Settled"])
      expect(viaSettle.lines).toEqual([
        `job ${first!.id} (conformance.echo) failed: auth on attempt 1 of 3; kept as a dead letter bad key`
      ])
      expect(viaCycle.lines).toEqual([
        `job ${second!.id} (conformance.echo) failed: auth on attempt 1 of 3; kept as a dead letter bad key`
      ])
    })
  )

  it.effect("offers no cycle over a Store that has none", () =>
    Effect.gen(function* () {
      const memory = yield* Store.makeMemory
      const { cycle: _cycle, ...withoutCycle } = memory.store

      const store = observe(withoutCycle)

      expect(store.cycle).toBeUndefined()
    })
  )
})
