/**
 * The batch verbs on Redis (`Batch.BatchStore`): one script per verb in the slot of the batch's queue (`lua/batch*.lua`);
 * every job script writes an item's batch in the same script (`lua/includes/records.lua`). This file only shapes
 * arguments, keeps the routes and reads replies; every rule is the scripts'.
 *
 * Layout: a batch lives with its items. Its queue is named when it is opened (`BatchSpec.queue`), every item and
 * callback must be of that queue (else `StoreError` `Constraint`, nothing written), and the batch id has a route to
 * that queue like a job id, so the verbs that name only a batch find its slot. On a Cluster the item write and the
 * batch write are therefore always one script in one slot.
 *
 * @internal
 */
import type * as Batch from "@slowcall/core/Batch"
import { StoreError } from "@slowcall/core/Errors"
import type { Job, JobId, JobState } from "@slowcall/core/Job"
import * as Protocol from "@slowcall/core/Protocol"
import { Effect } from "effect"
import { itemArgs, nowArg, optNumber, optString, type Raw, toJob } from "./codec.js"
import { type Context, script, serverNow } from "./context.js"
import { batchFields } from "./keys.js"

type Service = Batch.BatchStore["Type"]

const constraint = (operation: string, detail: string) => new StoreError({ reason: "Constraint", operation, detail })

/** A callback as its batch keeps it: the `Callback` with its input as JSON text (`cjson` keeps no number as is). */
const encodeCallback = (callback: Batch.Callback | null | undefined): string | null =>
  callback == null ? null : JSON.stringify({ ...callback, input: JSON.stringify(callback.input ?? null) })

const decodeCallback = (text: string | null): Batch.Callback | null => {
  if (text === null) return null
  const stored = JSON.parse(text) as Batch.Callback & { readonly input: string }
  return { ...stored, input: JSON.parse(stored.input) } as Batch.Callback
}

const INDEX = Object.fromEntries(batchFields.map(([name], i) => [name, i + 1])) as Record<
  (typeof batchFields)[number][0],
  number
>

/** The batch of a script's reply (`batchReply`). */
const toBatch = (raw: Raw): Batch.Batch => {
  const r = raw as ReadonlyArray<Raw>
  const at = (name: (typeof batchFields)[number][0]) => r[INDEX[name]] ?? null
  const text = (name: (typeof batchFields)[number][0]) => at(name) as string | null
  const num = (name: (typeof batchFields)[number][0]) => Number(at(name) as string)
  const opt = (name: (typeof batchFields)[number][0]) => (at(name) === null ? null : num(name))
  return {
    id: r[0] as Batch.BatchId,
    requestKey: text("requestKey"),
    tenant: text("tenant"),
    fingerprint: text("fingerprint")!,
    size: num("size"),
    added: num("added"),
    counts: {
      queued: num("queued"),
      running: num("running"),
      succeeded: num("succeeded"),
      failed: num("failed"),
      abandoned: num("abandoned")
    },
    costCents: num("costCents"),
    budgetCents: opt("budgetCents"),
    deadlineAt: opt("deadlineAt"),
    onComplete: decodeCallback(text("onComplete")),
    onSuccess: decodeCallback(text("onSuccess")),
    onCompleteJobId: text("onCompleteJobId") as JobId | null,
    onSuccessJobId: text("onSuccessJobId") as JobId | null,
    parentJobId: text("parentJobId") as JobId | null,
    cancelRequestedAt: opt("cancelRequestedAt"),
    createdAt: num("createdAt"),
    updatedAt: num("updatedAt"),
    finishedAt: opt("finishedAt")
  }
}

/**
 * The batch verbs over a context.
 *
 * @internal
 */
