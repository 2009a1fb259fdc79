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
 * Neither writes anything for an attempt once its lease is known lost. The held records are `held.ts`'s; the loops'
 * sleep is `wake.ts`'s.
 *
 * @internal
 */
import { Effect, Metric, type Tracer } from "effect"
import * as Lease from "../../Lease.js"
import type { Renew } from "../../Limiter.js"
import * as Metrics from "../../Metrics.js"
import type { HeartbeatItem, HeartbeatResult, Store } from "../../Store.js"
import type { ExtendItem, Transport } from "../../Transport.js"
import { withNow } from "../now.js"
import { catchFailure, inOrder } from "../steps.js"
import * as Tracing from "../tracing.js"
import * as Control from "./control.js"
import type { Held } from "./held.js"
import type { Start } from "./wake.js"
import { Alarm, loop } from "./wake.js"

/** How many heartbeat calls one keeper keeps out at once. */
const renewalsInFlight = 2

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

/** What `makeKeeper` takes. @internal */
export interface KeeperOptions {
  readonly store: Store["Type"]
  readonly transport: Transport["Type"]
  readonly tracer?: Tracer.Tracer | undefined
  readonly start?: Start | undefined
  /** Renews the limiter permits of the renewed jobs' calls (a worker with a limiter). */
  readonly renewPermits?: ((items: ReadonlyArray<Renew>) => Effect.Effect<void>) | undefined
}

/** Whether `h` may still be written under its token (its lease is not known lost). */
const live = (h: Held): boolean => !Control.leaseGone(h.control.stopReason)

/** @internal */
export const makeKeeper = (options: KeeperOptions): Keeper => new LeaseKeeper(options)

class LeaseKeeper implements Keeper {
  private readonly held = new Set<Held>()
  private readonly beats = new Alarm()
  private readonly fences = new Alarm()
  private readonly extendsVisibility: boolean
  private readonly maxBatch: number
  /** Heartbeat calls out now, and how many were sent (each call's number). */
  private renewing = 0
  private sent = 0
  /** With `start`, the loops start at the first held lease. */
  private waitingToStart: boolean
  private readonly startBeats: (() => void) | undefined
  private readonly startFences: (() => void) | undefined
  private readonly options: KeeperOptions
  readonly heartbeater: Effect.Effect<never>
  readonly watchdog: Effect.Effect<never>

  constructor(options: KeeperOptions) {
    this.options = options
    this.extendsVisibility = !options.transport.capabilities.visibilityFollowsLease
    this.maxBatch = Math.max(1, options.transport.capabilities.maxBatch)
    const beatOnce = Effect.suspend(() => withNow((at) => this.beatAt(at)))
    const fenceOnce = withNow((at) => this.fenceAt(at))
    this.heartbeater = Effect.ensuring(loop(beatOnce), this.beats.stop)
    this.watchdog = Effect.ensuring(loop(fenceOnce), this.fences.stop)
    this.startBeats = options.start?.(this.heartbeater)
    this.startFences = options.start?.(this.watchdog)
    this.waitingToStart = options.start !== undefined
  }

  add = (h: Held): void => {
    this.held.add(h)
    if (this.waitingToStart) {
      // The loops' first rounds see every held lease: nothing to wake.
      this.waitingToStart = false
      this.startBeats?.()
      this.startFences?.()
      return
    }
    this.beats.wake(h.nextBeatAt)
    this.fences.wake(h.control.localLeaseEnd)
  }

  remove = (h: Held): void => {
    this.held.delete(h)
  }

  size = (): number => this.held.size

  /** One round of the heartbeater at local time `at`: send the renewals due, else sleep until the next is due. */
  private beatAt(at: number): Effect.Effect<void> {
    let next = Number.POSITIVE_INFINITY
    const due: Array<Held> = []
    for (const h of this.held) {
      if (!live(h)) continue
      const interval = Lease.heartbeatIntervalFor(h.leaseMs)
      if (h.nextBeatAt <= at + interval / 2) due.push(h)
      else next = Math.min(next, h.nextBeatAt)
    }
    // With every call slot taken, the loop waits for a reply (its end wakes the loop).
    if (due.length === 0 || this.renewing >= renewalsInFlight) return this.beats.sleepUntil(next, at)
    // Due again one interval after this send, whether or not its reply has come by then.
    for (const h of due) h.nextBeatAt = at + Lease.heartbeatIntervalFor(h.leaseMs)
    this.renewing += 1
    this.sent += 1
    return Effect.asVoid(
      Effect.fork(
        Effect.ensuring(
          this.renew(due, at, this.sent),
          Effect.sync(() => {
            this.renewing -= 1
            this.beats.wake(Number.NEGATIVE_INFINITY)
          })
        )
      )
    )
  }

