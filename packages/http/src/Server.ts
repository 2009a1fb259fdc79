/**
 * The job HTTP server: implements every endpoint of `Api.ts` over the `Store` (the source of truth) and the
 * `Transport` (which only wakes workers), plus SSE, Prometheus metrics, health and the dashboard.
 *
 * Invariants:
 * - A rejected request (400, 401, 413, 422) writes nothing: every check runs before the single `Store.submit`.
 * - With an `authenticate` resolver, every `/v1` request is scoped to the caller's tenant; another tenant's job
 *   answers exactly like an unknown one (`404`).
 * - Views, ETags and SSE event ids are pure functions of the job record, so a client that misses a push recovers
 *   by reading the row.
 *
 * @since 0.1.0
 */

import { createServer } from "node:http"
import {
  type HttpApi,
  HttpApiBuilder,
  type HttpRouter,
  type HttpServer,
  type HttpServerRequest,
  HttpServerResponse,
  OpenApi
} from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { inputHash } from "@slowcall/core/Canonical"
import { makeJobId } from "@slowcall/core/Ids"
import * as Metrics from "@slowcall/core/Metrics"
import { ErrorClass, isTerminal, type Job, JobId, type JobState } from "@slowcall/core/Models"
import { Store } from "@slowcall/core/Store"
import { Transport } from "@slowcall/core/Transport"
import { Chunk, Context, Effect, Either, Layer, Option, ParseResult, Schedule, Schema, Stream } from "effect"
import { type Issue, ReplayBody, SlowcallApi, SubmitBody } from "./Api.js"
import { html as dashboardHtml } from "./Dashboard.js"
import { etag, etagMatches, jobDetail, jobView, retryAfterSeconds, revision } from "./View.js"

/**
 * How the server is set up. `jobTypes` is the registry of job types this deployment runs: a submit of any other
 * type is a `400`, so a typo never becomes a job that no worker will ever claim.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly jobTypes: ReadonlyArray<string>
  /** The queue jobs are submitted to and read from; default `"default"`. */
  readonly queue?: string | undefined
  /** Largest accepted request body in bytes; default 1 MiB. Larger bodies get `413`. */
  readonly maxBodyBytes?: number | undefined
  /** `maxAttempts` for a job that does not name one; default 5. */
  readonly defaultMaxAttempts?: number | undefined
  /**
   * Resolves the `Authorization` header to a tenant. `None` means the credentials are missing or invalid (`401`).
   * Without a resolver the API is open and jobs have no tenant.
   */
  readonly authenticate?: ((authorization: string | undefined) => Effect.Effect<Option.Option<string>>) | undefined
  /** How often an SSE stream reads the job record; default 250 ms. */
  readonly sseIntervalMs?: number | undefined
  /** Window over which `arrivalsPerMinute` is averaged; default 5 minutes. */
  readonly deadLetterWindowMinutes?: number | undefined
}

/**
 * The resolved options, available to handlers.
 *
 * @since 0.1.0
 * @category services
 */
export class ServerOptions extends Context.Tag("@slowcall/http/ServerOptions")<
  ServerOptions,
  {
    readonly jobTypes: ReadonlySet<string>
    readonly queue: string
    readonly maxBodyBytes: number
    readonly defaultMaxAttempts: number
    readonly authenticate: Options["authenticate"]
    readonly sseIntervalMs: number
    readonly deadLetterWindowMinutes: number
  }
>() {}

