/**
 * The job HTTP API as an `HttpApi` description: one place that names every endpoint, its path, its parameters,
 * headers and request body, and its success and error shapes. The server (`Server.ts`) decodes every request with
 * these schemas and encodes every answer with them; the description also yields the OpenAPI document served at
 * `/openapi.json`.
 *
 * @since 0.1.0
 */
import {
  HttpApi,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity,
  OpenApi
} from "@effect/platform"
import * as Canonical from "@slowcall/core/Canonical"
import { limits } from "@slowcall/core/Client"
import * as DeadLetters from "@slowcall/core/DeadLetters"
import { ErrorClass } from "@slowcall/core/ErrorClass"
import { JobState } from "@slowcall/core/Job"
import * as Limits from "@slowcall/core/Limits"
import { Context, JSONSchema, Schema } from "effect"
import { packageVersion, tidy } from "./internal/openApi.js"
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
    {
      identifier: "IsoDateTime",
      description: "an ISO-8601 date-time from 1970 to the end of 9999, such as 2026-05-01T12:00:00Z",
      jsonSchema: { format: "date-time" }
    }
  )
)

const NonNegative = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

/**
 * A string any Store can keep and compare (no U+0000, no lone surrogate, `Canonical.unstorable`), at most 255
 * characters: every filter and name a request carries outside a submit (whose strings `Client` checks).
 */
const FilterText = Schema.String.pipe(
  Schema.maxLength(255),
  Schema.filter(
    (text) => {
      const problem = Canonical.unstorable(text)
      return problem === undefined || problem
    },
    // An empty `jsonSchema` keeps the string's own schema and lets a use's `description` reach the document.
    { description: "text of at most 255 characters", jsonSchema: {} }
  )
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
  type: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({
    description: "the job type: one the server accepts (its handlers and `jobTypes`), or the submit is a 400"
  }),
  version: optional(
    Schema.Int.pipe(Schema.between(1, limits.maxInt)).annotations({
      description: "the version of the job type's handler that runs it (default 1)"
    })
  ),
  input: optional(
    Schema.Unknown.annotations({
      description: "the job's input, any JSON value (nested at most 64 levels); the handler's input schema checks it"
    })
  ),
  inputRef: optional(
    Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000)).annotations({
      description: "a reference to an input kept elsewhere (a URL or a key), read by the worker; instead of `input`"
    })
  ),
  priority: optional(
    Schema.Int.pipe(Schema.between(limits.minInt, limits.maxInt)).annotations({
      description: "higher runs first among due jobs (default 0)"
    })
  ),
  delayMs: optional(
    Schema.Int.pipe(Schema.between(0, limits.maxDelayMs)).annotations({
      description: "milliseconds, on the store's clock, before the job is due; or give `runAfter`, not both"
    })
  ),
  runAfter: optional(IsoDate.annotations({ description: "when the job becomes due; or give `delayMs`, not both" })),
  deadline: optional(IsoDate.annotations({ description: "after this time no attempt starts and no call is made" })),
  budgetCents: optional(
    NonNegative.annotations({
      description: "the most the job may spend, in cents; a call that does not fit is refused"
    })
  ),
  maxAttempts: optional(
    Schema.Int.pipe(Schema.between(1, 1000)).annotations({ description: "attempts per run (default 3)" })
  ),
  traceId: optional(
    Schema.String.pipe(Schema.maxLength(200)).annotations({
      description: "a W3C traceparent or a trace id the worker's spans join; not part of the idempotency check"
    })
  )
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

/** What the idempotency key is, wherever the document names it. */
const idempotencyKeyText =
  "The idempotency key: a name the client gives this request (1 to 255 characters, unique per tenant), so that " +
  "a retry cannot start a second job. A repeat with the same key and the same request answers 200 with the job " +
  "the first one created (`Idempotent-Replayed: true`); the same key with another request is " +
  "`422 idempotency_key_reused`. The job keeps it as its `requestKey` (the filter of `GET /v1/jobs`)."

/**
 * The headers `POST /v1/jobs` reads: an optional idempotency key of 1 to 255 characters, unique per tenant. The job
 * keeps it as its `requestKey` (the filter of `GET /v1/jobs`; `requestKey` in `Client.submit`, `key` in the Promise
 * API): one key, named for where it travels.
 *
 * @since 0.2.0
 * @category models
 */
export const SubmitHeaders = Schema.Struct({
  "idempotency-key": optional(
    Schema.String.pipe(Schema.minLength(1), Schema.maxLength(255)).annotations({
      message: () => "must be 1 to 255 characters",
      description: idempotencyKeyText
    })
  )
})

/**
 * The body of `POST /v1/dead-letters/replay`: what to replay, named explicitly. Explicit `ids`, or a filter
 * (`errorClass`, `type`, `inputHash`: every given one must match), or `all: true` for every dead letter; a body that
 * names none of them is a `400` and changes nothing. Filters apply to explicit ids too. `dryRun: true` changes
 * nothing and answers what the same call would do. Only failed jobs move; ids that are not job ids count as skipped.
 *
 * @since 0.1.0
 * @category models
 */
export const ReplayBody = Schema.Struct({
  ids: optional(Schema.Array(Schema.String).pipe(Schema.maxItems(10_000))),
  errorClass: optional(ErrorClass.annotations({ message: () => ({ message: "unknown error class", override: true }) })),
  type: optional(FilterText),
  inputHash: optional(FilterText),
  all: optional(Schema.Boolean),
  dryRun: optional(Schema.Boolean)
})
  .pipe(
    Schema.filter((body) =>
      body.ids !== undefined ||
      body.errorClass !== undefined ||
      body.type !== undefined ||
      body.inputHash !== undefined ||
      body.all === true
        ? true
        : {
            path: [],
            message: "name what to replay: ids, a filter (errorClass, type, inputHash), or all: true"
          }
    )
  )
  .annotations({ identifier: "ReplayBody", ...strict })
/**
 * @since 0.1.0
 * @category models
 */
export type ReplayBody = typeof ReplayBody.Type

/**
 * A query parameter that may be left blank: `?state=` means no filter, as if the parameter were absent. The document
 * shows the parameter as what it is (`limit` an integer from 1 to 1000, `state` one of the states), not as the text
 * the query carries or the blank the server also takes, so a typed client sends `limit: 200`.
 */
const param = <A, I extends string>(schema: Schema.Schema<A, I>, message: string, description?: string) =>
  optional(
    Schema.Union(
      Schema.transform(Schema.Literal(""), Schema.Undefined, {
        strict: true,
        decode: () => undefined,
        encode: () => "" as const
      }),
      schema
    ).annotations({
      message: () => ({ message, override: true }),
      jsonSchema: {
        ...JSONSchema.fromAST(Schema.typeSchema(schema).ast, {
          definitions: {},
          target: "openApi3.1",
          topLevelReferenceStrategy: "skip"
        }),
        ...(description === undefined ? {} : { description })
      }
    })
  )

const Limit = Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 1000))
const limitMessage = "must be an integer from 1 to 1000"

/**
 * The query of `GET /v1/jobs`: filters (state, type, error class, tenant, request key) and a page of at most
 * `limit` jobs (default 50), newest first (`order=oldest`: oldest first), after the job `after` names (the previous
 * page's `next`). Paging back is a listing the other way from the page's first job. With authentication, `tenant`
 * can only narrow to the caller's own tenant: any other gives no jobs.
 *
 * @since 0.2.0
 * @category models
 */
