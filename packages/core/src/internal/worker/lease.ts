/**
 * Keeping the leases of everything a worker holds, from the claim until each job's outcome is stored (jobs waiting
 * in the local queue, running, or being written). One keeper per worker, not per job:
 * - the heartbeater renews, in one `Store.heartbeat` call, every held lease whose renewal is due (a third of its
 *   lease after the last renewal was sent; leases due within half an interval more ride along, so a worker's leases
 *   settle into one call per interval). It does not wait for a call's reply before the next renewal falls due: up
 *   to `renewalsInFlight` calls are out at once, so one slow store call holds back no lease for longer than it
 *   takes, and a reply that comes late never moves a lease's local end back. Two calls may carry one lease; the
 *   Store never moves a lease's end back either (`Protocol.heartbeatTransition`), so whichever applies last, the
 *   Store's end is at or after the local one. A renewal reports a cancel request and, through its reply's store time, a
 *   passed deadline; both stop the attempt while the lease stays held for the outcome write. A `LeaseLost` item
 *   stops its attempt for good. When the transport's visibility does not follow the Store lease, the renewed
 *   deliveries are extended in one `Transport.extend` call.
 * - the watchdog fences (`self_fenced`) every held attempt whose local lease end (send time of the last granted
 *   claim or renewal, plus the lease) has come without a renewal. It never waits on I/O, so a hung store call cannot
 *   keep it from fencing in time.
 * Neither writes anything for an attempt once its lease is known lost.
 *
 * @internal
 */
import { Effect, Fiber, Metric, type Tracer } from "effect"
import type { Job } from "../../Job.js"
import * as Lease from "../../Lease.js"
import type { Renew } from "../../Limiter.js"
import * as Metrics from "../../Metrics.js"
import type { HeartbeatItem, Store } from "../../Store.js"
import type { Delivery, ExtendItem, Transport } from "../../Transport.js"
import { withNow } from "../now.js"
import { catchFailure, inOrder } from "../steps.js"
import * as Tracing from "../tracing.js"
import type { Start } from "./batch.js"
import * as Control from "./control.js"

/**
 * One job a worker holds a lease on: the job as claimed, its handler's lease, the attempt's control block and, with
 * a transport that delivers messages, the delivery that brought it.
 *
 * @internal
 */
export interface Held {
  readonly job: Job
  readonly leaseMs: number
  readonly control: Control.Control
  readonly delivery: Delivery | undefined
  /** Local clock ms at which the next renewal is due. */
  nextBeatAt: number
  /**
   * The heartbeat call (numbered by the keeper in send order; 0: the claim) whose reply last set the lease's local
   * end. A reply of an earlier call, landing after a later one's, sets nothing: the later send is the later end
   * (whatever the clock did between the two sends), and its reply already renewed the permits and the delivery.
   */
  renewedBy: number
  /** The heartbeat call that last carried the attempt's progress (0: none), so a failed one puts back only the latest. */
  progressBy: number
  /** The running attempt's span (parent of its heartbeat spans) while tracing; `undefined` otherwise. */
  span: Tracer.AnySpan | undefined
}

/**
 * A held job whose lease was granted by a claim sent at `sentAt` (local clock).
 *
 * @internal
 */
export const hold = (job: Job, leaseMs: number, sentAt: number, delivery: Delivery | undefined): Held => ({
  job,
  leaseMs,
  control: Control.make({ localLeaseEnd: sentAt + leaseMs, costCents: job.costCents }),
  delivery,
  nextBeatAt: sentAt + Lease.heartbeatIntervalFor(leaseMs),
  renewedBy: 0,
  progressBy: 0,
  span: undefined
})

/**
 * A loop's sleep until an instant, cut short when something sooner is due. The wait is one callback; the timer that
 * ends it is one fiber sleeping on the Clock, kept across waits while it is due no later than needed, so a loop that
 * wakes by its timer forks one fiber per wake and one woken early forks none.
 */
