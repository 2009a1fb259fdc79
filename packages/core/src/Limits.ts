/**
 * The Limiter's rules, stated once (the limits section of the protocol; `Protocol.ts` holds the lease protocol's):
 * every rule a `Limiter` applies to a resource, as pure functions over the resource's stored state, store time and
 * the caller's item. The memory Limiter is built from these functions and nothing else, the Postgres adapter runs
 * them in TypeScript under a row lock, and the Redis adapter's Lua is a line-for-line atomic version of them,
 * checked against these functions by the model-based property in `@slowcall/testing` (`LimiterProperty`).
 *
 * Nothing here reads a clock: `now` is always the store time of the call. Numbers are plain doubles, and each
 * formula is written in the order its Lua twin evaluates it, so every backend stores the same bits.
 *
 * What a stored state keeps (`LimitState`): the limits; per bucket dimension a level at a time (`Level`, null when
 * the dimension has no limit); the permits (live ones, and lapsed ones for `defaults.permitRetentionMs`, so that a
 * late Release still corrects the buckets once); the pause in force; whether the resource is half-open; the
 * concurrency learned from 429s (`learn`); counters.
 * Bucket levels are written only by `define`, a grant and a release; reads compute the level at `now` from them.
 *
 * @since 0.4.0
 */
import { InvalidInput } from "./Errors.js"
import type {
  Cost,
  Counters,
  Dimension,
  Holder,
  LimitItem,
  LimitResult,
  Limits,
  PauseKind,
  PauseState,
  PermitView,
  ResourceState,
  View,
  WaitReason
} from "./Limiter.js"

/**
 * Defaults every backend applies: a bucket holds one second's worth of its limit; a lapsed permit is kept an hour
 * for a late Release to correct the buckets, then forgotten; a resource id is 1..200 characters and a pause reason
 * at most 1000; a learned concurrency cap rises by one after `raiseAfter` times the cap calls ended well with the
 * cap in use (`learn`).
 *
 * @since 0.4.0
 * @category rules
 */
export const defaults = {
  burstSeconds: 1,
  permitRetentionMs: 3_600_000,
  resourceLength: 200,
  reasonLength: 1_000,
  raiseAfter: 10
} as const

/**
 * The bucket dimensions in the order the admission verdict checks them.
 *
 * @since 0.4.0
 * @category rules
 */
export const dimensions: ReadonlyArray<Dimension> = ["requests", "inputTokens", "outputTokens"]

// ---------------------------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------------------------

/**
 * A bucket as stored: its `level` at store time `at`. Negative is debt (a call larger than the bucket, or a
 * correction from usage above the reservation).
 *
 * @since 0.4.0
 * @category models
 */
export interface Level {
  readonly level: number
  readonly at: number
}

/**
 * Per dimension, how much a value counts (a reservation taken from the buckets, a cost).
 *
 * @since 0.4.0
 * @category models
 */
export type Amounts = { readonly [D in Dimension]: number }

/**
 * A permit as stored: the call and its holder (together its name), the job's tenant and priority, its end
 * (`until`: live while `until >= now`), whether it is a half-open resource's probe, and what its grant took from
 * each bucket (`taken`, 0 where the dimension had no bucket).
 *
 * @since 0.4.0
 * @category models
 */
export interface Permit {
  readonly callId: string
  readonly holder: Holder
  readonly tenant: string | null
  readonly priority: number
  readonly until: number
  readonly probe: boolean
  readonly taken: Amounts
}

/**
 * The concurrency cap the fleet learned from 429s (`learn`): `maxConcurrent` (an integer >= 1, below the declared
 * cap when there is one) and the calls that ended well with it in use since it last moved (`successes`).
 *
 * @since 0.4.0
 * @category models
 */
export interface Learned {
  readonly maxConcurrent: number
  readonly successes: number
}

/**
 * One resource's stored state. Invariant: a bucket is non-null exactly when its dimension has a limit; `learned`
 * is null or below the declared cap.
 *
 * @since 0.4.0
 * @category models
 */
export interface LimitState {
  readonly limits: Limits
  readonly buckets: { readonly [D in Dimension]: Level | null }
  readonly permits: ReadonlyArray<Permit>
  readonly pause: PauseState | null
  readonly halfOpen: boolean
  readonly learned: Learned | null
  readonly counters: Counters
}

/**
 * Counters of a new record: all zero.
 *
 * @since 0.4.0
 * @category rules
 */
export const zeroCounters: Counters = {
  grants: 0,
  waits: { concurrency: 0, requests: 0, inputTokens: 0, outputTokens: 0, probe: 0 },
  paused: 0,
  pauses: { rate_limited: 0, quota_exhausted: 0, manual: 0 }
}

