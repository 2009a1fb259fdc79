/**
 * Operational metrics, as Effect `Metric`s named `slowcall_*`. Counters are incremented where the event happens
 * (worker, sweeper); gauges of the job population are refreshed from `Query.stats` by `poll`, because the Store is
 * the truth and no process sees every job. Alert on `slowcall_dead_letter_rate_per_minute` (the arrival rate into
 * failed), not on the dead-letter depth. While the Store cannot be read the population gauges keep their last
 * values, so every refresh also says whether its read succeeded (`slowcall_store_up`) and how old the values are
 * (`slowcall_stats_age_seconds`): an alert on a gauge pairs with one on those.
 *
 * @since 0.1.0
 */
import {
  Clock,
  Duration,
  Effect,
  Either,
  Metric,
  MetricBoundaries,
  MetricState,
  Option,
  Schedule,
  type Scope
} from "effect"
import type { StoreError } from "./Errors.js"
import type { JobState } from "./Job.js"
import type { PauseKind, ResourceState } from "./Limiter.js"
import { Query, type StoreStats } from "./Query.js"
import { Store } from "./Store.js"

/**
 * Jobs per state (tag `state`), as last read from the Store.
 *
 * @since 0.1.0
 * @category metrics
 */
export const jobs = Metric.gauge("slowcall_jobs", { description: "jobs per state, from the store" })

/**
 * Age in seconds of the oldest due queued job per priority (tag `priority`), in store time: starvation shows here
 * first. Seconds, Prometheus' base unit of time (`promtool check metrics` rejects `_ms`).
 *
 * @since 0.4.0
 * @category metrics
 */
export const oldestQueuedAgeSeconds = Metric.gauge("slowcall_oldest_queued_age_seconds", {
  description: "age of the oldest due queued job, per priority, in seconds"
})

/**
 * Spend in cents recorded on jobs, per error class of the job (tag `error_class`, `none` for jobs without one).
 *
 * @since 0.1.0
 * @category metrics
 */
export const costCents = Metric.gauge("slowcall_cost_cents", {
  description: "spend of the attempts that ended with each error class"
})

/**
 * Spend in cents over the spend window (`PollOptions.spendWindowMs`), per queue, tenant (`none` without one), job
 * type and job state (tags `queue`, `tenant`, `type`, `state`): what bought results (`succeeded`) against what went
 * to dead letters (`failed`).
 *
 * @since 0.3.0
 * @category metrics
 */
export const spendCents = Metric.gauge("slowcall_spend_cents", {
  description: "spend over the spend window, per queue, tenant, type and state"
})

/**
 * Due queued jobs per type and version (tags `type`, `version`), as last read from the Store.
 *
 * @since 0.3.0
 * @category metrics
 */
export const waitingJobs = Metric.gauge("slowcall_waiting_jobs", {
  description: "due queued jobs per type and version"
})

/**
 * How long the oldest due queued job of each type and version has been due, in seconds of store time (tags `type`,
 * `version`): a type no worker claims shows here, growing, while the others stay small.
 *
 * @since 0.4.0
 * @category metrics
 */
export const oldestWaitingAgeSeconds = Metric.gauge("slowcall_oldest_waiting_age_seconds", {
  description: "age of the oldest due queued job, per type and version, in seconds"
})

/**
 * 1 when this process's last read of the Store's stats (`refresh`) succeeded, 0 when it failed: while it is 0 the
 * population gauges are the values of the last read that succeeded.
 *
 * @since 0.4.0
 * @category metrics
 */
export const storeUp = Metric.gauge("slowcall_store_up", {
  description: "1 if the last read of the store's stats succeeded, 0 if it failed"
})

/**
 * Seconds since this process last read the Store's stats successfully, on its own clock (the Store's clock cannot be
 * read while it is away), set by every `refresh`: 0 after a read that succeeded, growing while reads fail. Before a
 * first success it counts from the first attempt.
 *
 * @since 0.4.0
 * @category metrics
 */
export const statsAgeSeconds = Metric.gauge("slowcall_stats_age_seconds", {
  description: "seconds since the population gauges were last read from the store"
})

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