export const ListParams = Schema.Struct({
  state: param(JobState, `must be one of ${JobState.literals.join(", ")}`, "only jobs in this state"),
  type: optional(FilterText.annotations({ description: "only jobs of this type" })),
  errorClass: param(ErrorClass, "unknown error class", "only jobs whose last error has this class"),
  tenant: optional(FilterText.annotations({ description: "only this tenant's jobs (with tokens: the caller's own)" })),
  requestKey: optional(
    FilterText.annotations({
      description: "only the job submitted with this idempotency key (its submit's `Idempotency-Key` header)"
    })
  ),
  after: optional(FilterText.annotations({ description: "the cursor: the `next` of the previous page" })),
  limit: param(Limit, limitMessage, "the most jobs on the page (default 50)"),
  order: param(
    Schema.Literal("newest", "oldest"),
    "must be newest or oldest",
    "newest first (the default) or oldest first"
  )
})

/**
 * `GET /v1/jobs`: a page of jobs, the cursor of the next one (`null` when this page is the last), how many jobs the
 * filters select in all (counted up to 10,000: `totalCapped` says the count stopped there) and the store's time.
 *
 * @since 0.3.0
 * @category models
 */
export const ListBody = Schema.Struct({
  jobs: Schema.Array(JobView),
  next: Schema.NullOr(Schema.String),
  /** How many jobs the filters select in all pages, counted up to 10,000. */
  total: Schema.Number,
  /** The count stopped at its bound: there are at least `total`. */
  totalCapped: Schema.Boolean,
  /** Store time of the read (what `leaseUntil` is measured against). */
  now: Schema.String
})

/**
 * A page cursor of `GET /v1/dead-letters`: the `next` of an earlier page.
 */
const DeadLetterCursor = Schema.String.pipe(
  Schema.maxLength(1000),
  Schema.filter((text) => DeadLetters.decodeCursor(text) !== undefined || "not a cursor: pass the next of a page")
)

/**
 * The query of `GET /v1/dead-letters`: error class and type filters; the groups' order (`sort`: `cost`, the
 * default, `count` or `recent`); a page of at most `limit` groups (default 50), after `cursor` (the previous page's
 * `next`). `limit` also bounds the recent failed jobs listed beside the groups.
 *
 * @since 0.2.0
 * @category models
 */
export const DeadLetterParams = Schema.Struct({
  errorClass: param(ErrorClass, "unknown error class", "only dead letters whose last error has this class"),
  type: optional(FilterText.annotations({ description: "only dead letters of this job type" })),
  sort: param(
    Schema.Literal(...DeadLetters.sorts),
    `must be one of ${DeadLetters.sorts.join(", ")}`,
    "the order of the groups: cost (the default, most costly first), count, or recent (latest failure first)"
  ),
  limit: param(Limit, limitMessage, "groups per page (default 50)"),
  cursor: param(DeadLetterCursor, "not a cursor: pass the next of a page", "the page after the one whose next this is")
})

/**
 * One problem with a request: where (`path`: a field name, a header name or a parameter, then indexes) and what.
 *
 * @since 0.1.0
 * @category models
 */
export const Issue = Schema.Struct({
  path: Schema.Array(Schema.Union(Schema.String, Schema.Number)).annotations({
    description: "where: a body field, a header or a query parameter, then indexes and keys within it"
  }),
  message: Schema.String.annotations({ description: "what is wrong, for a person" })
}).annotations({ identifier: "RequestIssue" })
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
}).annotations({
  ...HttpApiSchema.annotations({ status: 400 }),
  identifier: "InvalidRequest",
  description: "the request was refused before anything was written; `issues` says where and why"
})

const errorBody = <const C extends string>(code: C, status: number, identifier: string, description: string) =>
  Schema.Struct({ error: Schema.Literal(code) }).annotations({
    ...HttpApiSchema.annotations({ status }),
    identifier,
    description
  })

/**
 * The body of every non-400 error: a stable code (`413` also names the limit, `429` the wait in seconds, which
 * `Retry-After` repeats).
 *
 * - `401 unauthorized`: missing or unknown credentials (`WWW-Authenticate: Bearer`);
 * - `403 cross_site_request`: a state-changing request whose `Origin` or `Sec-Fetch-Site` names another site;
 * - `403 operator_required`: a change to a resource (limits, pause, resume) or to a schedule by a tenant that is not
 *   an operator;
 * - `404 not_found`: no such job, batch or schedule, or another tenant's;
 * - `404 batches_unsupported`: a batch route on a server whose store keeps no batches;
 * - `409 already_terminal`: cancel of a finished job;
 * - `413 payload_too_large`: a body over the limit, with or without `Content-Length`;
 * - `405 method_not_allowed`: a method the path does not have (`Allow` lists those it has);
 * - `415 unsupported_media_type`: a state-changing request whose body is not `application/json`;
 * - `421 host_not_allowed`: a `Host` header outside the allow-list (DNS rebinding);
 * - `422 idempotency_key_reused`: the key was used for another request;
 * - `422 until_not_in_future`: a pause whose end is not after the store's time;
 * - `429 queue_full`: the queue's (or the tenant's) bound on queued jobs is reached; nothing was written;
 * - `500 internal_error`: the store refused a write for a reason a retry cannot change (a bug; no `Retry-After`);
 * - `503 store_unavailable`: the store cannot answer now (`Retry-After: 1`).
 *
 * @since 0.1.0
 * @category errors
 */