/**
 * The state of a resource no write has named: no limits, no permits, not paused. A resource behaves so until it is
 * defined.
 *
 * @since 0.4.0
 * @category rules
 */
export const empty: LimitState = {
  limits: {},
  buckets: { requests: null, inputTokens: null, outputTokens: null },
  permits: [],
  pause: null,
  halfOpen: false,
  learned: null,
  counters: zeroCounters
}

// ---------------------------------------------------------------------------------------------------------------
// Buckets
// ---------------------------------------------------------------------------------------------------------------

/**
 * The limit per minute of one dimension, or undefined when it has none.
 *
 * @since 0.4.0
 * @category rules
 */
export const perMinute = (limits: Limits, dimension: Dimension): number | undefined =>
  dimension === "requests"
    ? limits.requestsPerMinute
    : dimension === "inputTokens"
      ? limits.inputTokensPerMinute
      : limits.outputTokensPerMinute

/**
 * A bucket's capacity: `burstSeconds` worth of the limit, at least 1 (so a bucket always admits a call of one).
 *
 * @since 0.4.0
 * @category rules
 */
export const capacity = (limits: Limits, limit: number): number =>
  Math.max(1, (limit * (limits.burstSeconds ?? defaults.burstSeconds)) / 60)

/**
 * A bucket's level at `now`: refilled continuously at `limit / 60000` per ms since `at`, never above the capacity.
 * A `now` at or before `at` (a clock that stood still or moved back) refills nothing.
 *
 * @since 0.4.0
 * @category rules
 */
export const levelAt = (bucket: Level, limit: number, cap: number, now: number): number =>
  now <= bucket.at ? bucket.level : Math.min(cap, bucket.level + (now - bucket.at) * (limit / 60_000))

/** The bucket after `amount` is taken at `now` (no floor: the level may go negative, debt). */
const taken = (bucket: Level, limit: number, cap: number, now: number, amount: number): Level => ({
  level: levelAt(bucket, limit, cap, now) - amount,
  at: Math.max(bucket.at, now)
})

/** The bucket after `amount` (negative: more taken) is given back at `now`, capped at the capacity. */
const givenBack = (bucket: Level, limit: number, cap: number, now: number, amount: number): Level => ({
  level: Math.min(cap, levelAt(bucket, limit, cap, now) + amount),
  at: Math.max(bucket.at, now)
})

// ---------------------------------------------------------------------------------------------------------------
// Permits and time
// ---------------------------------------------------------------------------------------------------------------

/**
 * Whether a permit counts against the concurrency cap at `now`: until its end, inclusive.
 *
 * @since 0.4.0
 * @category rules
 */
export const isLive = (permit: Permit, now: number): boolean => permit.until >= now

/**
 * Whether a lapsed permit is old enough to forget (`defaults.permitRetentionMs` after its end): a Release after
 * that is `NotHeld`, and the reservation stays taken.
 *
 * @since 0.4.0
 * @category rules
 */
export const isForgotten = (permit: Permit, now: number): boolean => permit.until < now - defaults.permitRetentionMs

/**
 * Whether a permit is the one named by `callId` and `holder`.
 *
 * @since 0.4.0
 * @category rules
 */
export const names = (permit: Permit, callId: string, holder: Holder): boolean =>
  permit.callId === callId && permit.holder.jobId === holder.jobId && permit.holder.token === holder.token

/**
 * Whether a pause is in force at `now`: until resumed, or until its end (exclusive).
 *
 * @since 0.4.0
 * @category rules
 */
export const inForce = (pause: PauseState, now: number): boolean => pause.until === null || pause.until > now

/**
 * The concurrency cap in force: the lower of the declared `maxConcurrent` and the learned cap, undefined when
 * neither is set.
 *
 * @since 0.4.0
 * @category rules
 */
export const concurrencyCap = (limits: Limits, learned: Learned | null): number | undefined =>
  learned === null
    ? limits.maxConcurrent
    : limits.maxConcurrent === undefined
      ? learned.maxConcurrent
      : Math.min(limits.maxConcurrent, learned.maxConcurrent)

/**
 * The state as time left it at `now`, which every write persists first: a pause whose end has come is over and
 * leaves the resource half-open (one probe call before it opens fully), and forgotten permits are dropped.
 *
 * @since 0.4.0
 * @category rules
 */
export const advance = (state: LimitState, now: number): LimitState => {
  const ended = state.pause !== null && !inForce(state.pause, now)
  const permits = state.permits.filter((permit) => !isForgotten(permit, now))
  if (!ended && permits.length === state.permits.length) return state
  return ended ? { ...state, permits, pause: null, halfOpen: true } : { ...state, permits }
}

// ---------------------------------------------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------------------------------------------

/**
 * What a view is computed from: the state without its permit list, and the number of live permits.
 *
 * @since 0.4.0
 * @category models
 */