/**
 * The upper bounds, in seconds (Prometheus' base unit), of the duration histograms' buckets (a `+Inf` bucket follows): from 5 ms to 30 minutes,
 * about 2.5x apart, so both a fast claim and a slow batch call land in a bucket that tells them apart.
 *
 * @since 0.4.0
 * @category metrics
 */
export const durationBucketsSeconds: ReadonlyArray<number> = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1_800
]

const durationBoundaries = MetricBoundaries.fromIterable(durationBucketsSeconds)

/**
 * Queue wait in seconds: from when a job became due (`runAfter`: its submit, or the end of its retry delay) to its claim,
 * both in store time, observed by the worker that claimed it.
 *
 * @since 0.4.0
 * @category metrics
 */
export const queueWaitSeconds = Metric.histogram(
  "slowcall_queue_wait_seconds",
  durationBoundaries,
  "time from due to claim, store time, in seconds"
)

/**
 * Attempt duration in seconds: from the start of the handler to its end (the outcome write not included), on the worker's
 * clock, per attempt this process ran.
 *
 * @since 0.4.0
 * @category metrics
 */
export const attemptDurationSeconds = Metric.histogram(
  "slowcall_attempt_duration_seconds",
  durationBoundaries,
  "handler run time of one attempt, in seconds"
)

/**
 * Model-call duration in seconds: one `ctx.call`'s run (after its reservation and admission), on the worker's clock,
 * whether it succeeded or failed.
 *
 * @since 0.4.0
 * @category metrics
 */
export const modelCallDurationSeconds = Metric.histogram(
  "slowcall_model_call_duration_seconds",
  durationBoundaries,
  "run time of one billed model call, in seconds"
)

const states: ReadonlyArray<JobState> = ["queued", "running", "succeeded", "failed", "abandoned"]

/**
 * Options of `refresh` and `poll`. `windowMs` is the window of the dead-letter arrival rate (default 5 minutes),
 * `spendWindowMs` the window of the spend gauges (default 1 hour).
 *
 * @since 0.1.0
 * @category models
 */
export interface PollOptions {
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly windowMs?: number | undefined
  readonly spendWindowMs?: number | undefined
}

/**
 * One value of a population gauge: the metric's name, its tags and the value.
 *
 * @since 0.3.0
 * @category models
 */
export interface Sample {
  readonly name: string
  readonly tags: Readonly<Record<string, string>>
  readonly value: number
  /** How the exposition format types it: a gauge unless it says `counter` (a count that only grows). */
  readonly type?: "gauge" | "counter" | undefined
}

/**
 * The population gauges of one stats read, as samples: jobs per state, oldest due queued age per priority, cost per
 * error class, dead-letter rate, spend per (queue, tenant, type, state), waiting jobs and their oldest age per
 * (type, version). Ages use the store time `now` of the read. What `refresh` sets and a tenant's `/metrics` renders.
 *
 * @since 0.3.0
 * @category combinators
 */
export const samples = (read: {
  readonly now: number
  readonly windowMs: number
  readonly stats: StoreStats
}): ReadonlyArray<Sample> => {
  const { now, stats } = read
  const out: Array<Sample> = []
  for (const state of states) out.push({ name: "slowcall_jobs", tags: { state }, value: stats.byState[state] ?? 0 })
  for (const [priority, oldest] of Object.entries(stats.oldestQueuedAt)) {
    out.push({
      name: "slowcall_oldest_queued_age_seconds",
      tags: { priority },
      value: Math.max(0, now - oldest) / 1_000
    })
  }
  for (const [errorClass, cents] of Object.entries(stats.costCentsByErrorClass)) {
    out.push({ name: "slowcall_cost_cents", tags: { error_class: errorClass }, value: cents })
  }
  out.push({
    name: "slowcall_dead_letter_rate_per_minute",
    tags: {},
    value: stats.failedInWindow / (read.windowMs / 60_000)
  })
  for (const group of stats.spend) {
    out.push({
      name: "slowcall_spend_cents",
      tags: { queue: group.queue, tenant: group.tenant ?? "none", type: group.type, state: group.state },
      value: group.costCents
    })
  }
  for (const group of stats.waiting) {
    const tags = { type: group.type, version: String(group.version) }
    out.push({ name: "slowcall_waiting_jobs", tags, value: group.count })
    out.push({
      name: "slowcall_oldest_waiting_age_seconds",
      tags,
      value: Math.max(0, now - group.oldestDueAt) / 1_000
    })
  }
  return out
}

