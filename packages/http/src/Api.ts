/**
 * The job HTTP API as an `HttpApi` description: one place that names every endpoint, its path, its parameters,
 * headers and request body, and its success and error shapes. The server (`Server.ts`) decodes every request with
 * these schemas and encodes every answer with them; the description also yields the OpenAPI document served at
 * `/openapi.json`.
 *
 * @since 0.1.0
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema } from "@effect/platform"
import * as Canonical from "@slowcall/core/Canonical"
import { limits } from "@slowcall/core/Client"
import { ErrorClass } from "@slowcall/core/ErrorClass"
import { JobState } from "@slowcall/core/Job"
import { Context, Schema } from "effect"
import { JobDetail, JobView } from "./View.js"

const IsoDate = Schema.String.pipe(
  Schema.maxLength(64),
  Schema.filter(
    (s) => {
      const ms = Date.parse(s)
      return (
        (!Number.isNaN(ms) && ms >= 0 && ms <= limits.maxEpochMs) ||
        "must be an ISO-8601 date-time from 1970 to the end of 9999"
      )
    },
    { identifier: "IsoDateTime" }
  )
)

const NonNegative = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

/**
 * A string any Store can keep and compare (no U+0000, no lone surrogate, `Canonical.unstorable`), at most 255
 * characters: every filter and name a request carries outside a submit (whose strings `Client` checks).
 */
const FilterText = Schema.String.pipe(
  Schema.maxLength(255),
  Schema.filter((text) => {
    const problem = Canonical.unstorable(text)
    return problem === undefined || problem
  })
)

/** A field that may be left out; when present it must decode (`undefined` is not JSON, so it is not a value). */
const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

/** Unknown fields are errors, and every problem is reported, not only the first. */
const strict = { parseOptions: { onExcessProperty: "error", errors: "all" } } as const

/**
 * The body of `POST /v1/jobs`. Unknown fields are rejected, so a typo never silently drops a setting. `delayMs`
 * (relative to the store's time) and `runAfter` (absolute) both say when the job becomes due; give at most one.
 * Give `input` or `inputRef`, not both. Every number has a range (`Client.limits`), every date lies between 1970 and
 * the end of 9999, and every string must be storable (no U+0000, no lone surrogate): anything else is a `400`.
 *
 * @since 0.1.0
 * @category models
 */
export const SubmitBody = Schema.Struct({
  type: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  version: optional(Schema.Int.pipe(Schema.between(1, limits.maxInt))),
  input: optional(Schema.Unknown),
  inputRef: optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000))),
  priority: optional(Schema.Int.pipe(Schema.between(limits.minInt, limits.maxInt))),
  delayMs: optional(Schema.Int.pipe(Schema.between(0, limits.maxDelayMs))),
  runAfter: optional(IsoDate),
  deadline: optional(IsoDate),
  budgetCents: optional(NonNegative),
  maxAttempts: optional(Schema.Int.pipe(Schema.between(1, 1000))),
  traceId: optional(Schema.String.pipe(Schema.maxLength(200)))
})
  .pipe(
    Schema.filter((body) =>
      body.delayMs !== undefined && body.runAfter !== undefined
        ? { path: ["delayMs"], message: "give either delayMs or runAfter, not both" }
        : true
    )
  )
  .annotations({ identifier: "SubmitBody", ...strict })
/**
 * @since 0.1.0
 * @category models
 */
export type SubmitBody = typeof SubmitBody.Type

/**
 * The headers `POST /v1/jobs` reads: an optional idempotency key of 1 to 255 characters, unique per tenant.
 *
 * @since 0.2.0
 * @category models
 */
export const SubmitHeaders = Schema.Struct({
  "idempotency-key": optional(
    Schema.String.pipe(Schema.minLength(1), Schema.maxLength(255)).annotations({
      message: () => "must be 1 to 255 characters"
    })
  )
})

/**
 * The body of `POST /v1/dead-letters/replay`: explicit ids, or a filter. Only failed jobs move. Ids that are not job
 * ids are counted as skipped.
 *
 * @since 0.1.0
 * @category models
 */
export const ReplayBody = Schema.Struct({
  ids: optional(Schema.Array(Schema.String).pipe(Schema.maxItems(10_000))),
  errorClass: optional(ErrorClass.annotations({ message: () => ({ message: "unknown error class", override: true }) })),
  type: optional(FilterText),
  limit: optional(Schema.Int.pipe(Schema.between(1, 10_000)))
}).annotations({ identifier: "ReplayBody", ...strict })
/**
 * @since 0.1.0
 * @category models
 */