export interface ViewInput {
  readonly limits: Limits
  readonly buckets: LimitState["buckets"]
  readonly pause: PauseState | null
  readonly halfOpen: boolean
  readonly learned: Learned | null
  readonly livePermits: number
}

/**
 * The view of a resource at `now` (see `Limiter.View`): bucket levels refilled to `now`, a pause whose end has come
 * shown as over (the resource half-open).
 *
 * @since 0.4.0
 * @category rules
 */
export const viewOf = (input: ViewInput, now: number): View => {
  const bucket = (dimension: Dimension) => {
    const stored = input.buckets[dimension]
    const limit = perMinute(input.limits, dimension)
    if (stored === null || limit === undefined) return null
    const cap = capacity(input.limits, limit)
    return { level: levelAt(stored, limit, cap, now), capacity: cap, perMinute: limit }
  }
  const pause = input.pause !== null && inForce(input.pause, now) ? input.pause : null
  return {
    permits: input.livePermits,
    maxConcurrent: input.limits.maxConcurrent ?? null,
    learnedConcurrent: input.learned === null ? null : input.learned.maxConcurrent,
    buckets: { requests: bucket("requests"), inputTokens: bucket("inputTokens"), outputTokens: bucket("outputTokens") },
    priorityShare: input.limits.priorityShare ?? null,
    pause: pause === null ? null : { kind: pause.kind, until: pause.until },
    halfOpen: input.halfOpen || (input.pause !== null && pause === null)
  }
}

/**
 * The number of live permits at `now`.
 *
 * @since 0.4.0
 * @category rules
 */
export const livePermits = (state: LimitState, now: number): number => {
  let count = 0
  for (const permit of state.permits) if (isLive(permit, now)) count += 1
  return count
}

/**
 * The view of a stored state at `now`.
 *
 * @since 0.4.0
 * @category rules
 */
export const view = (state: LimitState, now: number): View =>
  viewOf({ ...state, livePermits: livePermits(state, now) }, now)

/**
 * The order `read` lists permits in: by end, then call id, job id and token.
 *
 * @since 0.4.0
 * @category rules
 */
export const permitOrder = (a: PermitView, b: PermitView): number =>
  a.permitUntil - b.permitUntil ||
  (a.callId < b.callId ? -1 : a.callId > b.callId ? 1 : 0) ||
  (a.holder.jobId < b.holder.jobId ? -1 : a.holder.jobId > b.holder.jobId ? 1 : 0) ||
  a.holder.token - b.holder.token

/**
 * A resource as `read` describes it at `now` (see `Limiter.ResourceState`).
 *
 * @since 0.4.0
 * @category rules
 */
export const describe = (resource: string, state: LimitState, now: number): ResourceState => ({
  resource,
  limits: state.limits,
  view: view(state, now),
  pause: state.pause !== null && inForce(state.pause, now) ? state.pause : null,
  permits: state.permits
    .filter((permit) => isLive(permit, now))
    .map((permit) => ({
      callId: permit.callId,
      holder: permit.holder,
      tenant: permit.tenant,
      priority: permit.priority,
      permitUntil: permit.until,
      probe: permit.probe
    }))
    .sort(permitOrder),
  counters: state.counters
})

// ---------------------------------------------------------------------------------------------------------------
// Define and resume
// ---------------------------------------------------------------------------------------------------------------

/**
 * Limits as stored: only the fields that are set.
 *
 * @since 0.4.0
 * @category rules
 */
export const normalize = (limits: Limits): Limits => {
  const out: {
    -readonly [K in keyof Limits]: Limits[K]
  } = {}
  if (limits.maxConcurrent !== undefined) out.maxConcurrent = limits.maxConcurrent
  if (limits.requestsPerMinute !== undefined) out.requestsPerMinute = limits.requestsPerMinute
  if (limits.inputTokensPerMinute !== undefined) out.inputTokensPerMinute = limits.inputTokensPerMinute
  if (limits.outputTokensPerMinute !== undefined) out.outputTokensPerMinute = limits.outputTokensPerMinute
  if (limits.burstSeconds !== undefined) out.burstSeconds = limits.burstSeconds
  if (limits.priorityShare !== undefined) {
    out.priorityShare = { minPriority: limits.priorityShare.minPriority, share: limits.priorityShare.share }
  }
  return out
}

/**
 * A define at `now`: the new limits replace the old whole. Each bucket keeps its level refilled to `now` under the
 * old limit, clamped to the new capacity; a dimension that gains a limit starts full, one that loses it drops its
 * bucket. Permits, the pause, half-open and the counters stay, and so does a learned cap unless the new declared cap
 * is at or below it (then the declared one is in force alone).
 *
 * @since 0.4.0
 * @category rules
 */
