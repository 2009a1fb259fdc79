/**
 * The per-attempt control block of a running job: why the attempt was stopped (first reason wins), the local
 * lease end used for self-fencing, pending progress, the spend known from the charge ledger, and the lock that makes
 * a call's budget check and reservation one step. Shared by the heartbeat, the watchdog, the handler context and the
 * worker's outcome logic.
 *
 * @internal
 */
import { Effect, Fiber, Option, Ref } from "effect"

/**
 * Why an attempt was stopped. `lease_lost` and `self_fenced` mean this worker may no longer write the job; the others
 * (`cancelled`, `deadline`, `shutdown`) leave the lease held so the worker can record the outcome.
 *
 * @internal
 */
export type StopReason = "cancelled" | "deadline" | "lease_lost" | "self_fenced" | "shutdown"

/**
 * Whether a stop reason means the lease is no longer this worker's to write with.
 *
 * @internal
 */
export const leaseGone = (reason: Option.Option<StopReason>): boolean =>
  Option.isSome(reason) && (reason.value === "lease_lost" || reason.value === "self_fenced")

/** @internal */
export interface Control {
  readonly stopReason: Ref.Ref<Option.Option<StopReason>>
  readonly handlerFiber: Ref.Ref<Option.Option<Fiber.RuntimeFiber<unknown, unknown>>>
  /** Local clock ms until which this worker may act as lease holder (send time of the last renewal + lease). */
  readonly localLeaseEnd: Ref.Ref<number>
  readonly pendingProgress: Ref.Ref<number | undefined>
  /** The job's `costCents` as last reported by the Store. */
  readonly knownCostCents: Ref.Ref<number>
  readonly callCount: Ref.Ref<number>
  /** One permit: a call's budget check, numbering and reservation, and every charge write, run one at a time. */
  readonly ledger: Effect.Semaphore
  /** Set once the handler has ended and its outcome is being written. */
  readonly persisting: Ref.Ref<boolean>
}

/** @internal */
export const make = (options: { readonly localLeaseEnd: number; readonly costCents: number }): Effect.Effect<Control> =>
  Effect.sync(() => ({
    stopReason: Ref.unsafeMake(Option.none<StopReason>()),
    handlerFiber: Ref.unsafeMake(Option.none<Fiber.RuntimeFiber<unknown, unknown>>()),
    localLeaseEnd: Ref.unsafeMake(options.localLeaseEnd),
    pendingProgress: Ref.unsafeMake<number | undefined>(undefined),
    knownCostCents: Ref.unsafeMake(options.costCents),
    callCount: Ref.unsafeMake(0),
    ledger: Effect.unsafeMakeSemaphore(1),
    persisting: Ref.unsafeMake(false)
  }))

/**
 * Record a stop reason (only the first one counts) and interrupt the handler without waiting for it. Returns
 * whether this call set the reason.
 *
 * @internal
 */
export const stop = (control: Control, reason: StopReason): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const first = yield* Ref.modify(control.stopReason, (current) =>
      Option.isNone(current) ? [true, Option.some(reason)] : [false, current]
    )
    if (first) {
      const fiber = yield* Ref.get(control.handlerFiber)
      if (Option.isSome(fiber)) yield* Fiber.interruptFork(fiber.value)
    }
    return first
  })
