import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { LeaseLost, StoreError } from "../src/Errors.js"
import { retryStore } from "../src/internal/workerStore.js"
import type { JobId } from "../src/Models.js"

/** An effect that fails with `errors` in turn, then succeeds; `tries` records the TestClock time of each try. */
const scripted = (errors: ReadonlyArray<StoreError | LeaseLost>) => {
  const tries: Array<number> = []
  const effect = Effect.flatMap(
    Effect.clockWith((clock) => clock.currentTimeMillis),
    (now) => {
      tries.push(now)
      const error = errors[tries.length - 1]
      return error === undefined ? Effect.succeed("ok" as const) : Effect.fail(error)
    }
  )
  return { effect, tries }
}

const timeout = new StoreError({ reason: "Timeout", operation: "claim", detail: "slow" })

describe("retryStore", () => {
  it.effect("a first try that succeeds runs once and waits for nothing", () =>
    Effect.gen(function* () {
      const { effect, tries } = scripted([])
      expect(yield* retryStore(effect)).toBe("ok")
      expect(tries).toEqual([0])
    })
  )

  it.effect("retries a retryable StoreError after 50, 100 and 200 ms, then succeeds", () =>
    Effect.gen(function* () {
      const { effect, tries } = scripted([timeout, timeout, timeout])
      const fiber = yield* Effect.fork(retryStore(effect))
      yield* TestClock.adjust(1_000)
      expect(yield* Fiber.join(fiber)).toBe("ok")
      expect(tries).toEqual([0, 50, 150, 350])
    })
  )

  it.effect("gives up after `times` retries with the last error", () =>
    Effect.gen(function* () {
      const last = new StoreError({ reason: "Connection", operation: "claim", detail: "down" })
      const { effect, tries } = scripted([timeout, timeout, last])
      const fiber = yield* Effect.fork(Effect.flip(retryStore(effect, { times: 2, baseMs: 10 })))
      yield* TestClock.adjust(1_000)
      expect(yield* Fiber.join(fiber)).toBe(last)
      expect(tries).toEqual([0, 10, 30])
    })
  )

  it.effect("never retries a non-retryable StoreError or another error", () =>
    Effect.gen(function* () {
      const refused = new StoreError({ reason: "Constraint", operation: "complete", detail: "too large" })
      expect(refused.isRetryable).toBe(false)
      const first = scripted([refused])
      expect(yield* Effect.flip(retryStore(first.effect))).toBe(refused)
      expect(first.tries).toEqual([0])
      const lost = new LeaseLost({
        jobId: "019b76da-b098-7695-9262-309b5765a9f1" as JobId,
        token: 1,
        currentToken: 2,
        state: "running"
      })
      const second = scripted([lost])
      expect(yield* Effect.flip(retryStore(second.effect))).toBe(lost)
      expect(second.tries).toEqual([0])
    })
  )
})
