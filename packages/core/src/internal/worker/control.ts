/**
 * The per-attempt control block of a running job: why the attempt was stopped (first reason wins), the local
 * lease end used for self-fencing, pending progress, the spend known from the charge ledger, and the lock that makes
 * a call's budget check and reservation one step. Shared by the heartbeat, the watchdog, the handler context and the
 * worker's outcome logic.
 *
 * Its fields are plain mutable values: every read and write happens inside one synchronous step of a fiber, and
 * fibers never run at the same time, so each step sees and leaves a consistent block without an effect per access.
 *
 * @internal
 */
import { Effect, Exit, type Fiber, FiberRef } from "effect"
import { masked } from "../steps.js"
import type { Throttled } from "./limits.js"

/**
 * Why an attempt was stopped. `lease_lost` and `self_fenced` mean this worker may no longer write the job; the others
 * (`cancelled`, `deadline`, `shutdown`, `throttled`: a model call must wait for its provider resource) leave the
 * lease held so the worker can record the outcome.
 *
 * @internal
 */
export type StopReason = "cancelled" | "deadline" | "lease_lost" | "self_fenced" | "shutdown" | "throttled"

/**
 * Whether a stop reason means the lease is no longer this worker's to write with.
 *
 * @internal
 */
export const leaseGone = (reason: StopReason | undefined): boolean =>
  reason === "lease_lost" || reason === "self_fenced"

/** @internal */
export interface Control {
  /** The first reason the attempt was stopped for; undefined while it runs unstopped. */
  stopReason: StopReason | undefined
  /** The handler's fiber, once forked. */
  handlerFiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
  /** Local clock ms until which this worker may act as lease holder (send time of the last renewal + lease). */
  localLeaseEnd: number
  pendingProgress: number | undefined
  /** The job's `costCents` as last reported by the Store. */
  knownCostCents: number
  callCount: number
  /**
   * One permit: a call's budget check, numbering and reservation, and every charge write, run one at a time. Made
   * by the first call (`ledgerOf`): an attempt that calls no model needs none.
   */
  ledger: Lock | undefined
  /** Set once the handler has ended and its outcome is being written. */
  persisting: boolean
  /** Why a stop for `throttled` was made: the resource, what for, until when (the first one counts). */
  throttled: Throttled | undefined
  /**
   * The limiter permits this attempt's calls hold, by call id, renewed with the job's heartbeats. Made by the first
   * limited call: an attempt whose calls name no resource has none.
   */
  permits: Map<string, string> | undefined
}

/** @internal */
export const make = (options: { readonly localLeaseEnd: number; readonly costCents: number }): Control => ({
  stopReason: undefined,
  handlerFiber: undefined,
  localLeaseEnd: options.localLeaseEnd,
  pendingProgress: undefined,
  knownCostCents: options.costCents,
  callCount: 0,
  ledger: undefined,
  persisting: false,
  throttled: undefined,
  permits: undefined
})

/**
 * The attempt's ledger lock, made on first use.
 *
 * @internal
 */
export const ledgerOf = (control: Control): Lock => {
  control.ledger ??= { held: false, waiters: new Set() }
  return control.ledger
}

/**
 * A lock of one permit: what `Effect.Semaphore` of one permit does for `withPermits(1)`. An attempt takes it around
 * every charge write, and `withPermits(1)` there costs the simulator's bench 8% more Effect operations (7 December
 * 2026, `npm run bench:sim -- --runs 100 --trials 1 --warmup 0 --count-ops`: 28,690 per run with this lock, 31,088
 * with `Effect.unsafeMakeSemaphore(1).withPermits(1)`). Invariant: at most one effect runs under it at a time; the holder
 * gives it back however it ends (success, failure, interruption); waiters are woken in the order they came, by a task
 * of the releasing fiber's scheduler, and one that is interrupted while it waits leaves the queue.
 *
 * @internal
 */
export interface Lock {
  held: boolean
  readonly waiters: Set<() => void>
}

/** The waiters that can take the lock now are resumed (one, since it has one permit). */
const wake = (lock: Lock): void => {
  for (const waiter of lock.waiters) {
    if (lock.held) return
    waiter()
  }
}

/** Waits for the lock and takes it; interruptible while it waits. */
const acquire = (lock: Lock): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    const waiter = () => {
      if (lock.held) return
      lock.waiters.delete(waiter)
      resume(
        Effect.suspend(() => {
          if (lock.held) return acquire(lock)
          lock.held = true
          return Effect.void
        })
      )
    }
    lock.waiters.add(waiter)
    return Effect.sync(() => {
      lock.waiters.delete(waiter)
    })
  })

/** Gives the lock back, then ends as `exit`; a waiter, if any, is woken by a task of this fiber's scheduler. */
const releaseThen = <A, E>(lock: Lock, exit: Exit.Exit<A, E>): Effect.Effect<A, E> =>
  Effect.withFiberRuntime<A, E>((fiber) => {
    lock.held = false
    if (lock.waiters.size > 0) {
      fiber.currentScheduler.scheduleTask(() => wake(lock), fiber.getFiberRef(FiberRef.currentSchedulingPriority))
    }
    return exit
  })

/**
 * Runs `effect` holding `lock`: waits for it (interruptibly) when another holds it, and gives it back however the
 * effect ends.
 *
 * @internal
 */
export const withLock = <A, E, R>(lock: Lock, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  // Taken from interruptible code (a reservation) and from uninterruptible code (a settlement) about equally often.
  masked((restore) => {
    const run = Effect.matchCauseEffect(restore(effect), {
      onFailure: (cause) => releaseThen(lock, Exit.failCause(cause)),
      onSuccess: (value) => releaseThen(lock, Exit.succeed(value))
    })
    if (!lock.held) {
      lock.held = true
      return run
    }
    return Effect.zipRight(restore(acquire(lock)), run)
  })

/**
 * Record a stop reason and interrupt the handler without waiting for it. The first reason counts, except that a lost
 * lease (`lease_lost`, `self_fenced`) replaces a reason that left the lease held: once the lease is gone nothing more
 * may be written under its token, whatever stopped the attempt first. Returns whether this call set the reason.
 *
 * @internal
 */
export const stop = (control: Control, reason: StopReason): Effect.Effect<boolean> =>
  Effect.suspend(() => {
    const current = control.stopReason
    if (current !== undefined && (leaseGone(current) || !leaseGone(reason))) return Effect.succeed(false)
    control.stopReason = reason
    const fiber = control.handlerFiber
    if (fiber === undefined) return Effect.succeed(true)
    // Signals the interruption from this fiber and returns at once (no daemon fiber, unlike `Fiber.interruptFork`).
    return Effect.withFiberRuntime<boolean>((self) => {
      fiber.unsafeInterruptAsFork(self.id())
      return Effect.succeed(true)
    })
  })