/**
 * The `# HELP` text of every per-resource metric `resourceSamples` gives, by name: what the provider-limits guide's
 * metrics table lists.
 *
 * @since 0.4.0
 * @category metrics
 */
export const resourceHelp: Readonly<Record<string, string>> = {
  slowcall_resource_permits_in_use: "calls holding a live permit of the resource, across the fleet",
  slowcall_resource_max_concurrent: "the resource's cap on concurrent calls (absent: no cap)",
  slowcall_resource_learned_concurrent:
    "the cap on concurrent calls the fleet learned from the provider's 429s; the lower of it and max_concurrent is in force (absent: none learned)",
  slowcall_resource_bucket_level:
    "what the resource's bucket holds now, per dimension (requests, input or output tokens); negative is debt",
  slowcall_resource_bucket_capacity: "the most the resource's bucket holds, per dimension",
  slowcall_resource_paused: "1 while a pause of this kind is in force on the resource, else 0",
  slowcall_resource_half_open: "1 while the resource admits one probe call after a timed pause, else 0",
  slowcall_resource_grants_total: "calls the resource admitted",
  slowcall_resource_waits_total: "calls told to wait for capacity (throttled), per reason",
  slowcall_resource_paused_acquires_total: "calls refused because the resource was paused",
  slowcall_resource_pauses_total:
    "pauses of the resource per kind: rate_limited and quota_exhausted are the 429s the fleet reported"
}

const pauseKinds: ReadonlyArray<PauseKind> = ["rate_limited", "quota_exhausted", "manual"]

/**
 * The per-resource metrics of one `Limiter.read`, as samples (tag `resource` on each): permits in use and the cap,
 * the cap learned from 429s (no sample while none is learned, as a resource without a cap has no `max_concurrent`
 * sample), each bucket's level and capacity (tag `dimension`), whether a pause of each kind is in force (tag `kind`,
 * 1 or 0) and the half-open state, and the resource's counters as counters (grants, waits per `reason`, acquires
 * refused while paused, pauses per `kind`). The store keeps the counters for the whole fleet, so they only grow whichever
 * process renders them. What `/metrics` adds at scrape time; the help texts are `resourceHelp`.
 *
 * @since 0.4.0
 * @category combinators
 */
export const resourceSamples = (read: {
  readonly now: number
  readonly resources: ReadonlyArray<ResourceState>
}): ReadonlyArray<Sample> => {
  const out: Array<Sample> = []
  for (const state of read.resources) {
    const resource = state.resource
    const view = state.view
    out.push({ name: "slowcall_resource_permits_in_use", tags: { resource }, value: view.permits })
    if (view.maxConcurrent !== null) {
      out.push({ name: "slowcall_resource_max_concurrent", tags: { resource }, value: view.maxConcurrent })
    }
    if (view.learnedConcurrent !== null) {
      out.push({ name: "slowcall_resource_learned_concurrent", tags: { resource }, value: view.learnedConcurrent })
    }
    for (const [dimension, bucket] of Object.entries(view.buckets)) {
      if (bucket === null) continue
      out.push({ name: "slowcall_resource_bucket_level", tags: { resource, dimension }, value: bucket.level })
      out.push({ name: "slowcall_resource_bucket_capacity", tags: { resource, dimension }, value: bucket.capacity })
    }
    for (const kind of pauseKinds) {
      const inForce = state.pause !== null && state.pause.kind === kind ? 1 : 0
      out.push({ name: "slowcall_resource_paused", tags: { resource, kind }, value: inForce })
    }
    out.push({ name: "slowcall_resource_half_open", tags: { resource }, value: view.halfOpen ? 1 : 0 })
    const counters = state.counters
    const counter = (name: string, tags: Record<string, string>, value: number): Sample => ({
      name,
      tags: { resource, ...tags },
      value,
      type: "counter"
    })
    out.push(counter("slowcall_resource_grants_total", {}, counters.grants))
    for (const [reason, n] of Object.entries(counters.waits)) {
      out.push(counter("slowcall_resource_waits_total", { reason }, n))
    }
    out.push(counter("slowcall_resource_paused_acquires_total", {}, counters.paused))
    for (const kind of pauseKinds) out.push(counter("slowcall_resource_pauses_total", { kind }, counters.pauses[kind]))
  }
  return out
}

