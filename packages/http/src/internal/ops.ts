/**
 * The `ops` endpoint group: stats for the dashboard, Prometheus metrics, health, the OpenAPI document and the
 * dashboard page. Stats and health read through `Client`; the metrics page refreshes the population gauges from
 * the Store's stats at scrape time (`Metrics.refresh`), renders every `slowcall_*` metric of this process, and adds
 * the per-resource metrics the Limiter reads (`Metrics.resourceSamples`). The
 * OpenAPI document is the API's, narrowed to this server (`openApi.forServer`).
 *
 * @internal
 */
import { HttpApiBuilder, OpenApi } from "@effect/platform"
import { Client } from "@slowcall/core/Client"
import { JobState } from "@slowcall/core/Job"
import { Limiter } from "@slowcall/core/Limiter"
import * as Metrics from "@slowcall/core/Metrics"
import { Effect } from "effect"
import { SlowcallApi, type StatsParams, Tenant } from "../Api.js"
import { html as dashboardHtml } from "../Dashboard.js"
import { type ResolvedOptions, respondWith, ServerOptions, storeUnavailable } from "./common.js"
import { forServer } from "./openApi.js"

/** The dashboard's chart shows this many minutes of dead-letter arrivals. */
const perMinuteBuckets = 15

const seconds = (ms: number): number => Math.max(0, Math.round(ms / 100) / 10)

const stats = (request: { readonly urlParams: typeof StatsParams.Type }) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const client = yield* Client
    const tenant = yield* Tenant
    const spendWindowMinutes = request.urlParams.spendWindowMinutes ?? 60
    const { now, stats: result } = yield* client.stats({
      queue: options.queue,
      tenant,
      windowMs: options.deadLetterWindowMinutes * 60_000,
      spendWindowMs: spendWindowMinutes * 60_000
    })
    const oldest: Record<string, number> = {}
    for (const [priority, at] of Object.entries(result.oldestQueuedAt)) {
      oldest[priority] = seconds(now - at)
    }
    // Per-minute arrivals for the chart, from the failed jobs' last write (the moment they failed).
    const recent = yield* client.deadLetters({ queue: options.queue, tenant, limit: 1000 })
    const currentMinute = Math.floor(now / 60_000)
    const counts = new Array<number>(perMinuteBuckets).fill(0)
    for (const job of recent.jobs) {
      const age = currentMinute - Math.floor(job.updatedAt / 60_000)
      if (age >= 0 && age < perMinuteBuckets) counts[perMinuteBuckets - 1 - age]! += 1
    }
    return {
      byState: Object.fromEntries(JobState.literals.map((state) => [state, result.byState[state] ?? 0])),
      oldestQueuedAgeSeconds: oldest,
      deadLetterArrivalsPerMinute: result.failedInWindow / options.deadLetterWindowMinutes,
      costCentsByErrorClass: result.costCentsByErrorClass,
      deadLetterArrivals: counts.map((count, index) => ({
        minute: new Date((currentMinute - (perMinuteBuckets - 1 - index)) * 60_000).toISOString(),
        count
      })),
      waiting: [...result.waiting]
        .sort((a, b) => a.oldestDueAt - b.oldestDueAt)
        .map((group) => ({
          type: group.type,
          version: group.version,
          count: group.count,
          oldestAgeSeconds: seconds(now - group.oldestDueAt),
          unclaimed: now - group.oldestDueAt >= options.unclaimedAfterSeconds * 1000
        })),
      spend: {
        windowMinutes: spendWindowMinutes,
        totalCents: sum(result.spend.map((group) => group.costCents)),
        succeededCents: sum(result.spend.filter((g) => g.state === "succeeded").map((group) => group.costCents)),
        failedCents: sum(result.spend.filter((g) => g.state === "failed").map((group) => group.costCents)),
        groups: [...result.spend].sort(
          (a, b) =>
            b.costCents - a.costCents ||
            (JSON.stringify([a.queue, a.tenant, a.type, a.state]) < JSON.stringify([b.queue, b.tenant, b.type, b.state])
              ? -1
              : 1)
        )
      }
    }
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const sum = (values: ReadonlyArray<number>): number => values.reduce((total, value) => total + value, 0)

/**
 * The per-resource metrics, read from the Limiter at scrape time (the fleet's, whoever asks: a resource is shared by
 * every tenant). A failed read leaves them off this page and is logged; the population gauges say whether the store
 * answers.
 */
const resourceMetrics = Effect.flatMap(Limiter, (limiter) => limiter.read({})).pipe(
  Effect.map((read) => (read.resources.length === 0 ? "" : Metrics.renderSamples(Metrics.resourceSamples(read)))),
  Effect.catchAll((error) => Effect.as(Effect.logWarning("resource metrics read failed", error.message), ""))
)

const metrics = Effect.gen(function* () {
  const options = yield* ServerOptions
  const tenant = yield* Tenant
  const windowMs = options.deadLetterWindowMinutes * 60_000
  if (tenant !== undefined) {
    // A tenant sees its own population and spend, read at scrape time; the process's counters are everyone's.
    const client = yield* Client
    const read = yield* client.stats({ queue: options.queue, tenant, windowMs })
    return (
      Metrics.renderSamples(Metrics.samples({ now: read.now, windowMs, stats: read.stats })) + (yield* resourceMetrics)
    )
  }
  // The population gauges come from the store at scrape time; counters are kept by the workers in this process.
  yield* Metrics.refresh({ queue: options.queue, windowMs }).pipe(
    Effect.catchAll((error) => Effect.logWarning("metrics refresh failed", error.message))
  )
  return (yield* Metrics.prometheus) + (yield* resourceMetrics)
}).pipe(Effect.catchTag("StoreError", storeUnavailable))

const healthz = Effect.gen(function* () {
  const client = yield* Client
  return yield* client.now.pipe(
    Effect.timeout("2 seconds"),
    Effect.as({ ok: true }),
    Effect.catchAll(() => Effect.fail({ error: "store_unavailable" } as const))
  )
})

/** The document each server serves, made once per server (its options are resolved once, when its layer is built). */
const documents = new WeakMap<ResolvedOptions, unknown>()

const openApiDocument = Effect.map(ServerOptions, (options) => {
  const cached = documents.get(options)
  if (cached !== undefined) return cached
  const document = forServer(OpenApi.fromApi(SlowcallApi), {
    jobTypes: options.jobTypes,
    handlers: options.handlers,
    authenticated: options.authenticate !== undefined,
    publicMetrics: options.metrics === "public"
  })
  documents.set(options, document)
  return document
})

const dashboard = Effect.as(
  respondWith({
    headers: {
      "cache-control": "no-cache",
      "content-security-policy":
        "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:"
    }
  }),
  dashboardHtml
)

/**
 * The handlers of the `ops` group.
 *
 * @internal
 */
export const opsGroup = HttpApiBuilder.group(SlowcallApi, "ops", (handlers) =>
  handlers
    .handle("stats", stats)
    .handle("metrics", () => metrics)
    .handle("healthz", () => healthz)
    .handle("openapi", () => openApiDocument)
    .handle("dashboard", () => dashboard)
)