class Alarm {
  private resume: ((effect: Effect.Effect<void>) => void) | undefined = undefined
  /** When the current wait must end at the latest (infinity: no wait, or a wait for `wake` only). */
  private armedAt = Number.POSITIVE_INFINITY
  private early = false
  private timer: Fiber.RuntimeFiber<void> | undefined = undefined
  private timerAt = Number.POSITIVE_INFINITY

  /** Wake the loop if it sleeps past `at` (or make its next sleep return at once). */
  wake(at: number): void {
    if (this.resume === undefined) {
      this.early = true
      return
    }
    if (at >= this.armedAt) return
    this.fire()
  }

  private fire(): void {
    const resume = this.resume
    this.resume = undefined
    this.armedAt = Number.POSITIVE_INFINITY
    if (resume !== undefined) resume(Effect.void)
  }

  sleepUntil(at: number, now: number): Effect.Effect<void> {
    if (this.early) {
      this.early = false
      return Effect.void
    }
    const arm =
      Number.isFinite(at) && !(this.timer !== undefined && this.timerAt <= at)
        ? Effect.flatMap(
            Effect.forkDaemon(
              Effect.zipRight(
                Effect.sleep(Math.max(0, at - now)),
                Effect.sync(() => {
                  this.timer = undefined
                  this.timerAt = Number.POSITIVE_INFINITY
                  this.fire()
                })
              )
            ),
            (fiber) =>
              Effect.withFiberRuntime<void>((self) => {
                // The timer it replaces is due later than needed now: stopped without waiting for it.
                this.timer?.unsafeInterruptAsFork(self.id())
                this.timer = fiber
                this.timerAt = at
                return Effect.void
              })
          )
        : Effect.void
    // No canceler (it would wrap every wait in an interruption handler): a loop's wait is interrupted only when the
    // loop stops for good, and the resume it leaves behind then does nothing if called (the fiber is gone).
    return Effect.zipRight(
      arm,
      Effect.async<void>((resume) => {
        this.armedAt = at
        this.resume = resume
      })
    )
  }

  /** Stops the timer (the loop is done). */
  readonly stop: Effect.Effect<void> = Effect.suspend(() => {
    const timer = this.timer
    this.timer = undefined
    return timer === undefined ? Effect.void : Fiber.interrupt(timer)
  })
}

/** How many heartbeat calls one keeper keeps out at once. */
const renewalsInFlight = 2

/** A loop that runs `once` again after each round, without yielding between rounds (each round waits on its own). */
const loop = (once: Effect.Effect<void>): Effect.Effect<never> => {
  const again: Effect.Effect<never> = Effect.flatMap(once, () => again)
  return again
}

/**
 * A worker's lease keeper. `add` and `remove` are synchronous (called inside fibers' steps); `heartbeater` and
 * `watchdog` are the two loops, run forked for the worker's lifetime, or, when the keeper is made with `start`,
 * started there by the first `add` (a worker that never holds a lease runs neither).
 *
 * @internal
 */
export interface Keeper {
  readonly add: (held: Held) => void
  readonly remove: (held: Held) => void
  readonly size: () => number
  readonly heartbeater: Effect.Effect<never>
  readonly watchdog: Effect.Effect<never>
}

