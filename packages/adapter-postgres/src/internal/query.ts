/**
 * The Query service over one `Queryable`: plain SELECTs (`statements.ts`), none of which writes or locks.
 *
 * @internal
 */

import type { ErrorClass } from "@slowcall/core/ErrorClass"
import { JobNotFound } from "@slowcall/core/Errors"
import type { JobId, JobState } from "@slowcall/core/Job"
import * as Protocol from "@slowcall/core/Protocol"
import type { Query, SpendGroup, WaitingGroup } from "@slowcall/core/Query"
import { Effect } from "effect"
import type { Queryable } from "./driver.js"
import { toStoreError } from "./errors.js"
import { makeReadStatements } from "./readStatements.js"
import { isUuid, micros, type Row, toAttempt, toCharge, toJob } from "./rows.js"
import type { Statements } from "./statements.js"

type QueryService = Query["Type"]

/**
 * The Query service over `q`.
 *
 * @internal
 */
export const makeQuery = (q: Queryable, st: Statements): QueryService => {
  const reads = makeReadStatements(st.schema)
  const run = (operation: string, text: string, params: ReadonlyArray<unknown>) =>
    Effect.tryPromise({ try: () => q.query<Row>(text, params), catch: (error) => toStoreError(operation, error) })

  const get: QueryService["get"] = (options) =>
    Effect.gen(function* () {
      if (!isUuid(options.jobId)) return yield* new JobNotFound({ jobId: options.jobId })
      const rows = yield* run("get", st.get, [options.jobId, options.tenant ?? null])
      const row = rows[0]
      if (row === undefined) return yield* new JobNotFound({ jobId: options.jobId })
      return toJob(row)
    })

  const list: QueryService["list"] = (options) => {
    if (options.after !== undefined && !isUuid(options.after)) return Effect.succeed([])
    const paged = options.after !== undefined || options.requestKey !== undefined || options.inputHash !== undefined
    const oldest = options.order === "oldest"
    const params = [
      options.queue ?? null,
      options.tenant ?? null,
      options.state ?? null,
      options.type ?? null,
      options.errorClass ?? null,
      options.limit === null ? null : (options.limit ?? Protocol.defaults.listLimit)
    ]
    return (
      paged
        ? run("list", oldest ? reads.pageOldest : reads.pageNewest, [
            ...params,
            options.requestKey ?? null,
            options.after ?? null,
            options.inputHash ?? null
          ])
        : run("list", oldest ? st.listOldest : st.listNewest, params)
    ).pipe(Effect.map((rows) => rows.map(toJob)))
  }

  const deadLetters: QueryService["deadLetters"] = (options) => {
    const filters = [options.queue ?? null, options.tenant ?? null, options.errorClass ?? null, options.type ?? null]
    return Effect.all(
      {
        jobs: run("deadLetters", st.deadLetterJobs, [...filters, options.limit ?? Protocol.defaults.listLimit]).pipe(
          Effect.map((rows) => rows.map(toJob))
        ),
        groups: run("deadLetters", st.deadLetterGroups, filters).pipe(
          Effect.map((rows) =>
            rows.map((row) => ({
              errorClass: (row.error_class ?? null) as ErrorClass | null,
              inputHash: String(row.input_hash),
              count: Number(row.count),
              costCents: Number(row.cost_cents),
              lastFailedAt: Number(row.last_failed_at),
              jobIds: (row.job_ids as ReadonlyArray<string>).map((id) => id as JobId)
            }))
          )
        )
      },
      { concurrency: 2 }
    )
  }

  const stats: QueryService["stats"] = (options) => {
    const filters = [options.queue ?? null, options.tenant ?? null]
    return Effect.all(
      {
        byState: run("stats", st.statsByState, filters),
        oldest: run("stats", st.statsOldest, [...filters, options.now ?? null]),
        cost: run("stats", st.statsCost, filters),
        failed: run("stats", st.statsFailed, [...filters, options.failedSince]),
        spend: run("stats", reads.spend, [...filters, options.spendSince ?? null]),
        waiting: run("stats", reads.waiting, [...filters, options.now ?? null])
      },
      { concurrency: 6 }
    ).pipe(
      Effect.map(({ byState, cost, failed, oldest, spend, waiting }) => {
        const counts: Record<JobState, number> = { queued: 0, running: 0, succeeded: 0, failed: 0, abandoned: 0 }
        for (const row of byState) counts[row.state as JobState] = Number(row.count)
        const oldestQueuedAt: Record<string, number> = {}
        for (const row of oldest) oldestQueuedAt[String(row.priority)] = micros(row.oldest)
        const costCentsByErrorClass: Record<string, number> = {}
        for (const row of cost) costCentsByErrorClass[String(row.error_class)] = Number(row.cost_cents)
        const failedInWindow = Number(failed[0]?.failed ?? 0)
        return {
          byState: counts,
          oldestQueuedAt,
          costCentsByErrorClass,
          failedInWindow,
          spend: spend.map(
            (row): SpendGroup => ({
              queue: String(row.queue),
              tenant: row.tenant === null || row.tenant === undefined ? null : String(row.tenant),
              type: String(row.type),
              state: row.state as JobState,
              costCents: Number(row.cost_cents),
              jobs: Number(row.jobs)
            })
          ),
          waiting: waiting.map(
            (row): WaitingGroup => ({
              type: String(row.type),
              version: Number(row.version),
              count: Number(row.count),
              oldestDueAt: micros(row.oldest)
            })
          )
        }
      })
    )
  }

  return {
    get,
    list,
    attempts: (options) =>
      isUuid(options.jobId)
        ? run("attempts", st.attempts, [options.jobId]).pipe(Effect.map((rows) => rows.map(toAttempt)))
        : Effect.succeed([]),
    charges: (options) =>
      isUuid(options.jobId)
        ? run("charges", st.charges, [options.jobId]).pipe(Effect.map((rows) => rows.map(toCharge)))
        : Effect.succeed([]),
    estimates: (options) => {
      // An id that is not a uuid names no job: its estimate is 0 without asking.
      const ids = options.jobIds.filter(isUuid)
      return ids.length === 0
        ? Effect.succeed(options.jobIds.map(() => 0))
        : run("estimates", reads.estimates, [ids]).pipe(
            Effect.map((rows) => {
              const byId = new Map(ids.map((id, i) => [id, Number(rows[i]?.estimate ?? 0)]))
              return options.jobIds.map((id) => byId.get(id) ?? 0)
            })
          )
    },
    deadLetters,
    stats,
    count: (options) =>
      run("count", reads.count, [
        options.queue ?? null,
        options.tenant ?? null,
        options.state ?? null,
        options.type ?? null,
        options.errorClass ?? null,
        options.requestKey ?? null,
        Math.floor(options.upTo),
        options.inputHash ?? null
      ]).pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0))),
    countQueued: (options) =>
      run("countQueued", reads.countQueued, [options.queue, options.tenant ?? null, Math.floor(options.upTo)]).pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0))
      )
  } satisfies QueryService
}
