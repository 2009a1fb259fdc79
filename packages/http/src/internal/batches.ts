/**
 * The `batches` endpoint group: submit, read, list items, cancel and replay, each a typed handler over `Client`'s
 * batch verbs. A server whose Store keeps no batches (no `Batch.BatchStore` beside it) answers every route
 * `404 batches_unsupported` before reading anything, so a client is told what is missing, never a 5xx.
 *
 * @internal
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import type * as Batch from "@slowcall/core/Batch"
import { BatchId, BatchStore } from "@slowcall/core/Batch"
import { Client } from "@slowcall/core/Client"
import { JobId, type JobState } from "@slowcall/core/Job"
import { Effect, identity, Option, Schedule, Schema, Stream } from "effect"
import { type BatchView, type Issue, SlowcallApi, type SubmitBatchBody, type SubmitHeaders, Tenant } from "../Api.js"
import { etagMatches, jobView } from "../View.js"
import { invalidRequest, notFound, respondWith, ServerOptions, storeUnavailable } from "./common.js"
import { handlerIssues } from "./jobs.js"

const iso = (ms: number): string => new Date(Math.floor(ms)).toISOString()

/**
 * The batch as the API shows it.
 *
 * @internal
 */
export const batchView = (batch: Batch.Batch): BatchView => ({
  id: batch.id,
  requestKey: batch.requestKey,
  tenant: batch.tenant,
  size: batch.size,
  added: batch.added,
  counts: batch.counts,
  costCents: batch.costCents,
  budgetCents: batch.budgetCents,
  deadline: batch.deadlineAt === null ? null : iso(batch.deadlineAt),
  onComplete: batch.onComplete === null ? null : { type: batch.onComplete.type, jobId: batch.onCompleteJobId },
  onSuccess: batch.onSuccess === null ? null : { type: batch.onSuccess.type, jobId: batch.onSuccessJobId },
  parentJobId: batch.parentJobId,
  cancelRequestedAt: batch.cancelRequestedAt === null ? null : iso(batch.cancelRequestedAt),
  createdAt: iso(batch.createdAt),
  updatedAt: iso(batch.updatedAt),
  finishedAt: batch.finishedAt === null ? null : iso(batch.finishedAt),
  finished: batch.finishedAt !== null
})

/**
 * A batch's revision: its `updatedAt` in microseconds, which every item write and batch verb moves forward.
 *
 * @internal
 */
export const batchRevision = (batch: Pick<Batch.Batch, "updatedAt">): number => Math.round(batch.updatedAt * 1000)

/**
 * The batch's strong entity tag: it changes exactly when the batch record changes.
 *
 * @internal
 */
export const batchEtag = (batch: Pick<Batch.Batch, "id" | "updatedAt">): string =>
  `"${batch.id}.${batchRevision(batch)}"`

/**
 * The headers of a batch view: its `ETag`, no caching without revalidation, and while it has not finished a
 * `Retry-After` polling hint that grows with its age (1 s, one more per 10 s of age, at most 30 s).
 *
 * @internal
 */
export const batchHeaders = (batch: Batch.Batch, now: number): Readonly<Record<string, string>> => {
  const hint =
    batch.finishedAt === null ? Math.min(30, 1 + Math.floor(Math.max(0, now - batch.createdAt) / 10_000)) : undefined
  return {
    etag: batchEtag(batch),
    "cache-control": "no-cache",
    ...(hint === undefined ? {} : { "retry-after": String(hint) })
  }
}

/** @internal */
export const batchesUnsupported = { error: "batches_unsupported" } as const

/**
 * Fails with `404 batches_unsupported` when the server's Store has no batch verbs.
 *
 * @internal
 */
export const requireBatches = Effect.serviceOption(BatchStore).pipe(
  Effect.flatMap((verbs) => (Option.isSome(verbs) ? Effect.void : Effect.fail(batchesUnsupported)))
)

/**
 * The batch id of a path, or `404`: a malformed id names no batch.
 *
 * @internal
 */
export const parseBatchId = (id: string): Effect.Effect<BatchId, typeof notFound> =>
  Option.match(Schema.decodeUnknownOption(BatchId)(id), {
    onNone: () => Effect.fail(notFound),
    onSome: Effect.succeed
  })