export const define = (state: LimitState, limits: Limits, now: number): LimitState => {
  const s = advance(state, now)
  const next = normalize(limits)
  const bucket = (dimension: Dimension): Level | null => {
    const limit = perMinute(next, dimension)
    if (limit === undefined) return null
    const cap = capacity(next, limit)
    const old = s.buckets[dimension]
    const oldLimit = perMinute(s.limits, dimension)
    if (old === null || oldLimit === undefined) return { level: cap, at: now }
    return {
      level: Math.min(cap, levelAt(old, oldLimit, capacity(s.limits, oldLimit), now)),
      at: Math.max(old.at, now)
    }
  }
  const learned =
    s.learned !== null && next.maxConcurrent !== undefined && next.maxConcurrent <= s.learned.maxConcurrent
      ? null
      : s.learned
  return {
    ...s,
    limits: next,
    buckets: { requests: bucket("requests"), inputTokens: bucket("inputTokens"), outputTokens: bucket("outputTokens") },
    learned
  }
}

/**
 * An operator's resume at `now`: no pause and not half-open, whatever the kind; `wasPaused` tells whether it was
 * either.
 *
 * @since 0.4.0
 * @category rules
 */
export const resume = (state: LimitState, now: number): { readonly state: LimitState; readonly wasPaused: boolean } => {
  const s = advance(state, now)
  return { state: { ...s, pause: null, halfOpen: false }, wasPaused: s.pause !== null || s.halfOpen }
}

// ---------------------------------------------------------------------------------------------------------------
// Admission
// ---------------------------------------------------------------------------------------------------------------

/**
 * The verdict of an Acquire on an advanced state at `now`, in this order:
 * 1. `Paused` while a pause is in force.
 * 2. A half-open resource admits one probe at a time: while a probe's permit is live, `Wait` with reason `probe`
 *    until its end.
 * 3. Concurrency: live permits must stay below the cap in force (`concurrencyCap`: the declared cap, or the one
 *    learned from 429s when lower), less `floor(cap * share)` for a call below the priority share's `minPriority`.
 * 4. Each bucket the call takes from (cost > 0): below the priority share a call must leave `capacity * share` in
 *    the bucket. A call needs `min(cost, usable capacity)` in the usable level, so one larger than the bucket is
 *    admitted when the bucket is full (then the level goes negative: debt) and nothing starves.
 *
 * `Wait` names the first dimension without room; its `until` is the latest of the times each such dimension is
 * expected to have room (the earliest live permit's end; the refill time of the missing amount). Otherwise `Grant`,
 * as the probe when the resource is half-open.
 *
 * @since 0.4.0
 * @category rules
 */
export type Verdict =
  | { readonly _tag: "Paused"; readonly pause: PauseState }
  | { readonly _tag: "Wait"; readonly reason: WaitReason; readonly until: number }
  | { readonly _tag: "Grant"; readonly probe: boolean }

/**
 * See `Verdict`.
 *
 * @since 0.4.0
 * @category rules
 */
export const admission = (
  state: LimitState,
  request: { readonly priority: number; readonly cost: Amounts },
  now: number
): Verdict => {
  if (state.pause !== null && inForce(state.pause, now)) return { _tag: "Paused", pause: state.pause }
  if (state.halfOpen) {
    let probeUntil: number | undefined
    for (const permit of state.permits) {
      if (permit.probe && isLive(permit, now)) probeUntil = Math.max(probeUntil ?? permit.until, permit.until)
    }
    if (probeUntil !== undefined) return { _tag: "Wait", reason: "probe", until: probeUntil }
  }
  const limits = state.limits
  const share = limits.priorityShare
  const reserved = share !== undefined && request.priority < share.minPriority ? share.share : 0
  let reason: WaitReason | undefined
  let until = Number.NEGATIVE_INFINITY
  const cap = concurrencyCap(limits, state.learned)
  if (cap !== undefined) {
    const allowed = cap - Math.floor(cap * reserved)
    let live = 0
    let earliest = Number.POSITIVE_INFINITY
    for (const permit of state.permits) {
      if (isLive(permit, now)) {
        live += 1
        earliest = Math.min(earliest, permit.until)
      }
    }
    if (live >= allowed) {
      reason = "concurrency"
      until = Math.max(until, earliest)
    }
  }
  for (const dimension of dimensions) {
    const bucket = state.buckets[dimension]
    const limit = perMinute(limits, dimension)
    const cost = request.cost[dimension]
    if (bucket === null || limit === undefined || cost <= 0) continue
    const cap = capacity(limits, limit)
    const reserve = cap * reserved
    const usable = levelAt(bucket, limit, cap, now) - reserve
    const need = Math.min(cost, cap - reserve)
    if (usable < need) {
      reason ??= dimension
      until = Math.max(until, now + (need - usable) / (limit / 60_000))
    }
  }
  return reason === undefined ? { _tag: "Grant", probe: state.halfOpen } : { _tag: "Wait", reason, until }
}