/**
 * The default body limit: 1 MiB.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultMaxBodyBytes = 1024 * 1024

type Deps = Store | Transport | ServerOptions

const json = (status: number, body: unknown, headers?: Record<string, string>) =>
  HttpServerResponse.unsafeJson(body, { status, ...(headers ? { headers } : {}) })

const invalid = (issues: ReadonlyArray<Issue>) => json(400, { error: "invalid_request", issues })
const notFound = json(404, { error: "not_found" })
const unauthorized = json(401, { error: "unauthorized" }, { "www-authenticate": "Bearer" })
const storeUnavailable = json(503, { error: "store_unavailable" }, { "retry-after": "1" })

class Reject {
  readonly _tag = "Reject"
  constructor(readonly response: HttpServerResponse.HttpServerResponse) {}
}

const reject = (response: HttpServerResponse.HttpServerResponse) => Effect.fail(new Reject(response))

/** Turns every typed failure into its response; defects become `500`. */
const respond = <R>(
  effect: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, R> =>
  effect.pipe(
    Effect.catchAll((error) => {
      if (error instanceof Reject) return Effect.succeed(error.response)
      const tag = (error as { _tag?: string } | null)?._tag
      if (tag === "JobNotFound") return Effect.succeed(notFound)
      if (tag === "StoreError") {
        return Effect.logWarning("store unavailable", error).pipe(Effect.as(storeUnavailable))
      }
      return Effect.logError("request failed", error).pipe(Effect.as(json(500, { error: "internal" })))
    }),
    Effect.catchAllDefect((defect) =>
      Effect.logError("request failed", defect).pipe(Effect.as(json(500, { error: "internal" })))
    )
  )

/** The caller's tenant: `undefined` when auth is off, else the resolved tenant or a `401`. */
const tenantOf = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    if (options.authenticate === undefined) return undefined
    const tenant = yield* options.authenticate(request.headers.authorization)
    if (Option.isNone(tenant)) return yield* reject(unauthorized)
    return tenant.value
  })

const parseJobId = (id: string) =>
  Either.match(Schema.decodeUnknownEither(JobId)(id), {
    onLeft: () => reject(notFound),
    onRight: (jobId) => Effect.succeed(jobId)
  })

const readBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const { maxBodyBytes } = yield* ServerOptions
    const tooLarge = json(413, { error: "payload_too_large", limitBytes: maxBodyBytes })
    const declared = Number(request.headers["content-length"] ?? "0")
    if (Number.isFinite(declared) && declared > maxBodyBytes) return yield* reject(tooLarge)
    const chunks = yield* request.stream.pipe(
      Stream.mapAccumEffect(0, (total, chunk: Uint8Array) =>
        total + chunk.length > maxBodyBytes ? reject(tooLarge) : Effect.succeed([total + chunk.length, chunk] as const)
      ),
      Stream.runCollect,
      Effect.catchTag("RequestError", () => reject(json(400, { error: "invalid_request", issues: [] })))
    )
    const text = Buffer.concat(Chunk.toReadonlyArray(chunks)).toString("utf8")
    if (text.trim() === "") return yield* reject(invalid([{ path: [], message: "a JSON body is required" }]))
    return yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: () => new Reject(invalid([{ path: [], message: "the body is not valid JSON" }]))
    })
  })

const decodeBody = <A, I>(schema: Schema.Schema<A, I>, body: unknown) =>
  Schema.decodeUnknown(schema, { onExcessProperty: "error", errors: "all" })(body).pipe(
    Effect.catchAll((error) =>
      reject(
        invalid(
          ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({
            path: issue.path.map((segment) => (typeof segment === "symbol" ? String(segment) : segment)),
            message: issue.message
          }))
        )
      )
    )
  )

const publish = (job: Job) =>
  Effect.gen(function* () {
    const transport = yield* Transport
    yield* transport
      .publish({
        queue: job.queue,
        message: { jobId: job.id, type: job.type, version: job.version, priority: job.priority }
      })
      .pipe(
        Effect.catchAll((error) =>
          Effect.logWarning("publish failed; the sweeper will republish the job", error.message)
        )
      )
  })

const viewResponse = (status: number, job: Job, now: number, headers: Record<string, string> = {}) => {
  const hint = retryAfterSeconds(job, now)
  return json(status, jobView(job), {
    etag: etag(job),
    "cache-control": "no-cache",
    ...(hint === undefined ? {} : { "retry-after": String(hint) }),
    ...headers
  })
}

