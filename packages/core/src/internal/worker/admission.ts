/**
 * Admission before the claim: a worker does not claim jobs whose handler's resource (`HandlerOptions.resource`) has
 * no capacity, so a job that could only be throttled stays queued in its place, and the claim's order (its fairness
 * per tenant) decides who goes first once capacity returns. The limiter stays the judge of every call (`Acquire`);
 * this is the worker's forecast from what the limiter last told it, and costs no statement of its own:
 * - every limiter reply carries the resource's `view` (live permits, bucket levels at the reply's store time, the
 *   pause, half-open), which the worker keeps per resource (`learn`), with the reservation its last call asked and
 *   the end of the last wait it was told;
 * - before a claim, each such resource's room (`openingOf` in `forecast.ts`: how many calls it admits now, or when it
 *   is expected to admit one) is forecast from that view, less the jobs of the resource this worker already holds
 *   that have not been admitted yet (they will take that room first); a resource without a view yet admits one
 *   claim, which learns it;
 * - the Store-selected intake claims only the handlers whose resource has room, at most that many jobs when every
 *   handler it claims for is limited, and sleeps until the earliest opening when none has room; the
 *   transport-delivered intake defers a delivery of a resource without room until its opening, without claiming;
 * - a view that would only be asked again by a probe claim (a full cap, a half-open resource with its probe out, or a
 *   pause until resumed, seen `recheckMs` or more ago, or `pausedRecheckMs` for the pause) is read first
 *   (`Limiter.read`, which writes nothing): only a resource the fresh view shows with room is claimed for, so
 *   waiting on a full cap costs one read per worker and recheck instead of a claim, a reservation, a refused
 *   `Acquire`, a refund and a throttled settlement (and on a transport, a publish and a receive).
 *
 * Handlers that name no resource are never held back, and a worker none of whose handlers names one does none of
 * this (no statement, no wait): `make` returns nothing for it.
 *
 * @internal
 */
import type * as Handler from "../../Handler.js"
import type * as Limiter from "../../Limiter.js"
import * as Limits from "../../Limits.js"
import type { Runnable } from "../../Protocol.js"
import { type Known, type Opening, openingOf } from "./forecast.js"
import type { Held } from "./held.js"

/**
 * What a claim round may claim: the (type, version) pairs whose resource has room (all of them for handlers that
 * name none) and at most how many jobs; or, when no handler here has room, `Closed` until the earliest opening.
 *
 * @internal
 */
export type Plan =
  | { readonly _tag: "Claim"; readonly types: ReadonlyArray<Runnable>; readonly max: number }
  | { readonly _tag: "Closed"; readonly until: number }

/**
 * A worker's admission before the claim: what it learned from the limiter, and the plans and verdicts made from it.
 *
 * @internal
 */
export interface WorkerAdmission {
  /** Takes in one limiter reply (its items, in order, and their results). */
  readonly learn: (
    items: ReadonlyArray<Limiter.LimitItem>,
    reply: { readonly now: number; readonly results: ReadonlyArray<Limiter.LimitResult> }
  ) => void
  /** Takes in the views a `Limiter.read` at store time `now` returned. */
  readonly learnStates: (now: number, states: ReadonlyArray<Limiter.ResourceState>) => void
  /**
   * The resources whose view is too old to plan on at store time `now` (the forecast would admit a probe claim only
   * to ask the limiter again), in handler order: the intake reads them before it plans. None while a held job of the
   * resource is about to ask anyway, and none that was never seen (its first claim learns it).
   */
  readonly stale: (now: number, held: Iterable<Held>) => ReadonlyArray<string>
  /** The plan of a Store-selected claim of up to `want` jobs at store time `now`, given the jobs held (`held`). */
  readonly plan: (want: number, now: number, held: Iterable<Held>) => Plan
  /**
   * The verdicts on a transport's deliveries at store time `now`, in order: `undefined` to claim, or the store time
   * to defer until. Each delivery admitted takes one of its resource's room.
   */
  readonly verdicts: (
    handlers: ReadonlyArray<Handler.Handler<any, any, any>>,
    now: number,
    held: Iterable<Held>
  ) => Array<number | undefined>
}

/**
 * A held job not admitted by the limiter yet: waiting in the local queue, or running without a grant, unstopped.
 */
const notAdmitted = (held: Held): boolean =>
  held.control.permits === undefined && held.control.stopReason === undefined && !held.control.persisting

/** What `make` takes. @internal */
export interface AdmissionOptions {
  readonly handlers: ReadonlyArray<Handler.Handler<any, any, any>>
  readonly recheckMs: number
  readonly pausedRecheckMs: number
}

/**
 * The admission of a worker running `handlers`, or undefined when none of them names a resource (nothing to do).
 *
 * @internal
 */
export const make = (options: AdmissionOptions): WorkerAdmission | undefined =>
  options.handlers.some((handler) => handler.resource !== undefined) ? new Admission(options) : undefined

