/**
 * The `deadLetters` endpoint group: the dead letters with their groups and arrival rate, and replay. Replay goes
 * through `Client.replay`, so an HTTP replay moves and publishes exactly what a replay in code would.
 *
 * @internal
 */
import { HttpApiBuilder } from "@effect/platform"
import { Client } from "@slowcall/core/Client"
import { JobId } from "@slowcall/core/Job"
import { Effect, Option, Schema } from "effect"
import { type DeadLetterParams, type ReplayBody, SlowcallApi, Tenant } from "../Api.js"
import { jobView } from "../View.js"
import { ServerOptions, storeUnavailable } from "./common.js"

const list = (request: { readonly urlParams: typeof DeadLetterParams.Type }) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const client = yield* Client
    const tenant = yield* Tenant
    const result = yield* client.deadLetters({
      queue: options.queue,
      tenant,
      errorClass: request.urlParams.errorClass,
      type: request.urlParams.type,
      limit: request.urlParams.limit
    })
    const { stats } = yield* client.stats({
      queue: options.queue,
      tenant,
      windowMs: options.deadLetterWindowMinutes * 60_000
    })
    return {
      jobs: result.jobs.map(jobView),
      groups: result.groups.map((group) => ({
        errorClass: group.errorClass,
        inputHash: group.inputHash,
        count: group.count,
        costCents: group.costCents,
        jobIds: result.jobs
          .filter((job) => job.errorClass === group.errorClass && job.inputHash === group.inputHash)
          .map((job) => job.id)
      })),
      arrivalsPerMinute: stats.failedInWindow / options.deadLetterWindowMinutes
    }
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const decodeJobId = Schema.decodeUnknownOption(JobId)

/** A replay by filter alone touches at most this many jobs per request. */
const filterReplayLimit = 1000

const replay = (request: { readonly payload: ReplayBody }) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const client = yield* Client
    const body = request.payload
    // A string that is not a job id names no job: it can never be replayed, so it counts as skipped.
    const jobIds = body.ids?.flatMap((raw) => Option.toArray(decodeJobId(raw)))
    const malformed = (body.ids?.length ?? 0) - (jobIds?.length ?? 0)
    if (jobIds !== undefined && jobIds.length === 0) return { replayed: 0, skipped: malformed }
    // The tenant filter applies to explicit ids too: another tenant's job is skipped like a missing one.
    const result = yield* client.replay({
      jobIds,
      queue: options.queue,
      tenant: yield* Tenant,
      errorClass: body.errorClass,
      type: body.type,
      limit: body.limit ?? (jobIds === undefined ? filterReplayLimit : undefined)
    })
    return { replayed: result.replayed.length, skipped: result.skipped.length + malformed }
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

/**
 * The handlers of the `deadLetters` group.
 *
 * @internal
 */
export const deadLettersGroup = HttpApiBuilder.group(SlowcallApi, "deadLetters", (handlers) =>
  handlers.handle("list", list).handle("replay", replay)
)
