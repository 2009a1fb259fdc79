import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Fiber, TestClock } from "effect"
import { LeaseLost, StoreError } from "../src/Errors.js"
import { chargeOne, claimOne, heartbeatOne, leaseLost, retryStore, settleOne } from "../src/internal/workerStore.js"
import type { JobId } from "../src/Job.js"
import type { Store } from "../src/Store.js"
import * as StoreModule from "../src/Store.js"
import { submitOne } from "./fixtures.js"

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

describe("one-job views of the batch verbs", () => {
  const LEASE = 10_000

  it.effect("claimOne and heartbeatOne return the item's result with the store time of the reply", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store)
      yield* TestClock.setTime(2_000)

      const claimed = yield* claimOne(store, { jobId: job.id, owner: "w", leaseMs: LEASE })
      yield* TestClock.adjust(500)
      const renewed = yield* heartbeatOne(store, { jobId: job.id, token: 1, leaseMs: LEASE, progress: 0.5 })
      const stale = yield* heartbeatOne(store, { jobId: job.id, token: 2, leaseMs: LEASE })

      expect(claimed).toMatchObject({ now: 2_000, result: { _tag: "Claimed", job: { leaseToken: 1 } } })
      expect(renewed).toEqual({
        now: 2_500,
        result: { _tag: "Renewed", leaseUntil: 2_500 + LEASE, cancelRequested: false, costCents: 0 }
      })
      expect(stale).toEqual({
        now: 2_500,
        result: { _tag: "LeaseLost", jobId: job.id, token: 2, currentToken: 1, state: "running" }
      })
    })
  )

  it.effect("chargeOne returns the spend after the charge and the reply's store time", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store)
      yield* TestClock.setTime(700)

      const reserved = yield* chargeOne(store, { jobId: job.id, callId: "c", token: 0, amountCents: 5, settled: false })
      const settled = yield* chargeOne(store, { jobId: job.id, callId: "c", token: 0, amountCents: 3, settled: true })

      expect(reserved).toEqual({ costCents: 5, now: 700 })
      expect(settled).toEqual({ costCents: 3, now: 700 })
    })
  )

  it.effect("a charge for a job the store does not know is a defect of the caller", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const jobId = "019b76da-b098-7695-9262-309b5765a9f1" as JobId

      const exit = yield* Effect.exit(chargeOne(store, { jobId, callId: "c", token: 1, amountCents: 1, settled: true }))

      expect(exit._tag === "Failure" && Cause.isDie(exit.cause)).toBe(true)
    })
  )

  it.effect("settleOne returns the job and the store time, and fails a fenced miss with LeaseLost", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store)
      yield* claimOne(store, { jobId: job.id, owner: "w", leaseMs: LEASE })
      yield* TestClock.setTime(900)

      const done = yield* settleOne(store, { jobId: job.id, token: 1, outcome: { _tag: "Complete", result: 1 } })
      const again = yield* Effect.flip(
        settleOne(store, { jobId: job.id, token: 1, outcome: { _tag: "Complete", result: 2 } })
      )

      expect(done).toMatchObject({ now: 900, job: { state: "succeeded", result: 1 } })
      expect(again).toBeInstanceOf(LeaseLost)
      expect(again).toMatchObject({ jobId: job.id, token: 1, currentToken: 1, state: "succeeded" })
    })
  )

  it.effect("a reply without a result for the item is a StoreError, not a silent success", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const empty: Store["Type"] = {
        ...store,
        claim: () => Effect.succeed({ now: 0, results: [] }),
        settle: () => Effect.succeed({ now: 0, results: [] })
      }
      const jobId = "019b76da-b098-7695-9262-309b5765a9f1" as JobId

      const claim = yield* Effect.flip(claimOne(empty, { jobId, owner: "w", leaseMs: LEASE }))
      const settle = yield* Effect.flip(settleOne(empty, { jobId, token: 1, outcome: { _tag: "Release" } }))

      expect(claim).toMatchObject({ _tag: "StoreError", reason: "Unknown", operation: "claim" })
      expect(settle).toMatchObject({ _tag: "StoreError", reason: "Unknown", operation: "settle" })
    })
  )

  it("leaseLost carries every field of the fenced miss", () => {
    const jobId = "019b76da-b098-7695-9262-309b5765a9f1" as JobId
    const error = leaseLost({ _tag: "LeaseLost", jobId, token: 3, currentToken: null, state: null })
    expect(error).toBeInstanceOf(LeaseLost)
    expect(error).toMatchObject({ jobId, token: 3, currentToken: null, state: null })
  })
})
