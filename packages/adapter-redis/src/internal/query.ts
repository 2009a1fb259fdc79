/**
 * The Query service on Redis: read-only scripts over the indexes the write scripts keep (`lua/list.lua`,
 * `count.lua`, `deadLetters.lua`, `stats.lua`, `get.lua`), and the attempt and ledger hashes read whole. A read
 * without a queue spans every queue of the prefix (the set `<prefix>:queues`): one script per queue, merged here;
 * across queues, equal `createdAt` go by queue name, then insertion order.
 *
 * @internal
 */
import type { ErrorClass } from "@slowcall/core/ErrorClass"
import { JobNotFound } from "@slowcall/core/Errors"
import type { Job, JobId, JobState } from "@slowcall/core/Job"
import * as Protocol from "@slowcall/core/Protocol"
import {
  type DeadLetterGroup,
  groupJobIdsLimit,
  type Query,
  type SpendGroup,
  type StoreStats,
  type WaitingGroup
} from "@slowcall/core/Query"
import { Effect } from "effect"
import { optNumber, optString, type Raw, toAttempts, toCharges, toJob, toSum } from "./codec.js"
import { attempt, type Context, script } from "./context.js"
import { enc, suffix } from "./keys.js"

type QueryService = Query["Type"]

/** One dead-letter group as `deadLetters.lua` returns it: field, "count|cost", then member and score pairs. */
type GroupCells = readonly [string, string, ReadonlyArray<string>]

/** The job id of an index member (`<12-digit insertion counter><id>`). */
const idOfMember = (member: string): JobId => member.slice(12) as JobId

const STATES: ReadonlyArray<JobState> = ["queued", "running", "succeeded", "failed", "abandoned"]

/**
 * The Query service over `ctx`.
 *
 * @internal
 */
