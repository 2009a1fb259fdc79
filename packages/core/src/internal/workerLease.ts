/**
 * Keeping an attempt's lease: the heartbeat renews it every third of the lease and the watchdog fences the attempt
 * when no renewal arrived before the local lease end. Both run from the claim until the attempt's outcome is
 * stored, so a store outage shorter than the lease at commit time costs retries, never a second model call.
 *
 * @internal
 */
import { Clock, Effect, Metric } from "effect"
import type { Job } from "../Job.js"
import * as Lease from "../Lease.js"
import * as Metrics from "../Metrics.js"
import type { Store } from "../Store.js"
import type { Delivery, Transport } from "../Transport.js"
import * as Control from "./workerControl.js"
import { heartbeatOne } from "./workerStore.js"

/** What keeping one attempt's lease needs: the services, the delivery and job it holds, its lease and control block. */
interface KeepOptions {
  readonly store: Store["Type"]
  readonly transport: Transport["Type"]
  readonly delivery: Delivery
  readonly job: Job
  readonly leaseMs: number
  readonly control: Control.Control
}

/**
 * Renews the lease every third of it until the lease is gone (the caller interrupts it once the outcome is
 * stored). A renewal reports a cancel request and, through the store time of its reply, a passed deadline; both
 * stop the handler while the lease stays held for the outcome write. The transport's visibility is extended with
 * each renewal unless the transport's visibility follows the Store lease.
 */
const heartbeatLoop = (options: KeepOptions): Effect.Effect<void> => {
  const { control, delivery, job, leaseMs, store, transport } = options
  const extend = transport.capabilities.visibilityFollowsLease
    ? Effect.void
    : transport
        .extend({ delivery, visibilityMs: leaseMs })
        .pipe(Effect.catchAll((error) => Effect.logWarning("visibility extend failed", error)))
  const beat = Effect.gen(function* () {
    // A write of this attempt already learned the lease is lost: nothing more is written under its token.
    if (Control.leaseGone(control.stopReason)) return
    const progress = control.pendingProgress
    control.pendingProgress = undefined
    const sentAt = yield* Clock.currentTimeMillis
    const beat = yield* Effect.either(heartbeatOne(store, { jobId: job.id, token: job.leaseToken, leaseMs, progress }))
    if (beat._tag === "Left") {
      if (progress !== undefined) control.pendingProgress = control.pendingProgress ?? progress
      return yield* Effect.logWarning("heartbeat failed", beat.left)
    }
    const { now, result } = beat.right
    if (result._tag === "LeaseLost") {
      // While the outcome is being written, its own write reports a lost lease (and counts it); a renewal that
      // races a write which already applied must not count one more.
      if (!control.persisting) yield* Metric.increment(Metrics.fencedWritesRejected)
      return yield* Control.stop(control, "lease_lost")
    }
    control.localLeaseEnd = sentAt + leaseMs
    if (result.cancelRequested) yield* Control.stop(control, "cancelled")
    if (job.deadlineAt !== null && now >= job.deadlineAt) yield* Control.stop(control, "deadline")
    yield* extend
  })
  const interval = Lease.heartbeatIntervalFor(leaseMs)
  const loop: Effect.Effect<void> = Effect.zipRight(Effect.sleep(interval), beat).pipe(
    Effect.flatMap(() => (Control.leaseGone(control.stopReason) ? Effect.void : loop))
  )
  return loop
}

/** Self-fencing: past the local lease end without a renewal, stop the handler and any outcome retries. */
const watchdog = (control: Control.Control): Effect.Effect<void> =>
  Effect.gen(function* () {
    while (true) {
      const now = yield* Clock.currentTimeMillis
      const end = control.localLeaseEnd
      if (now >= end) break
      yield* Effect.sleep(end - now)
    }
    if (yield* Control.stop(control, "self_fenced")) yield* Metric.increment(Metrics.selfFenced)
  })

/**
 * Runs `use` while keeping the lease (heartbeat and watchdog), and stops both as soon as `use` ends, however it ends.
 * Stopping signals the interruption and does not wait: neither fiber writes anything once interrupted, and awaiting
 * would cost an interruption handler each.
 *
 * Both are daemons stopped here rather than children of the attempt: a child still running when its parent ends is
 * interrupted a second time, and each further interruption of a fiber costs it a structural comparison (hashing) of
 * its interruption causes, which is most of what ending an attempt costs the runtime.
 *
 * @internal
 */
export const keeping = <A, E, R>(options: KeepOptions, use: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  // Started uninterruptibly so that no interruption lands between the starts and the stop's installation; each fiber
  // is interruptible again inside.
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Effect.forkDaemon(Effect.interruptible(heartbeatLoop(options))), (heartbeat) =>
      Effect.flatMap(Effect.forkDaemon(Effect.interruptible(watchdog(options.control))), (fence) =>
        Effect.ensuring(
          restore(use),
          Effect.withFiberRuntime<void>((self) => {
            heartbeat.unsafeInterruptAsFork(self.id())
            fence.unsafeInterruptAsFork(self.id())
            return Effect.void
          })
        )
      )
    )
  )
