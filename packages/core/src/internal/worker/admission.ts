/**
 * Admission before the claim: a worker does not claim jobs whose handler's resource (`HandlerOptions.resource`) has
 * no capacity, so a job that could only be throttled stays queued in its place, and the claim's order (its fairness
 * per tenant) decides who goes first once capacity returns. The limiter stays the judge of every call (`Acquire`);
 * this is the worker's forecast from what the limiter last told it, and costs no statement of its own:
 * - every limiter reply carries the resource's `view` (live permits, bucket levels at the reply's store time, the
 *   pause, half-open), which the worker keeps per resource (`learn`), with the reservation its last call asked and
 *   the end of the last wait it was told;
 * - before a claim, each such resource's room (`openingOf`: how many calls it admits now, or when it is expected to
 *   admit one) is forecast from that view, less the jobs of the resource this worker already holds that have not been
 *   admitted yet (they will take that room first); a resource without a view yet admits one claim, which learns it;
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
 * this (no step, no statement): `make` returns nothing for it.
 *
 * @internal
 */
import type * as Handler from "../../Handler.js"
import type * as Limiter from "../../Limiter.js"
import * as Limits from "../../Limits.js"
import type { Runnable } from "../../Protocol.js"
import type { Held } from "./held.js"

/**
 * What the worker last learned of one resource.
 *
 * @internal
 */
export interface Known {
  /** The view of the last reply that named the resource, and the store time it was taken at. */
  view: Limiter.View
  at: number
  /** The reservation of this worker's last call on it, per dimension (one request, no tokens until one is seen). */
  cost: { [D in Limiter.Dimension]: number }
  /** The store time the last `Wait` answer said to come back at (cleared by a grant; a pause is in the view). */
  waitUntil: number
}

/**
 * A resource's forecast room at a store time: `room` calls it admits now (`Infinity`: no limit known), and, when
 * `room` is 0, `until`, the store time it is expected to admit one.
 *
 * @internal
 */
export interface Opening {
  readonly room: number
  readonly until: number
  /** The one claim is a probe: admitted only to ask the limiter again how things stand. */
  readonly probe?: true
}

const open: Opening = { room: Number.POSITIVE_INFINITY, until: Number.NEGATIVE_INFINITY }

/**
 * The room `known` forecasts at `now`, after `taken` more calls of this worker's last reservation (held jobs not
 * admitted yet). A wait or pause in force gives none until it ends; a paused-until-resumed resource is asked again
 * (one claim, a probe) every `pausedRecheckMs`; a concurrency cap without a free permit, or a half-open resource with
 * its probe out, every `recheckMs` after the view (a permit comes back when a call ends, which no view foresees).
 * Free permits admit as many calls. A bucket admits as many calls as its forecast level holds reservations
 * (`Limits.admission`: a call needs at most the capacity), and opens when its refill covers the next one.
 *
 * @internal
 */
export const openingOf = (
  known: Known,
  now: number,
  taken: number,
  rechecks: { readonly recheckMs: number; readonly pausedRecheckMs: number }
): Opening => {
  if (now < known.waitUntil) return { room: 0, until: known.waitUntil }
  const view = known.view
  // One claim to learn how things stand now, unless a held job is about to ask the limiter anyway.
  const probe: Opening =
    taken === 0 ? { room: 1, until: now, probe: true } : { room: 0, until: now + rechecks.recheckMs }
  if (view.pause !== null) {
    if (view.pause.until === null) {
      const until = known.at + rechecks.pausedRecheckMs
      return now < until ? { room: 0, until } : probe
    }
    if (now < view.pause.until) return { room: 0, until: view.pause.until }
  }
  // Permits come back when calls end, which no view foresees: a view that showed none free (or a half-open
  // resource's probe out) is trusted for `recheckMs`, then a probe claim.
  const stale = now >= known.at + rechecks.recheckMs
  // A half-open resource (or a timed pause that ended since the view: half-open now) admits one probe at a time.
  if (view.halfOpen || view.pause !== null) {
    return view.permits === 0 || stale ? probe : { room: 0, until: known.at + rechecks.recheckMs }
  }
  let room = Number.POSITIVE_INFINITY
  let until = now
  // The cap in force: the declared one, or the one learned from 429s when lower (`Limits.concurrencyCap`).
  const cap =
    view.learnedConcurrent === null
      ? view.maxConcurrent
      : Math.min(view.maxConcurrent ?? view.learnedConcurrent, view.learnedConcurrent)
  if (cap !== null) {
    const free = cap - view.permits
    if (free <= 0) {
      if (stale) return probe
      return { room: 0, until: known.at + rechecks.recheckMs }
    }
    room = Math.max(0, free - taken)
    if (room === 0) until = now + rechecks.recheckMs
  }
  for (const dimension of Limits.dimensions) {
    const bucket = view.buckets[dimension]
    const need = Math.min(known.cost[dimension], bucket?.capacity ?? 0)
    if (bucket === null || need <= 0) continue
    const perMs = bucket.perMinute / 60_000
    const level =
      Math.min(bucket.capacity, bucket.level + Math.max(0, now - known.at) * perMs) - taken * known.cost[dimension]
    const calls = Math.max(0, Math.floor(level / need))
    room = Math.min(room, calls)
    if (calls === 0) until = Math.max(until, now + (need - level) / perMs)
  }
  return room === 0 ? { room, until } : room === Number.POSITIVE_INFINITY ? open : { room, until: now }
}

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

