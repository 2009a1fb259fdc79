/**
 * Operational metrics, as Effect `Metric`s named `slowcall_*`. Counters are incremented where the event happens
 * (worker, sweeper); gauges of the job population are refreshed from `Query.stats` by `poll`, because the Store is
 * the truth and no process sees every job. Alert on `slowcall_dead_letter_rate_per_minute` (the arrival rate into
 * failed), not on the dead-letter depth.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Metric, MetricState, Schedule, type Scope } from "effect"
import type { StoreError } from "./Errors.js"
import type { JobState } from "./Job.js"
import { Query } from "./Query.js"
import { Store } from "./Store.js"

/**
 * Jobs per state (tag `state`), as last read from the Store.
 *
 * @since 0.1.0
 * @category metrics
 */
export const jobs = Metric.gauge("slowcall_jobs", { description: "jobs per state, from the store" })

/**
 * Age in ms of the oldest due queued job per priority (tag `priority`): starvation shows here first.
 *
 * @since 0.1.0
 * @category metrics
 */
export const oldestQueuedAgeMs = Metric.gauge("slowcall_oldest_queued_age_ms", {
  description: "age of the oldest due queued job, per priority"
})

/**
 * Spend in cents recorded on jobs, per error class of the job (tag `error_class`, `none` for jobs without one).
 *
 * @since 0.1.0
 * @category metrics
 */
export const costCents = Metric.gauge("slowcall_cost_cents", { description: "recorded spend per error class" })

/**
 * Jobs that this process saw arrive in `failed` (the dead-letter view).
 *
 * @since 0.1.0
 * @category metrics
 */
export const deadLetterArrivals = Metric.counter("slowcall_dead_letter_arrivals_total", {
  description: "jobs moved to failed by this process",
  incremental: true
})

/**
 * Arrivals into `failed` per minute over the polling window, from the Store (all processes).
 *
 * @since 0.1.0
 * @category metrics
 */
export const deadLetterRatePerMinute = Metric.gauge("slowcall_dead_letter_rate_per_minute", {
  description: "arrivals into failed per minute over the window"
})

/**
 * Claims that took over a running job whose lease had expired (its holder died, paused or lost the store).
 *
 * @since 0.1.0
 * @category metrics
 */
export const leaseTakeovers = Metric.counter("slowcall_lease_takeovers_total", {
  description: "claims that took over an expired lease",
  incremental: true
})

/**
 * Fenced writes the Store rejected with `LeaseLost`: a stale worker was stopped from committing.
 *
 * @since 0.1.0
 * @category metrics
 */
export const fencedWritesRejected = Metric.counter("slowcall_fenced_writes_rejected_total", {
  description: "fenced writes rejected because the lease was lost",
  incremental: true
})

/**
 * Deliveries of jobs that were already terminal, acked without any model call.
 *
 * @since 0.1.0
 * @category metrics
 */
export const duplicateDeliveriesDropped = Metric.counter("slowcall_duplicate_deliveries_dropped_total", {
  description: "deliveries of terminal jobs acked without work",
  incremental: true
})

/**
 * Billed model calls started through a handler context.
 *
 * @since 0.1.0
 * @category metrics
 */
export const modelCalls = Metric.counter("slowcall_model_calls_total", {
  description: "billed model calls started",
  incremental: true
})

/**
 * Attempts that ended in a scheduled retry.
 *
 * @since 0.1.0
 * @category metrics
 */
export const retries = Metric.counter("slowcall_retries_total", {
  description: "attempts that ended in a scheduled retry",
  incremental: true
})

/**
 * Attempts a worker interrupted itself because it could not renew its lease in time.
 *
 * @since 0.1.0
 * @category metrics
 */
export const selfFenced = Metric.counter("slowcall_self_fenced_total", {
  description: "attempts interrupted by their own worker because the lease could not be renewed",
  incremental: true
})

/**
 * Deliveries deferred because no handler is registered for their (type, version) here.
 *
 * @since 0.1.0
 * @category metrics
 */
export const unknownHandlerDeferred = Metric.counter("slowcall_unknown_handler_deferred_total", {
  description: "deliveries deferred for lack of a handler of their type and version",
  incremental: true
})

const states: ReadonlyArray<JobState> = ["queued", "running", "succeeded", "failed", "abandoned"]

/**
 * Options of `refresh` and `poll`. `windowMs` is the window of the dead-letter arrival rate (default 5 minutes).
 *
 * @since 0.1.0
 * @category models
 */
export interface PollOptions {
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly windowMs?: number | undefined
}