export const ErrorBodies = {
  unauthorized: errorBody(
    "unauthorized",
    401,
    "Unauthorized",
    "no bearer token, or one the server does not know (`WWW-Authenticate: Bearer`)"
  ),
  crossSite: errorBody(
    "cross_site_request",
    403,
    "CrossSiteRequest",
    "a state-changing request whose `Origin` or `Sec-Fetch-Site` names another site"
  ),
  notFound: errorBody("not_found", 404, "NotFound", "no such job, batch or schedule, or another tenant's"),
  operatorRequired: errorBody(
    "operator_required",
    403,
    "OperatorRequired",
    "with authentication, only an operator tenant's token may change a resource or a schedule"
  ),
  methodNotAllowed: errorBody(
    "method_not_allowed",
    405,
    "MethodNotAllowed",
    "the path does not have this method; `Allow` lists the methods it has"
  ),
  alreadyTerminal: errorBody("already_terminal", 409, "AlreadyTerminal", "the job has already ended"),
  payloadTooLarge: Schema.Struct({
    error: Schema.Literal("payload_too_large"),
    limitBytes: Schema.Number
  }).annotations({
    ...HttpApiSchema.annotations({ status: 413 }),
    identifier: "PayloadTooLarge",
    description: "the body is larger than the server takes (`limitBytes`); nothing was written"
  }),
  unsupportedMediaType: errorBody(
    "unsupported_media_type",
    415,
    "UnsupportedMediaType",
    "a state-changing request whose body is not `application/json`"
  ),
  hostNotAllowed: errorBody(
    "host_not_allowed",
    421,
    "HostNotAllowed",
    "the `Host` header is not one the server answers for"
  ),
  idempotencyKeyReused: errorBody(
    "idempotency_key_reused",
    422,
    "IdempotencyKeyReused",
    "the idempotency key was used for another request; nothing was written"
  ),
  batchesUnsupported: errorBody(
    "batches_unsupported",
    404,
    "BatchesUnsupported",
    "this server's store keeps no batches (its backend has no batch verbs); nothing was written"
  ),
  untilNotInFuture: errorBody(
    "until_not_in_future",
    422,
    "UntilNotInFuture",
    "the pause's `until` is not after the store's time, so it would pause nothing; nothing was written"
  ),
  queueFull: Schema.Struct({
    error: Schema.Literal("queue_full"),
    retryAfterSeconds: Schema.Number
  }).annotations({
    ...HttpApiSchema.annotations({ status: 429 }),
    identifier: "QueueFull",
    description: "the queue holds as many queued jobs as it may; repeat after `Retry-After`; nothing was written"
  }),
  internalError: errorBody(
    "internal_error",
    500,
    "InternalError",
    "the store refused the request for a reason a retry cannot change (a bug to report)"
  ),
  storeUnavailable: errorBody(
    "store_unavailable",
    503,
    "StoreUnavailable",
    "the store cannot answer now; repeat after `Retry-After`"
  )
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
  provides: Tenant,
  security: {
    bearer: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "`Authorization: Bearer <token>`, a token made by `slowcall token` (or what the server's `authenticate` " +
          "takes). Each token speaks for one tenant: the requests see only that tenant's jobs."
      )
    )
  }
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
 * One group of `GET /v1/dead-letters`: the failed jobs of one error class and one input (`inputHash`), or, collapsed
 * (`collapsed: true`, `inputHash: null`), the jobs of one error class whose input failed only once. `jobIds` are the
 * group's most recent jobs (at most 50); `sampleInput` and `lastError` are those of its most recent job (redacted,
 * the input cut to 300 characters); `lastFailedAt` is when that job failed (epoch ms).
 *
 * @since 0.5.0
 * @category models
 */
export const DeadLetterGroupBody = Schema.Struct({
  errorClass: Schema.NullOr(Schema.String),
  inputHash: Schema.NullOr(Schema.String),
  count: Schema.Number,
  costCents: Schema.Number,
  jobIds: Schema.Array(Schema.String),
  sampleInput: Schema.NullOr(Schema.String),
  lastError: Schema.NullOr(Schema.String),
  lastFailedAt: Schema.Number,
  collapsed: Schema.Boolean
})

/**
 * `GET /v1/dead-letters`: a page of groups in the order asked for, the cursor of the next page (`null` on the last),
 * the totals over every group (for "page k of n"), the most recent failed jobs (at most `limit`) and the arrival
 * rate.
 *
 * @since 0.1.0
 * @category models
 */
export const DeadLettersBody = Schema.Struct({
  groups: Schema.Array(DeadLetterGroupBody),
  next: Schema.NullOr(Schema.String),
  totalGroups: Schema.Number,
  totalJobs: Schema.Number,
  totalCostCents: Schema.Number,
  jobs: Schema.Array(JobView),
  arrivalsPerMinute: Schema.Number
})

/**
 * `POST /v1/dead-letters/replay`, one operation over everything the body names (at most 100,000 jobs, `capped` when
 * more matched): `matched` dead letters found, `replayed` moved back to queued (0 in a dry run), `skipped` (ids
 * naming no failed job of the filter; or matched jobs that left `failed` before their write), and `estimatedCents`:
 * what re-running the matched jobs once is expected to cost, the sum over them of the protocol's per-attempt estimate
 * (`Protocol.fallbackEstimate`: the most one earlier attempt of the job was charged, what a claim reserves against a
 * budget when the handler declares no estimate). A job that fails again may spend up to its `maxAttempts` times that.
 *
 * @since 0.2.0
 * @category models
 */
export const ReplayResultBody = Schema.Struct({
  matched: Schema.Number,
  replayed: Schema.Number,
  skipped: Schema.Number,
  estimatedCents: Schema.Number,
  capped: Schema.Boolean
})

/**
 * The query of `GET /v1/stats`: the spend window in minutes (default 60, at most 30 days).
 *
 * @since 0.3.0
 * @category models
 */
