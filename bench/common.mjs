// The harness's common options of W5-W7 (shared/bench/adapters/index.mjs, `CommonOptions`) as slowcall settings,
// shared by bench/slowcall.mjs (Postgres) and bench/slowcall-redis.mjs (Redis) so both map them the same way:
// - leaseMs: "how long a held job may go unheard from before another worker may take it" is the Worker's
//            `keepAliveMs`: the lease every claim and heartbeat asks for, renewed every third of it (absent or 0:
//            the default, `Lease.defaultKeepAliveMs`). The handler's attempt (a 30 s call timeout) only bounds the
//            lease from above (`Lease.keptLeaseMs`), so it stays fixed.
// - retry:   `maxAttempts` on every submitted job (first run included) and the Worker's backoff base and cap.
// - limit:   the provider's limits as one fleet resource in the Store (`Limiter.define`: requests per minute and
//            concurrent calls), named on the handler, so each worker admits its calls through the Limiter; a 429
//            with retry-after pauses the resource for every worker and hands the job's attempt back.
// - detectMs: no mapping; a claim takes over a lapsed lease directly, so there is no expiry scan to tune (see
//            `gaps`).
// Over the Store layer each adapter builds (its store layer, its setup and `pending` stay in its own file), the harness
// calls are made the same way on both backends (`adapterCalls`).

/** The resource W7's calls name: one provider key shared by every worker process. */
export const RESOURCE = "bench:provider:key"

/** The queue the adapters submit to and work (its one job type has the same name). */
export const QUEUE = "anchors"

/** Jobs the worker claims ahead of a free slot (its local queue): the one setting changed from the defaults. */
export const PREFETCH = Number(process.env.SLOWCALL_BENCH_PREFETCH ?? 500)

/** The handler's call timeout: above W5's 20 s longest call and W6's 15 s jobs. */
const TIMEOUT_MS = 30_000

/**
 * What the common options become. `defaultKeepAliveMs` is the Worker's own default (`Lease.defaultKeepAliveMs`),
 * reported when `leaseMs` is absent or 0.
 * @param {{ leaseMs?: number, detectMs?: number, limit?: { rpm: number, concurrency: number },
 *           retry?: { attempts: number, backoffMs: number } }} options
 * @param {number} defaultKeepAliveMs
 */
export function settingsOf(options, defaultKeepAliveMs) {
  const gaps = []
  if (options.detectMs)
    gaps.push("detectMs: no expiry scan to tune; a claim takes over a lease that ended without a renewal directly")
  return {
    attempt: { timeoutMs: TIMEOUT_MS },
    keepAliveMs: options.leaseMs ? options.leaseMs : undefined,
    defaultKeepAliveMs,
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
      keepAliveMs: settings.keepAliveMs ?? settings.defaultKeepAliveMs,
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

/**
 * The harness calls both adapters make alike, over a Store layer the adapter builds: `open` builds it with the Client
 * (and, on a fresh W7 setup, defines the provider's limits once in the Store every worker reads) and returns the
 * layer's context; `enqueue`, `enqueueBulk`, `startWorker` and `stop` are the adapter's own; `close` closes the
 * worker's scope, then the layer's.
 * @param {{ effect: typeof import("effect"), lib: any, settings: ReturnType<typeof settingsOf> }} options
 */
export function adapterCalls({ effect, lib, settings }) {
  const { Effect, Exit, Layer, Schema, Scope } = effect
  const { Client, Handler, Limiter, Worker } = lib
  let layerScope
  let context
  let client
  let workerScope
  const submitted = (input) => ({ queue: QUEUE, type: QUEUE, input, maxAttempts: settings.maxAttempts })
  const runPromise = (program) => Effect.runPromise(Effect.provide(program, context))

  return {
    async open(layer, { fresh }) {
      layerScope = await Effect.runPromise(Scope.make())
      context = await Effect.runPromise(Layer.buildWithScope(layer, layerScope))
      client = await runPromise(Client.make)
      // W7: the provider's limits, once, in the Store every worker reads.
      if (fresh && settings.limits !== undefined)
        await runPromise(
          Effect.flatMap(Limiter.Limiter, (limiter) =>
            limiter.define({ items: [{ resource: RESOURCE, limits: settings.limits }] })
          )
        )
      return context
    },

    async enqueue(jobs) {
      for (const input of jobs) await runPromise(client.submit(submitted(input)))
    },

    async enqueueBulk(jobs) {
      await runPromise(client.submitMany(jobs.map(submitted)))
    },

    async startWorker({ concurrency, handler }) {
      const job = Handler.make({
        type: QUEUE,
        version: 1,
        input: Schema.Unknown,
        result: Schema.Null,
        attempt: settings.attempt,
        ...(settings.limits === undefined ? {} : { resource: RESOURCE }),
        run: runOf({ Effect, handler, limited: settings.limits !== undefined })
      })
      workerScope = await Effect.runPromise(Scope.make())
      await runPromise(
        Scope.extend(
          Worker.make({
            queue: QUEUE,
            concurrency,
            prefetch: PREFETCH,
            keepAliveMs: settings.keepAliveMs,
            retry: settings.workerRetry,
            throttle: settings.throttle,
            handlers: [job]
          }),
          workerScope
        )
      )
    },

    // Closing the worker's scope stops claiming and lets running handlers finish (shutdownGraceMs).
    async stop() {
      if (workerScope) await Effect.runPromise(Scope.close(workerScope, Exit.void))
      workerScope = undefined
    },

    async close() {
      if (workerScope) await Effect.runPromise(Scope.close(workerScope, Exit.void))
      if (layerScope) await Effect.runPromise(Scope.close(layerScope, Exit.void))
      workerScope = layerScope = context = client = undefined
    }
  }
}
