/**
 * Retry delays: exponential backoff with full jitter, floored by the server's Retry-After when the error class
 * honours it. Randomness comes only from Effect's `Random`, so a seeded run replays the same delays.
 *
 * @since 0.1.0
 */
import { Effect, Random } from "effect"
import { type ClassPolicy, policy as classPolicy } from "./ErrorClass.js"
import type { Normalized } from "./Normalize.js"

/**
 * Input of `backoff`: the 1-based attempt number that just failed, the base delay and the cap, in milliseconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface BackoffOptions {
  readonly attempt: number
  readonly baseMs: number
  readonly capMs: number
}

/**
 * The upper bound of the jittered delay after `attempt`: `min(capMs, baseMs * 2^(attempt - 1))`, never negative
 * and never NaN (attempts below 1 count as 1; a huge attempt saturates at the cap).
 *
 * @since 0.1.0
 * @category combinators
 */
export const ceiling = ({ attempt, baseMs, capMs }: BackoffOptions): number => {
  const base = Math.max(0, baseMs)
  const cap = Math.max(0, capMs)
  const n = Math.max(1, Math.floor(Number.isFinite(attempt) ? attempt : 1))
  if (base === 0) return 0
  const exponential = base * 2 ** Math.min(n - 1, 1_000)
  return Math.min(cap, exponential)
}

/**
 * Full-jitter backoff: a whole number of milliseconds drawn uniformly from `[0, ceiling(options)]` (both ends
 * included) with Effect's `Random`. Full jitter spreads a herd of retries over the whole window instead of
 * synchronising them at the same instants.
 *
 * @since 0.1.0
 * @category combinators
 */
export const backoff = (options: BackoffOptions): Effect.Effect<number> => {
  const top = Math.floor(ceiling(options))
  return top <= 0 ? Effect.succeed(0) : Random.nextIntBetween(0, top + 1)
}

/**
 * The delay before retrying after a normalised failure: `max(backoff, retryAfterMs)`, where the server's
 * Retry-After counts only when the class policy honours it. The policy defaults to the one of the error's class.
 * The result is never below what the server asked for, and never negative.
 *
 * @since 0.1.0
 * @category combinators
 */
export const delayFor = (
  normalized: Pick<Normalized, "errorClass" | "retryAfterMs">,
  attempt: number,
  policy: Pick<ClassPolicy, "baseMs" | "capMs" | "honoursRetryAfter"> = classPolicy(normalized.errorClass)
): Effect.Effect<number> =>
  Effect.map(backoff({ attempt, baseMs: policy.baseMs, capMs: policy.capMs }), (jittered) =>
    policy.honoursRetryAfter && normalized.retryAfterMs !== undefined
      ? Math.max(jittered, normalized.retryAfterMs)
      : jittered
  )
