/**
 * `GET /v1/jobs/{id}/events`: the job as server-sent events, from `Client.watch`. The one response the platform
 * cannot encode from a schema (a stream), so the handler builds it; the path and headers are still decoded by the
 * endpoint's schemas.
 *
 * Each event's id is the record's revision (`updatedAt` in microseconds, strictly increasing), so a client that
 * reconnects with `Last-Event-ID` gets only what it has not seen. An id ahead of the job's current revision (from
 * another server, a clock that moved, a made-up value) cannot name anything the client saw: the stream starts again
 * from the current state. While nothing changes, a comment line is sent every `sseKeepAliveMs`, so an idle timeout
 * on the path (often 60 s) does not cut a quiet stream. The stream ends after the terminal state.
 *
 * @internal
 */
import { HttpServerResponse } from "@effect/platform"
import { Client } from "@slowcall/core/Client"
import type { Job } from "@slowcall/core/Job"
import { Effect, identity, Option, Schedule, Stream } from "effect"
import { Tenant } from "../Api.js"
import { jobView, revision } from "../View.js"
import { notFound, parseJobId, ServerOptions, storeUnavailable } from "./common.js"

const encoder = new TextEncoder()

const sseEvent = (job: Job) =>
  encoder.encode(`id: ${revision(job)}\nevent: job\ndata: ${JSON.stringify(jobView(job))}\n\n`)

const keepAlive = encoder.encode(": keep-alive\n\n")

/**
 * The event stream of one job after the revision `Last-Event-ID` names (all of it without one). `404` when the job
 * is unknown or another tenant's, before the stream starts.
 *
 * @internal
 */
export const events = (request: {
  readonly path: { readonly id: string }
  readonly headers: { readonly "last-event-id"?: string | undefined }
}) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const client = yield* Client
    const tenant = yield* Tenant
    const jobId = yield* parseJobId(request.path.id)
    const current = yield* client
      .get(jobId, { tenant })
      .pipe(Effect.catchTags({ JobNotFound: () => Effect.fail(notFound), StoreError: storeUnavailable }))
    const lastEventId = Number(request.headers["last-event-id"] ?? Number.NaN)
    const after = Number.isFinite(lastEventId) && lastEventId <= revision(current) ? lastEventId : -1
    const body = client.watch(jobId, { tenant, intervalMs: options.sseIntervalMs }).pipe(
      // A transient store error only delays the next event: the watch starts again from the row, which stays the
      // truth, and the revision filter below drops what was already sent.
      Stream.retry(
        Schedule.spaced(`${options.sseIntervalMs} millis`).pipe(
          Schedule.whileInput((error: { readonly _tag: string }) => error._tag === "StoreError")
        )
      ),
      Stream.mapAccum(after, (last, job) =>
        revision(job) > last ? ([revision(job), Option.some(job)] as const) : ([last, Option.none<Job>()] as const)
      ),
      Stream.filterMap(identity),
      Stream.map(sseEvent),
      Stream.catchAll(() => Stream.empty),
      // The keep-alive comments run beside the events and stop with them: the stream still ends after the terminal
      // state.
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