export type ReplayBody = typeof ReplayBody.Type

/** A query parameter that may be left blank: `?state=` means no filter, as if the parameter were absent. */
const param = <A, I extends string>(schema: Schema.Schema<A, I>, message: string) =>
  optional(
    Schema.Union(
      Schema.transform(Schema.Literal(""), Schema.Undefined, {
        strict: true,
        decode: () => undefined,
        encode: () => "" as const
      }),
      schema
    ).annotations({ message: () => ({ message, override: true }) })
  )

const Limit = Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 1000))
const limitMessage = "must be an integer from 1 to 1000"

/**
 * The query of `GET /v1/jobs`: filters (state, type, error class, tenant, request key) and a page of at most
 * `limit` jobs (default 50), newest first, after the job `after` names (the previous page's `next`). With
 * authentication, `tenant` can only narrow to the caller's own tenant: any other gives no jobs.
 *
 * @since 0.2.0
 * @category models
 */
export const ListParams = Schema.Struct({
  state: param(JobState, `must be one of ${JobState.literals.join(", ")}`),
  type: optional(FilterText),
  errorClass: param(ErrorClass, "unknown error class"),
  tenant: optional(FilterText),
  requestKey: optional(FilterText),
  after: optional(FilterText),
  limit: param(Limit, limitMessage)
})

/**
 * `GET /v1/jobs`: a page of jobs and the cursor of the next one (`null` when this page is the last).
 *
 * @since 0.3.0
 * @category models
 */
export const ListBody = Schema.Struct({ jobs: Schema.Array(JobView), next: Schema.NullOr(Schema.String) })

/**
 * The query of `GET /v1/dead-letters`: error class and type filters and at most `limit` jobs (default 50).
 *
 * @since 0.2.0
 * @category models
 */
export const DeadLetterParams = Schema.Struct({
  errorClass: param(ErrorClass, "unknown error class"),
  type: optional(FilterText),
  limit: param(Limit, limitMessage)
})

/**
 * One problem with a request: where (`path`: a field name, a header name or a parameter, then indexes) and what.
 *
 * @since 0.1.0
 * @category models
 */