/** The `# HELP` text of each population gauge, the same as its metric's description. */
const sampleHelp: Readonly<Record<string, string>> = {
  ...resourceHelp,
  slowcall_jobs: "jobs per state, from the store",
  slowcall_oldest_queued_age_seconds: "age of the oldest due queued job, per priority, in seconds",
  slowcall_cost_cents: "spend of the attempts that ended with each error class",
  slowcall_dead_letter_rate_per_minute: "arrivals into failed per minute over the window",
  slowcall_spend_cents: "spend over the spend window, per queue, tenant, type and state",
  slowcall_waiting_jobs: "due queued jobs per type and version",
  slowcall_oldest_waiting_age_seconds: "age of the oldest due queued job, per type and version, in seconds"
}

const gauges: Readonly<Record<string, Metric.Metric.Gauge<number>>> = {
  slowcall_jobs: jobs,
  slowcall_oldest_queued_age_seconds: oldestQueuedAgeSeconds,
  slowcall_cost_cents: costCents,
  slowcall_dead_letter_rate_per_minute: deadLetterRatePerMinute,
  slowcall_spend_cents: spendCents,
  slowcall_waiting_jobs: waitingJobs,
  slowcall_oldest_waiting_age_seconds: oldestWaitingAgeSeconds
}

/**
 * The tagged gauges `refresh` set last time, by name and tags: a group that is gone since (no spend left in the
 * window, no job waiting) is set to 0 instead of keeping its last value for ever.
 */
const lastSet = new Map<string, Sample>()

/**
 * When this process last read the Store's stats successfully (or first tried, before any success), on its own clock:
 * what `slowcall_stats_age_seconds` counts from.
 */
const lastRead = { at: undefined as number | undefined }

/**
 * Read `Query.stats` once and set every population gauge from it (`samples`). Ages and windows use store time.
 * Either way sets `slowcall_store_up` (1 or 0) and `slowcall_stats_age_seconds`; a failed read leaves the population
 * gauges as they were and fails with its `StoreError`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const refresh: (options?: PollOptions) => Effect.Effect<void, StoreError, Store | Query> = Effect.fnUntraced(
  function* (options: PollOptions = {}) {
    const startedAt = yield* Clock.currentTimeMillis
    lastRead.at ??= startedAt
    const read = yield* Effect.either(readStats(options))
    if (Either.isLeft(read)) {
      const now = yield* Clock.currentTimeMillis
      yield* Metric.set(storeUp, 0)
      yield* Metric.set(statsAgeSeconds, Math.max(0, now - lastRead.at) / 1_000)
      return yield* Effect.fail(read.left)
    }
    // A slower read that started earlier must not make the values look older than they are.
    lastRead.at = Math.max(lastRead.at, startedAt)
    yield* Metric.set(storeUp, 1)
    yield* Metric.set(statsAgeSeconds, 0)
  }
)

const readStats: (options: PollOptions) => Effect.Effect<void, StoreError, Store | Query> = Effect.fnUntraced(
  function* (options: PollOptions) {
    const store = yield* Store
    const query = yield* Query
    const windowMs = options.windowMs ?? 300_000
    const now = yield* store.now
    const stats = yield* query.stats({
      queue: options.queue,
      tenant: options.tenant,
      failedSince: now - windowMs,
      spendSince: now - (options.spendWindowMs ?? 3_600_000)
    })
    const setGauge = (sample: Sample) => {
      const gauge = gauges[sample.name]
      return gauge === undefined
        ? Effect.void
        : Metric.set(
            Object.entries(sample.tags).reduce((tagged, [tag, value]) => Metric.tagged(tagged, tag, value), gauge),
            sample.value
          )
    }
    const seen = new Set<string>()
    for (const sample of samples({ now, windowMs, stats })) {
      const key = render(sample.name, tagList(sample.tags))
      seen.add(key)
      lastSet.set(key, sample)
      yield* setGauge(sample)
    }
    for (const [key, sample] of lastSet) {
      if (seen.has(key)) continue
      lastSet.delete(key)
      yield* setGauge({ ...sample, value: 0 })
    }
  }
)

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

const tagList = (tags: Readonly<Record<string, string>>) => Object.entries(tags).map(([key, value]) => ({ key, value }))

/** A `# HELP` text: backslash and line feed escaped, as the exposition format asks. */
const helpText = (text: string): string => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

