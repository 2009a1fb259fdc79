/**
 * The job HTTP API as an `HttpApi` description: one place that names every endpoint, its path, its request body and
 * its success and error shapes. The server (`Server.ts`) implements each endpoint; the description also yields the
 * OpenAPI document served at `/openapi.json`.
 *
 * @since 0.1.0
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { JobView } from "./View.js"

const IsoDate = Schema.String.pipe(
  Schema.filter((s) => !Number.isNaN(Date.parse(s)) || "must be an ISO-8601 date-time", {
    identifier: "IsoDateTime"
  })
)

const NonNegative = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

/**
 * The body of `POST /v1/jobs`. Unknown fields are rejected, so a typo never silently drops a setting.
 *
 * @since 0.1.0
 * @category models
 */
export const SubmitBody = Schema.Struct({
  type: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  version: Schema.optional(Schema.Int.pipe(Schema.positive())),
  input: Schema.optional(Schema.Unknown),
  inputRef: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000))),
  priority: Schema.optional(Schema.Int),
  runAfter: Schema.optional(IsoDate),
  deadline: Schema.optional(IsoDate),
  budgetCents: Schema.optional(NonNegative),
  maxAttempts: Schema.optional(Schema.Int.pipe(Schema.between(1, 1000))),
  traceId: Schema.optional(Schema.String.pipe(Schema.maxLength(200)))
})
/**
 * @since 0.1.0
 * @category models
 */
export type SubmitBody = typeof SubmitBody.Type

/**
 * The body of `POST /v1/dead-letters/replay`: explicit ids, or a filter. Only failed jobs move.
 *
 * @since 0.1.0
 * @category models
 */
export const ReplayBody = Schema.Struct({
  ids: Schema.optional(Schema.Array(Schema.String).pipe(Schema.maxItems(10_000))),
  errorClass: Schema.optional(Schema.String),
  type: Schema.optional(Schema.String),
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, 10_000)))
})
/**
 * @since 0.1.0
 * @category models
 */
export type ReplayBody = typeof ReplayBody.Type

/**
 * One problem with a request: where (`path`, field names and indexes) and what.
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
 * The body of every non-400 error: a stable code.
 *
 * @since 0.1.0
 * @category errors
 */
export const ErrorBodies = {
  unauthorized: errorBody("unauthorized", 401),
  notFound: errorBody("not_found", 404),
  alreadyTerminal: errorBody("already_terminal", 409),
  payloadTooLarge: errorBody("payload_too_large", 413),
  idempotencyKeyReused: errorBody("idempotency_key_reused", 422),
  storeUnavailable: errorBody("store_unavailable", 503)
} as const

/**
 * `GET /v1/dead-letters`.
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
      costCents: Schema.Number
    })
  ),
  arrivalsPerMinute: Schema.Number
})

/**
 * `GET /v1/stats`. `deadLetterArrivals` (per-minute counts, oldest first) feeds the dashboard's chart.
 *
 * @since 0.1.0
 * @category models
 */
export const StatsBody = Schema.Struct({
  byState: Schema.Record({ key: Schema.String, value: Schema.Number }),
  oldestQueuedAgeSeconds: Schema.Record({ key: Schema.String, value: Schema.Number }),
  deadLetterArrivalsPerMinute: Schema.Number,
  costCentsByErrorClass: Schema.Record({ key: Schema.String, value: Schema.Number }),
  deadLetterArrivals: Schema.Array(Schema.Struct({ minute: Schema.String, count: Schema.Number }))
})

const IdPath = Schema.Struct({ id: Schema.String })

const jobs = HttpApiGroup.make("jobs")
  .add(
    HttpApiEndpoint.post("submit", "/v1/jobs")
      .setPayload(SubmitBody)
      .addSuccess(JobView, { status: 202 })
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.payloadTooLarge)
      .addError(ErrorBodies.idempotencyKeyReused)
      .addError(ErrorBodies.unauthorized)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/jobs")
      .addSuccess(Schema.Struct({ jobs: Schema.Array(JobView) }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.unauthorized)
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/jobs/:id")
      .setPath(IdPath)
      .addSuccess(JobView)
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.unauthorized)
  )
  .add(
    HttpApiEndpoint.get("detail", "/v1/jobs/:id/detail")
      .setPath(IdPath)
      .addSuccess(Schema.Unknown)
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.unauthorized)
  )
  .add(
    HttpApiEndpoint.get("events", "/v1/jobs/:id/events")
      .setPath(IdPath)
      .addSuccess(HttpApiSchema.Text({ contentType: "text/event-stream" }))
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.unauthorized)
  )
  .add(
    HttpApiEndpoint.post("cancel", "/v1/jobs/:id/cancel")
      .setPath(IdPath)
      .addSuccess(JobView, { status: 202 })
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.alreadyTerminal)
      .addError(ErrorBodies.unauthorized)
  )

const deadLetters = HttpApiGroup.make("deadLetters")
  .add(
    HttpApiEndpoint.get("list", "/v1/dead-letters")
      .addSuccess(DeadLettersBody)
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.unauthorized)
  )
  .add(
    HttpApiEndpoint.post("replay", "/v1/dead-letters/replay")
      .setPayload(ReplayBody)
      .addSuccess(Schema.Struct({ replayed: Schema.Number, skipped: Schema.Number }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.payloadTooLarge)
      .addError(ErrorBodies.unauthorized)
  )

const ops = HttpApiGroup.make("ops")
  .add(HttpApiEndpoint.get("stats", "/v1/stats").addSuccess(StatsBody).addError(ErrorBodies.unauthorized))
  .add(HttpApiEndpoint.get("metrics", "/metrics").addSuccess(HttpApiSchema.Text({ contentType: "text/plain" })))
  .add(
    HttpApiEndpoint.get("healthz", "/healthz")
      .addSuccess(Schema.Struct({ ok: Schema.Boolean }))
      .addError(ErrorBodies.storeUnavailable)
  )
  .add(HttpApiEndpoint.get("openapi", "/openapi.json").addSuccess(Schema.Unknown))
  .add(HttpApiEndpoint.get("dashboard", "/").addSuccess(HttpApiSchema.Text({ contentType: "text/html" })))

/**
 * The whole API. Every endpoint is implemented by `Server.layer`.
 *
 * @since 0.1.0
 * @category models
 */
export class SlowcallApi extends HttpApi.make("slowcall").add(jobs).add(deadLetters).add(ops) {}