/**
 * The admission of a worker running `handlers`, or undefined when none of them names a resource (nothing to do).
 *
 * @internal
 */
export const make = (options: {
  readonly handlers: ReadonlyArray<Handler.Handler<any, any, any>>
  readonly recheckMs: number
  readonly pausedRecheckMs: number
}): WorkerAdmission | undefined => {
  const limited = options.handlers.filter((handler) => handler.resource !== undefined)
  if (limited.length === 0) return undefined
  const resourceOf = new Map<string, string>()
  for (const handler of limited) resourceOf.set(`${handler.type}@${handler.version}`, handler.resource!)
  const resources = [...new Set(resourceOf.values())]
  const known = new Map<string, Known>()
  const rechecks = { recheckMs: options.recheckMs, pausedRecheckMs: options.pausedRecheckMs }

  /** Held jobs not admitted yet, per resource. */
  const pendingOf = (held: Iterable<Held>): Map<string, number> => {
    const pending = new Map<string, number>()
    for (const h of held) {
      const resource = resourceOf.get(`${h.job.type}@${h.job.version}`)
      if (resource !== undefined && notAdmitted(h)) pending.set(resource, (pending.get(resource) ?? 0) + 1)
    }
    return pending
  }
  // A resource this worker has no view of yet: one claim (a probe) learns it, rather than a full batch for a
  // resource that may have room for one call.
  const openingAt = (resource: string, now: number, taken: number): Opening => {
    const k = known.get(resource)
    if (k !== undefined) return openingOf(k, now, taken, rechecks)
    return taken === 0 ? { room: 1, until: now } : { room: 0, until: now + rechecks.recheckMs }
  }

  return {
    learn: (items, reply) => {
      for (let i = 0; i < items.length; i++) {
        const item = items[i]!
        const result = reply.results[i]
        if (result === undefined) continue
        const k: Known = known.get(item.resource) ?? {
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
          k.waitUntil = short ? Math.min(result.until, reply.now + rechecks.recheckMs) : result.until
        }
        known.set(item.resource, k)
      }
    },

    learnStates: (now, states) => {
      for (const state of states) {
        const k = known.get(state.resource)
        if (k === undefined) {
          known.set(state.resource, {
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
    },

    stale: (now, held) => {
      const pending = pendingOf(held)
      const stale: Array<string> = []
      for (const resource of resources) {
        const k = known.get(resource)
        if (k === undefined || (pending.get(resource) ?? 0) > 0 || now < k.waitUntil) continue
        if (now >= k.at + rechecks.recheckMs && openingOf(k, now, 0, rechecks).probe === true) stale.push(resource)
      }
      return stale
    },

    plan: (want, now, held) => {
      const pending = pendingOf(held)
      const types: Array<Runnable> = []
      const rooms = new Map<string, number>()
      let unlimited = false
      let until = Number.POSITIVE_INFINITY
      for (const handler of options.handlers) {
        const resource = handler.resource
        if (resource === undefined) {
          unlimited = true
          types.push({ type: handler.type, version: handler.version })
          continue
        }
        const opening = openingAt(resource, now, pending.get(resource) ?? 0)
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
    },

    verdicts: (handlers, now, held) => {
      const pending = pendingOf(held)
      return handlers.map((handler) => {
        const resource = handler.resource
        if (resource === undefined) return undefined
        const taken = pending.get(resource) ?? 0
        const opening = openingAt(resource, now, taken)
        if (opening.room === 0) return opening.until
        pending.set(resource, taken + 1)
        return undefined
      })
    }
  }
}