const submit = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const store = yield* Store
    const tenant = yield* tenantOf(request)
    const key = request.headers["idempotency-key"]
    if (key !== undefined && (key.length < 1 || key.length > 255)) {
      return yield* reject(invalid([{ path: ["Idempotency-Key"], message: "must be 1 to 255 characters" }]))
    }
    const body = yield* decodeBody(SubmitBody, yield* readBody(request))
    const issues: Array<Issue> = []
    if (!options.jobTypes.has(body.type)) {
      issues.push({ path: ["type"], message: `unknown job type ${JSON.stringify(body.type)}` })
    }
    if (body.input !== undefined && body.inputRef !== undefined) {
      issues.push({ path: ["inputRef"], message: "give either input or inputRef, not both" })
    }
    if (issues.length > 0) return yield* reject(invalid(issues))
    const input = body.input === undefined ? null : body.input
    const hash = yield* inputHash(body.inputRef === undefined ? input : { inputRef: body.inputRef }).pipe(
      Effect.catchTag("InvalidInput", (error) =>
        reject(invalid([{ path: ["input", error.path], message: error.message }]))
      )
    )
    const id = yield* makeJobId
    const result = yield* store
      .submit({
        id,
        queue: options.queue,
        tenant: tenant ?? null,
        type: body.type,
        version: body.version ?? 1,
        requestKey: key ?? null,
        inputHash: hash,
        input: input as Job["input"],
        inputRef: body.inputRef ?? null,
        priority: body.priority,
        runAfter: body.runAfter === undefined ? undefined : Date.parse(body.runAfter),
        deadlineAt: body.deadline === undefined ? null : Date.parse(body.deadline),
        budgetCents: body.budgetCents ?? null,
        maxAttempts: body.maxAttempts ?? options.defaultMaxAttempts,
        traceId: body.traceId ?? null
      })
      .pipe(Effect.catchTag("IdempotencyKeyReused", () => reject(json(422, { error: "idempotency_key_reused" }))))
    const now = yield* store.now
    if (!result.created) return viewResponse(200, result.job, now, { "idempotent-replayed": "true" })
    yield* publish(result.job)
    return viewResponse(202, result.job, now, { location: `/v1/jobs/${result.job.id}` })
  })

const getJob = (request: HttpServerRequest.HttpServerRequest, id: string) =>
  Effect.gen(function* () {
    const store = yield* Store
    const tenant = yield* tenantOf(request)
    const jobId = yield* parseJobId(id)
    const job = yield* store.get({ jobId, tenant })
    const tag = etag(job)
    if (etagMatches(request.headers["if-none-match"], tag)) {
      return HttpServerResponse.empty({ status: 304, headers: { etag: tag, "cache-control": "no-cache" } })
    }
    return viewResponse(200, job, yield* store.now)
  })

const getDetail = (request: HttpServerRequest.HttpServerRequest, id: string) =>
  Effect.gen(function* () {
    const store = yield* Store
    const tenant = yield* tenantOf(request)
    const jobId = yield* parseJobId(id)
    const job = yield* store.get({ jobId, tenant })
    const [attempts, charges] = yield* Effect.all([store.attempts({ jobId }), store.charges({ jobId })])
    return json(200, jobDetail(job, attempts, charges))
  })

const cancel = (request: HttpServerRequest.HttpServerRequest, id: string) =>
  Effect.gen(function* () {
    const store = yield* Store
    const tenant = yield* tenantOf(request)
    const jobId = yield* parseJobId(id)
    const job = yield* store
      .cancel({ jobId, tenant })
      .pipe(Effect.catchTag("AlreadyTerminal", () => reject(json(409, { error: "already_terminal" }))))
    return viewResponse(202, job, yield* store.now)
  })

const encoder = new TextEncoder()

const sseEvent = (job: Job) =>
  encoder.encode(`id: ${revision(job)}\nevent: job\ndata: ${JSON.stringify(jobView(job))}\n\n`)