export const Issue = Schema.Struct({
  path: Schema.Array(Schema.Union(Schema.String, Schema.Number)),
  message: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type Issue = typeof Issue.Type

/**
 * `400`: the request was rejected before anything was written.
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidRequestBody = Schema.Struct({
  error: Schema.Literal("invalid_request"),
  issues: Schema.Array(Issue)
}).annotations(HttpApiSchema.annotations({ status: 400 }))

const errorBody = <const C extends string>(code: C, status: number) =>
  Schema.Struct({ error: Schema.Literal(code) }).annotations(HttpApiSchema.annotations({ status }))

/**
 * The body of every non-400 error: a stable code (`413` also names the limit, `429` the wait in seconds, which
 * `Retry-After` repeats).
 *
 * - `401 unauthorized`: missing or unknown credentials (`WWW-Authenticate: Bearer`);
 * - `403 cross_site_request`: a state-changing request whose `Origin` or `Sec-Fetch-Site` names another site;
 * - `404 not_found`: no such job, or another tenant's;
 * - `409 already_terminal`: cancel of a finished job;
 * - `413 payload_too_large`: a body over the limit, with or without `Content-Length`;
 * - `415 unsupported_media_type`: a state-changing request whose body is not `application/json`;
 * - `421 host_not_allowed`: a `Host` header outside the allow-list (DNS rebinding);
 * - `422 idempotency_key_reused`: the key was used for another request;
 * - `429 queue_full`: the queue's (or the tenant's) bound on queued jobs is reached; nothing was written;
 * - `500 internal_error`: the store refused a write for a reason a retry cannot change (a bug; no `Retry-After`);
 * - `503 store_unavailable`: the store cannot answer now (`Retry-After: 1`).
 *
 * @since 0.1.0
 * @category errors
 */
export const ErrorBodies = {
  unauthorized: errorBody("unauthorized", 401),
  crossSite: errorBody("cross_site_request", 403),
  notFound: errorBody("not_found", 404),
  alreadyTerminal: errorBody("already_terminal", 409),
  payloadTooLarge: Schema.Struct({
    error: Schema.Literal("payload_too_large"),
    limitBytes: Schema.Number
  }).annotations(HttpApiSchema.annotations({ status: 413 })),
  unsupportedMediaType: errorBody("unsupported_media_type", 415),
  hostNotAllowed: errorBody("host_not_allowed", 421),
  idempotencyKeyReused: errorBody("idempotency_key_reused", 422),
  queueFull: Schema.Struct({
    error: Schema.Literal("queue_full"),
    retryAfterSeconds: Schema.Number
  }).annotations(HttpApiSchema.annotations({ status: 429 })),
  internalError: errorBody("internal_error", 500),
  storeUnavailable: errorBody("store_unavailable", 503)
} as const

/**
 * The names of the headers the API reads, as a problem's `path` shows them (requests carry them in any case).
 *
 * @since 0.2.0
 * @category models
 */
export const headerNames: Readonly<Record<string, string>> = {
  "idempotency-key": "Idempotency-Key",
  "if-none-match": "If-None-Match",
  "last-event-id": "Last-Event-ID"
}

/**
 * The caller's tenant for the request: the one `authenticate` resolved, or `undefined` when the server runs
 * without authentication (jobs then have no tenant).
 *
 * @since 0.2.0
 * @category services
 */
export class Tenant extends Context.Tag("@slowcall/http/Tenant")<Tenant, string | undefined>() {}

/**
 * Resolves the `Authorization` header to the `Tenant` before anything else of the request is read; missing or
 * invalid credentials answer `401` (with `WWW-Authenticate: Bearer`). Every `/v1` endpoint has it.
 *
 * @since 0.2.0
 * @category middleware
 */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("@slowcall/http/Authentication", {
  failure: ErrorBodies.unauthorized,
  provides: Tenant
}) {}

/**
 * Reads the request body before it is decoded: over the server's `maxBodyBytes` it answers `413`, empty or not
 * JSON it answers `400`. The endpoints with a JSON body have it.
 *
 * @since 0.2.0
 * @category middleware
 */
export class JsonBody extends HttpApiMiddleware.Tag<JsonBody>()("@slowcall/http/JsonBody", {
  failure: Schema.Union(InvalidRequestBody, ErrorBodies.payloadTooLarge)
}) {}

/**
 * `GET /v1/dead-letters`. Each group lists the ids of its listed jobs, so a client can replay exactly that group.
 *
 * @since 0.1.0
 * @category models
 */
export const DeadLettersBody = Schema.Struct({
  jobs: Schema.Array(JobView),
  groups: Schema.Array(
    Schema.Struct({
      errorClass: Schema.NullOr(Schema.String),
      inputHash: Schema.String,
      count: Schema.Number,
      costCents: Schema.Number,
      jobIds: Schema.Array(Schema.String)
    })
  ),
  arrivalsPerMinute: Schema.Number
})

/**
 * `POST /v1/dead-letters/replay`: how many jobs moved back to queued and how many were skipped.
 *
 * @since 0.2.0
 * @category models
 */
export const ReplayResultBody = Schema.Struct({ replayed: Schema.Number, skipped: Schema.Number })

/**
 * The query of `GET /v1/stats`: the spend window in minutes (default 60, at most 30 days).
 *
 * @since 0.3.0
 * @category models
 */
export const StatsParams = Schema.Struct({
  spendWindowMinutes: param(
    Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 43_200)),
    "must be an integer from 1 to 43200"
  )
})

/**
 * Spend over the window: the total, what succeeded and failed jobs spent, and the groups per (queue, tenant, type,
 * state), largest first. A job's spend counts in the state the job is in now.
 *
 * @since 0.3.0
 * @category models
 */
export const SpendBody = Schema.Struct({
  windowMinutes: Schema.Number,
  totalCents: Schema.Number,
  succeededCents: Schema.Number,
  failedCents: Schema.Number,
  groups: Schema.Array(
    Schema.Struct({
      queue: Schema.String,
      tenant: Schema.NullOr(Schema.String),
      type: Schema.String,
      state: JobState,
      costCents: Schema.Number,
      jobs: Schema.Number
    })
  )
})

/**
 * `GET /v1/stats`. `deadLetterArrivals` (per-minute counts, oldest first) feeds the dashboard's chart; `waiting`
 * lists due queued jobs per type and version with how long the oldest has been due (a group whose age keeps growing
 * is one no worker claims); `spend` is the spend over the window.
 *
 * @since 0.1.0
 * @category models
 */
