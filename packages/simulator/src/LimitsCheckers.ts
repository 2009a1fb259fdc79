/**
 * The fleet-limits invariants, pure functions over one run's history, like the rest of `Checkers.ts`: they read the
 * Limiter's items as the store applied them (`limit` events, in store time), the provider's calls and refusals, and
 * the store's writes. The permits and pauses are modelled here from the items and their results alone (a permit is
 * live from its grant until `leaseMs` after its grant or latest renewal, inclusive, or until its own holder's
 * release), never from the Limiter's state.
 *
 * - **I13 concurrency.** Per resource, at every grant the permits whose lease is live number at most the declared
 *   `maxConcurrent`, and every reply's count of live permits is the model's: a permit is freed only by its own
 *   holder's Release (job id, token and call id) or by its lease's end, and a Release frees only a permit its holder
 *   still holds.
 * - **I14 no call while paused.** Every call on a resource starts under a permit granted to exactly that call and
 *   holder, and no grant is made while a pause of the resource is in force (from a `Pause` item, until its end or an
 *   operator's resume).
 * - **I15 waiting costs nothing.** A call the Limiter told to wait (or found paused) and never granted later is never
 *   made and its ledger row ends at 0 (unless its process crashed, or the store refused its refund); unless its attempt
 *   had a call granted before (it then waited in place), that attempt ends without using an attempt (`Throttle`,
 *   `Release` or `Abandon`); and every `Throttle` settlement gives the claim's attempt back.
 * - **I16 (almost) no 429 with matching limits.** When the fleet declares the provider's own limits, the provider
 *   refuses a call for concurrency only while some call on the resource is in flight at the provider without a live
 *   permit (its holder paused, crashed or unable to renew past the permit's lease), and for a token bucket only while
 *   the Limiter's buckets and the provider's may have parted: after a call whose cost the Limiter took before the
 *   provider did (granted earlier than admitted), or whose unused output it gave back after the provider did with
 *   another grant in between (its Release late), until the resource has gone a bucket's fill time without a grant.
 *   A bucket is capped at its capacity, so a take or a give-back moved in time is not worth the same: a refill the
 *   earlier take made room for, or a give-back the provider lost to the cap while the bucket was full, is still in
 *   the Limiter's bucket and no longer in the provider's. A bucket's fill time without a grant fills both again.
 *
 * @since 0.4.0
 */

import type { Coverage } from "./Checkers.js"
import type { Event, LimitEvent } from "./History.js"
import { declaredLimits } from "./LimitsPlan.js"
import type { Plan } from "./Plan.js"

type Write = Extract<Event, { k: "write" }>
type Call = Extract<Event, { k: "call" }>

interface Permit {
  until: number
  released: boolean
  readonly grant: LimitEvent
}

const nameOf = (callId: string | null, jobId: string | null, token: number | null): string =>
  `${callId}|${jobId}|${token}`

/** A settle's outcome that uses no attempt. */
const attemptFree = new Set(["Throttle", "Release", "Abandon"])

const used = (snap: { readonly attempts: number; readonly attemptsBase: number }): number =>
  snap.attempts - snap.attemptsBase

/**
 * Check I13 to I16 on one run's history (nothing when the plan has no limits), counting what the coverage needs:
 * calls told to wait (`limiterWait`) and pauses applied (`resourcePaused`).
 *
 * @since 0.4.0
 * @category combinators
 */