const events = (request: HttpServerRequest.HttpServerRequest, id: string) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const store = yield* Store
    const tenant = yield* tenantOf(request)
    const jobId = yield* parseJobId(id)
    const first = yield* store.get({ jobId, tenant })
    const lastEventId = Number(request.headers["last-event-id"] ?? Number.NaN)
    const after = Number.isFinite(lastEventId) ? lastEventId : -1
    const changes = Stream.repeatEffectWithSchedule(
      store.get({ jobId, tenant }),
      Schedule.spaced(`${options.sseIntervalMs} millis`)
    ).pipe(
      // A transient store error only delays the next event; the row stays the truth.
      Stream.retry(Schedule.spaced(`${options.sseIntervalMs} millis`))
    )
    const body = Stream.concat(Stream.make(first), changes).pipe(
      Stream.mapAccum(after, (last, job) =>
        revision(job) > last ? ([revision(job), Option.some(job)] as const) : ([last, Option.none<Job>()] as const)
      ),
      Stream.filterMap((job) => job),
      Stream.takeUntil((job) => isTerminal(job.state)),
      // A resumed stream whose last seen event was already terminal has nothing more to say.
      Stream.interruptWhen(isTerminal(first.state) && revision(first) <= after ? Effect.void : Effect.never),
      Stream.map(sseEvent),
      Stream.catchAll(() => Stream.empty)
    )
    return HttpServerResponse.stream(body, {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" }
    })
  })

const states: ReadonlyArray<JobState> = ["queued", "running", "succeeded", "failed", "abandoned"]

const queryOf = (request: HttpServerRequest.HttpServerRequest) => new URL(request.url, "http://localhost").searchParams

const parseLimit = (raw: string | null, fallback: number, max: number, issues: Array<Issue>) => {
  if (raw === null || raw === "") return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1 || n > max) {
    issues.push({ path: ["limit"], message: `must be an integer from 1 to ${max}` })
    return fallback
  }
  return n
}

const list = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const store = yield* Store
    const tenant = yield* tenantOf(request)
    const query = queryOf(request)
    const issues: Array<Issue> = []
    const state = query.get("state") || undefined
    if (state !== undefined && !states.includes(state as JobState)) {
      issues.push({ path: ["state"], message: `must be one of ${states.join(", ")}` })
    }
    const limit = parseLimit(query.get("limit"), 50, 1000, issues)
    if (issues.length > 0) return yield* reject(invalid(issues))
    const jobs = yield* store.list({
      queue: options.queue,
      tenant,
      state: state as JobState | undefined,
      type: query.get("type") || undefined,
      limit
    })
    return json(200, { jobs: jobs.map(jobView) })
  })

const isErrorClass = Schema.is(ErrorClass)

const deadLetters = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const store = yield* Store
    const tenant = yield* tenantOf(request)
    const query = queryOf(request)
    const issues: Array<Issue> = []
    const errorClass = query.get("errorClass") || undefined
    if (errorClass !== undefined && !isErrorClass(errorClass)) {
      issues.push({ path: ["errorClass"], message: "unknown error class" })
    }
    const limit = parseLimit(query.get("limit"), 50, 1000, issues)
    if (issues.length > 0) return yield* reject(invalid(issues))
    const result = yield* store.deadLetters({
      queue: options.queue,
      tenant,
      errorClass: errorClass as ErrorClass | undefined,
      type: query.get("type") || undefined,
      limit
    })
    const now = yield* store.now
    const window = options.deadLetterWindowMinutes
    const stats = yield* store.stats({ queue: options.queue, tenant, failedSince: now - window * 60_000 })
    return json(200, {
      jobs: result.jobs.map(jobView),
      groups: result.groups.map((group) => ({
        errorClass: group.errorClass,
        inputHash: group.inputHash,
        count: group.count,
        costCents: group.costCents,
        // The listed failed jobs of this group, so a client can replay exactly this group.
        jobIds: result.jobs
          .filter((job) => job.errorClass === group.errorClass && job.inputHash === group.inputHash)
          .map((job) => job.id)
      })),
      arrivalsPerMinute: stats.failedInWindow / window
    })
  })