  /**
   * Heartbeat call number `seq` for `due`, sent at `sentAt`, and what its reply says for each. A call that has not
   * answered once the longest of its leases has passed is given up (a failed renewal): its slot serves later ones.
   */
  private renew(due: ReadonlyArray<Held>, sentAt: number, seq: number): Effect.Effect<void> {
    const { tracer } = this.options
    let longest = 0
    const items: Array<HeartbeatItem> = due.map((h) => {
      const progress = h.control.pendingProgress
      h.control.pendingProgress = undefined
      if (progress !== undefined) h.progressBy = seq
      longest = Math.max(longest, h.leaseMs)
      return { jobId: h.job.id, token: h.job.leaseToken, leaseMs: h.leaseMs, progress }
    })
    const heartbeat = Effect.timeout(this.options.store.heartbeat({ items }), longest)
    const call = tracer === undefined ? heartbeat : traced(tracer, due, sentAt, heartbeat)
    return Effect.matchEffect(call, {
      // Called when the reply lands: the leases are updated from that instant.
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
      onSuccess: ({ now, results }) => this.renewed(due, sentAt, seq, now, results)
    })
  }

  /**
   * What the reply of heartbeat call `seq` (sent at `sentAt`, applied at store time `now`) does for each renewed job:
   * stops (lease lost, cancel, deadline), the new local lease end, the visibility extended, the permits renewed.
   */
  private renewed(
    due: ReadonlyArray<Held>,
    sentAt: number,
    seq: number,
    now: number,
    results: ReadonlyArray<HeartbeatResult>
  ): Effect.Effect<void> {
    const stops: Array<Effect.Effect<unknown>> = []
    const extend: Array<ExtendItem> = []
    const permits: Array<Renew> = []
    for (let i = 0; i < due.length; i++) {
      const h = due[i]!
      const result = results[i]
      // A write of this attempt already learned the lease is lost: nothing more is done under its token.
      if (result === undefined || !live(h)) continue
      if (result._tag === "LeaseLost") {
        // While the outcome is being written, its own write reports a lost lease (and counts it); a renewal that
        // races a write which already applied must not count one more.
        if (!h.control.persisting) stops.push(Metric.increment(Metrics.fencedWritesRejected))
        stops.push(Control.stop(h.control, "lease_lost"))
        continue
      }
      if (result.cancelRequested) stops.push(Control.stop(h.control, "cancelled"))
      if (h.job.deadlineAt !== null && now >= h.job.deadlineAt) stops.push(Control.stop(h.control, "deadline"))
      // A reply that comes after a later call's sets nothing more; nor does one for a job no longer held.
      if (seq < h.renewedBy || !this.held.has(h)) continue
      h.renewedBy = seq
      h.control.localLeaseEnd = sentAt + h.leaseMs
      if (this.extendsVisibility && h.delivery !== undefined) {
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
      permits.length === 0 || this.options.renewPermits === undefined
        ? stopAll
        : Effect.zipRight(stopAll, this.options.renewPermits(permits))
    if (extend.length === 0) return renewed
    return Effect.zipRight(renewed, this.extendAll(extend))
  }

  private extendAll(items: ReadonlyArray<ExtendItem>): Effect.Effect<void> {
    const { transport } = this.options
    return inOrder(
      chunks(items, this.maxBatch).map((chunk) =>
        catchFailure(transport.extend({ items: chunk }), (error) =>
          Effect.logWarning("visibility extend failed", error)
        )
      )
    )
  }

  /** One round of the watchdog at local time `at`: fence every held attempt whose local lease end has come. */
  private fenceAt(at: number): Effect.Effect<void> {
    let next = Number.POSITIVE_INFINITY
    const fenced: Array<Held> = []
    for (const h of this.held) {
      if (!live(h)) continue
      const end = h.control.localLeaseEnd
      if (at >= end) fenced.push(h)
      else next = Math.min(next, end)
    }
    if (fenced.length === 0) return this.fences.sleepUntil(next, at)
    return Effect.forEach(
      fenced,
      (h) =>
        Effect.flatMap(Control.stop(h.control, "self_fenced"), (first) =>
          first ? Metric.increment(Metrics.selfFenced) : Effect.void
        ),
      { discard: true }
    )
  }
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