export const StatsBody = Schema.Struct({
  byState: Schema.Record({ key: Schema.String, value: Schema.Number }),
  oldestQueuedAgeSeconds: Schema.Record({ key: Schema.String, value: Schema.Number }),
  deadLetterArrivalsPerMinute: Schema.Number,
  costCentsByErrorClass: Schema.Record({ key: Schema.String, value: Schema.Number }),
  deadLetterArrivals: Schema.Array(Schema.Struct({ minute: Schema.String, count: Schema.Number })),
  waiting: Schema.Array(
    Schema.Struct({
      type: Schema.String,
      version: Schema.Number,
      count: Schema.Number,
      oldestAgeSeconds: Schema.Number,
      /** The oldest has waited longer than the server's `unclaimedAfterSeconds`: no worker claims this type. */
      unclaimed: Schema.Boolean
    })
  ),
  spend: SpendBody
})

const IdPath = Schema.Struct({ id: Schema.String })

const jobs = HttpApiGroup.make("jobs")
  .add(
    HttpApiEndpoint.post("submit", "/v1/jobs")
      .setPayload(SubmitBody)
      .setHeaders(SubmitHeaders)
      .addSuccess(JobView, { status: 202 })
      .addSuccess(JobView.annotations({ description: "the job an earlier submit with this key created" }), {
        status: 200
      })
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.idempotencyKeyReused)
      .addError(ErrorBodies.queueFull)
      .middleware(JsonBody)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/jobs").setUrlParams(ListParams).addSuccess(ListBody).addError(InvalidRequestBody)
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/jobs/:id")
      .setPath(IdPath)
      .setHeaders(Schema.Struct({ "if-none-match": optional(Schema.String) }))
      .addSuccess(JobView)
      .addSuccess(HttpApiSchema.Empty(304))
      .addError(ErrorBodies.notFound)
  )
  .add(
    HttpApiEndpoint.get("detail", "/v1/jobs/:id/detail")
      .setPath(IdPath)
      .addSuccess(JobDetail)
      .addError(ErrorBodies.notFound)
  )
  .add(
    HttpApiEndpoint.get("events", "/v1/jobs/:id/events")
      .setPath(IdPath)
      .setHeaders(Schema.Struct({ "last-event-id": optional(Schema.String) }))
      .addSuccess(HttpApiSchema.Text({ contentType: "text/event-stream" }))
      .addError(ErrorBodies.notFound)
  )
  .add(
    HttpApiEndpoint.post("cancel", "/v1/jobs/:id/cancel")
      .setPath(IdPath)
      .addSuccess(JobView, { status: 202 })
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.alreadyTerminal)
  )
  .addError(ErrorBodies.storeUnavailable)
  .middlewareEndpoints(Authentication)

const deadLetters = HttpApiGroup.make("deadLetters")
  .add(
    HttpApiEndpoint.get("list", "/v1/dead-letters")
      .setUrlParams(DeadLetterParams)
      .addSuccess(DeadLettersBody)
      .addError(InvalidRequestBody)
  )
  .add(
    HttpApiEndpoint.post("replay", "/v1/dead-letters/replay")
      .setPayload(ReplayBody)
      .addSuccess(ReplayResultBody)
      .addError(InvalidRequestBody)
      .middleware(JsonBody)
  )
  .addError(ErrorBodies.storeUnavailable)
  .middlewareEndpoints(Authentication)

const ops = HttpApiGroup.make("ops")
  .add(
    HttpApiEndpoint.get("stats", "/v1/stats")
      .setUrlParams(StatsParams)
      .addSuccess(StatsBody)
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.storeUnavailable)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.get("metrics", "/metrics")
      .addSuccess(HttpApiSchema.Text({ contentType: "text/plain; version=0.0.4; charset=utf-8" }))
      .addError(ErrorBodies.storeUnavailable)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.get("healthz", "/healthz")
      .addSuccess(Schema.Struct({ ok: Schema.Boolean }))
      .addError(ErrorBodies.storeUnavailable)
  )
  .add(HttpApiEndpoint.get("openapi", "/openapi.json").addSuccess(Schema.Unknown))
  .add(
    HttpApiEndpoint.get("dashboard", "/").addSuccess(HttpApiSchema.Text({ contentType: "text/html; charset=utf-8" }))
  )

/**
 * The whole API. Every endpoint is implemented by `Server.layerApi`; a request that does not decode answers `400`
 * with `InvalidRequestBody`.
 *
 * @since 0.1.0
 * @category models
 */
export class SlowcallApi extends HttpApi.make("slowcall")
  .add(jobs)
  .add(deadLetters)
  .add(ops)
  .addError(InvalidRequestBody)
  .addError(ErrorBodies.crossSite)
  .addError(ErrorBodies.unsupportedMediaType)
  .addError(ErrorBodies.hostNotAllowed)
  .addError(ErrorBodies.internalError) {}