/**
 * Read `Query.stats` once and set every population gauge from it. Ages and the window use store time.
 *
 * @since 0.1.0
 * @category combinators
 */
export const refresh = (options: PollOptions = {}): Effect.Effect<void, StoreError, Store | Query> =>
  Effect.gen(function* () {
    const store = yield* Store
    const query = yield* Query
    const windowMs = options.windowMs ?? 300_000
    const now = yield* store.now
    const stats = yield* query.stats({ queue: options.queue, tenant: options.tenant, failedSince: now - windowMs })
    for (const state of states) {
      yield* Metric.set(Metric.tagged(jobs, "state", state), stats.byState[state] ?? 0)
    }
    for (const [priority, oldest] of Object.entries(stats.oldestQueuedAt)) {
      yield* Metric.set(Metric.tagged(oldestQueuedAgeMs, "priority", priority), Math.max(0, now - oldest))
    }
    for (const [errorClass, cents] of Object.entries(stats.costCentsByErrorClass)) {
      yield* Metric.set(Metric.tagged(costCents, "error_class", errorClass), cents)
    }
    yield* Metric.set(deadLetterRatePerMinute, stats.failedInWindow / (windowMs / 60_000))
  })

/**
 * A scoped loop that runs `refresh` every `intervalMs` (default 15 s) until the scope closes. A failed read is
 * logged and the gauges keep their last values.
 *
 * @since 0.1.0
 * @category constructors
 */
export const poll = (
  options: PollOptions & { readonly intervalMs?: number | undefined } = {}
): Effect.Effect<void, never, Store | Query | Scope.Scope> =>
  refresh(options).pipe(
    Effect.catchAll((error) => Effect.logWarning("metrics refresh failed", error)),
    Effect.repeat(Schedule.spaced(Duration.millis(options.intervalMs ?? 15_000))),
    Effect.asVoid,
    Effect.forkScoped,
    Effect.asVoid
  )

const render = (name: string, tags: ReadonlyArray<{ readonly key: string; readonly value: string }>): string =>
  tags.length === 0
    ? name
    : `${name}{${tags
        .map((tag) => `${tag.key}="${tag.value.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`)
        .sort()
        .join(",")}}`

/**
 * The current value of every `slowcall_*` counter and gauge, keyed `name` or `name{tag="value",...}` (tags sorted).
 * Counters only grow, so tests compare two snapshots.
 *
 * @since 0.1.0
 * @category combinators
 */
export const snapshot: Effect.Effect<Readonly<Record<string, number>>> = Effect.map(Metric.snapshot, (pairs) => {
  const out: Record<string, number> = {}
  for (const pair of pairs) {
    const name = pair.metricKey.name
    if (!name.startsWith("slowcall_")) continue
    const state = pair.metricState
    const value = MetricState.isCounterState(state)
      ? Number(state.count)
      : MetricState.isGaugeState(state)
        ? Number(state.value)
        : undefined
    if (value !== undefined) out[render(name, pair.metricKey.tags)] = value
  }
  return out
})

/**
 * The value of one entry of `snapshot`, 0 when the metric was never touched.
 *
 * @since 0.1.0
 * @category combinators
 */
export const read = (
  snap: Readonly<Record<string, number>>,
  name: string,
  tags: Readonly<Record<string, string>> = {}
): number =>
  snap[
    render(
      name,
      Object.entries(tags).map(([key, value]) => ({ key, value }))
    )
  ] ?? 0

/**
 * The `slowcall_*` metrics in the Prometheus text exposition format, for an HTTP `/metrics` endpoint.
 *
 * @since 0.1.0
 * @category combinators
 */
export const prometheus: Effect.Effect<string> = Effect.map(Metric.snapshot, (pairs) => {
  const byName = new Map<string, { type: string; lines: Array<string> }>()
  for (const pair of pairs) {
    const name = pair.metricKey.name
    if (!name.startsWith("slowcall_")) continue
    const state = pair.metricState
    const sample = MetricState.isCounterState(state)
      ? { type: "counter", value: Number(state.count) }
      : MetricState.isGaugeState(state)
        ? { type: "gauge", value: Number(state.value) }
        : undefined
    if (sample === undefined) continue
    const entry = byName.get(name) ?? { type: sample.type, lines: [] }
    entry.lines.push(`${render(name, pair.metricKey.tags)} ${sample.value}`)
    byName.set(name, entry)
  }
  return [...byName.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, entry]) => [`# TYPE ${name} ${entry.type}`, ...entry.lines.sort()].join("\n"))
    .join("\n")
    .concat("\n")
})
