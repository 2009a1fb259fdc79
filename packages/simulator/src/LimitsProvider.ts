/**
 * The simulated provider's own limits, per resource: a concurrency cap and token buckets for requests, input tokens
 * and output tokens per minute, refilled continuously on the world's clock (the provider's), and a spend cap reached
 * for a while. A call is admitted or refused when it reaches the provider: admitted, it takes one request, its input
 * tokens and its `max_tokens` at once (as providers count `max_tokens` on admission) and holds a concurrency slot
 * until the provider is done with it (its reply sent, or its caller gone at its timeout), when the output tokens it
 * did not use are given back; refused, it takes nothing and is answered a 429: `rate_limited` with a `retry-after`
 * (the seconds until the dimension has room), or a spend-cap 429 (`insufficient_quota`, no `retry-after`).
 *
 * @since 0.4.0
 */
import type { History } from "./History.js"
import { type LimitsPlan, type ResourcePlan, resourceId } from "./LimitsPlan.js"

/**
 * Why the provider refused a call.
 *
 * @since 0.4.0
 * @category models
 */
export type RefusalReason = "concurrency" | "requests" | "inputTokens" | "outputTokens" | "quota"

/**
 * A refusal: why, and the `retry-after` in whole seconds (none for a spend cap).
 *
 * @since 0.4.0
 * @category models
 */
export interface Refusal {
  readonly reason: RefusalReason
  readonly retryAfterSeconds: number | null
}

interface Bucket {
  level: number
  at: number
  readonly perMinute: number
  readonly capacity: number
}

interface ResourceState {
  readonly plan: ResourcePlan
  inFlight: number
  readonly requests: Bucket
  readonly inputTokens: Bucket
  readonly outputTokens: Bucket
}

/**
 * A rounding allowance: the fleet's Limiter computes the same levels in another order of operations, so a level the
 * Limiter found exactly sufficient may come out a hair short here. Far below one token.
 */
const epsilon = 1e-6

const bucketOf = (perMinute: number, burstSeconds: number, now: number): Bucket => {
  const capacity = Math.max(1, (perMinute * burstSeconds) / 60)
  return { level: capacity, at: now, perMinute, capacity }
}

const levelAt = (bucket: Bucket, now: number): number =>
  now <= bucket.at
    ? bucket.level
    : Math.min(bucket.capacity, bucket.level + ((now - bucket.at) * bucket.perMinute) / 60_000)

const move = (bucket: Bucket, now: number, amount: number): void => {
  bucket.level = Math.min(bucket.capacity, levelAt(bucket, now) + amount)
  bucket.at = Math.max(bucket.at, now)
}

/**
 * The provider's limits in one run. Invariant: a call is admitted only with a free concurrency slot and every bucket
 * holding its cost at that instant; nothing else changes a bucket but refill, admission and the end of a call.
 *
 * @since 0.4.0
 * @category models
 */
export class ProviderLimits {
  private readonly states = new Map<string, ResourceState>()
  constructor(
    readonly plan: LimitsPlan,
    readonly history: History,
    /** Epoch of the run: the spend cap's times are ms after it. */
    readonly epoch: number
  ) {
    plan.resources.forEach((resource, r) => {
      this.states.set(resourceId(r), {
        plan: resource,
        inFlight: 0,
        requests: bucketOf(resource.requestsPerMinute, resource.burstSeconds, epoch),
        inputTokens: bucketOf(resource.inputTokensPerMinute, resource.burstSeconds, epoch),
        outputTokens: bucketOf(resource.outputTokensPerMinute, resource.burstSeconds, epoch)
      })
    })
  }

  /**
   * A call reaching the provider at `now`: admitted (`undefined`; the caller must call `done` when the provider is
   * through with it) or refused (recorded as a `refusal` event).
   */
  admit(resource: string, callId: string, now: number, inputTokens: number, maxOutput: number): Refusal | undefined {
    const state = this.states.get(resource)
    if (state === undefined) return undefined
    const cap = this.plan.spendCap
    const refusal = (reason: RefusalReason, retryAfterSeconds: number | null): Refusal => {
      this.history.push({ k: "refusal", t: now, resource, callId, reason })
      return { reason, retryAfterSeconds }
    }
    if (cap !== null && resource === resourceId(0) && now >= this.epoch + cap.at && now < this.epoch + cap.until) {
      return refusal("quota", null)
    }
    if (state.inFlight >= state.plan.maxConcurrent) return refusal("concurrency", 1)
    const costs: ReadonlyArray<readonly [RefusalReason, Bucket, number]> = [
      ["requests", state.requests, 1],
      ["inputTokens", state.inputTokens, inputTokens],
      ["outputTokens", state.outputTokens, maxOutput]
    ]
    for (const [reason, bucket, cost] of costs) {
      const missing = cost - levelAt(bucket, now)
      if (missing > epsilon) return refusal(reason, Math.max(1, Math.ceil((missing * 60) / bucket.perMinute)))
    }
    for (const [, bucket, cost] of costs) move(bucket, now, -cost)
    state.inFlight++
    return undefined
  }

  /**
   * The provider is through with an admitted call at `now`: its slot is free, its unused output tokens come back
   * (recorded as a `through` event).
   */
  done(resource: string, callId: string, now: number, unusedOutput: number): void {
    const state = this.states.get(resource)
    if (state === undefined) return
    this.history.push({ k: "through", t: now, resource, callId })
    state.inFlight--
    move(state.outputTokens, now, unusedOutput)
  }
}
