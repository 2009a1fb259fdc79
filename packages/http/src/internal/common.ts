/**
 * What every endpoint group shares: the resolved server options, the error bodies handlers fail with, and the
 * headers a response carries beside its schema-encoded body.
 *
 * @internal
 */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import type { InvalidInput, QueueFull, StoreError } from "@slowcall/core/Errors"
import type * as Handler from "@slowcall/core/Handler"
import { type Job, JobId } from "@slowcall/core/Job"
import { Context, Effect, Option, Schema } from "effect"
import type { Issue } from "../Api.js"
import { etag, retryAfterSeconds } from "../View.js"

/**
 * Resolves the `Authorization` header to a tenant; `None` means missing or invalid credentials.
 *
 * @internal
 */
export type Authenticate = (authorization: string | undefined) => Effect.Effect<Option.Option<string>>

/**
 * The server options with every default applied.
 *
 * @internal
 */
export interface ResolvedOptions {
  /** Every type the API accepts: the registry's types and the handlers' types. */
  readonly jobTypes: ReadonlySet<string>
  /** The handlers the server knows, by type: their versions and input schemas are checked at submit. */
  readonly handlers: ReadonlyMap<string, ReadonlyArray<Handler.Handler<any, any, any>>>
  readonly queue: string
  readonly maxBodyBytes: number
  readonly authenticate: Authenticate | undefined
  /** With authentication, the tenants whose tokens may change a resource's limits, pause and resume it. */
  readonly operators: ReadonlySet<string>
  readonly allowedHosts: ReadonlyArray<string> | "*"
  readonly allowedOrigins: ReadonlyArray<string>
  readonly metrics: "public" | "tenant"
  readonly sseIntervalMs: number
  readonly sseKeepAliveMs: number
  readonly deadLetterWindowMinutes: number
  readonly unclaimedAfterSeconds: number
}

/**
 * The resolved options, available to handlers and middleware.
 *
 * @internal
 */
export class ServerOptions extends Context.Tag("@slowcall/http/ServerOptions")<ServerOptions, ResolvedOptions>() {}

/** @internal */
export const invalidRequest = (issues: ReadonlyArray<Issue>) => ({ error: "invalid_request", issues }) as const

/** @internal */
export const notFound = { error: "not_found" } as const

/**
 * A problem `Client.submit` found in a submit's options as an issue of the HTTP body: input paths (`$.a[0]`) sit
 * under `input`, every other path names the field.
 *
 * @internal
 */
export const inputIssue = (error: InvalidInput): Issue => ({
  path: error.path.startsWith("$") ? ["input", error.path] : [error.path],
  message: error.message
})

/**
 * Sets headers (and, when given, the status) on the response this request ends with, after its body has been
 * encoded by the endpoint's schema: the platform encodes bodies, the handler knows the headers.
 *
 * @internal
 */
export const respondWith = (options: {
  readonly headers: Readonly<Record<string, string>>
  readonly status?: number | undefined
}): Effect.Effect<void> =>
  HttpApp.appendPreResponseHandler((_request, response) => {
    const withHeaders = HttpServerResponse.setHeaders(response, options.headers)
    return Effect.succeed(
      options.status === undefined ? withHeaders : HttpServerResponse.setStatus(withHeaders, options.status)
    )
  })

/**
 * A Store that failed. A failure a retry may cure (`StoreError.isRetryable`: the connection, a timeout, a
 * conflict, an ambiguous reply) is `503` with `Retry-After: 1`. Any other (a constraint or an unknown refusal: a
 * value the request validation should have refused, a bug) is `500 internal_error` with no `Retry-After`, so a client
 * is never told to repeat a request that cannot succeed. Either way the request wrote nothing it reports.
 *
 * @internal
 */
export const storeUnavailable = (
  error: StoreError
): Effect.Effect<never, { readonly error: "store_unavailable" } | { readonly error: "internal_error" }> =>
  error.isRetryable
    ? Effect.logWarning("store unavailable", error.message).pipe(
        Effect.zipRight(respondWith({ headers: { "retry-after": "1" } })),
        Effect.zipRight(Effect.fail({ error: "store_unavailable" } as const))
      )
    : Effect.logError("the store refused the request", error.message).pipe(
        Effect.zipRight(Effect.fail({ error: "internal_error" } as const))
      )

/**
 * A submit over the queue's bound: `429 queue_full` with `Retry-After` in whole seconds; nothing was written.
 *
 * @internal
 */
export const queueFull = (error: QueueFull) => {
  const seconds = Math.max(1, Math.ceil(error.retryAfterMs / 1000))
  return respondWith({ headers: { "retry-after": String(seconds) } }).pipe(
    Effect.zipRight(Effect.fail({ error: "queue_full", retryAfterSeconds: seconds } as const))
  )
}

/**
 * The job id of a path, or `404`: a malformed id names no job, exactly like an unknown one.
 *
 * @internal
 */
export const parseJobId = (id: string): Effect.Effect<JobId, typeof notFound> =>
  Option.match(Schema.decodeUnknownOption(JobId)(id), {
    onNone: () => Effect.fail(notFound),
    onSome: Effect.succeed
  })

/**
 * The headers of a job view: its `ETag`, no caching without revalidation, and while the job is not terminal a
 * `Retry-After` polling hint measured at store time `now`.
 *
 * @internal
 */
export const viewHeaders = (job: Job, now: number): Readonly<Record<string, string>> => {
  const hint = retryAfterSeconds(job, now)
  return {
    etag: etag(job),
    "cache-control": "no-cache",
    ...(hint === undefined ? {} : { "retry-after": String(hint) })
  }
}