const replay = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const store = yield* Store
    const tenant = yield* tenantOf(request)
    const body = yield* decodeBody(ReplayBody, yield* readBody(request))
    if (body.errorClass !== undefined && !isErrorClass(body.errorClass)) {
      return yield* reject(invalid([{ path: ["errorClass"], message: "unknown error class" }]))
    }
    let skipped = 0
    let jobIds: Array<JobId> | undefined
    if (body.ids !== undefined) {
      jobIds = []
      for (const raw of body.ids) {
        const parsed = Schema.decodeUnknownOption(JobId)(raw)
        // An id that is malformed or not visible to this tenant can never be replayed by this caller.
        const visible = Option.isSome(parsed)
          ? yield* store.get({ jobId: parsed.value, tenant }).pipe(
              Effect.as(true),
              Effect.catchTag("JobNotFound", () => Effect.succeed(false))
            )
          : false
        if (visible && Option.isSome(parsed)) jobIds.push(parsed.value)
        else skipped++
      }
    }
    const result =
      jobIds !== undefined && jobIds.length === 0
        ? { replayed: [], skipped: [] }
        : yield* store.replay({
            jobIds,
            queue: options.queue,
            tenant,
            errorClass: body.errorClass as ErrorClass | undefined,
            type: body.type,
            limit: body.limit ?? (jobIds === undefined ? 1000 : undefined)
          })
    yield* Effect.forEach(
      result.replayed,
      (jobId) =>
        store.get({ jobId }).pipe(
          Effect.flatMap(publish),
          Effect.catchAll(() => Effect.void)
        ),
      { concurrency: 8, discard: true }
    )
    return json(200, { replayed: result.replayed.length, skipped: result.skipped.length + skipped })
  })

const perMinuteBuckets = 15

const stats = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const store = yield* Store
    const tenant = yield* tenantOf(request)
    const now = yield* store.now
    const window = options.deadLetterWindowMinutes
    const result = yield* store.stats({ queue: options.queue, tenant, failedSince: now - window * 60_000 })
    const oldest: Record<string, number> = {}
    for (const [priority, at] of Object.entries(result.oldestQueuedAt)) {
      oldest[priority] = Math.max(0, Math.round((now - at) / 100) / 10)
    }
    // Per-minute arrivals for the chart, from the failed jobs' last write (the moment they failed).
    const recent = yield* store.deadLetters({ queue: options.queue, tenant, limit: 1000 })
    const currentMinute = Math.floor(now / 60_000)
    const counts = new Array<number>(perMinuteBuckets).fill(0)
    for (const job of recent.jobs) {
      const age = currentMinute - Math.floor(job.updatedAt / 60_000)
      if (age >= 0 && age < perMinuteBuckets) counts[perMinuteBuckets - 1 - age]! += 1
    }
    return json(200, {
      byState: Object.fromEntries(states.map((state) => [state, result.byState[state] ?? 0])),
      oldestQueuedAgeSeconds: oldest,
      deadLetterArrivalsPerMinute: result.failedInWindow / window,
      costCentsByErrorClass: result.costCentsByErrorClass,
      deadLetterArrivals: counts.map((count, index) => ({
        minute: new Date((currentMinute - (perMinuteBuckets - 1 - index)) * 60_000).toISOString(),
        count
      }))
    })
  })

const metrics = Effect.gen(function* () {
  const options = yield* ServerOptions
  // The population gauges come from the store at scrape time; counters are kept by the workers in this process.
  yield* Metrics.refresh({ queue: options.queue, windowMs: options.deadLetterWindowMinutes * 60_000 }).pipe(
    Effect.catchAll((error) => Effect.logWarning("metrics refresh failed", error.message))
  )
  const text = yield* Metrics.prometheus
  return HttpServerResponse.text(text, { contentType: "text/plain; version=0.0.4; charset=utf-8" })
})