class Admission implements WorkerAdmission {
  /** The resource of each limited handler, by `type@version`. */
  private readonly resourceOf = new Map<string, string>()
  private readonly resources: ReadonlyArray<string>
  private readonly known = new Map<string, Known>()
  private readonly rechecks: { readonly recheckMs: number; readonly pausedRecheckMs: number }

  constructor(private readonly options: AdmissionOptions) {
    for (const handler of options.handlers) {
      if (handler.resource !== undefined) this.resourceOf.set(`${handler.type}@${handler.version}`, handler.resource)
    }
    this.resources = [...new Set(this.resourceOf.values())]
    this.rechecks = { recheckMs: options.recheckMs, pausedRecheckMs: options.pausedRecheckMs }
  }

  learn: WorkerAdmission["learn"] = (items, reply) => {
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!
      const result = reply.results[i]
      if (result === undefined) continue
      const k: Known = this.known.get(item.resource) ?? {
        view: result.view,
        at: reply.now,
        cost: { requests: 1, inputTokens: 0, outputTokens: 0 },
        waitUntil: Number.NEGATIVE_INFINITY
      }
      k.view = result.view
      k.at = reply.now
      if (item._tag === "Acquire") {
        const cost = Limits.costOf(item)
        k.cost = { requests: cost.requests, inputTokens: cost.inputTokens, outputTokens: cost.outputTokens }
      }
      if (result._tag === "Granted") k.waitUntil = Number.NEGATIVE_INFINITY
      else if (result._tag === "Wait") {
        // A permit or a probe comes back when a call ends: asked again after `recheckMs` at most.
        const short = result.reason === "concurrency" || result.reason === "probe"
        k.waitUntil = short ? Math.min(result.until, reply.now + this.rechecks.recheckMs) : result.until
      }
      this.known.set(item.resource, k)
    }
  }

  learnStates: WorkerAdmission["learnStates"] = (now, states) => {
    for (const state of states) {
      const k = this.known.get(state.resource)
      if (k === undefined) {
        this.known.set(state.resource, {
          view: state.view,
          at: now,
          cost: { requests: 1, inputTokens: 0, outputTokens: 0 },
          waitUntil: Number.NEGATIVE_INFINITY
        })
      } else {
        k.view = state.view
        k.at = now
      }
    }
  }

  stale: WorkerAdmission["stale"] = (now, held) => {
    const pending = this.pendingOf(held)
    const stale: Array<string> = []
    for (const resource of this.resources) {
      const k = this.known.get(resource)
      if (k === undefined || (pending.get(resource) ?? 0) > 0 || now < k.waitUntil) continue
      if (now >= k.at + this.rechecks.recheckMs && openingOf(k, now, 0, this.rechecks).probe === true) {
        stale.push(resource)
      }
    }
    return stale
  }

  plan: WorkerAdmission["plan"] = (want, now, held) => {
    const pending = this.pendingOf(held)
    const types: Array<Runnable> = []
    const rooms = new Map<string, number>()
    let unlimited = false
    let until = Number.POSITIVE_INFINITY
    for (const handler of this.options.handlers) {
      const resource = handler.resource
      if (resource === undefined) {
        unlimited = true
        types.push({ type: handler.type, version: handler.version })
        continue
      }
      const opening = this.openingAt(resource, now, pending.get(resource) ?? 0)
      if (opening.room === 0) {
        until = Math.min(until, opening.until)
        continue
      }
      rooms.set(resource, opening.room)
      types.push({ type: handler.type, version: handler.version })
    }
    if (types.length === 0) return { _tag: "Closed", until }
    let max = want
    if (!unlimited) {
      let sum = 0
      for (const room of rooms.values()) sum += room
      max = Math.min(want, sum)
    }
    return { _tag: "Claim", types, max }
  }

  verdicts: WorkerAdmission["verdicts"] = (handlers, now, held) => {
    const pending = this.pendingOf(held)
    return handlers.map((handler) => {
      const resource = handler.resource
      if (resource === undefined) return undefined
      const taken = pending.get(resource) ?? 0
      const opening = this.openingAt(resource, now, taken)
      if (opening.room === 0) return opening.until
      pending.set(resource, taken + 1)
      return undefined
    })
  }

  /** Held jobs not admitted yet, per resource. */
  private pendingOf(held: Iterable<Held>): Map<string, number> {
    const pending = new Map<string, number>()
    for (const h of held) {
      const resource = this.resourceOf.get(`${h.job.type}@${h.job.version}`)
      if (resource !== undefined && notAdmitted(h)) pending.set(resource, (pending.get(resource) ?? 0) + 1)
    }
    return pending
  }

  /**
   * A resource this worker has no view of yet: one claim (a probe) learns it, rather than a full batch for a resource
   * that may have room for one call.
   */
  private openingAt(resource: string, now: number, taken: number): Opening {
    const k = this.known.get(resource)
    if (k !== undefined) return openingOf(k, now, taken, this.rechecks)
    return taken === 0 ? { room: 1, until: now } : { room: 0, until: now + this.rechecks.recheckMs }
  }
}