export const StatsParams = Schema.Struct({
  spendWindowMinutes: param(
    Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 43_200)),
    "must be an integer from 1 to 43200",
    "the spend window in minutes (default 60)"
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

/**
 * A resource id as a path carries it: one path segment, percent-encoded as `encodeURIComponent` does (`/` is `%2F`;
 * `:`, `@` and `+` may stay as they are). The id itself is 1 to 200 characters of `A-Z a-z 0-9 . _ : / @ + -`
 * (`Limits.isResource`); anything else is a `400`. The ids `.` and `..` cannot be named in a path (a URL parser
 * folds those segments away), so they are best not used.
 *
 * @since 0.4.0
 * @category models
 */
export const ResourcePath = Schema.Struct({
  resource: Schema.String.pipe(
    Schema.filter((value) => Limits.isResource(value) || "a resource id is 1 to 200 characters of [A-Za-z0-9._:/@+-]", {
      jsonSchema: {}
    })
  ).annotations({
    description:
      "the resource id (provider:model-class:credential, such as `openai:gpt-4.1:key-a`), percent-encoded as one " +
      "path segment (`/` as `%2F`)"
  })
})

const PerMinute = Schema.Number.pipe(Schema.finite(), Schema.greaterThan(0))

/**
 * The body of `PUT /v1/resources/{resource}/limits`: the resource's limits, each optional (absent: unlimited in that
 * dimension), replacing the old ones whole (`Limiter.define`: bucket levels are kept, clamped to a lower capacity,
 * and so are permits in flight and any pause). `{}` removes every limit. The ranges are those of
 * `Limits.checkLimits`; unknown fields are refused, so a typo never silently drops a limit.
 *
 * @since 0.4.0
 * @category models
 */
export const LimitsBody = Schema.Struct({
  maxConcurrent: optional(
    Schema.Int.pipe(Schema.between(1, limits.maxInt)).annotations({
      description: "calls holding a live permit at once"
    })
  ),
  requestsPerMinute: optional(
    PerMinute.annotations({ description: "a token bucket of requests, refilled continuously" })
  ),
  inputTokensPerMinute: optional(PerMinute.annotations({ description: "a token bucket of input tokens" })),
  outputTokensPerMinute: optional(PerMinute.annotations({ description: "a token bucket of output tokens" })),
  burstSeconds: optional(
    Schema.Number.pipe(Schema.finite(), Schema.greaterThan(0)).annotations({
      description: "how many seconds' worth of each per-minute limit a bucket holds (default 1)"
    })
  ),
  priorityShare: optional(
    Schema.Struct({
      minPriority: Schema.Int.pipe(Schema.between(limits.minInt, limits.maxInt)).annotations({
        description: "jobs of this priority and above may use the reserved share"
      }),
      share: Schema.Number.pipe(Schema.finite(), Schema.greaterThanOrEqualTo(0), Schema.lessThan(1)).annotations({
        description: "the part of every dimension kept for them (0 <= share < 1)"
      })
    }).annotations({ ...strict, description: "capacity kept for jobs of a priority and above" })
  )
}).annotations({ identifier: "LimitsBody", ...strict })
/**
 * @since 0.4.0
 * @category models
 */
export type LimitsBody = typeof LimitsBody.Type

/**
 * The body of `POST /v1/resources/{resource}/pause`: an operator's pause (kind `manual`) until `until`, or, without
 * it, until someone resumes the resource. `until` must lie after the store's time (`422 until_not_in_future`).
 *
 * @since 0.4.0
 * @category models
 */
export const PauseBody = Schema.Struct({
  until: optional(IsoDate.annotations({ description: "when the pause ends by itself; absent: until resumed" })),
  reason: optional(
    Schema.String.pipe(
      Schema.maxLength(1000),
      Schema.filter(
        (text) => {
          const problem = Canonical.unstorable(text)
          return problem === undefined || problem
        },
        { jsonSchema: {} }
      )
    ).annotations({ description: "why, shown to operators (at most 1000 characters)" })
  )
}).annotations({ identifier: "PauseBody", ...strict })
/**
 * @since 0.4.0
 * @category models
 */
export type PauseBody = typeof PauseBody.Type

const PauseKindSchema = Schema.Literal("rate_limited", "quota_exhausted", "manual")

const Bucket = Schema.NullOr(
  Schema.Struct({
    level: Schema.Number.annotations({ description: "what the bucket holds now (negative: debt)" }),
    capacity: Schema.Number,
    perMinute: Schema.Number
  })
)

/**
 * One resource as the API shows it, at the store time of the answer: its limits, permits in use against the cap,
 * each bucket's level and capacity, the pause in force (kind, end, reason, start), whether it is half-open (its one
 * probe call admitted, the rest waiting), the live permits (with authentication, only the caller's tenant's are
 * listed, an operator's sees them all; `permitsInUse` counts every one) and the counters (only ever growing: grants, waits by reason, acquires
 * answered paused, pauses by kind, so `rate_limited` plus `quota_exhausted` are the 429s the fleet saw). Times are
 * ISO-8601, store time.
 *
 * @since 0.4.0
 * @category models
 */
export const ResourceView = Schema.Struct({
  resource: Schema.String,
  limits: Schema.Struct({
    maxConcurrent: Schema.optional(Schema.Number),
    requestsPerMinute: Schema.optional(Schema.Number),
    inputTokensPerMinute: Schema.optional(Schema.Number),
    outputTokensPerMinute: Schema.optional(Schema.Number),
    burstSeconds: Schema.optional(Schema.Number),
    priorityShare: Schema.optional(Schema.Struct({ minPriority: Schema.Number, share: Schema.Number }))
  }).annotations({ description: "the limits set (`PUT .../limits`); an absent one is unlimited" }),
  permitsInUse: Schema.Number,
  maxConcurrent: Schema.NullOr(Schema.Number),
  learnedConcurrent: Schema.NullOr(Schema.Number).annotations({
    description:
      "the concurrency cap the fleet learned from the provider's 429s, below `maxConcurrent` (the lower is in force); null when none"
  }),
  buckets: Schema.Struct({ requests: Bucket, inputTokens: Bucket, outputTokens: Bucket }),
  pause: Schema.NullOr(
    Schema.Struct({
      kind: PauseKindSchema,
      until: Schema.NullOr(Schema.String),
      reason: Schema.String,
      since: Schema.String
    })
  ),
  halfOpen: Schema.Boolean,
  permits: Schema.Array(
    Schema.Struct({
      callId: Schema.String,
      jobId: Schema.String,
      token: Schema.Number,
      tenant: Schema.NullOr(Schema.String),
      priority: Schema.Number,
      permitUntil: Schema.String,
      probe: Schema.Boolean
    })
  ),
  counters: Schema.Struct({
    grants: Schema.Number,
    waits: Schema.Struct({
      concurrency: Schema.Number,
      requests: Schema.Number,
      inputTokens: Schema.Number,
      outputTokens: Schema.Number,
      probe: Schema.Number
    }),
    paused: Schema.Number,
    pauses: Schema.Struct({ rate_limited: Schema.Number, quota_exhausted: Schema.Number, manual: Schema.Number })
  })
}).annotations({ identifier: "ResourceView" })
/**
 * @since 0.4.0
 * @category models
 */
export type ResourceView = typeof ResourceView.Type

/**
 * `GET /v1/resources`: every resource with a record (named by a limit, a call or an operator), by id, and the
 * store time of the read.
 *
 * @since 0.4.0
 * @category models
 */
export const ResourcesBody = Schema.Struct({ now: Schema.String, resources: Schema.Array(ResourceView) })

/**
 * One resource and the store time of the read (`GET`, `PUT .../limits`, `POST .../pause`): the state after the
 * change, for a write.
 *
 * @since 0.4.0
 * @category models
 */
export const ResourceBody = Schema.Struct({ now: Schema.String, resource: ResourceView })

/**
 * `POST /v1/resources/{resource}/resume`: whether the resource was paused (or half-open) before, and its state after.
 *
 * @since 0.4.0
 * @category models
 */
export const ResumeBody = Schema.Struct({ now: Schema.String, wasPaused: Schema.Boolean, resource: ResourceView })

/**
 * A schedule id as a path carries it: one path segment, percent-encoded as `encodeURIComponent` does. The id itself
 * is 1 to 200 storable characters (`Schedule.limits.maxIdLength`; no NUL, no lone surrogate); anything else is a
 * `400` for every verb.
 *
 * @since 0.5.0
 * @category models
 */
export const SchedulePath = Schema.Struct({
  id: Schema.String.pipe(
    Schema.minLength(1),
    Schema.maxLength(200),
    // An id no store can keep (a NUL, a lone surrogate) names no schedule, whatever the verb: a 400, never a 500.
    Schema.filter(
      (id) => {
        const problem = Canonical.unstorable(id)
        return problem === undefined || problem
      },
      { jsonSchema: {} }
    )
  ).annotations({
    description: "the schedule id, percent-encoded as one path segment (`/` as `%2F`)"
  })
})

/**
 * The body of `PUT /v1/schedules/{id}`: a schedule's definition (`Schedule.make` without the id, which the path
 * names). Absent policies take `make`'s defaults (`UTC`, `skip`, `skip`, one minute of grace). The shapes are checked
 * here, every value by `Schedule.make` (the cron through croner, the timezone, the job's options as a submit would),
 * before anything is written; unknown fields are refused.
 *
 * @since 0.5.0
 * @category models
 */
export const ScheduleDefinitionBody = Schema.Struct({
  cron: Schema.String.annotations({
    description: "a cron expression: five fields, or six with seconds first (`0 2 * * *`, `*/10 * * * * *`)"
  }),
  timezone: optional(Schema.String.annotations({ description: "an IANA timezone name (default `UTC`)" })),
  job: Schema.Struct({
    queue: Schema.String,
    type: Schema.String,
    input: optional(Schema.Unknown.annotations({ description: "JSON handed to every tick's job under `input`" })),
    version: optional(Schema.Number),
    tenant: optional(Schema.String),
    priority: optional(Schema.Number),
    maxAttempts: optional(Schema.Number),
    budgetCents: optional(Schema.Number),
    deadlineMs: optional(Schema.Number.annotations({ description: "the job's deadline, counted from its tick" }))
  }).annotations({ ...strict, description: "the job each tick submits" }),
  overlap: optional(
    Schema.Literal("allow", "skip", "cancelPrevious").annotations({
      description: "when the previous tick's job is still going (default `skip`)"
    })
  ),
  catchUp: optional(
    Schema.Union(
      Schema.Literal("skip", "latest"),
      Schema.Struct({ all: Schema.Number }).annotations(strict)
    ).annotations({
      description: "missed ticks after an outage: none, the newest, or all within a window in ms (default `skip`)"
    })
  ),
  graceMs: optional(
    Schema.Number.annotations({ description: "how late a tick may be made and still count as on time (default 60000)" })
  )
}).annotations({ identifier: "ScheduleDefinition", ...strict })
/**
 * @since 0.5.0
 * @category models
 */
export type ScheduleDefinitionBody = typeof ScheduleDefinitionBody.Type

/**
 * One schedule as the API shows it, at the store time of the answer: its definition, whether it is paused,
 * `decidedThrough` (the schedule's cursor: every tick at or before it is decided, made or skipped; a new schedule's is
 * when it was created, a resumed one's when it was resumed), `lastTick` (that instant when it is a tick of the
 * current expression: the newest tick decided; null until one is), `lastJobId` (the job of the newest tick that made
 * one), `nextTick` (the first tick after the store's time; null while paused, or when the expression has no more)
 * and `createdAt`. Times are ISO-8601, store time.
 *
 * @since 0.5.0
 * @category models
 */
export const ScheduleView = Schema.Struct({
  id: Schema.String,
  cron: Schema.String,
  timezone: Schema.String,
  job: Schema.Struct({
    queue: Schema.String,
    type: Schema.String,
    input: Schema.optional(Schema.Unknown),
    version: Schema.optional(Schema.Number),
    tenant: Schema.optional(Schema.String),
    priority: Schema.optional(Schema.Number),
    maxAttempts: Schema.optional(Schema.Number),
    budgetCents: Schema.optional(Schema.Number),
    deadlineMs: Schema.optional(Schema.Number)
  }),
  overlap: Schema.Literal("allow", "skip", "cancelPrevious"),
  catchUp: Schema.Union(Schema.Literal("skip", "latest"), Schema.Struct({ all: Schema.Number })),
  graceMs: Schema.Number,
  paused: Schema.Boolean,
  lastTick: Schema.NullOr(Schema.String),
  lastJobId: Schema.NullOr(Schema.String),
  decidedThrough: Schema.String,
  nextTick: Schema.NullOr(Schema.String),
  createdAt: Schema.String
}).annotations({ identifier: "ScheduleView" })
/**
 * @since 0.5.0
 * @category models
 */
export type ScheduleView = typeof ScheduleView.Type

/**
 * `GET /v1/schedules`: every schedule the caller may see, by id, and the store time of the read.
 *
 * @since 0.5.0
 * @category models
 */
export const SchedulesBody = Schema.Struct({ now: Schema.String, schedules: Schema.Array(ScheduleView) })

/**
 * One schedule and the store time of the answer (`GET`, `PUT`, `POST .../pause`, `POST .../resume`): the state after
 * the change, for a write.
 *
 * @since 0.5.0
 * @category models
 */
export const ScheduleBody = Schema.Struct({ now: Schema.String, schedule: ScheduleView })

const IdPath = Schema.Struct({ id: Schema.String.annotations({ description: "the job id (a UUID)" }) })

/**
 * A callback of `POST /v1/batches`: the job enqueued once when the batch finishes, in the server's queue, under the
 * batch's tenant. Its input is `{ batchId, input }` (the given input, or null).
 *
 * @since 0.7.0
 * @category models
 */
export const BatchCallbackBody = Schema.Struct({
  type: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({
    description: "the callback's job type: one the server accepts"
  }),
  version: optional(Schema.Int.pipe(Schema.between(1, limits.maxInt))),
  input: optional(Schema.Unknown.annotations({ description: "any JSON value, handed to the callback as `input`" })),
  priority: optional(Schema.Int.pipe(Schema.between(limits.minInt, limits.maxInt))),
  budgetCents: optional(NonNegative),
  maxAttempts: optional(Schema.Int.pipe(Schema.between(1, 1000)))
}).annotations({ identifier: "BatchCallbackBody", ...strict })

/**
 * The most items one `POST /v1/batches` carries (the body limit may bound it first).
 *
 * @since 0.7.0
 * @category models
 */
export const maxBatchItems = 10_000

/**
 * The body of `POST /v1/batches`: the items (each a `POST /v1/jobs` body), the batch's budget and deadline, and the
 * callbacks. Unknown fields are rejected; one bad item or callback refuses the whole request with nothing written.
 * The idempotency key travels in the `Idempotency-Key` header, as for a job.
 *
 * @since 0.7.0
 * @category models
 */
export const SubmitBatchBody = Schema.Struct({
  items: Schema.Array(SubmitBody)
    .pipe(Schema.minItems(1), Schema.maxItems(maxBatchItems))
    .annotations({
      description: `the batch's jobs, 1 to ${maxBatchItems}, each a \`POST /v1/jobs\` body`
    }),
  budgetCents: optional(
    NonNegative.annotations({ description: "the batch's spend cap in cents: no item is claimed once it is spent" })
  ),
  deadline: optional(IsoDate.annotations({ description: "every item's deadline at the latest" })),
  onComplete: optional(BatchCallbackBody.annotations({ description: "enqueued once, when every item has ended" })),
  onSuccess: optional(BatchCallbackBody.annotations({ description: "enqueued once, when every item has succeeded" }))
}).annotations({ identifier: "SubmitBatchBody", ...strict })
/**
 * @since 0.7.0
 * @category models
 */
export type SubmitBatchBody = typeof SubmitBatchBody.Type

/**
 * A batch as the API shows it: its counts per state and its cost are kept by the store in the same write as each
 * item's change, never counted. `finished` is set once every item has landed and none is queued or running; times
 * are ISO-8601.
 *
 * @since 0.7.0
 * @category models
 */
export const BatchView = Schema.Struct({
  id: Schema.String,
  requestKey: Schema.NullOr(Schema.String),
  tenant: Schema.NullOr(Schema.String),
  size: Schema.Number.annotations({ description: "the items the batch holds once every chunk has landed" }),
  added: Schema.Number.annotations({ description: "the items landed so far" }),
  counts: Schema.Struct({
    queued: Schema.Number,
    running: Schema.Number,
    succeeded: Schema.Number,
    failed: Schema.Number,
    abandoned: Schema.Number
  }),
  costCents: Schema.Number,
  budgetCents: Schema.NullOr(Schema.Number),
  deadline: Schema.NullOr(Schema.String),
  onComplete: Schema.NullOr(Schema.Struct({ type: Schema.String, jobId: Schema.NullOr(Schema.String) })),
  onSuccess: Schema.NullOr(Schema.Struct({ type: Schema.String, jobId: Schema.NullOr(Schema.String) })),
  parentJobId: Schema.NullOr(Schema.String),
  cancelRequestedAt: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String,
  finishedAt: Schema.NullOr(Schema.String),
  finished: Schema.Boolean
}).annotations({ identifier: "BatchView" })
/**
 * @since 0.7.0
 * @category models
 */
export type BatchView = typeof BatchView.Type

/**
 * The query of `GET /v1/batches/{id}/jobs`: the items in the order they landed, those in `state` only when given, a
 * page of `limit` (default 50) after the item `after` (the previous page's `next`).
 *
 * @since 0.7.0
 * @category models
 */
export const BatchJobsParams = Schema.Struct({
  state: param(JobState, `must be one of ${JobState.literals.join(", ")}`, "only items in this state"),
  after: optional(FilterText.annotations({ description: "the cursor: the `next` of the previous page" })),
  limit: param(Limit, limitMessage, "the most items on the page (default 50)")
})

/**
 * `GET /v1/batches/{id}/jobs`: a page of the batch's items and the cursor of the next (`null` on the last).
 *
 * @since 0.7.0
 * @category models
 */
export const BatchJobsBody = Schema.Struct({ jobs: Schema.Array(JobView), next: Schema.NullOr(Schema.String) })

/**
 * `POST /v1/batches/{id}/replay`: the batch after its failed items moved back to queued, and how many moved.
 *
 * @since 0.7.0
 * @category models
 */
export const BatchReplayBody = Schema.Struct({ batch: BatchView, replayed: Schema.Number })

const BatchPath = Schema.Struct({ id: Schema.String.annotations({ description: "the batch id (a UUID)" }) })

/** The request headers of a server-sent event stream: `Last-Event-ID` resumes after the last event received. */
const ResumeHeaders = Schema.Struct({
  "last-event-id": optional(
    Schema.String.annotations({ description: "the `id:` of the last event received, to resume after it" })
  )
})

/** An endpoint's summary (one line) and description (what a client needs beyond the schemas) in the document. */
const doc = (summary: string, description: string) => OpenApi.annotations({ summary, description })

const jobs = HttpApiGroup.make("jobs")
  .add(
    HttpApiEndpoint.post("submit", "/v1/jobs")
      .setPayload(SubmitBody)
      .setHeaders(SubmitHeaders)
      .addSuccess(JobView.annotations({ description: "the job, created and queued (`Location` names it)" }), {
        status: 202
      })
      .addSuccess(JobView.annotations({ description: "the job an earlier submit with this key created" }), {
        status: 200
      })
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.unsupportedMediaType)
      .addError(ErrorBodies.idempotencyKeyReused)
      .addError(ErrorBodies.queueFull)
      .middleware(JsonBody)
      .annotateContext(
        doc(
          "Submit a job",
          "Validates the request, writes a queued job and publishes it to the workers. Send an idempotency key " +
            "(`Idempotency-Key`) so that a retry after a timeout cannot start a second, billed job. A refused " +
            "request writes nothing."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/jobs")
      .setUrlParams(ListParams)
      .addSuccess(ListBody.annotations({ description: "a page of jobs, newest first" }))
      .addError(InvalidRequestBody)
      .annotateContext(
        doc(
          "List jobs",
          "Jobs newest first, filtered by state, type, error class, tenant or idempotency key (`requestKey`). A " +
            "blank parameter (`?state=`) is the same as none. `next` is the `after` of the next page, `null` on the " +
            "last."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/jobs/:id")
      .setPath(IdPath)
      .setHeaders(
        Schema.Struct({
          "if-none-match": optional(
            Schema.String.annotations({ description: "an `ETag` of this job read before: `304` if unchanged" })
          )
        })
      )
      .addSuccess(JobView.annotations({ description: "the job, with its `ETag`" }))
      .addSuccess(HttpApiSchema.Empty(304).annotations({ description: "the job has not changed since that `ETag`" }))
      .addError(ErrorBodies.notFound)
      .annotateContext(
        doc(
          "Read a job",
          "The job's view with an `ETag`. While the job has not ended, `Retry-After` says when to poll again (1 s " +
            "for a young job, up to 30 s); or follow its events."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("detail", "/v1/jobs/:id/detail")
      .setPath(IdPath)
      .addSuccess(JobDetail.annotations({ description: "the job with its attempts, charges and timeline" }))
      .addError(ErrorBodies.notFound)
      .annotateContext(
        doc(
          "Read a job's history",
          "The job, each attempt with its redacted evidence, the charges of its model calls and its timeline."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("events", "/v1/jobs/:id/events")
      .setPath(IdPath)
      .setHeaders(ResumeHeaders)
      .addSuccess(
        HttpApiSchema.Text({ contentType: "text/event-stream" }).annotations({
          description: "server-sent events: the job's view now, then one per change, until it ends"
        })
      )
      .addError(ErrorBodies.notFound)
      .annotateContext(
        doc(
          "Follow a job",
          "Server-sent events: the job's current view, then one event per change; each `id:` is the job's " +
            "`updatedAt` in microseconds. `Last-Event-ID` resumes. A `: keep-alive` comment comes every 15 s while " +
            "nothing changes; the stream ends after the job ends."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("cancel", "/v1/jobs/:id/cancel")
      .setPath(IdPath)
      .addSuccess(
        JobView.annotations({ description: "the job, abandoned (it was queued) or asked to stop (running)" }),
        {
          status: 202
        }
      )
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.unsupportedMediaType)
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.alreadyTerminal)
      .annotateContext(
        doc(
          "Cancel a job",
          "A queued job is abandoned at once; a running one is asked to stop, and its worker stops it at its next " +
            "checkpoint or heartbeat. A job that has ended is a `409`. Send `content-type: application/json` (no " +
            "body needed)."
        )
      )
  )
  .addError(ErrorBodies.internalError)
  .addError(ErrorBodies.storeUnavailable)
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Submit, read, follow and cancel jobs.")

const deadLetters = HttpApiGroup.make("deadLetters")
  .add(
    HttpApiEndpoint.get("list", "/v1/dead-letters")
      .setUrlParams(DeadLetterParams)
      .addSuccess(DeadLettersBody.annotations({ description: "failed jobs, grouped by error class and input" }))
      .addError(InvalidRequestBody)
      .annotateContext(
        doc(
          "List dead letters",
          "Failed jobs, newest first, with groups by error class and input hash (each with the ids of its listed " +
            "jobs, to replay exactly that group) and the arrival rate."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("replay", "/v1/dead-letters/replay")
      .setPayload(ReplayBody)
      .addSuccess(ReplayResultBody.annotations({ description: "how many jobs moved back to queued, how many did not" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.unsupportedMediaType)
      .middleware(JsonBody)
      .annotateContext(
        doc(
          "Replay dead letters",
          "Moves failed jobs back to queued, for a new run of their attempts: the ones named in `ids`, or those the " +
            "filter matches. Only failed jobs move; the others are counted as skipped. Each replayed job may call " +
            "its model again, and that is billed."
        )
      )
  )
  .addError(ErrorBodies.internalError)
  .addError(ErrorBodies.storeUnavailable)
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Jobs that ended in failure, and their replay.")

const batches = HttpApiGroup.make("batches")
  .add(
    HttpApiEndpoint.post("submit", "/v1/batches")
      .setPayload(SubmitBatchBody)
      .setHeaders(SubmitHeaders)
      .addSuccess(BatchView.annotations({ description: "the batch, every item landed (`Location` names it)" }), {
        status: 202
      })
      .addSuccess(BatchView.annotations({ description: "the batch an earlier submit with this key created" }), {
        status: 200
      })
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.unsupportedMediaType)
      .addError(ErrorBodies.idempotencyKeyReused)
      .addError(ErrorBodies.batchesUnsupported)
      .middleware(JsonBody)
      .annotateContext(
        doc(
          "Submit a batch",
          "Validates every item and callback, opens the batch and lands its items. With an `Idempotency-Key`, a " +
            "repeat with the same items and options answers 200 with the same batch (landing any items a cut-off " +
            "earlier request did not); the same key with anything else is `422 idempotency_key_reused`. A refused " +
            "request writes nothing."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/batches/:id")
      .setPath(BatchPath)
      .setHeaders(
        Schema.Struct({
          "if-none-match": optional(
            Schema.String.annotations({ description: "an `ETag` of this batch read before: `304` if unchanged" })
          )
        })
      )
      .addSuccess(BatchView.annotations({ description: "the batch, with its `ETag`" }))
      .addSuccess(HttpApiSchema.Empty(304).annotations({ description: "the batch has not changed since that `ETag`" }))
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.batchesUnsupported)
      .annotateContext(
        doc(
          "Read a batch",
          "The batch's counts per state, cost and times (kept by the store, never counted), with an `ETag`. While " +
            "it has not finished, `Retry-After` says when to poll again (1 s for a young batch, up to 30 s)."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("events", "/v1/batches/:id/events")
      .setPath(BatchPath)
      .setHeaders(ResumeHeaders)
      .addSuccess(
        HttpApiSchema.Text({ contentType: "text/event-stream" }).annotations({
          description: "server-sent events: the batch's view now, then one per change, until it finishes"
        })
      )
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.batchesUnsupported)
      .annotateContext(
        doc(
          "Follow a batch",
          "Server-sent events (`event: batch`): the batch's current view, then one per change of its counts, cost " +
            "or times; each `id:` is the batch's `updatedAt` in microseconds. `Last-Event-ID` resumes. A " +
            "`: keep-alive` comment comes every 15 s while nothing changes; the stream ends after the batch finishes."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("jobs", "/v1/batches/:id/jobs")
      .setPath(BatchPath)
      .setUrlParams(BatchJobsParams)
      .addSuccess(BatchJobsBody.annotations({ description: "a page of the batch's items, in the order they landed" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.batchesUnsupported)
      .annotateContext(
        doc(
          "List a batch's jobs",
          "The batch's items in the order they landed, filtered by state. `next` is the `after` of the next page, " +
            "`null` on the last."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("cancel", "/v1/batches/:id/cancel")
      .setPath(BatchPath)
      .addSuccess(BatchView.annotations({ description: "the batch, cancelled" }), { status: 202 })
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.unsupportedMediaType)
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.batchesUnsupported)
      .annotateContext(
        doc(
          "Cancel a batch",
          "The batch is sealed at the items that have landed; queued items are abandoned at once, running ones are " +
            "asked to stop, and no item is claimed afterwards. A finished batch is answered as it is. Send " +
            "`content-type: application/json` (no body needed)."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("replay", "/v1/batches/:id/replay")
      .setPath(BatchPath)
      .addSuccess(BatchReplayBody.annotations({ description: "the batch, and how many failed items moved back" }))
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.unsupportedMediaType)
      .addError(ErrorBodies.notFound)
      .addError(ErrorBodies.batchesUnsupported)
      .annotateContext(
        doc(
          "Replay a batch's failures",
          "Moves the batch's failed items (never a succeeded one) back to queued in one write. A finished batch " +
            "becomes unfinished until they end; a callback it already enqueued is not enqueued again. Each replayed " +
            "item may call its model again, and that is billed."
        )
      )
  )
  .addError(ErrorBodies.internalError)
  .addError(ErrorBodies.storeUnavailable)
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Submit, read, list, cancel and replay batches: many jobs followed as one.")

const resources = HttpApiGroup.make("resources")
  .add(
    HttpApiEndpoint.get("list", "/v1/resources")
      .addSuccess(ResourcesBody.annotations({ description: "every resource with a record, by id" }))
      .annotateContext(
        doc(
          "List resources",
          "Every resource the store keeps limits for (named by a limit, a call or an operator), each with its " +
            "limits, permits in use, bucket levels, pause and counters, at the store's time."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/resources/:resource")
      .setPath(ResourcePath)
      .addSuccess(ResourceBody.annotations({ description: "the resource at the store's time" }))
      .addError(InvalidRequestBody)
      .annotateContext(
        doc(
          "Read a resource",
          "One resource; the id is one path segment, percent-encoded (`openai%3Agpt-4.1%3Akey-a` or " +
            "`openai:gpt-4.1:key-a`; a `/` in the id is `%2F`). A resource nothing has named yet is shown unlimited, " +
            "with no record written."
        )
      )
  )
  .add(
    HttpApiEndpoint.put("define", "/v1/resources/:resource/limits")
      .setPath(ResourcePath)
      .setPayload(LimitsBody)
      .addSuccess(ResourceBody.annotations({ description: "the resource with its new limits" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.operatorRequired)
      .addError(ErrorBodies.unsupportedMediaType)
      .middleware(JsonBody)
      .annotateContext(
        doc(
          "Set a resource's limits",
          "Replaces the resource's limits whole, for every worker at once: bucket levels are kept (clamped to a " +
            "lower capacity; a new dimension starts full), and so are the permits in flight and any pause. `{}` " +
            "removes every limit. A refused request writes nothing."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("pause", "/v1/resources/:resource/pause")
      .setPath(ResourcePath)
      .setPayload(PauseBody)
      .addSuccess(ResourceBody.annotations({ description: "the resource, paused" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.operatorRequired)
      .addError(ErrorBodies.unsupportedMediaType)
      .addError(ErrorBodies.untilNotInFuture)
      .middleware(JsonBody)
      .annotateContext(
        doc(
          "Pause a resource",
          "An operator's pause (kind `manual`): no worker starts a call on the resource until `until`, or until it " +
            "is resumed when `until` is absent. A pause already in force that ends later (or never) stays in force."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("resume", "/v1/resources/:resource/resume")
      .setPath(ResourcePath)
      .addSuccess(ResumeBody.annotations({ description: "whether it was paused, and the resource after" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.operatorRequired)
      .addError(ErrorBodies.unsupportedMediaType)
      .annotateContext(
        doc(
          "Resume a resource",
          "Clears any pause (a 429's, a spend cap's or an operator's) and the half-open state at once, for every " +
            "worker. Resuming a resource that is not paused changes nothing. Send `content-type: application/json` " +
            "(no body needed)."
        )
      )
  )
  .addError(ErrorBodies.internalError)
  .addError(ErrorBodies.storeUnavailable)
  .middlewareEndpoints(Authentication)
  .annotate(
    OpenApi.Description,
    "Provider limits the fleet keeps: each resource's limits, what is in use, pauses and their resume."
  )

const schedules = HttpApiGroup.make("schedules")
  .add(
    HttpApiEndpoint.get("list", "/v1/schedules")
      .addSuccess(SchedulesBody.annotations({ description: "every schedule, by id, with its last and next tick" }))
      .annotateContext(
        doc(
          "List schedules",
          "Every schedule the store keeps (declared in code or through this API), with its paused flag, the newest " +
            "tick decided and its job, and the next tick after the store's time. With authentication, a tenant that " +
            "is not an operator sees the schedules whose jobs are its own."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/schedules/:id")
      .setPath(SchedulePath)
      .addSuccess(ScheduleBody.annotations({ description: "the schedule at the store's time" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.notFound)
      .annotateContext(doc("Read a schedule", "One schedule; the id is one path segment, percent-encoded."))
  )
  .add(
    HttpApiEndpoint.put("define", "/v1/schedules/:id")
      .setPath(SchedulePath)
      .setPayload(ScheduleDefinitionBody)
      .addSuccess(ScheduleBody.annotations({ description: "the schedule as defined" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.operatorRequired)
      .addError(ErrorBodies.unsupportedMediaType)
      .middleware(JsonBody)
      .annotateContext(
        doc(
          "Define a schedule",
          "Creates the schedule, or replaces an existing one's definition whole (its paused flag, last tick and last " +
            "job stay). A new schedule makes no job for ticks before it existed. The definition is checked as " +
            "`Schedule.make` checks it (cron, timezone, policies, the job's options); a refused request writes " +
            "nothing."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("pause", "/v1/schedules/:id/pause")
      .setPath(SchedulePath)
      .addSuccess(ScheduleBody.annotations({ description: "the schedule, paused" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.operatorRequired)
      .addError(ErrorBodies.unsupportedMediaType)
      .addError(ErrorBodies.notFound)
      .annotateContext(
        doc(
          "Pause a schedule",
          "No scheduler of the fleet makes a job for it until it is resumed. Pausing a paused schedule changes " +
            "nothing. Send `content-type: application/json` (no body needed)."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("resume", "/v1/schedules/:id/resume")
      .setPath(SchedulePath)
      .addSuccess(ScheduleBody.annotations({ description: "the schedule, running" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.operatorRequired)
      .addError(ErrorBodies.unsupportedMediaType)
      .addError(ErrorBodies.notFound)
      .annotateContext(
        doc(
          "Resume a schedule",
          "Its ticks run again from the store's time on: the ticks that came during the pause make no job (a pause " +
            "is an operator's decision, not an outage). Resuming a running schedule changes nothing. Send " +
            "`content-type: application/json` (no body needed)."
        )
      )
  )
  .add(
    HttpApiEndpoint.del("remove", "/v1/schedules/:id")
      .setPath(SchedulePath)
      .addSuccess(HttpApiSchema.Empty(204).annotations({ description: "the schedule is gone" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.crossSite)
      .addError(ErrorBodies.operatorRequired)
      .addError(ErrorBodies.unsupportedMediaType)
      .addError(ErrorBodies.notFound)
      .annotateContext(
        doc(
          "Delete a schedule",
          "Removes the schedule: it makes no more jobs (the jobs it made stay). A process that still declares it in " +
            "code writes it again when it starts. Send `content-type: application/json` (no body needed)."
        )
      )
  )
  .addError(ErrorBodies.internalError)
  .addError(ErrorBodies.storeUnavailable)
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Cron schedules the fleet keeps: define, read, pause, resume and delete them.")

const ops = HttpApiGroup.make("ops")
  .add(
    HttpApiEndpoint.get("stats", "/v1/stats")
      .setUrlParams(StatsParams)
      .addSuccess(StatsBody.annotations({ description: "counts, ages, dead-letter arrivals, waiting jobs and spend" }))
      .addError(InvalidRequestBody)
      .addError(ErrorBodies.internalError)
      .addError(ErrorBodies.storeUnavailable)
      .middleware(Authentication)
      .annotateContext(
        doc(
          "Read the queue's statistics",
          "Jobs per state, the oldest queued age per priority, dead-letter arrivals per minute, due jobs per type " +
            "and version (`unclaimed` when no worker seems to run them) and spend over the window."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("metrics", "/metrics")
      .addSuccess(
        HttpApiSchema.Text({ contentType: "text/plain; version=0.0.4; charset=utf-8" }).annotations({
          description: "the `slowcall_*` metrics in the Prometheus text format"
        })
      )
      .addError(ErrorBodies.internalError)
      .addError(ErrorBodies.storeUnavailable)
      .middleware(Authentication)
      .annotateContext(
        doc(
          "Prometheus metrics",
          "Population gauges read from the store at scrape time (`slowcall_store_up` and " +
            "`slowcall_stats_age_seconds` say whether that read succeeded and how old the values are), and this " +
            "process's counters and histograms. With tokens, a tenant sees its own population only, unless the " +
            "server makes `/metrics` public."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("healthz", "/healthz")
      .addSuccess(Schema.Struct({ ok: Schema.Boolean }).annotations({ description: "the store answers" }))
      .addError(ErrorBodies.storeUnavailable)
      .annotateContext(doc("Health", "`200` while the store answers within 2 s, `503` otherwise."))
  )
  .add(
    HttpApiEndpoint.get("openapi", "/openapi.json")
      .addSuccess(Schema.Unknown.annotations({ description: "this document, OpenAPI 3.1" }))
      .annotateContext(
        doc(
          "This document",
          "The API as this server runs it: the job types it accepts, with the input schema of each whose handler it " +
            "knows, and the bearer token where it asks for one."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("dashboard", "/")
      .addSuccess(
        HttpApiSchema.Text({ contentType: "text/html; charset=utf-8" }).annotations({ description: "the dashboard" })
      )
      .annotateContext(doc("Dashboard", "The dashboard: one HTML page that reads this API."))
  )
  .annotate(OpenApi.Description, "Statistics, metrics, health, this document and the dashboard.")

/** The document's opening paragraph. */
const apiDescription = [
  "Durable background jobs for slow, billed model calls: submit a job, then poll it, follow its events or list it.",
  "",
  'Errors are JSON, `{ "error": "<code>" }` with a stable code (a `400` adds `issues`, a `413` `limitBytes`, a ' +
    "`429` `retryAfterSeconds`). A refused request writes nothing, and bad input is never a 5xx: `503 " +
    "store_unavailable` (with `Retry-After`) means the store could not answer now. A method a path does not have " +
    "is `405 method_not_allowed` with `Allow`; a `Host` the server does not answer for is `421 host_not_allowed`.",
  "",
  "The idempotency key is one concept under the names of the places it travels: the `Idempotency-Key` header of a " +
    "submit, the job's `requestKey` (the filter of `GET /v1/jobs`, `requestKey` in `Client.submit`) and `key` in " +
    "the Promise API."
].join("\n")

/**
 * The whole API. Every endpoint is implemented by `Server.layerApi`; a request that does not decode answers `400`
 * with `InvalidRequestBody`. Its OpenAPI document (`OpenApi.fromApi`) is titled slowcall with this package's version,
 * has a summary and a description per operation, the bearer scheme on the endpoints with `Authentication`, query
 * parameters typed as what they are, and the API's own error bodies only (no platform decoding error, no schema
 * titles): a document client generators take as it is.
 *
 * @since 0.1.0
 * @category models
 */
export class SlowcallApi extends HttpApi.make("slowcall")
  .add(jobs)
  .add(batches)
  .add(deadLetters)
  .add(resources)
  .add(schedules)
  .add(ops)
  .addError(InvalidRequestBody)
  .addError(ErrorBodies.hostNotAllowed)
  .annotateContext(
    OpenApi.annotations({
      title: "slowcall",
      version: packageVersion,
      description: apiDescription,
      license: { name: "MIT", url: "https://spdx.org/licenses/MIT.html" },
      // Relative: the document describes the server that serves it, at whatever address it was reached.
      servers: [{ url: "/", description: "the server that serves this document" }],
      transform: (spec) => tidy(spec, headerNames)
    })
  ) {}