const healthz = Effect.gen(function* () {
  const store = yield* Store
  return yield* store.now.pipe(
    Effect.timeout("2 seconds"),
    Effect.as(json(200, { ok: true })),
    Effect.catchAll(() => Effect.succeed(json(503, { error: "store_unavailable" })))
  )
})

const dashboard = Effect.sync(() =>
  HttpServerResponse.text(dashboardHtml, {
    contentType: "text/html; charset=utf-8",
    headers: {
      "cache-control": "no-cache",
      "content-security-policy":
        "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:"
    }
  })
)

const openapi = Effect.sync(() => json(200, OpenApi.fromApi(SlowcallApi)))

type Raw = (request: {
  readonly request: HttpServerRequest.HttpServerRequest
  readonly path?: { readonly id: string }
}) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, Deps>

const raw =
  (f: (request: HttpServerRequest.HttpServerRequest, id: string) => Effect.Effect<any, any, Deps>): Raw =>
  ({ request, path }) =>
    respond(f(request, path?.id ?? ""))

const jobsGroup = HttpApiBuilder.group(SlowcallApi, "jobs", (handlers) =>
  handlers
    .handleRaw("submit", raw(submit))
    .handleRaw("list", raw(list))
    .handleRaw("get", raw(getJob))
    .handleRaw("detail", raw(getDetail))
    .handleRaw("events", raw(events))
    .handleRaw("cancel", raw(cancel))
)

const deadLettersGroup = HttpApiBuilder.group(SlowcallApi, "deadLetters", (handlers) =>
  handlers.handleRaw("list", raw(deadLetters)).handleRaw("replay", raw(replay))
)

const opsGroup = HttpApiBuilder.group(SlowcallApi, "ops", (handlers) =>
  handlers
    .handleRaw("stats", raw(stats))
    .handleRaw("metrics", () => respond(metrics))
    .handleRaw("healthz", () => respond(healthz))
    .handleRaw("openapi", () => respond(openapi))
    .handleRaw("dashboard", () => respond(dashboard))
)

/**
 * The API implementation as a layer: provide it to `HttpApiBuilder.serve()` (see `serve`) together with a Store and
 * a Transport.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerApi = (options: Options): Layer.Layer<HttpApi.Api, never, Store | Transport> =>
  HttpApiBuilder.api(SlowcallApi).pipe(
    Layer.provide([jobsGroup, deadLettersGroup, opsGroup]),
    Layer.provide(
      Layer.succeed(ServerOptions, {
        jobTypes: new Set(options.jobTypes),
        queue: options.queue ?? "default",
        maxBodyBytes: options.maxBodyBytes ?? defaultMaxBodyBytes,
        defaultMaxAttempts: options.defaultMaxAttempts ?? 5,
        authenticate: options.authenticate,
        sseIntervalMs: options.sseIntervalMs ?? 250,
        deadLetterWindowMinutes: options.deadLetterWindowMinutes ?? 5
      })
    )
  )

/**
 * The API served by whatever `HttpServer` is provided (Node, Bun, a test server).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options
): Layer.Layer<never, never, Store | Transport | HttpServer.HttpServer | HttpRouter.HttpRouter.DefaultServices> =>
  HttpApiBuilder.serve().pipe(Layer.provide(layerApi(options)))

/**
 * The API on a Node HTTP server listening on `port` (0 picks a free one) and `host` (default 127.0.0.1). Read the
 * bound address from `HttpServer.HttpServer` once the layer is built.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNode = (
  options: Options & { readonly port: number; readonly host?: string | undefined }
): Layer.Layer<HttpServer.HttpServer, unknown, Store | Transport> =>
  layer(options).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host: options.host ?? "127.0.0.1" }))
  )
