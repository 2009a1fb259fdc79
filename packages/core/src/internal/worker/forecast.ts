/**
 * The forecast admission plans on: from what the limiter last told a worker of one resource (its view at a store
 * time, the cost of the last call asked, the end of the last wait it was told), how many calls it admits at a later
 * store time, or when it is expected to admit one. Plain functions over plain data.
 *
 * @internal
 */
import type * as Limiter from "../../Limiter.js"
import * as Limits from "../../Limits.js"

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