/**
 * What an Acquire costs per dimension: one request and no tokens unless it says otherwise.
 *
 * @since 0.4.0
 * @category rules
 */
export const costOf = (item: { readonly cost?: Cost | undefined }): Amounts => ({
  requests: item.cost?.requests ?? 1,
  inputTokens: item.cost?.inputTokens ?? 0,
  outputTokens: item.cost?.outputTokens ?? 0
})

/**
 * The pause that stands when `next` arrives while `current` is in force: the one that ends later (no end is the
 * latest); at the same end, `rate_limited` yields to the other kinds, otherwise the newer one stands.
 *
 * @since 0.4.0
 * @category rules
 */
export const mergePause = (current: PauseState | null, next: PauseState): PauseState => {
  if (current === null) return next
  const end = (pause: PauseState) => (pause.until === null ? Number.POSITIVE_INFINITY : pause.until)
  const rank = (kind: PauseKind) => (kind === "rate_limited" ? 0 : 1)
  if (end(next) !== end(current)) return end(next) > end(current) ? next : current
  return rank(next.kind) >= rank(current.kind) ? next : current
}

/**
 * What a Release gives back to one dimension's bucket: the whole reservation when the call never reached the
 * provider (the request too); once reached, nothing for the request, and `taken - actual` for a token dimension
 * whose usage is known (negative when the call used more than it reserved), nothing when unknown.
 *
 * @since 0.4.0
 * @category rules
 */
export const giveBack = (
  permit: Permit,
  release: {
    readonly reached: boolean
    readonly usage?: { readonly [K in Exclude<Dimension, "requests">]?: number | undefined } | undefined
  },
  dimension: Dimension
): number => {
  if (!release.reached) return permit.taken[dimension]
  if (dimension === "requests") return 0
  const actual = release.usage?.[dimension]
  return actual === undefined ? 0 : permit.taken[dimension] - actual
}

/**
 * What a Release that reached the provider teaches the resource's concurrency cap; `others` counts the live permits
 * besides the released one. Lower at once, raise slowly (as TCP does with its window), so a fleet that declares no
 * cap, or one above the provider's, converges on the provider's cap from its 429s:
 * - a call the provider refused with a rate limit (`rateLimited`): the cap in force falls to the calls still in
 *   flight beside it, `max(1, min(cap, others))`, its successes back to 0;
 * - a call that ended otherwise with a learned cap in use (`others + 1 >= cap`) counts one success; after
 *   `defaults.raiseAfter * cap` of them the cap rises by one;
 * - a learned cap at or above the declared cap is forgotten (the declared one is in force alone).
 * A Release that did not reach the provider teaches nothing.
 *
 * @since 0.4.0
 * @category rules
 */
export const learn = (
  limits: Limits,
  learned: Learned | null,
  release: { readonly reached: boolean; readonly rateLimited?: boolean | undefined },
  others: number
): Learned | null => {
  if (!release.reached) return learned
  const declared = limits.maxConcurrent
  const below = (next: Learned): Learned | null =>
    declared !== undefined && next.maxConcurrent >= declared ? null : next
  if (release.rateLimited === true) {
    const cap = concurrencyCap(limits, learned)
    return below({ maxConcurrent: Math.max(1, cap === undefined ? others : Math.min(cap, others)), successes: 0 })
  }
  if (learned === null || others + 1 < learned.maxConcurrent) return learned
  const successes = learned.successes + 1
  return successes >= defaults.raiseAfter * learned.maxConcurrent
    ? below({ maxConcurrent: learned.maxConcurrent + 1, successes: 0 })
    : { maxConcurrent: learned.maxConcurrent, successes }
}

const counted = <K extends string>(counts: { readonly [P in K]: number }, key: K): { readonly [P in K]: number } => {
  const out: { [P in K]: number } = { ...counts }
  out[key] = counts[key] + 1
  return out
}

/**
 * What one item does: the state to store and the item's result.
 *
 * @since 0.4.0
 * @category models
 */
export interface Step {
  readonly state: LimitState
  readonly result: LimitResult
}

