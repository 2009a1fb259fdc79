/**
 * Lease sizing. Two durations, kept apart:
 * - the attempt's worst case (`leaseFor`): every call of the attempt running to its timeout, plus a margin. It sizes
 *   what an attempt may cost in time, never how long a dead worker keeps its jobs.
 * - the keep-alive (`keptLeaseMs`): the lease a worker actually holds in the Store, short, and renewed by its
 *   batched heartbeats while the attempt runs. When a worker dies its jobs come back once the keep-alive ends, not
 *   after the worst case (a 25 s call: 6 s instead of 27.5 s; a 10-minute job: 6 s instead of 11 minutes).
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
 * The worst case of one attempt: `timeoutMs * (1 + retries + fallbacks) + margin`. A held lease is never longer than
 * this (`keptLeaseMs`); a lease held for the whole attempt is kept by heartbeats alone.
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

/**
 * The default keep-alive: how long a job a worker holds may go unheard from (no renewal reaching the Store) before
 * another worker may claim it. 6 s, so that the jobs of a killed worker are claimed again within 10 s by a live
 * worker polling at the default `receiveWaitMs` (1 s): the last renewal was sent at most a heartbeat interval before
 * the kill, so the lease ends at most 6 s after it, and the next claim round comes within 1 s more. The price is
 * renewals: one every `heartbeatIntervalFor(6_000)` = 2 s per held job (0.5 row or key writes per held job per
 * second, batched into one heartbeat call per worker per interval), and a worker process that stops for longer than
 * the keep-alive (a debugger, a stop signal, swapping) has its attempts fenced: it commits nothing, and another
 * worker may make the model call again.
 *
 * @since 0.9.0
 * @category models
 */
export const defaultKeepAliveMs = 6_000

/**
 * The lease a worker holds for an attempt whose worst case is `attemptLeaseMs`: the keep-alive, or the worst case
 * when that is shorter (a short call needs no longer lease than itself).
 *
 * @since 0.9.0
 * @category combinators
 */
export const keptLeaseMs = (attemptLeaseMs: number, keepAliveMs: number): number =>
  Math.max(1, Math.min(attemptLeaseMs, keepAliveMs))

/**
 * Why a keep-alive is not usable, or `undefined` when it is: it must be a whole number of milliseconds, at least 3
 * (so that a renewal is due every third of it, at least 1 ms apart).
 *
 * @since 0.9.0
 * @category combinators
 */
export const keepAliveProblem = (keepAliveMs: number): string | undefined =>
  Number.isSafeInteger(keepAliveMs) && keepAliveMs >= 3
    ? undefined
    : `keepAliveMs must be a whole number of milliseconds, at least 3; got ${String(keepAliveMs)}`