export const makeQuery = (ctx: Context): QueryService => {
  const queuesOf = (operation: string, queue: string | undefined) =>
    queue === undefined
      ? Effect.map(ctx.routes.queues(operation), (queues) => [...queues].sort())
      : Effect.succeed([queue])

  const get: QueryService["get"] = (options) =>
    Effect.gen(function* () {
      const routes = yield* ctx.routes.resolve("get", [options.jobId])
      const queue = routes.get(options.jobId)
      if (queue === undefined) return yield* new JobNotFound({ jobId: options.jobId })
      const raw = (yield* script(ctx, "get", "get", queue, [options.jobId], false)) as ReadonlyArray<Raw>
      const found = raw[0]
      if (found == null) return yield* new JobNotFound({ jobId: options.jobId })
      const job = toJob(queue, found)
      if (options.tenant !== undefined && job.tenant !== options.tenant) {
        return yield* new JobNotFound({ jobId: options.jobId })
      }
      return job
    })

  /** The cursor job's queue, createdAt (as the hash holds it) and index member, or undefined when no job has that id. */
  const cursorOf = (jobId: JobId) =>
    Effect.gen(function* () {
      const routes = yield* ctx.routes.resolve("list", [jobId])
      const queue = routes.get(jobId)
      if (queue === undefined) return undefined
      const [createdAt, seq] = yield* attempt(ctx.client, "list", false, () =>
        ctx.client.hmget(ctx.keys.job(queue, jobId), "cr", "sq")
      )
      if (createdAt == null || seq == null) return undefined
      return { queue, createdAt, member: `${String(Number(seq)).padStart(12, "0")}${jobId}` }
    })

  const list: QueryService["list"] = (options) =>
    Effect.gen(function* () {
      const limit = options.limit === null ? null : (options.limit ?? Protocol.defaults.listLimit)
      const order = options.order === "oldest" ? "oldest" : "newest"
      const cursor = options.after === undefined ? undefined : yield* cursorOf(options.after)
      if (options.after !== undefined && cursor === undefined) return []
      const queues = yield* queuesOf("list", options.queue)
      // Across queues, equal createdAt go by queue name (below): a queue after the cursor's has its ties above the
      // cursor in ascending order, so they follow it when listing oldest first and precede it when newest first.
      const tiesOf = (queue: string): string => {
        if (cursor === undefined || queue === cursor.queue) return "same"
        return queue > cursor.queue === (order === "oldest") ? "high" : "low"
      }
      const perQueue = yield* Effect.forEach(
        queues,
        (queue) =>
          Effect.map(
            script(
              ctx,
              "list",
              "list",
              queue,
              [
                optString(options.tenant),
                optString(options.state),
                optString(options.type),
                optString(options.errorClass),
                optNumber(limit),
                order,
                optString(options.requestKey),
                cursor === undefined ? "" : cursor.createdAt,
                tiesOf(queue),
                cursor === undefined ? "" : cursor.member,
                optString(options.inputHash)
              ],
              false
            ),
            (raw) => (raw as ReadonlyArray<Raw>).map((r) => toJob(queue, r))
          ),
        { concurrency: 8 }
      )
      if (perQueue.length === 1) return perQueue[0]!
      const sign = order === "oldest" ? 1 : -1
      // Each queue's list is in order already; a stable sort by createdAt keeps queue order, then insertion order.
      const merged = perQueue.flat().sort((a, b) => sign * (a.createdAt - b.createdAt))
      return limit === null ? merged : merged.slice(0, limit)
    })

  const rowsOf = <A>(
    operation: string,
    jobId: JobId,
    key: (queue: string, jobId: string) => string,
    decode: (jobId: JobId, hash: Record<string, string>) => ReadonlyArray<A>
  ) =>
    Effect.gen(function* () {
      const routes = yield* ctx.routes.resolve(operation, [jobId])
      const queue = routes.get(jobId)
      if (queue === undefined) return []
      const hash = yield* attempt(ctx.client, operation, false, () => ctx.client.hgetall(key(queue, jobId)))
      return decode(jobId, hash)
    })

  const deadLetters: QueryService["deadLetters"] = (options) =>
    Effect.gen(function* () {
      const limit = options.limit ?? Protocol.defaults.listLimit
      const queues = yield* queuesOf("deadLetters", options.queue)
      const perQueue = yield* Effect.forEach(
        queues,
        (queue) =>
          Effect.map(
            script(
              ctx,
              "deadLetters",
              "deadLetters",
              queue,
              [optString(options.tenant), optString(options.errorClass), optString(options.type), String(limit)],
              false
            ),
            (raw) => {
              const [jobs, groups] = raw as [ReadonlyArray<Raw>, ReadonlyArray<GroupCells>]
              return { queue, jobs: jobs.map((r) => toJob(queue, r)), groups }
            }
          ),
        { concurrency: 8 }
      )
      const sums = new Map<
        string,
        {
          errorClass: ErrorClass | null
          inputHash: string
          count: number
          sum: number
          recent: Array<{
            readonly jobId: JobId
            readonly failedAt: number
            readonly queue: string
            readonly rank: number
          }>
        }
      >()
      for (const { queue, groups } of perQueue) {
        for (const [field, cell, entries] of groups) {
          const colon = field.indexOf(":")
          const errorClass = field.startsWith("c") ? (field.slice(1, colon) as ErrorClass) : null
          const inputHash = field.slice(colon + 1)
          const { count, sum } = toSum(cell)
          const recent = []
          for (let i = 0; i < entries.length; i += 2) {
            recent.push({ jobId: idOfMember(entries[i]!), failedAt: Number(entries[i + 1]), queue, rank: i })
          }
          const group = sums.get(field)
          if (group === undefined) sums.set(field, { errorClass, inputHash, count, sum, recent })
          else {
            group.count += count
            group.sum += sum
            group.recent.push(...recent)
          }
        }
      }
      const groups: Array<DeadLetterGroup> = [...sums.values()]
        .map((g) => {
          // One queue's entries come in order; across queues, the latest failure first, then by queue name.
          const recent =
            perQueue.length === 1
              ? g.recent
              : g.recent.sort(
                  (a, b) =>
                    b.failedAt - a.failedAt || (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : a.rank - b.rank)
                )
          return {
            errorClass: g.errorClass,
            inputHash: g.inputHash,
            count: g.count,
            costCents: g.sum,
            // A group whose index is missing (jobs failed before it was kept) shows no time and no ids.
            lastFailedAt: recent[0]?.failedAt ?? 0,
            jobIds: recent.slice(0, groupJobIdsLimit).map((entry) => entry.jobId)
          }
        })
        .sort(
          (a, b) =>
            b.count - a.count ||
            b.costCents - a.costCents ||
            (a.inputHash < b.inputHash ? -1 : a.inputHash > b.inputHash ? 1 : 0)
        )
      const jobs: ReadonlyArray<Job> =
        perQueue.length === 1
          ? perQueue[0]!.jobs
          : perQueue
              .flatMap((q) => q.jobs)
              .sort((a, b) => b.updatedAt - a.updatedAt)
              .slice(0, limit)
      return { jobs, groups }
    })

  const estimates: QueryService["estimates"] = (options) =>
    Effect.gen(function* () {
      const routes = yield* ctx.routes.resolve("estimates", options.jobIds)
      // The ledger hashes of the jobs found, read a few at a time; the rule is the protocol's own.
      return yield* Effect.forEach(
        options.jobIds,
        (jobId) => {
          const queue = routes.get(jobId)
          return queue === undefined
            ? Effect.succeed(0)
            : Effect.map(
                attempt(ctx.client, "estimates", false, () => ctx.client.hgetall(ctx.keys.charges(queue, jobId))),
                (hash) => Protocol.fallbackEstimate(toCharges(jobId, hash))
              )
        },
        { concurrency: 16 }
      )
    })

  const stats: QueryService["stats"] = (options) =>
    Effect.gen(function* () {
      const queues = yield* queuesOf("stats", options.queue)
      const byState: Record<JobState, number> = { queued: 0, running: 0, succeeded: 0, failed: 0, abandoned: 0 }
      const oldestQueuedAt: Record<string, number> = {}
      const costs = new Map<string, { count: number; sum: number }>()
      let failedInWindow = 0
      const waiting = new Map<string, { -readonly [K in keyof WaitingGroup]: WaitingGroup[K] }>()
      const spend: Array<SpendGroup> = []
      let now = options.now
      for (const queue of queues) {
        const raw = (yield* script(
          ctx,
          "stats",
          "stats",
          queue,
          [optString(options.tenant), String(options.failedSince), optNumber(now), optNumber(options.spendSince)],
          false
        )) as [
          string,
          ReadonlyArray<string>,
          ReadonlyArray<string>,
          ReadonlyArray<string>,
          string,
          ReadonlyArray<string>,
          ReadonlyArray<string | null>
        ]
        const [at, counts, oldest, costCells, failures, waitingCells, spendCells] = raw
        now ??= Number(at)
        STATES.forEach((state, i) => {
          byState[state] += Number(counts[i])
        })
        for (let i = 0; i < oldest.length; i += 2) {
          const key = oldest[i]!
          const value = Number(oldest[i + 1])
          const current = oldestQueuedAt[key]
          oldestQueuedAt[key] = current === undefined ? value : Math.min(current, value)
        }
        for (let i = 0; i < costCells.length; i += 2) {
          const { count, sum } = toSum(costCells[i + 1]!)
          const cell = costs.get(costCells[i]!)
          if (cell === undefined) costs.set(costCells[i]!, { count, sum })
          else {
            cell.count += count
            cell.sum += sum
          }
        }
        failedInWindow += Number(failures)
        // (type, version) groups span queues: merged here.
        for (let i = 0; i < waitingCells.length; i += 4) {
          const version = Number(waitingCells[i])
          const type = waitingCells[i + 1]!
          const count = Number(waitingCells[i + 2])
          const oldestDueAt = Number(waitingCells[i + 3])
          const key = JSON.stringify([type, version])
          const group = waiting.get(key)
          if (group === undefined) waiting.set(key, { type, version, count, oldestDueAt })
          else {
            group.count += count
            group.oldestDueAt = Math.min(group.oldestDueAt, oldestDueAt)
          }
        }
        // Spend groups carry their queue: one script's groups are the queue's own.
        for (let i = 0; i < spendCells.length; i += 5) {
          spend.push({
            queue,
            tenant: spendCells[i] ?? null,
            type: spendCells[i + 1]!,
            state: spendCells[i + 2] as JobState,
            costCents: Number(spendCells[i + 3]),
            jobs: Number(spendCells[i + 4])
          })
        }
      }
      const costCentsByErrorClass: Record<string, number> = {}
      for (const [errorClass, cell] of costs) if (cell.count > 0) costCentsByErrorClass[errorClass] = cell.sum
      return {
        byState,
        oldestQueuedAt,
        costCentsByErrorClass,
        failedInWindow,
        spend,
        waiting: [...waiting.values()]
      } satisfies StoreStats
    })

  const count: QueryService["count"] = (options) =>
    Effect.gen(function* () {
      const queues = yield* queuesOf("count", options.queue)
      // Queue by queue, each asked only for what the bound still allows.
      let total = 0
      for (const queue of queues) {
        const left = Math.max(0, Math.floor(options.upTo)) - total
        if (left <= 0) break
        const counted = yield* script(
          ctx,
          "count",
          "count",
          queue,
          [
            optString(options.tenant),
            optString(options.state),
            optString(options.type),
            optString(options.errorClass),
            optString(options.requestKey),
            String(left),
            optString(options.inputHash)
          ],
          false
        )
        total += Number(counted)
      }
      return total
    })

  const countQueued: QueryService["countQueued"] = (options) => {
    const upTo = Math.max(0, Math.floor(options.upTo))
    const base = ctx.keys.queueBase(options.queue)
    const key =
      options.tenant === undefined
        ? `${base}${suffix.state}queued`
        : `${base}${suffix.tenantState}queued:${enc(options.tenant)}`
    // ZCARD of the queue's (or the tenant's) queued index: O(1) whatever the backlog.
    return upTo === 0
      ? Effect.succeed(0)
      : Effect.map(
          attempt(ctx.client, "countQueued", false, () => ctx.client.zcard(key)),
          (count) => Math.min(count, upTo)
        )
  }

  return {
    get,
    list,
    attempts: (options) => rowsOf("attempts", options.jobId, ctx.keys.attempts, toAttempts),
    charges: (options) => rowsOf("charges", options.jobId, ctx.keys.charges, toCharges),
    estimates,
    deadLetters,
    stats,
    count,
    countQueued
  } satisfies QueryService
}