const acquire = (s: LimitState, item: Extract<LimitItem, { readonly _tag: "Acquire" }>, now: number): Step => {
  const held = s.permits.find((permit) => names(permit, item.callId, item.holder))
  if (held !== undefined) {
    return { state: s, result: { _tag: "Granted", permitUntil: held.until, probe: held.probe, view: view(s, now) } }
  }
  const cost = costOf(item)
  const priority = item.priority ?? 0
  const verdict = admission(s, { priority, cost }, now)
  if (verdict._tag === "Paused") {
    const next: LimitState = { ...s, counters: { ...s.counters, paused: s.counters.paused + 1 } }
    return {
      state: next,
      result: { _tag: "Paused", until: verdict.pause.until, kind: verdict.pause.kind, view: view(next, now) }
    }
  }
  if (verdict._tag === "Wait") {
    const next: LimitState = { ...s, counters: { ...s.counters, waits: counted(s.counters.waits, verdict.reason) } }
    return {
      state: next,
      result: { _tag: "Wait", until: verdict.until, reason: verdict.reason, view: view(next, now) }
    }
  }
  const take = (dimension: Dimension): Level | null => {
    const bucket = s.buckets[dimension]
    const limit = perMinute(s.limits, dimension)
    if (bucket === null || limit === undefined) return null
    return taken(bucket, limit, capacity(s.limits, limit), now, cost[dimension])
  }
  const permit: Permit = {
    callId: item.callId,
    holder: { jobId: item.holder.jobId, token: item.holder.token },
    tenant: item.tenant ?? null,
    priority,
    until: now + item.leaseMs,
    probe: verdict.probe,
    taken: {
      requests: s.buckets.requests === null ? 0 : cost.requests,
      inputTokens: s.buckets.inputTokens === null ? 0 : cost.inputTokens,
      outputTokens: s.buckets.outputTokens === null ? 0 : cost.outputTokens
    }
  }
  const next: LimitState = {
    ...s,
    buckets: { requests: take("requests"), inputTokens: take("inputTokens"), outputTokens: take("outputTokens") },
    permits: [...s.permits, permit],
    counters: { ...s.counters, grants: s.counters.grants + 1 }
  }
  return {
    state: next,
    result: { _tag: "Granted", permitUntil: permit.until, probe: permit.probe, view: view(next, now) }
  }
}

const release = (s: LimitState, item: Extract<LimitItem, { readonly _tag: "Release" }>, now: number): Step => {
  const held = s.permits.find((permit) => names(permit, item.callId, item.holder))
  if (held === undefined) return { state: s, result: { _tag: "NotHeld", view: view(s, now) } }
  const back = (dimension: Dimension): Level | null => {
    const bucket = s.buckets[dimension]
    const limit = perMinute(s.limits, dimension)
    if (bucket === null || limit === undefined) return null
    return givenBack(bucket, limit, capacity(s.limits, limit), now, giveBack(held, item, dimension))
  }
  const others = livePermits(s, now) - (isLive(held, now) ? 1 : 0)
  const next: LimitState = {
    ...s,
    buckets: { requests: back("requests"), inputTokens: back("inputTokens"), outputTokens: back("outputTokens") },
    permits: s.permits.filter((permit) => permit !== held),
    halfOpen: held.probe && item.reached ? false : s.halfOpen,
    learned: learn(s.limits, s.learned, item, others)
  }
  return { state: next, result: { _tag: "Released", view: view(next, now) } }
}

const renew = (s: LimitState, item: Extract<LimitItem, { readonly _tag: "Renew" }>, now: number): Step => {
  const held = s.permits.find((permit) => names(permit, item.callId, item.holder))
  if (held === undefined || !isLive(held, now)) return { state: s, result: { _tag: "NotHeld", view: view(s, now) } }
  const renewed: Permit = { ...held, until: now + item.leaseMs }
  const next: LimitState = { ...s, permits: s.permits.map((permit) => (permit === held ? renewed : permit)) }
  return { state: next, result: { _tag: "Renewed", permitUntil: renewed.until, view: view(next, now) } }
}

const pause = (s: LimitState, item: Extract<LimitItem, { readonly _tag: "Pause" }>, now: number): Step => {
  const merged = mergePause(s.pause, { kind: item.kind, until: item.until, reason: item.reason, since: now })
  const next: LimitState = {
    ...s,
    pause: merged,
    halfOpen: false,
    counters: { ...s.counters, pauses: counted(s.counters.pauses, item.kind) }
  }
  return { state: next, result: { _tag: "Paused", until: merged.until, kind: merged.kind, view: view(next, now) } }
}

/**
 * One `apply` item on the resource's stored state at `now` (first `advance`d): the state to store and the item's
 * result.
 * - Acquire: the existing grant when the same call and holder hold a permit (nothing else written); otherwise the
 *   `admission` verdict. A grant takes the cost from every bucket (each refilled to `now` first) and adds a permit
 *   until `now + leaseMs`; a wait or a pause takes nothing. Each verdict is counted.
 * - Release: `NotHeld` unless the exact holder's permit (live or lapsed, not yet forgotten) exists; otherwise the
 *   permit goes and each bucket gets `giveBack` (capped at its capacity), and the concurrency cap learns from it
 *   (`learn`). A probe's Release that reached the provider closes the half-open state (the rate limit is over); one
 *   that did not leaves it half-open, so the next Acquire is the probe.
 * - Renew: the exact holder's live permit runs to `now + leaseMs`; a lapsed one is `NotHeld` (its slot may be
 *   another's by now).
 * - Pause: `mergePause` with the one in force; the resource is no longer half-open (the pause's end makes it so
 *   again). Counted by kind.
 *
 * @since 0.4.0
 * @category rules
 */
