// The harness's common options of W5-W7 (shared/bench/adapters/index.mjs, `CommonOptions`) as slowcall settings,
// shared by bench/slowcall.mjs (Postgres) and bench/slowcall-redis.mjs (Redis) so both map them the same way:
// - leaseMs: slowcall's lease is the handler's declared attempt (`Lease.leaseFor`: timeout plus 10% margin), so
//            the call timeout is chosen to give that lease; absent, a 30 s timeout (a 33 s lease).
// - retry:   `maxAttempts` on every submitted job (first run included) and the Worker's backoff base and cap.
// - limit:   the provider's limits as one fleet resource in the Store (`Limiter.define`: requests per minute and
//            concurrent calls), named on the handler, so each worker admits its calls through the Limiter; a 429
//            with retry-after pauses the resource for every worker and hands the job's attempt back.
// - detectMs: no mapping; the worker has no separate expiry scan to tune (see `gaps`).

/** The resource W7's calls name: one provider key shared by every worker process. */
export const RESOURCE = "bench:provider:key"

/** The call timeout that gives a lease of `leaseMs` (`leaseFor` adds 10%, at least 1 s). */
const timeoutFor = (leaseMs) => Math.max(1, Math.min(Math.floor(leaseMs / 1.1), leaseMs - 1000))

/**
 * What the common options become.
 * @param {{ leaseMs?: number, detectMs?: number, limit?: { rpm: number, concurrency: number },
 *           retry?: { attempts: number, backoffMs: number } }} options
 */
export function settingsOf(options) {
  const timeoutMs = options.leaseMs ? timeoutFor(options.leaseMs) : 30_000
  const gaps = []
  if (options.detectMs) gaps.push("detectMs: no separate expiry scan in the worker; expired leases are claimed again")
  return {
    attempt: { timeoutMs },
    maxAttempts: options.retry?.attempts,
    workerRetry: options.retry ? { baseMs: options.retry.backoffMs, capMs: options.retry.backoffMs } : undefined,
    // A call waiting for one of the few concurrency permits asks again this often: a permit comes back when a call
    // ends (W7's calls take 0.2-0.8 s), much sooner than the worker's default recheck of 1 s.
    throttle: options.limit ? { recheckMs: Number(process.env.SLOWCALL_BENCH_RECHECK_MS ?? 200) } : undefined,
    limits: options.limit
      ? { requestsPerMinute: options.limit.rpm, maxConcurrent: options.limit.concurrency }
      : undefined,
    gaps
  }
}

/** `info()` for the harness: the settings in force, as slowcall names them. */
export function infoOf(settings, store) {
  return {
    settings: {
      timeoutMs: settings.attempt.timeoutMs,
      ...(settings.maxAttempts === undefined ? {} : { maxAttempts: settings.maxAttempts }),
      ...(settings.workerRetry === undefined ? {} : { retry: settings.workerRetry }),
      ...(settings.limits === undefined
        ? {}
        : { resource: RESOURCE, limits: settings.limits, throttle: settings.throttle })
    },
    store,
    gaps: settings.gaps
  }
}

/**
 * The handler's `run`: with limits, the harness's handler (which calls the provider) is one model call on the
 * fleet resource, so the Limiter admits it and a 429 it throws pauses the resource; without, a plain promise.
 */
export function runOf({ Effect, handler, limited }) {
  if (!limited)
    return (payload) =>
      Effect.as(
        Effect.promise(() => handler(payload)),
        null
      )
  return (payload, ctx) =>
    Effect.as(
      ctx.call({
        estimateCents: 0,
        cost: () => 0,
        run: Effect.tryPromise({ try: () => handler(payload), catch: (error) => error })
      }),
      null
    )
}
