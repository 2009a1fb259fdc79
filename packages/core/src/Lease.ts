/**
 * Lease sizing. A lease is derived from the worst case of one attempt, never from a default: a lease shorter than
 * a legitimate call lets a second worker take the job over while the first is still generating (double billing),
 * and a lease much longer than the call delays recovery after a crash.
 *
 * @since 0.1.0
 */

/**
 * The shape of one attempt as a handler declares it: the timeout of a single model call, how many times the
 * handler may retry that call inside the attempt, how many fallback calls (another model or provider) it may
 * make, and an optional explicit safety margin.
 *
 * @since 0.1.0
 * @category models
 */
export interface AttemptPolicy {
  /** Timeout of one model call, in ms. */
  readonly timeoutMs: number
  /** In-attempt retries of the call (default 0). */
  readonly retries?: number | undefined
  /** Fallback calls after the retries are spent (default 0). */
  readonly fallbacks?: number | undefined
  /** Extra time on top of the calls; default 10% of their worst case, at least 1 s. */
  readonly marginMs?: number | undefined
}

/**
 * The smallest margin added to a lease when the handler gives none: 1 s covers store round trips and scheduling
 * jitter for short calls.
 *
 * @since 0.1.0
 * @category models
 */
export const minimumMarginMs = 1_000

/**
 * The worst-case duration of the model calls of one attempt: every call (the first, each retry, each fallback)
 * running to its timeout.
 *
 * @since 0.1.0
 * @category combinators
 */
export const worstCaseMs = (attempt: AttemptPolicy): number =>
  attempt.timeoutMs * (1 + (attempt.retries ?? 0) + (attempt.fallbacks ?? 0))

/**
 * The margin of a lease: the declared one, or 10% of the worst case and never less than `minimumMarginMs`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const marginFor = (attempt: AttemptPolicy): number =>
  attempt.marginMs ?? Math.max(minimumMarginMs, Math.ceil(worstCaseMs(attempt) * 0.1))

/**
 * The lease of one attempt: `timeoutMs * (1 + retries + fallbacks) + margin`. It is never shorter than the
 * worst case of the attempt, so a live worker keeps its lease with heartbeats alone.
 *
 * @since 0.1.0
 * @category combinators
 */
export const leaseFor = (attempt: AttemptPolicy): number => worstCaseMs(attempt) + marginFor(attempt)

/**
 * How often a lease holder renews: a third of the lease, so two consecutive heartbeats can fail before the lease
 * runs out. At least 1 ms.
 *
 * @since 0.1.0
 * @category combinators
 */
export const heartbeatIntervalFor = (leaseMs: number): number => Math.max(1, Math.floor(leaseMs / 3))
