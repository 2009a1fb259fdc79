/**
 * The `jobs` endpoint group: submit, list, read, detail, events and cancel, each a typed handler over `Client`.
 * Requests arrive decoded by the schemas of `Api.ts`; bodies leave encoded by them, with the view headers (`ETag`,
 * `Retry-After`, `Location`) set beside.
 *
 * @internal
 */
import { HttpApiBuilder } from "@effect/platform"
import * as Canonical from "@slowcall/core/Canonical"
import { Client, defaults } from "@slowcall/core/Client"
import type * as Handler from "@slowcall/core/Handler"
import { JobId } from "@slowcall/core/Job"
import { Effect, Either, Option, ParseResult, Schema } from "effect"
import { type Issue, type ListParams, SlowcallApi, type SubmitBody, type SubmitHeaders, Tenant } from "../Api.js"
import { etag, etagMatches, jobDetail, jobView } from "../View.js"
import {
  inputIssue,
  invalidRequest,
  notFound,
  parseJobId,
  queueFull,
  respondWith,
  ServerOptions,
  storeUnavailable,
  viewHeaders
} from "./common.js"
import { events } from "./events.js"

/**
 * Issues the server's own handlers find in a submit: an unknown version, input their schema refuses.
 *
 * @internal
 */
export const handlerIssues = (
  known: ReadonlyArray<Handler.Handler<any, any, any>> | undefined,
  body: SubmitBody
): ReadonlyArray<Issue> => {
  if (known === undefined) return []
  const version = body.version ?? defaults.version
  const handler = known.find((h) => h.version === version)
  if (handler === undefined) {
    const versions = known.map((h) => h.version).sort((a, b) => a - b)
    return [
      { path: ["version"], message: `no handler for ${body.type} version ${version} (known: ${versions.join(", ")})` }
    ]
  }
  // Input given by reference is read by the worker; only inline input can be checked here.
  if (body.inputRef !== undefined) return []
  // The value is plain JSON nested no deeper than `Canonical.maxDepth` (checked first), so decoding cannot overflow.
  const valid = Canonical.validateJson(body.input === undefined ? null : body.input)
  if (Either.isLeft(valid)) return [inputIssue(valid.left)]
  const decoded = Either.try({
    try: () => ParseResult.decodeUnknownEither(handler.input)(valid.right, { errors: "all" }),
    catch: () => undefined
  })
  if (Either.isLeft(decoded)) return [{ path: ["input"], message: "the handler's input schema failed on this input" }]
  if (Either.isRight(decoded.right)) return []
  return ParseResult.ArrayFormatter.formatIssueSync(decoded.right.left)
    .slice(0, 20)
    .map((issue) => ({
      path: ["input", ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))],
      message: issue.message
    }))
}

