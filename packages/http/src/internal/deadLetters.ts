/**
 * The `deadLetters` endpoint group: a page of the dead-letter view (`Client.deadLetterPage`, the one rule of
 * `DeadLetters.ts`) with the arrival rate, and replay. Replay goes through `Client.replay`, so an HTTP replay moves and
 * publishes exactly what a replay in code would, as one call over everything the body names.
 *
 * @internal
 */
import { HttpApiBuilder } from "@effect/platform"
import { Client } from "@slowcall/core/Client"
import * as DeadLetters from "@slowcall/core/DeadLetters"
import { JobId } from "@slowcall/core/Job"
import { replayLimit } from "@slowcall/core/Query"
import { Effect, Option, Schema } from "effect"
import { type DeadLetterParams, type ReplayBody, SlowcallApi, Tenant } from "../Api.js"
import { inputView, jobView, redactEvidence } from "../View.js"
import { ServerOptions, storeUnavailable } from "./common.js"

const list = (request: { readonly urlParams: typeof DeadLetterParams.Type }) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const client = yield* Client
    const tenant = yield* Tenant
    const params = request.urlParams
    const page = yield* client.deadLetterPage({
      queue: options.queue,
      tenant,
      errorClass: params.errorClass,
      type: params.type,
      sort: params.sort,
      limit: params.limit,
      // The parameter's schema took only a decodable cursor.
      cursor: params.cursor === undefined ? undefined : DeadLetters.decodeCursor(params.cursor)
    })
    const { stats } = yield* client.stats({
      queue: options.queue,
      tenant,
      windowMs: options.deadLetterWindowMinutes * 60_000
    })
    return {
      groups: page.groups.map((group) => ({
        errorClass: group.errorClass,
        inputHash: group.inputHash,
        count: group.count,
        costCents: group.costCents,
        jobIds: group.jobIds,
        sampleInput: group.latest === null ? null : inputView(group.latest).inputPreview,
        lastError: group.latest?.lastError == null ? null : redactEvidence(group.latest.lastError),
        lastFailedAt: group.lastFailedAt,
        collapsed: group.collapsed
      })),
      next: page.next,
      totalGroups: page.totalGroups,
      totalJobs: page.totalJobs,
      totalCostCents: page.totalCostCents,
      jobs: page.jobs.map(jobView),
      arrivalsPerMinute: stats.failedInWindow / options.deadLetterWindowMinutes
    }
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const decodeJobId = Schema.decodeUnknownOption(JobId)

const replay = (request: { readonly payload: ReplayBody }) =>
  Effect.gen(function* () {
    const options = yield* ServerOptions
    const client = yield* Client
    const body = request.payload
    // A string that is not a job id names no job: it can never be replayed, so it counts as skipped.
    const jobIds = body.ids?.flatMap((raw) => Option.toArray(decodeJobId(raw)))
    const malformed = (body.ids?.length ?? 0) - (jobIds?.length ?? 0)
    // The tenant filter applies to explicit ids too: another tenant's job is skipped like a missing one.
    const result = yield* client.replay({
      jobIds,
      queue: options.queue,
      tenant: yield* Tenant,
      errorClass: body.errorClass,
      type: body.type,
      inputHash: body.inputHash,
      dryRun: body.dryRun,
      limit: replayLimit
    })
    return {
      matched: result.matched,
      replayed: result.replayed.length,
      skipped: result.skipped.length + malformed,
      estimatedCents: result.estimatedCents,
      capped: result.capped
    }
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

/**
 * The handlers of the `deadLetters` group.
 *
 * @internal
 */
export const deadLettersGroup = HttpApiBuilder.group(SlowcallApi, "deadLetters", (handlers) =>
  handlers.handle("list", list).handle("replay", replay)
)