export const checkLimits = (
  events: ReadonlyArray<Event>,
  plan: Plan,
  violate: (invariant: string, jobId: string | null, message: string, witness: ReadonlyArray<Event>) => void,
  coverage: Coverage
): void => {
  const limits = plan.limits
  if (limits === undefined) return
  const caps = new Map<string, number | undefined>()
  /** Per resource, how long the provider's emptiest bucket takes to fill: its capacity over its refill per ms. */
  const fillMs = new Map<string, number>()
  limits.resources.forEach((resource, r) => {
    caps.set(`sim:model-${r}:key-a`, declaredLimits(limits, resource).maxConcurrent)
    const slowest = Math.min(resource.requestsPerMinute, resource.inputTokensPerMinute, resource.outputTokensPerMinute)
    fillMs.set(`sim:model-${r}:key-a`, Math.max(resource.burstSeconds * 1_000, 60_000 / slowest))
  })
  const permits = new Map<string, Map<string, Permit>>()
  const permitsOf = (resource: string) => {
    let map = permits.get(resource)
    if (map === undefined) {
      map = new Map()
      permits.set(resource, map)
    }
    return map
  }
  const liveAt = (resource: string, t: number): number => {
    let n = 0
    for (const permit of permitsOf(resource).values()) if (!permit.released && permit.until >= t) n++
    return n
  }
  /** Per resource, the end of the pause in force (`Infinity`: until resumed; below any time: none). */
  const pauseEnd = new Map<string, number>()
  const callResource = new Map<string, string>()
  /** I16: per resource, the grants so far and the latest one's time; per call, its grant's time. */
  const grantCount = new Map<string, number>()
  const lastGrant = new Map<string, number>()
  const grantedAt = new Map<string, number>()
  /** I16: per call the provider was through with, the grants on its resource by then. */
  const grantsAtThrough = new Map<string, number>()
  /** I16: per resource, since when its buckets at the Limiter and at the provider may have parted (none: in step). */
  const parted = new Map<string, number>()
  const part = (resource: string, t: number): void => {
    parted.set(resource, Math.max(parted.get(resource) ?? t, t))
  }
  /** A new permit took its cost at `t` (a repeated Acquire answered with it takes nothing). */
  const granted = (resource: string, callId: string | null, t: number): void => {
    // A bucket's fill time without a take since the buckets parted: both are full, in step again.
    const since = Math.max(lastGrant.get(resource) ?? -Infinity, parted.get(resource) ?? -Infinity)
    if (t - since >= fillMs.get(resource)!) parted.delete(resource)
    grantCount.set(resource, (grantCount.get(resource) ?? 0) + 1)
    lastGrant.set(resource, t)
    if (callId !== null) grantedAt.set(callId, t)
  }
  const waited: Array<LimitEvent> = []
  const calls: Array<Call> = []
  const writesByCall = new Map<string, Array<Write>>()
  const settles: Array<Write> = []
  const crashes = new Map<string, Array<number>>()

  for (const e of events) {
    switch (e.k) {
      case "limit":
        limitEvent(e)
        break
      case "call": {
        calls.push(e)
        // The provider takes the call's cost now, the Limiter took it at the grant.
        const resource = callResource.get(e.callId)
        const grantTime = grantedAt.get(e.callId)
        const admitted = e.outcome !== "limited" && e.outcome !== "quota"
        if (admitted && resource !== undefined && grantTime !== undefined && grantTime < e.t) part(resource, e.t)
        break
      }
      case "through":
        grantsAtThrough.set(e.callId, grantCount.get(e.resource) ?? 0)
        break
      case "refusal":
        refused(e)
        break
      case "write":
        if (e.op === "charge" && e.callId !== null) {
          const list = writesByCall.get(e.callId) ?? []
          list.push(e)
          writesByCall.set(e.callId, list)
        }
        if (e.op === "settle" && e.ok) settles.push(e)
        break
      case "life":
        if (e.what === "crash") {
          const list = crashes.get(e.who) ?? []
          list.push(e.t)
          crashes.set(e.who, list)
        }
        break
    }
  }

  /**
   * I16: with the provider's own limits declared, a refusal needs a call on the resource in flight at the provider
   * (started, not answered, not yet released: a Release comes only once the provider is through) without a live permit.
   */
  function refused(refusal: Extract<Event, { k: "refusal" }>): void {
    if (limits!.declared !== "match" || refusal.reason === "quota") return
    if (refusal.reason !== "concurrency") {
      const grantTime = grantedAt.get(refusal.callId)
      if (grantTime !== undefined && grantTime < refusal.t) part(refusal.resource, refusal.t)
      if (parted.has(refusal.resource)) return
      violate(
        "I16",
        null,
        `the provider refused ${refusal.callId} for ${refusal.reason} at ${refusal.t} although the fleet keeps its limits`,
        [refusal]
      )
      return
    }
    const map = permitsOf(refusal.resource)
    const orphan = calls.find((c) => {
      if (c.callId === refusal.callId || callResource.get(c.callId) !== refusal.resource) return false
      if (c.outcome === "limited" || c.outcome === "quota" || c.end <= refusal.t) return false
      const permit = map.get(nameOf(c.callId, c.jobId, c.token))
      return permit === undefined || (!permit.released && permit.until < refusal.t)
    })
    if (orphan === undefined) {
      violate(
        "I16",
        null,
        `the provider refused ${refusal.callId} for concurrency at ${refusal.t} with every call in flight under a live permit`,
        [refusal]
      )
    }
  }

  function limitEvent(e: LimitEvent): void {
    if (!e.ok) return
    const { resource, t } = e
    const map = permitsOf(resource)
    const name = nameOf(e.callId, e.jobId, e.token)
    switch (e.op) {
      case "Acquire": {
        if (e.callId !== null) callResource.set(e.callId, resource)
        if (e.res === "Wait" || e.res === "Paused") {
          // Only a wait its caller heard of binds it: a lost reply fails the call as a store error would.
          if (e.delivered) {
            waited.push(e)
            coverage.limiterWait++
          }
          break
        }
        if (e.res !== "Granted") break
        const held = map.get(name)
        if (held === undefined || held.released) {
          map.set(name, { until: t + (e.leaseMs ?? 0), released: false, grant: e })
          granted(resource, e.callId, t)
        }
        if ((pauseEnd.get(resource) ?? -Infinity) > t) {
          violate("I14", e.jobId, `${resource} granted a permit to ${e.callId} at ${t} while paused`, [e])
        }
        const live = liveAt(resource, t)
        const cap = caps.get(resource)
        if (cap !== undefined && live > cap) {
          const holders = [...map.values()].filter((p) => !p.released && p.until >= t).map((p) => p.grant)
          violate("I13", e.jobId, `${live} permits of ${resource} live at ${t}, its limit is ${cap}`, holders)
        }
        break
      }
      case "Release": {
        if (e.res !== "Released") break
        // The provider gave the unused output back when it was through; a grant since saw the buckets differ.
        const through = e.callId === null ? undefined : grantsAtThrough.get(e.callId)
        if (e.reached === true && through !== undefined && through < (grantCount.get(resource) ?? 0)) part(resource, t)
        const held = map.get(name)
        if (held === undefined || held.released) {
          violate("I13", e.jobId, `a Release of ${e.callId} under token ${e.token} freed a permit it did not hold`, [
            ...(held === undefined ? [] : [held.grant]),
            e
          ])
        } else held.released = true
        break
      }
      case "Renew": {
        if (e.res !== "Renewed") break
        const held = map.get(name)
        if (held === undefined || held.released || held.until < t) {
          violate("I13", e.jobId, `a Renew of ${e.callId} under token ${e.token} renewed a permit it did not hold`, [e])
        } else held.until = t + (e.leaseMs ?? 0)
        break
      }
      case "Pause": {
        coverage.resourcePaused++
        const end = e.until === null ? Infinity : e.until
        const current = pauseEnd.get(resource) ?? -Infinity
        pauseEnd.set(resource, current > t ? Math.max(current, end) : end)
        break
      }
      case "Resume":
        pauseEnd.set(resource, -Infinity)
        break
    }
    if (e.permits !== null && e.op !== "Resume") {
      const live = liveAt(resource, t)
      if (e.permits !== live) {
        violate(
          "I13",
          e.jobId,
          `the Limiter counted ${e.permits} live permits of ${resource} after ${e.op} ${e.callId ?? ""} at ${t}; its holders' live permits are ${live}`,
          [e]
        )
      }
    }
  }

  // I14: every call starts under a permit granted to it.
  const grants = new Map<string, LimitEvent>()
  for (const map of permits.values()) for (const [name, permit] of map) grants.set(name, permit.grant)
  const waitedNames = new Set(waited.map((e) => nameOf(e.callId, e.jobId, e.token)))
  for (const call of calls) {
    const name = nameOf(call.callId, call.jobId, call.token)
    const grant = grants.get(name)
    if (grant === undefined || grant.t > call.t) {
      violate(
        "I14",
        call.jobId,
        `call ${call.callId} by ${call.who} started at ${call.t} without a permit${waitedNames.has(name) ? " (the Limiter had told it to wait or that the resource was paused)" : ""}`,
        [...waited.filter((e) => e.callId === call.callId), call]
      )
    }
  }

  // I15: a wait uses no money and no attempt.
  for (const e of waited) {
    // A call of an attempt that had made calls already waits in place and is granted later: checked as a call.
    if (grants.has(nameOf(e.callId, e.jobId, e.token))) continue
    const charges = writesByCall.get(e.callId ?? "") ?? []
    const last = charges.filter((w) => w.ok).at(-1)
    const excused = (crashes.get(e.who) ?? []).some((t) => t >= e.t) || charges.some((w) => !w.ok && w.settled === true)
    if (!excused && (last === undefined || last.settled !== true || last.amount !== 0)) {
      violate(
        "I15",
        e.jobId,
        `call ${e.callId} was told to ${e.res === "Wait" ? "wait" : "wait out a pause"} at ${e.t}, but its ledger row ends at ${last?.amount ?? "nothing"}c${last?.settled === true ? "" : " unsettled"}`,
        [e, ...charges]
      )
    }
    // An attempt that had a call granted before this wait waited in place: its attempt was its earlier calls'.
    const inPlace = [...grants.values()].some(
      (g) => g.jobId === e.jobId && g.token === e.token && g.callId !== e.callId && g.t <= e.t
    )
    const settle = settles.find((w) => w.jobId === e.jobId && w.token === e.token && w.who === e.who)
    if (!inPlace && settle !== undefined && !attemptFree.has(settle.outcome ?? "")) {
      violate(
        "I15",
        e.jobId,
        `the attempt under token ${e.token} waited for ${e.resource} but was settled as ${settle.outcome}`,
        [e, settle]
      )
    }
  }
  for (const w of settles) {
    if (w.outcome !== "Throttle" || w.before === null || w.after === null || w.after.state === "abandoned") continue
    if (used(w.after) !== used(w.before) - 1) {
      violate(
        "I15",
        w.jobId,
        `a Throttle settlement left ${used(w.after)} attempts used (${used(w.before)} while it ran): the attempt was not given back`,
        [w]
      )
    }
  }
}
