/**
 * The attempt's control block: which stop reason wins. The first reason counts, but a lost lease replaces a reason
 * that kept the lease, because once the lease is gone nothing may be written under its token.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import * as Control from "../src/internal/worker/control.js"

const stops = (...reasons: ReadonlyArray<Control.StopReason>) =>
  Effect.gen(function* () {
    const control = Control.make({ localLeaseEnd: 0, costCents: 0 })
    const set: Array<boolean> = []
    for (const reason of reasons) set.push(yield* Control.stop(control, reason))
    return { reason: control.stopReason, set }
  })

describe("Control.stop", () => {
  it.effect("keeps the first reason among those that keep the lease", () =>
    Effect.gen(function* () {
      expect(yield* stops("cancelled", "deadline", "shutdown")).toEqual({
        reason: "cancelled",
        set: [true, false, false]
      })
    })
  )

  it.effect("lets a lost lease replace a reason that kept it, and nothing replace a lost lease", () =>
    Effect.gen(function* () {
      expect(yield* stops("cancelled", "lease_lost", "deadline")).toEqual({
        reason: "lease_lost",
        set: [true, true, false]
      })
      expect(yield* stops("shutdown", "self_fenced", "lease_lost")).toEqual({
        reason: "self_fenced",
        set: [true, true, false]
      })
      expect(Control.leaseGone((yield* stops("deadline", "lease_lost")).reason)).toBe(true)
    })
  )
})

describe("Control.withLock (the attempt's ledger lock)", () => {
  const lockOf = () => Control.ledgerOf(Control.make({ localLeaseEnd: 0, costCents: 0 }))

  it.effect("runs one holder at a time and wakes waiters in the order they came", () =>
    Effect.gen(function* () {
      const lock = lockOf()
      const log: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const holder = (name: string, wait: Effect.Effect<void>) =>
        Control.withLock(
          lock,
          Effect.gen(function* () {
            log.push(`${name} in`)
            yield* wait
            log.push(`${name} out`)
          })
        )
      const first = yield* Effect.fork(holder("a", Deferred.await(gate)))
      yield* Effect.yieldNow()
      const second = yield* Effect.fork(holder("b", Effect.yieldNow()))
      const third = yield* Effect.fork(holder("c", Effect.void))
      yield* Effect.yieldNow()
      expect(log).toEqual(["a in"])
      expect(lock.waiters.size).toBe(2)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      yield* Fiber.join(third)
      expect(log).toEqual(["a in", "a out", "b in", "b out", "c in", "c out"])
      expect(lock.held).toBe(false)
    })
  )

  it.effect("is given back when the holder fails or is interrupted", () =>
    Effect.gen(function* () {
      const lock = lockOf()
      const failed = yield* Effect.exit(Control.withLock(lock, Effect.fail("boom")))
      expect(Exit.isFailure(failed)).toBe(true)
      expect(lock.held).toBe(false)
      const holder = yield* Effect.fork(Control.withLock(lock, Effect.never))
      yield* Effect.yieldNow()
      expect(lock.held).toBe(true)
      yield* Fiber.interrupt(holder)
      expect(lock.held).toBe(false)
      expect(yield* Control.withLock(lock, Effect.succeed(7))).toBe(7)
    })
  )

  it.effect("a waiter interrupted while it waits leaves the queue and never holds the lock", () =>
    Effect.gen(function* () {
      const lock = lockOf()
      const gate = yield* Deferred.make<void>()
      let ran = false
      const holder = yield* Effect.fork(Control.withLock(lock, Deferred.await(gate)))
      yield* Effect.yieldNow()
      const waiter = yield* Effect.fork(
        Control.withLock(
          lock,
          Effect.sync(() => {
            ran = true
          })
        )
      )
      yield* Effect.yieldNow()
      expect(lock.waiters.size).toBe(1)
      yield* Fiber.interrupt(waiter)
      expect(lock.waiters.size).toBe(0)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      expect(ran).toBe(false)
      expect(lock.held).toBe(false)
    })
  )
})