export const makeBatchStore = (ctx: Context): Service => {
  const retention = optNumber(ctx.retentionMs)

  /** The queue of a batch (its route), or undefined. */
  const queueOf = (operation: string, batchId: Batch.BatchId) =>
    Effect.map(ctx.routes.resolve(operation, [batchId]), (routes) => routes.get(batchId))

  /** Fails with `Constraint` when an id has a route to another queue (a job of that id lives elsewhere). */
  const refuseElsewhere = (operation: string, queue: string, ids: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      if (ids.length === 0) return
      const routes = yield* ctx.routes.resolve(operation, ids)
      for (const id of ids) {
        const owner = routes.get(id)
        if (owner !== undefined && owner !== queue) return yield* constraint(operation, `id ${id} already exists`)
      }
    })

  /** Writes the routes of what a script created in `queue`; a clash (a race on an id) is a `Constraint`. */
  const route = (operation: string, queue: string, ids: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      if (ids.length === 0) return
      const clash = yield* ctx.routes.claimRoutes(
        operation,
        queue,
        ids.map((id) => ({ id }))
      )
      if (clash !== undefined) return yield* constraint(operation, `id ${clash} already exists`)
      for (const id of ids) ctx.routes.learn(id, queue)
    })

  const jobsOf = (queue: string, raw: Raw): ReadonlyArray<Job> =>
    (raw as ReadonlyArray<Raw>).map((r) => {
      const job = toJob(queue, r)
      ctx.routes.learn(job.id, queue)
      return job
    })

  const open: Service["open"] = ({ now, spec }) =>
    Effect.gen(function* () {
      const queue = spec.queue
      if (queue == null) {
        return yield* constraint("batchOpen", "a batch on Redis names the queue of its items (BatchSpec.queue)")
      }
      for (const callback of [spec.onComplete, spec.onSuccess]) {
        if (callback != null && callback.queue !== queue) {
          return yield* constraint("batchOpen", `a callback of a batch on Redis is of the batch's queue ${queue}`)
        }
      }
      const callbackIds = [spec.onComplete, spec.onSuccess].flatMap((c) => (c == null ? [] : [c.id]))
      yield* refuseElsewhere("batchOpen", queue, [spec.id, ...callbackIds])
      yield* ctx.routes.register("batchOpen", queue)
      const raw = (yield* script(
        ctx,
        "batchOpen",
        "batchOpen",
        queue,
        [
          nowArg(now),
          spec.id,
          optString(spec.tenant),
          optString(spec.requestKey),
          spec.fingerprint,
          String(spec.size),
          optNumber(spec.budgetCents),
          optNumber(spec.deadlineAt),
          optString(encodeCallback(spec.onComplete)),
          optString(encodeCallback(spec.onSuccess)),
          optString(spec.parentJobId)
        ],
        true
      )) as ReadonlyArray<Raw>
      if (raw[0] === "constraint") return yield* constraint("batchOpen", `batch id ${raw[1] as string} already exists`)
      const at = Number(raw[0] as string)
      if (raw[1] === "KeyReused") {
        return {
          now: at,
          result: {
            _tag: "KeyReused",
            requestKey: spec.requestKey!,
            existingBatchId: raw[2] as Batch.BatchId
          } satisfies Batch.OpenResult
        }
      }
      const batch = toBatch(raw[2]!)
      // On a Cluster the routes are written after the script: an open that met its batch writes them again, so a
      // call that stopped in between leaves no batch (nor callback) without its route.
      yield* route("batchOpen", queue, [
        batch.id,
        ...[batch.onComplete, batch.onSuccess].flatMap((c) => (c === null ? [] : [c.id]))
      ])
      return { now: at, result: { _tag: raw[1] as "Created" | "Existing", batch } }
    })

  const add: Service["add"] = ({ batchId, items, now, offset }) =>
    Effect.gen(function* () {
      const queue = yield* queueOf("batchAdd", batchId)
      if (queue === undefined) {
        return {
          now: now ?? (yield* serverNow(ctx, "batch")),
          result: { _tag: "NotFound", batchId } as Batch.AddResult
        }
      }
      for (const item of items) {
        if (item.queue !== queue) {
          return yield* constraint("batchAdd", `an item of a batch on Redis is of the batch's queue ${queue}`)
        }
      }
      yield* refuseElsewhere(
        "batchAdd",
        queue,
        items.map((item) => item.id)
      )
      const raw = (yield* script(
        ctx,
        "batchAdd",
        "batchAdd",
        queue,
        [nowArg(now), batchId, String(offset), ...items.flatMap(itemArgs)],
        true
      )) as ReadonlyArray<Raw>
      if (raw[0] === "constraint") return yield* constraint("batchAdd", `job id ${raw[1] as string} already exists`)
      const at = Number(raw[0] as string)
      const tag = raw[1] as "NotFound" | "Cancelled" | "Misplaced" | "Added"
      if (tag === "NotFound") return { now: at, result: { _tag: "NotFound", batchId } }
      const batch = toBatch(raw[2]!)
      if (tag !== "Added") return { now: at, result: { _tag: tag, batch } }
      const jobs = jobsOf(queue, raw[3]!)
      // The items that had landed get their routes again: a call that stopped between its script and its routes (on
      // a Cluster they are written after) leaves none without one once it is repeated.
      yield* route("batchAdd", queue, [...jobs.map((job) => job.id), ...((raw[4] ?? []) as ReadonlyArray<string>)])
      return { now: at, result: { _tag: "Added", batch, jobs } }
    })

  const get: Service["get"] = ({ batchId, tenant }) =>
    Effect.gen(function* () {
      const queue = yield* queueOf("batchGet", batchId)
      if (queue === undefined) return undefined
      const raw = (yield* script(ctx, "batchGet", "batchGet", queue, [batchId], false)) as Raw
      if (raw === null || (raw as unknown) === false) return undefined
      const batch = toBatch(raw)
      return tenant === undefined || batch.tenant === tenant ? batch : undefined
    })

  const cancel: Service["cancel"] = ({ batchId, now, tenant }) =>
    Effect.gen(function* () {
      const queue = yield* queueOf("batchCancel", batchId)
      if (queue === undefined) {
        return {
          now: now ?? (yield* serverNow(ctx, "batch")),
          result: { _tag: "NotFound", batchId } as Batch.CancelBatchResult
        }
      }
      const raw = (yield* script(
        ctx,
        "batchCancel",
        "batchCancel",
        queue,
        [nowArg(now), retention, batchId, optString(tenant)],
        true
      )) as ReadonlyArray<Raw>
      const at = Number(raw[0] as string)
      const tag = raw[1] as "NotFound" | "Unchanged" | "AlreadyFinished" | "Cancelled"
      if (tag === "NotFound") return { now: at, result: { _tag: "NotFound", batchId } }
      const batch = toBatch(raw[2]!)
      if (tag !== "Cancelled") return { now: at, result: { _tag: tag, batch } }
      return { now: at, result: { _tag: "Cancelled", batch, jobs: jobsOf(queue, raw[3]!) } }
    })

  const replay: Service["replay"] = ({ batchId, now, tenant }) =>
    Effect.gen(function* () {
      const queue = yield* queueOf("batchReplay", batchId)
      if (queue === undefined) {
        return {
          now: now ?? (yield* serverNow(ctx, "batch")),
          result: { _tag: "NotFound", batchId } as Batch.ReplayBatchResult
        }
      }
      const raw = (yield* script(
        ctx,
        "batchReplay",
        "batchReplay",
        queue,
        [nowArg(now), batchId, optString(tenant)],
        true
      )) as ReadonlyArray<Raw>
      const at = Number(raw[0] as string)
      if (raw[1] === "NotFound") return { now: at, result: { _tag: "NotFound", batchId } }
      return { now: at, result: { _tag: "Replayed", batch: toBatch(raw[2]!), jobs: jobsOf(queue, raw[3]!) } }
    })

  const jobs: Service["jobs"] = ({ after, batchId, limit, state, tenant }) =>
    Effect.gen(function* () {
      const queue = yield* queueOf("batchJobs", batchId)
      if (queue === undefined) return []
      const raw = yield* script(
        ctx,
        "batchJobs",
        "batchJobs",
        queue,
        [
          batchId,
          optString(tenant),
          (state ?? "") as JobState | "",
          after ?? "",
          String(limit ?? Protocol.defaults.listLimit)
        ],
        false
      )
      return jobsOf(queue, raw as Raw)
    })

  return { open, add, get, cancel, replay, jobs }
}