export const applyItem = (state: LimitState, item: LimitItem, now: number): Step => {
  const s = advance(state, now)
  switch (item._tag) {
    case "Acquire":
      return acquire(s, item, now)
    case "Release":
      return release(s, item, now)
    case "Renew":
      return renew(s, item, now)
    case "Pause":
      return pause(s, item, now)
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Input checks
// ---------------------------------------------------------------------------------------------------------------

const RESOURCE = /^[A-Za-z0-9._:/@+-]{1,200}$/

const isFiniteNumber = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

const invalid = (path: string, message: string) => new InvalidInput({ path, message })

/**
 * Whether `value` is a resource id: 1..200 characters of `[A-Za-z0-9._:/@+-]`.
 *
 * @since 0.4.0
 * @category rules
 */
export const isResource = (value: unknown): value is string => typeof value === "string" && RESOURCE.test(value)

const checkResourceAt = (value: unknown, path: string): InvalidInput | undefined =>
  isResource(value)
    ? undefined
    : invalid(path, `a resource id is 1..${defaults.resourceLength} characters of [A-Za-z0-9._:/@+-]`)

const checkPositive = (value: unknown, path: string): InvalidInput | undefined =>
  value === undefined || (isFiniteNumber(value) && value > 0) ? undefined : invalid(path, "must be a finite number > 0")

const checkRequiredPositive = (value: unknown, path: string): InvalidInput | undefined =>
  isFiniteNumber(value) && value > 0 ? undefined : invalid(path, "must be a finite number > 0")

const checkNonNegative = (value: unknown, path: string): InvalidInput | undefined =>
  value === undefined || (isFiniteNumber(value) && value >= 0)
    ? undefined
    : invalid(path, "must be a finite number >= 0")

const checkLimitsAt = (limits: Limits, path: string): InvalidInput | undefined => {
  if (typeof limits !== "object" || limits === null) return invalid(path, "must be an object of limits")
  const mc = limits.maxConcurrent
  if (mc !== undefined && !(Number.isSafeInteger(mc) && mc >= 1)) {
    return invalid(`${path}.maxConcurrent`, "must be an integer >= 1")
  }
  const share = limits.priorityShare
  if (share !== undefined) {
    if (typeof share !== "object" || share === null) return invalid(`${path}.priorityShare`, "must be an object")
    if (!isFiniteNumber(share.minPriority)) {
      return invalid(`${path}.priorityShare.minPriority`, "must be a finite number")
    }
    if (!(isFiniteNumber(share.share) && share.share >= 0 && share.share < 1)) {
      return invalid(`${path}.priorityShare.share`, "must be a number with 0 <= share < 1")
    }
  }
  return (
    checkPositive(limits.requestsPerMinute, `${path}.requestsPerMinute`) ??
    checkPositive(limits.inputTokensPerMinute, `${path}.inputTokensPerMinute`) ??
    checkPositive(limits.outputTokensPerMinute, `${path}.outputTokensPerMinute`) ??
    checkPositive(limits.burstSeconds, `${path}.burstSeconds`)
  )
}

/**
 * The first problem of a set of limits (see `Limiter.Limits` for the ranges), or undefined.
 *
 * @since 0.4.0
 * @category rules
 */
export const checkLimits = (limits: Limits): InvalidInput | undefined => checkLimitsAt(limits, "limits")

const checkNow = (now: unknown): InvalidInput | undefined =>
  now === undefined || isFiniteNumber(now) ? undefined : invalid("now", "must be a finite number")

const checkCall = (
  item: { readonly callId: unknown; readonly holder: unknown },
  path: string
): InvalidInput | undefined => {
  if (typeof item.callId !== "string" || item.callId.length === 0 || item.callId.length > 500) {
    return invalid(`${path}.callId`, "must be a string of 1..500 characters")
  }
  const holder = item.holder as Holder | null | undefined
  if (typeof holder !== "object" || holder === null) return invalid(`${path}.holder`, "must be { jobId, token }")
  if (typeof holder.jobId !== "string" || holder.jobId.length === 0 || holder.jobId.length > 200) {
    return invalid(`${path}.holder.jobId`, "must be a string of 1..200 characters")
  }
  if (!(Number.isSafeInteger(holder.token) && holder.token >= 0)) {
    return invalid(`${path}.holder.token`, "must be an integer >= 0")
  }
  return undefined
}

const checkItem = (item: LimitItem, path: string): InvalidInput | undefined => {
  if (typeof item !== "object" || item === null) return invalid(path, "must be an item")
  const resource = checkResourceAt(item.resource, `${path}.resource`)
  if (resource !== undefined) return resource
  switch (item._tag) {
    case "Acquire": {
      if (item.tenant != null && typeof item.tenant !== "string") return invalid(`${path}.tenant`, "must be a string")
      if (item.priority !== undefined && !isFiniteNumber(item.priority)) {
        return invalid(`${path}.priority`, "must be a finite number")
      }
      if (item.cost !== undefined && (typeof item.cost !== "object" || item.cost === null)) {
        return invalid(`${path}.cost`, "must be an object")
      }
      return (
        checkCall(item, path) ??
        checkRequiredPositive(item.leaseMs, `${path}.leaseMs`) ??
        checkNonNegative(item.cost?.requests, `${path}.cost.requests`) ??
        checkNonNegative(item.cost?.inputTokens, `${path}.cost.inputTokens`) ??
        checkNonNegative(item.cost?.outputTokens, `${path}.cost.outputTokens`)
      )
    }
    case "Release":
      if (typeof item.reached !== "boolean") return invalid(`${path}.reached`, "must be a boolean")
      if (item.rateLimited !== undefined && typeof item.rateLimited !== "boolean") {
        return invalid(`${path}.rateLimited`, "must be a boolean")
      }
      if (item.usage !== undefined && (typeof item.usage !== "object" || item.usage === null)) {
        return invalid(`${path}.usage`, "must be an object")
      }
      return (
        checkCall(item, path) ??
        checkNonNegative(item.usage?.inputTokens, `${path}.usage.inputTokens`) ??
        checkNonNegative(item.usage?.outputTokens, `${path}.usage.outputTokens`)
      )
    case "Renew":
      return checkCall(item, path) ?? checkRequiredPositive(item.leaseMs, `${path}.leaseMs`)
    case "Pause":
      if (item.kind !== "rate_limited" && item.kind !== "quota_exhausted" && item.kind !== "manual") {
        return invalid(`${path}.kind`, "must be rate_limited, quota_exhausted or manual")
      }
      if (item.until !== null && !isFiniteNumber(item.until)) {
        return invalid(`${path}.until`, "must be a finite number or null")
      }
      if (typeof item.reason !== "string" || item.reason.length > defaults.reasonLength) {
        return invalid(`${path}.reason`, `must be a string of at most ${defaults.reasonLength} characters`)
      }
      return undefined
    default:
      return invalid(`${path}._tag`, "must be Acquire, Release, Renew or Pause")
  }
}

/**
 * The first problem of a `define` call, or undefined.
 *
 * @since 0.4.0
 * @category rules
 */
export const checkDefine = (options: {
  readonly items: ReadonlyArray<{ readonly resource: string; readonly limits: Limits }>
  readonly now?: number | undefined
}): InvalidInput | undefined => {
  for (const [i, item] of options.items.entries()) {
    const problem =
      checkResourceAt(item.resource, `items[${i}].resource`) ?? checkLimitsAt(item.limits, `items[${i}].limits`)
    if (problem !== undefined) return problem
  }
  return checkNow(options.now)
}

/**
 * The first problem of an `apply` call, or undefined.
 *
 * @since 0.4.0
 * @category rules
 */
export const checkApply = (options: {
  readonly items: ReadonlyArray<LimitItem>
  readonly now?: number | undefined
}): InvalidInput | undefined => {
  for (const [i, item] of options.items.entries()) {
    const problem = checkItem(item, `items[${i}]`)
    if (problem !== undefined) return problem
  }
  return checkNow(options.now)
}

/**
 * The first problem of a `resume` call, or undefined.
 *
 * @since 0.4.0
 * @category rules
 */
export const checkResume = (options: {
  readonly items: ReadonlyArray<{ readonly resource: string }>
  readonly now?: number | undefined
}): InvalidInput | undefined => {
  for (const [i, item] of options.items.entries()) {
    const problem = checkResourceAt(item.resource, `items[${i}].resource`)
    if (problem !== undefined) return problem
  }
  return checkNow(options.now)
}

/**
 * The first problem of a `read` call, or undefined.
 *
 * @since 0.4.0
 * @category rules
 */
export const checkRead = (options: {
  readonly resources?: ReadonlyArray<string> | undefined
  readonly now?: number | undefined
}): InvalidInput | undefined => {
  for (const [i, resource] of (options.resources ?? []).entries()) {
    const problem = checkResourceAt(resource, `resources[${i}]`)
    if (problem !== undefined) return problem
  }
  return checkNow(options.now)
}