/** @internal */
export const makeKeeper = (options: {
  readonly store: Store["Type"]
  readonly transport: Transport["Type"]
  readonly tracer?: Tracer.Tracer | undefined
  readonly start?: Start | undefined
  /** Renews the limiter permits of the renewed jobs' calls (a worker with a limiter). */
  readonly renewPermits?: ((items: ReadonlyArray<Renew>) => Effect.Effect<void>) | undefined
}): Keeper => {
  const { store, tracer, transport } = options
  const held = new Set<Held>()
  const beats = new Alarm()
  const fences = new Alarm()
  const extendsVisibility = !transport.capabilities.visibilityFollowsLease
  const maxBatch = Math.max(1, transport.capabilities.maxBatch)

  const live = (h: Held): boolean => !Control.leaseGone(h.control.stopReason)
  /** Heartbeat calls out now, and how many were sent (each call's number). */
  let renewing = 0
  let sent = 0

  const beatOnce: Effect.Effect<void> = Effect.suspend(() => {
    return withNow((at) => {
      let next = Number.POSITIVE_INFINITY
      const due: Array<Held> = []
      for (const h of held) {
        if (!live(h)) continue
        const interval = Lease.heartbeatIntervalFor(h.leaseMs)
        if (h.nextBeatAt <= at + interval / 2) due.push(h)
        else next = Math.min(next, h.nextBeatAt)
      }
      // With every call slot taken, the loop waits for a reply (its end wakes the loop).
      if (due.length === 0 || renewing >= renewalsInFlight) return beats.sleepUntil(next, at)
      // Due again one interval after this send, whether or not its reply has come by then.
      for (const h of due) h.nextBeatAt = at + Lease.heartbeatIntervalFor(h.leaseMs)
      renewing += 1
      sent += 1
      return Effect.asVoid(
        Effect.fork(
          Effect.ensuring(
            renew(due, at, sent),
            Effect.sync(() => {
              renewing -= 1
              beats.wake(Number.NEGATIVE_INFINITY)
            })
          )
        )
      )
    })
  })

  /**
   * Heartbeat call number `seq` for `due`, sent at `sentAt`, and what its reply says for each. A call that has not
   * answered once the longest of its leases has passed is given up (a failed renewal): its slot serves later ones.
   */
  const renew = (due: ReadonlyArray<Held>, sentAt: number, seq: number): Effect.Effect<void> => {
    let longest = 0
    const items: Array<HeartbeatItem> = due.map((h) => {
      const progress = h.control.pendingProgress
      h.control.pendingProgress = undefined
      if (progress !== undefined) h.progressBy = seq
      longest = Math.max(longest, h.leaseMs)
      return { jobId: h.job.id, token: h.job.leaseToken, leaseMs: h.leaseMs, progress }
    })
    const heartbeat = Effect.timeout(store.heartbeat({ items }), longest)
    const call = tracer === undefined ? heartbeat : traced(tracer, due, sentAt, heartbeat)
    return Effect.matchEffect(call, {
      // The match calls these when the reply lands: the leases are updated in that step, with no step of their own.
      onFailure: (error) => {
        for (let i = 0; i < due.length; i++) {
          const h = due[i]!
          const progress = items[i]!.progress
          // Put back unless a later call carried newer progress, or newer progress came meanwhile.
          if (progress !== undefined && h.progressBy === seq) {
            h.control.pendingProgress = h.control.pendingProgress ?? progress
          }
        }
        return Effect.logWarning("heartbeat failed", error)
      },
      onSuccess: ({ now, results }) => {
        const stops: Array<Effect.Effect<unknown>> = []
        const extend: Array<ExtendItem> = []
        const permits: Array<Renew> = []
        for (let i = 0; i < due.length; i++) {
          const h = due[i]!
          const result = results[i]
          // A write of this attempt already learned the lease is lost: nothing more is done under its token.
          if (result === undefined || !live(h)) continue
          if (result._tag === "LeaseLost") {
            // While the outcome is being written, its own write reports a lost lease (and counts it); a renewal
            // that races a write which already applied must not count one more.
            if (!h.control.persisting) stops.push(Metric.increment(Metrics.fencedWritesRejected))
            stops.push(Control.stop(h.control, "lease_lost"))
            continue
          }
          if (result.cancelRequested) stops.push(Control.stop(h.control, "cancelled"))
          if (h.job.deadlineAt !== null && now >= h.job.deadlineAt) stops.push(Control.stop(h.control, "deadline"))
          // A reply that comes after a later call's sets nothing more; nor does one for a job no longer held.
          if (seq < h.renewedBy || !held.has(h)) continue
          h.renewedBy = seq
          h.control.localLeaseEnd = sentAt + h.leaseMs
          if (extendsVisibility && h.delivery !== undefined) {
            extend.push({ delivery: h.delivery, visibilityMs: h.leaseMs })
          }
          // The permits of the job's calls in flight live as long as its lease does.
          if (h.control.permits !== undefined) {
            const holder = { jobId: h.job.id, token: h.job.leaseToken }
            for (const [callId, resource] of h.control.permits) {
              permits.push({ _tag: "Renew", resource, callId, holder, leaseMs: h.leaseMs })
            }
          }
        }
        const stopAll = inOrder(stops)
        const renewed =
          permits.length === 0 || options.renewPermits === undefined
            ? stopAll
            : Effect.zipRight(stopAll, options.renewPermits(permits))
        if (extend.length === 0) return renewed
        return Effect.zipRight(renewed, extendAll(extend))
      }
    })
  }

  /** One `slowcall.heartbeat` span per renewed job, under its attempt (or its submit), spanning the batched call. */
  const traced = <A extends { readonly results: ReadonlyArray<{ readonly _tag: string }> }, E>(
    tracer: Tracer.Tracer,
    due: ReadonlyArray<Held>,
    sentAt: number,
    call: Effect.Effect<A, E>
  ): Effect.Effect<A, E> =>
    Effect.onExit(call, (exit) =>
      withNow((endMs) => {
        for (let i = 0; i < due.length; i++) {
          const h = due[i]!
          const result = exit._tag === "Success" ? exit.value.results[i] : undefined
          Tracing.record({
            tracer,
            name: "slowcall.heartbeat",
            parent: h.span ?? Tracing.parentOf(h.job.traceId),
            startMs: sentAt,
            endMs,
            attributes: {
              "slowcall.job_id": h.job.id,
              "slowcall.token": h.job.leaseToken,
              "slowcall.batch_size": due.length,
              "slowcall.heartbeat.result": result?._tag ?? "error"
            },
            failure:
              exit._tag === "Failure" ? "heartbeat failed" : result?._tag === "LeaseLost" ? "lease lost" : undefined
          })
        }
        return Effect.void
      })
    )

  const extendAll = (items: ReadonlyArray<ExtendItem>): Effect.Effect<void> =>
    inOrder(
      chunks(items, maxBatch).map((chunk) =>
        catchFailure(transport.extend({ items: chunk }), (error) =>
          Effect.logWarning("visibility extend failed", error)
        )
      )
    )

  const fenceOnce: Effect.Effect<void> = withNow((at) => {
    let next = Number.POSITIVE_INFINITY
    const fenced: Array<Held> = []
    for (const h of held) {
      if (!live(h)) continue
      const end = h.control.localLeaseEnd
      if (at >= end) fenced.push(h)
      else next = Math.min(next, end)
    }
    if (fenced.length === 0) return fences.sleepUntil(next, at)
    return Effect.forEach(
      fenced,
      (h) =>
        Effect.flatMap(Control.stop(h.control, "self_fenced"), (first) =>
          first ? Metric.increment(Metrics.selfFenced) : Effect.void
        ),
      { discard: true }
    )
  })

  const heartbeater = Effect.ensuring(loop(beatOnce), beats.stop)
  const watchdog = Effect.ensuring(loop(fenceOnce), fences.stop)
  // With `start`, the loops start at the first held lease.
  const startBeats = options.start?.(heartbeater)
  const startFences = options.start?.(watchdog)
  let waitingToStart = options.start !== undefined
  return {
    add: (h) => {
      held.add(h)
      if (waitingToStart) {
        // The loops' first rounds see every held lease: nothing to wake.
        waitingToStart = false
        startBeats?.()
        startFences?.()
        return
      }
      beats.wake(h.nextBeatAt)
      fences.wake(h.control.localLeaseEnd)
    },
    remove: (h) => {
      held.delete(h)
    },
    size: () => held.size,
    heartbeater,
    watchdog
  }
}

/**
 * `items` cut into consecutive chunks of at most `size`.
 *
 * @internal
 */
export const chunks = <A>(items: ReadonlyArray<A>, size: number): ReadonlyArray<ReadonlyArray<A>> => {
  if (items.length <= size) return [items]
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