/** The batch named by the path, visible to the caller's tenant, or `404`. */
const visibleBatch = (id: string) =>
  Effect.gen(function* () {
    yield* requireBatches
    const client = yield* Client
    const batchId = yield* parseBatchId(id)
    return yield* client.getBatch(batchId, { tenant: yield* Tenant })
  }).pipe(Effect.catchTag("BatchNotFound", () => Effect.fail(notFound)))

/**
 * A path of `Client`'s `InvalidInput` (`items[3].priority`, `onComplete.type`, `items[0].$.a` for input) as an issue
 * path: names and indexes, with an input path kept whole under `input`.
 */
const issuePath = (path: string): ReadonlyArray<string | number> => {
  const dollar = path.indexOf("$")
  const named = dollar === -1 ? path : path.slice(0, dollar)
  const parts = (named.match(/[^.[\]]+/g) ?? []).map((part) => (/^\d+$/.test(part) ? Number(part) : part))
  return dollar === -1 ? parts : [...parts.filter((part) => part !== "input"), "input", path.slice(dollar)]
}

const submit = (request: { readonly payload: SubmitBatchBody; readonly headers: typeof SubmitHeaders.Type }) =>
  Effect.gen(function* () {
    yield* requireBatches
    const options = yield* ServerOptions
    const client = yield* Client
    const tenant = yield* Tenant
    const body = request.payload
    const issues: Array<Issue> = []
    body.items.forEach((item, index) => {
      if (!options.jobTypes.has(item.type)) {
        issues.push({ path: ["items", index, "type"], message: `unknown job type ${JSON.stringify(item.type)}` })
        return
      }
      for (const issue of handlerIssues(options.handlers.get(item.type), item)) {
        issues.push({ path: ["items", index, ...issue.path], message: issue.message })
      }
    })
    for (const kind of ["onComplete", "onSuccess"] as const) {
      const callback = body[kind]
      if (callback !== undefined && !options.jobTypes.has(callback.type)) {
        issues.push({ path: [kind, "type"], message: `unknown job type ${JSON.stringify(callback.type)}` })
      }
    }
    if (issues.length > 0) return yield* Effect.fail(invalidRequest(issues.slice(0, 50)))
    const callback = (given: SubmitBatchBody["onComplete"]) =>
      given === undefined ? undefined : { ...given, queue: options.queue }
    const result = yield* client
      .submitBatch({
        tenant,
        requestKey: request.headers["idempotency-key"],
        budgetCents: body.budgetCents,
        deadlineAt: body.deadline === undefined ? undefined : Date.parse(body.deadline),
        onComplete: callback(body.onComplete),
        onSuccess: callback(body.onSuccess),
        items: body.items.map((item) => ({
          queue: options.queue,
          type: item.type,
          version: item.version,
          input: item.input,
          inputRef: item.inputRef,
          priority: item.priority,
          delayMs: item.delayMs,
          runAfter: item.runAfter === undefined ? undefined : Date.parse(item.runAfter),
          deadlineAt: item.deadline === undefined ? undefined : Date.parse(item.deadline),
          budgetCents: item.budgetCents,
          maxAttempts: item.maxAttempts,
          traceId: item.traceId
        }))
      })
      .pipe(
        Effect.catchTags({
          IdempotencyKeyReused: () => Effect.fail({ error: "idempotency_key_reused" } as const),
          InvalidInput: (error) =>
            Effect.fail(invalidRequest([{ path: issuePath(error.path), message: error.message }]))
        })
      )
    const headers = batchHeaders(result.batch, yield* client.now)
    yield* result.created
      ? respondWith({ headers: { ...headers, location: `/v1/batches/${result.batch.id}` } })
      : respondWith({ status: 200, headers: { ...headers, "idempotent-replayed": "true" } })
    return batchView(result.batch)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const get = (request: {
  readonly path: { readonly id: string }
  readonly headers: { readonly "if-none-match"?: string | undefined }
}) =>
  Effect.gen(function* () {
    const client = yield* Client
    const batch = yield* visibleBatch(request.path.id)
    const tag = batchEtag(batch)
    if (etagMatches(request.headers["if-none-match"], tag)) {
      yield* respondWith({ headers: { etag: tag, "cache-control": "no-cache" } })
      return undefined
    }
    yield* respondWith({ headers: batchHeaders(batch, yield* client.now) })
    return batchView(batch)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const encoder = new TextEncoder()
const keepAlive = encoder.encode(": keep-alive\n\n")

/**
 * `GET /v1/batches/{id}/events`: the batch as server-sent events, from `Client.watchBatch`. Each event's id is the
 * batch's revision (strictly increasing: every item write and batch verb moves `updatedAt` forward), so a client that
 * reconnects with `Last-Event-ID` gets only what it has not seen; an id ahead of the current revision names nothing
 * the client saw, and the stream starts again from the current state. The stream ends after the finished batch.
 */
const events = (request: {
  readonly path: { readonly id: string }
  readonly headers: { readonly "last-event-id"?: string | undefined }
}) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const client = yield* Client
    const tenant = yield* Tenant
    const current = yield* visibleBatch(request.path.id).pipe(Effect.catchTag("StoreError", storeUnavailable))
    const lastEventId = Number(request.headers["last-event-id"] ?? Number.NaN)
    const after = Number.isFinite(lastEventId) && lastEventId <= batchRevision(current) ? lastEventId : -1
    const body = client.watchBatch(current.id, { tenant, intervalMs: options.sseIntervalMs }).pipe(
      // A transient store error only delays the next event: the watch starts again from the record.
      Stream.retry(
        Schedule.spaced(`${options.sseIntervalMs} millis`).pipe(
          Schedule.whileInput((error: { readonly _tag: string }) => error._tag === "StoreError")
        )
      ),
      Stream.mapAccum(after, (last, batch) =>
        batchRevision(batch) > last
          ? ([batchRevision(batch), Option.some(batch)] as const)
          : ([last, Option.none<Batch.Batch>()] as const)
      ),
      Stream.filterMap(identity),
      Stream.map((batch) =>
        encoder.encode(`id: ${batchRevision(batch)}\nevent: batch\ndata: ${JSON.stringify(batchView(batch))}\n\n`)
      ),
      Stream.catchAll(() => Stream.empty),
      Stream.merge(
        Stream.repeatEffectWithSchedule(
          Effect.succeed(keepAlive),
          Schedule.spaced(`${options.sseKeepAliveMs} millis`)
        ).pipe(Stream.drop(1)),
        { haltStrategy: "left" }
      )
    )
    return HttpServerResponse.stream(body, {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" }
    })
  })

const decodeJobId = Schema.decodeUnknownOption(JobId)

const jobs = (request: {
  readonly path: { readonly id: string }
  readonly urlParams: {
    readonly state?: JobState | undefined
    readonly after?: string | undefined
    readonly limit?: number | undefined
  }
}) =>
  Effect.gen(function* () {
    const client = yield* Client
    const tenant = yield* Tenant
    const batch = yield* visibleBatch(request.path.id)
    const params = request.urlParams
    const limit = params.limit ?? 50
    // A cursor that is not a job id names no item, so there is nothing after it.
    const after = params.after === undefined ? undefined : Option.getOrUndefined(decodeJobId(params.after))
    const page =
      params.after !== undefined && after === undefined
        ? []
        : yield* client.batchJobs(batch.id, { tenant, state: params.state, after, limit })
    return { jobs: page.map(jobView), next: page.length === limit ? (page.at(-1)?.id ?? null) : null }
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const cancel = (request: { readonly path: { readonly id: string } }) =>
  Effect.gen(function* () {
    yield* requireBatches
    const client = yield* Client
    const batchId = yield* parseBatchId(request.path.id)
    const batch = yield* client
      .cancelBatch(batchId, { tenant: yield* Tenant })
      .pipe(Effect.catchTag("BatchNotFound", () => Effect.fail(notFound)))
    yield* respondWith({ headers: batchHeaders(batch, yield* client.now) })
    return batchView(batch)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const replay = (request: { readonly path: { readonly id: string } }) =>
  Effect.gen(function* () {
    yield* requireBatches
    const client = yield* Client
    const batchId = yield* parseBatchId(request.path.id)
    const result = yield* client
      .replayBatch(batchId, { tenant: yield* Tenant })
      .pipe(Effect.catchTag("BatchNotFound", () => Effect.fail(notFound)))
    return { batch: batchView(result.batch), replayed: result.replayed.length }
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

/**
 * The handlers of the `batches` group.
 *
 * @internal
 */
export const batchesGroup = HttpApiBuilder.group(SlowcallApi, "batches", (handlers) =>
  handlers
    .handle("submit", submit)
    .handle("get", get)
    .handle("events", events)
    .handle("jobs", jobs)
    .handle("cancel", cancel)
    .handle("replay", replay)
)