/** A label value in the exposition format: backslash, double quote and line feed escaped. */
const labelValue = (value: string): string => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")

const render = (name: string, tags: ReadonlyArray<{ readonly key: string; readonly value: string }>): string =>
  tags.length === 0
    ? name
    : `${name}{${tags
        .map((tag) => `${tag.key}="${labelValue(tag.value)}"`)
        .sort()
        .join(",")}}`

/**
 * Samples in the Prometheus text exposition format, a `# HELP` and a `# TYPE` line per metric name (a gauge unless
 * the samples say `counter`): the population of a stats read without the process's counters (what a tenant's
 * `/metrics` shows), or the per-resource metrics of `resourceSamples`.
 *
 * @since 0.3.0
 * @category combinators
 */
export const renderSamples = (list: ReadonlyArray<Sample>): string => {
  const byName = new Map<string, { type: string; lines: Array<string> }>()
  for (const sample of list) {
    const entry = byName.get(sample.name) ?? { type: sample.type ?? "gauge", lines: [] }
    entry.lines.push(`${render(sample.name, tagList(sample.tags))} ${sample.value}`)
    byName.set(sample.name, entry)
  }
  return [...byName.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, entry]) =>
      [
        `# HELP ${name} ${helpText(sampleHelp[name] ?? name)}`,
        `# TYPE ${name} ${entry.type}`,
        ...entry.lines.sort()
      ].join("\n")
    )
    .join("\n")
    .concat("\n")
}

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

/** A bucket bound as Prometheus writes it (`+Inf` for the last). */
const bound = (value: number): string => (value === Number.POSITIVE_INFINITY ? "+Inf" : String(value))

/**
 * The `slowcall_*` metrics in the Prometheus text exposition format, for an HTTP `/metrics` endpoint: for each metric
 * a `# HELP` line (its description) and a `# TYPE` line, then its samples; a histogram has one cumulative
 * `_bucket{le="..."}` line per bound up to `le="+Inf"`, then `_sum` and `_count`. Metrics are sorted by name, the
 * lines of one metric by their labels, so the page is stable between scrapes.
 *
 * @since 0.1.0
 * @category combinators
 */
export const prometheus: Effect.Effect<string> = Effect.map(Metric.snapshot, (pairs) => {
  const byName = new Map<string, { type: string; help: string; lines: Array<string> }>()
  for (const pair of pairs) {
    const name = pair.metricKey.name
    if (!name.startsWith("slowcall_")) continue
    const state = pair.metricState
    const tags = pair.metricKey.tags
    const help = Option.getOrElse(pair.metricKey.description, () => name)
    let type: string
    let lines: Array<string>
    if (MetricState.isCounterState(state)) {
      type = "counter"
      lines = [`${render(name, tags)} ${Number(state.count)}`]
    } else if (MetricState.isGaugeState(state)) {
      type = "gauge"
      lines = [`${render(name, tags)} ${Number(state.value)}`]
    } else if (MetricState.isHistogramState(state)) {
      type = "histogram"
      lines = []
      for (const [le, count] of state.buckets) {
        lines.push(`${render(`${name}_bucket`, [...tags, { key: "le", value: bound(le) }])} ${count}`)
      }
      lines.push(`${render(`${name}_sum`, tags)} ${state.sum}`, `${render(`${name}_count`, tags)} ${state.count}`)
    } else {
      continue
    }
    const entry = byName.get(name) ?? { type, help, lines: [] }
    entry.lines.push(...lines)
    byName.set(name, entry)
  }
  return [...byName.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, entry]) =>
      [
        `# HELP ${name} ${helpText(entry.help)}`,
        `# TYPE ${name} ${entry.type}`,
        ...(entry.type === "histogram" ? entry.lines : entry.lines.sort())
      ].join("\n")
    )
    .join("\n")
    .concat("\n")
})