const submit = (request: { readonly payload: SubmitBody; readonly headers: typeof SubmitHeaders.Type }) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const client = yield* Client
    const tenant = yield* Tenant
    const body = request.payload
    if (!options.jobTypes.has(body.type)) {
      return yield* Effect.fail(
        invalidRequest([{ path: ["type"], message: `unknown job type ${JSON.stringify(body.type)}` }])
      )
    }
    const issues = handlerIssues(options.handlers.get(body.type), body)
    if (issues.length > 0) return yield* Effect.fail(invalidRequest(issues))
    const result = yield* client
      .submit({
        queue: options.queue,
        tenant,
        type: body.type,
        version: body.version,
        input: body.input,
        inputRef: body.inputRef,
        requestKey: request.headers["idempotency-key"],
        priority: body.priority,
        delayMs: body.delayMs,
        // An absolute `runAfter` becomes a delay from the store's time in Client, the one clock every due time is
        // measured on; the idempotency fingerprint keeps it as given.
        runAfter: body.runAfter === undefined ? undefined : Date.parse(body.runAfter),
        deadlineAt: body.deadline === undefined ? undefined : Date.parse(body.deadline),
        budgetCents: body.budgetCents,
        maxAttempts: body.maxAttempts,
        traceId: body.traceId
      })
      .pipe(
        Effect.catchTags({
          IdempotencyKeyReused: () => Effect.fail({ error: "idempotency_key_reused" } as const),
          InvalidInput: (error) => Effect.fail(invalidRequest([inputIssue(error)])),
          QueueFull: queueFull
        })
      )
    const headers = viewHeaders(result.job, result.now)
    // The view is encoded as the endpoint's first success (202); an idempotent repeat answers 200.
    yield* result.created
      ? respondWith({ headers: { ...headers, location: `/v1/jobs/${result.job.id}` } })
      : respondWith({ status: 200, headers: { ...headers, "idempotent-replayed": "true" } })
    return jobView(result.job)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const list = (request: { readonly urlParams: typeof ListParams.Type }) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const client = yield* Client
    const tenant = yield* Tenant
    const params = request.urlParams
    const filters = {
      queue: options.queue,
      tenant: tenant ?? params.tenant,
      state: params.state,
      type: params.type,
      errorClass: params.errorClass,
      requestKey: params.requestKey
    }
    const none = { jobs: [], next: null, total: 0, totalCapped: false }
    // With authentication the caller's tenant is the scope; a tenant filter can only repeat it.
    if (tenant !== undefined && params.tenant !== undefined && params.tenant !== tenant) {
      return { ...none, now: iso(yield* client.now) }
    }
    const limit = params.limit ?? 50
    // A cursor that is not a job id names no job, so there is nothing after it (the total still counts the filter).
    const after = params.after === undefined ? undefined : Option.getOrUndefined(decodeJobId(params.after))
    const [jobs, total, now] = yield* Effect.all([
      params.after !== undefined && after === undefined
        ? Effect.succeed([])
        : client.list({ ...filters, after, limit, order: params.order }),
      client.count({ ...filters, upTo: totalLimit }),
      client.now
    ])
    return {
      jobs: jobs.map(jobView),
      next: jobs.length === limit ? (jobs.at(-1)?.id ?? null) : null,
      total,
      totalCapped: total >= totalLimit,
      now: iso(now)
    }
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const decodeJobId = Schema.decodeUnknownOption(JobId)

/** `GET /v1/jobs` counts the jobs its filters select up to this many (`totalCapped` beyond). */
const totalLimit = 10_000

const iso = (ms: number): string => new Date(Math.floor(ms)).toISOString()

/** The job named by the path, visible to the caller's tenant, or `404`. */
const visibleJob = (id: string) =>
  Effect.gen(function* () {
    const client = yield* Client
    const jobId = yield* parseJobId(id)
    return yield* client.get(jobId, { tenant: yield* Tenant })
  }).pipe(Effect.catchTag("JobNotFound", () => Effect.fail(notFound)))

const get = (request: {
  readonly path: { readonly id: string }
  readonly headers: { readonly "if-none-match"?: string | undefined }
}) =>
  Effect.gen(function* () {
    const client = yield* Client
    const job = yield* visibleJob(request.path.id)
    const tag = etag(job)
    if (etagMatches(request.headers["if-none-match"], tag)) {
      yield* respondWith({ headers: { etag: tag, "cache-control": "no-cache" } })
      return undefined
    }
    yield* respondWith({ headers: viewHeaders(job, yield* client.now) })
    return jobView(job)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const detail = (request: { readonly path: { readonly id: string } }) =>
  Effect.gen(function* () {
    const client = yield* Client
    const job = yield* visibleJob(request.path.id)
    const [attempts, charges, now] = yield* Effect.all([client.attempts(job.id), client.charges(job.id), client.now])
    return jobDetail(job, attempts, charges, now)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const cancel = (request: { readonly path: { readonly id: string } }) =>
  Effect.gen(function* () {
    const client = yield* Client
    const jobId = yield* parseJobId(request.path.id)
    const job = yield* client.cancel(jobId, { tenant: yield* Tenant }).pipe(
      Effect.catchTags({
        JobNotFound: () => Effect.fail(notFound),
        AlreadyTerminal: () => Effect.fail({ error: "already_terminal" } as const)
      })
    )
    yield* respondWith({ headers: viewHeaders(job, yield* client.now) })
    return jobView(job)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

/**
 * The handlers of the `jobs` group.
 *
 * @internal
 */
export const jobsGroup = HttpApiBuilder.group(SlowcallApi, "jobs", (handlers) =>
  handlers
    .handle("submit", submit)
    .handle("list", list)
    .handle("get", get)
    .handle("detail", detail)
    .handle("events", events)
    .handle("cancel", cancel)
)
