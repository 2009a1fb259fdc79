/**
 * The protocol Store verbs on Redis: each batch runs as one script per queue (one slot), see `lua/`. This file
 * only shapes arguments and reads replies; every rule is the scripts'.
 *
 * Batches over several queues: the items are grouped by queue (their routes, see `context.ts`) and each group runs
 * as one script, in item order within the group. Items of different queues name different jobs, so running the
 * groups one after another or side by side gives every item the result it would get "as if one after another".
 * One store time serves the whole call: the caller's `now`, else the first group's server time, which the other
 * groups are given. An item whose job has no route gets its "no such job" answer without a script.
 *
 * @internal
 */
import type { BatchId } from "@slowcall/core/Batch"
import { StoreError } from "@slowcall/core/Errors"
import * as Fairness from "@slowcall/core/Fairness"
import type { Job, JobId, JobState, Json } from "@slowcall/core/Job"
import type { SubmitItem } from "@slowcall/core/Protocol"
import * as Protocol from "@slowcall/core/Protocol"
import type {
  CancelItem,
  CancelResult,
  ChargeItem,
  ChargeResult,
  ClaimItem,
  ClaimNextOptions,
  ClaimNextResult,
  ClaimResult,
  Fenced,
  HeartbeatItem,
  HeartbeatResult,
  ReplayItemResult,
  Reply,
  SettleItem,
  SettleResult,
  Store,
  SubmitOutcome,
  SweepResult
} from "@slowcall/core/Store"
import { Effect } from "effect"
import { itemArgs, nowArg, optNumber, optString, type Raw, toJob } from "./codec.js"
import { type Context, script, serverNow } from "./context.js"
import { toStoreError } from "./errors.js"
import { guarded } from "./guard.js"
import { run } from "./scripts.js"

type StoreService = Store["Type"]

/** A script's per-item reply list: the store time first, then one result per item. */
const split = (raw: unknown): { readonly now: number; readonly results: ReadonlyArray<ReadonlyArray<Raw>> } => {
  const list = raw as ReadonlyArray<Raw>
  return { now: Number(list[0] as string), results: list.slice(1) as ReadonlyArray<ReadonlyArray<Raw>> }
}

const lost = (jobId: JobId, token: number, r: ReadonlyArray<Raw>): Fenced => ({
  _tag: "LeaseLost",
  jobId,
  token,
  currentToken: r[1] == null ? null : Number(r[1] as string),
  state: (r[2] ?? null) as JobState | null
})

/**
 * Runs a batch of items that each name a job: groups them by queue, answers unrouted items with `local`, runs
 * `chunk` per queue at one store time, and returns the results in item order.
 */
const byQueue = <I extends { readonly jobId: JobId }, R>(
  ctx: Context,
  operation: string,
  items: ReadonlyArray<I>,
  requestedNow: number | undefined,
  local: (item: I) => R,
  chunk: (queue: string, items: ReadonlyArray<I>, now: number | undefined) => Effect.Effect<Reply<R>, StoreError>
): Effect.Effect<Reply<R>, StoreError> =>
  Effect.gen(function* () {
    if (items.length === 0) return { now: requestedNow ?? (yield* serverNow(ctx, operation)), results: [] }
    const routes = yield* ctx.routes.resolve(
      operation,
      items.map((item) => item.jobId)
    )
    const results: Array<R | undefined> = new Array(items.length)
    const groups = new Map<string, Array<number>>()
    items.forEach((item, i) => {
      const queue = routes.get(item.jobId)
      if (queue === undefined) {
        results[i] = local(item)
        return
      }
      const group = groups.get(queue)
      if (group === undefined) groups.set(queue, [i])
      else group.push(i)
    })
    const runGroup = (queue: string, indexes: ReadonlyArray<number>, now: number | undefined) =>
      Effect.map(
        chunk(
          queue,
          indexes.map((i) => items[i]!),
          now
        ),
        (reply) => {
          indexes.forEach((index, k) => {
            results[index] = reply.results[k]
          })
          return reply.now
        }
      )
    const entries = [...groups]
    let now = requestedNow
    if (entries.length === 0) now ??= yield* serverNow(ctx, operation)
    else {
      const [first, ...rest] = entries
      if (now === undefined) now = yield* runGroup(first![0], first![1], undefined)
      else rest.unshift(first!)
      const at = now
      yield* Effect.forEach(rest, ([queue, indexes]) => runGroup(queue, indexes, at), {
        concurrency: "unbounded",
        discard: true
      })
    }
    return { now: now!, results: results as ReadonlyArray<R> }
  })

const outcomeArgs = (outcome: Protocol.Outcome): ReadonlyArray<string> => {
  switch (outcome._tag) {
    case "Complete":
      return ["complete", JSON.stringify(outcome.result), "", "-", "-", ""]
    case "Retry":
      return ["retry", "", String(outcome.delayMs), optString(outcome.errorClass), optString(outcome.error), ""]
    case "Fail":
      return ["fail", "", "", optString(outcome.errorClass), optString(outcome.error), ""]
    case "Abandon":
      return ["abandon", "", "", optString(outcome.errorClass), optString(outcome.error), outcome.reason]
    case "Release":
      return ["release", "", "", "-", "-", ""]
    case "Throttle":
      return ["throttle", "", String(outcome.delayMs), optString("rate_limited"), optString(outcome.error), ""]
  }
}

/** A `charge` call refused as a whole (`Protocol.chargeProblem`), before anything is sent. */
const chargeProblem = (items: ReadonlyArray<ChargeItem>): StoreError | undefined => {
  const problem = Protocol.chargeProblem(items)
  return problem === undefined
    ? undefined
    : new StoreError({ reason: "Constraint", operation: "charge", detail: problem })
}

/** A `claimNext` call refused as a whole (a `fair` that `Fairness.problem` rejects), before anything is sent. */
const claimNextProblem = (options: ClaimNextOptions): StoreError | undefined => {
  const problem = options.fair === undefined ? undefined : Fairness.problem(options.fair)
  return problem === undefined
    ? undefined
    : new StoreError({ reason: "Constraint", operation: "claimNext", detail: problem })
}

/** A claim's arguments after the retention: `claimNext.lua`'s, or `claimNextFair.lua`'s with `fair`. */
const claimNextArgs = (
  options: ClaimNextOptions
): { readonly script: "claimNext" | "claimNextFair"; readonly args: ReadonlyArray<string> } => {
  // The `Protocol.runnableBy` filter: "-" for none, else "+" and then one "type@version" per argument.
  const filter = [
    options.types === undefined ? "-" : "+",
    ...(options.types ?? []).map((t) => `${t.type}@${t.version}`)
  ]
  const head = [String(Math.max(0, options.max)), options.owner, String(options.leaseMs)]
  const fair = options.fair
  if (fair === undefined) return { script: "claimNext", args: [...head, ...filter] }
  const weights = Object.entries(fair.weights ?? {})
  return {
    script: "claimNextFair",
    args: [
      ...head,
      String(fair.defaultWeight ?? Fairness.defaults.defaultWeight),
      String(Fairness.stepMs(fair)),
      String(weights.length),
      ...weights.flatMap(([tenant, weight]) => [tenant, String(weight)]),
      ...filter
    ]
  }
}

const settleArgs = (items: ReadonlyArray<SettleItem>): Array<string> =>
  items.flatMap((i) => [i.jobId, String(i.token), ...outcomeArgs(i.outcome)])

const heartbeatArgs = (items: ReadonlyArray<HeartbeatItem>): Array<string> =>
  items.flatMap((i) => [i.jobId, String(i.token), String(i.leaseMs), optNumber(i.progress)])

const chargeArgs = (items: ReadonlyArray<ChargeItem>): Array<string> =>
  items.flatMap((i) => [i.jobId, i.callId, String(i.token), String(i.amountCents), i.settled ? "1" : "0"])

const heartbeatResult = (item: HeartbeatItem, r: ReadonlyArray<Raw>): HeartbeatResult =>
  r[0] === "Renewed"
    ? {
        _tag: "Renewed",
        leaseUntil: Number(r[1] as string),
        cancelRequested: r[2] === "1",
        costCents: Number(r[3] as string)
      }
    : lost(item.jobId, item.token, r)

const chargeResult = (item: ChargeItem, r: ReadonlyArray<Raw>): ChargeResult => {
  switch (r[0]) {
    case "Charged":
      return { _tag: "Charged", costCents: Number(r[1] as string) }
    case "BatchBudgetExceeded":
      return {
        _tag: "BatchBudgetExceeded",
        jobId: item.jobId,
        batchId: r[2] as BatchId,
        costCents: Number(r[1] as string),
        batchCostCents: Number(r[3] as string),
        budgetCents: Number(r[4] as string)
      }
    default:
      return { _tag: "NotFound", jobId: item.jobId }
  }
}

/** The answer of a fenced item whose job has no route: there is no such job. */
const unroutedFenced = (item: { readonly jobId: JobId; readonly token: number }): Fenced => ({
  _tag: "LeaseLost",
  jobId: item.jobId,
  token: item.token,
  currentToken: null,
  state: null
})

/** The answer of a charge whose job has no route. */
const unroutedCharge = (item: ChargeItem): ChargeResult => ({ _tag: "NotFound", jobId: item.jobId })

/** A cycle's items of one queue, by part (their indexes in the part), and whether the claim part is this queue's. */
interface Share {
  readonly settle: Array<number>
  readonly heartbeat: Array<number>
  readonly charge: Array<number>
  claim: boolean
}

/**
 * The protocol Store over `ctx`.
 *
 * @internal
 */
export const makeStore = (ctx: Context): StoreService => {
  const retention = optNumber(ctx.retentionMs)
  const job = (queue: string, raw: Raw, sentResult?: Json | null): Job => {
    const decoded = toJob(queue, raw, sentResult)
    ctx.routes.learn(decoded.id, queue)
    return decoded
  }

  /**
   * A job the submit script created: `Protocol.newJob` of the item at the script's store time, which is what the
   * script stored (`lua/includes/protocol.lua`, `newJob`), so the reply need not carry the record or its input back.
   */
  const createdJob = (queue: string, item: SubmitItem, now: number): Job => {
    ctx.routes.learn(item.id, queue)
    return Protocol.newJob(item, now)
  }

  /** The submit script's arguments for some items of one queue. */
  const submitArgs = (items: ReadonlyArray<SubmitItem>, now: number | undefined): Array<string> => {
    const args = [nowArg(now)]
    for (const item of items) args.push(...itemArgs(item))
    return args
  }

  /** The submit script's reply for `items` of `queue`: its store time and outcomes, or a Constraint failure. */
  const submitReply = (
    queue: string,
    items: ReadonlyArray<SubmitItem>,
    raw: unknown
  ): Effect.Effect<Reply<SubmitOutcome>, StoreError> => {
    const list = raw as ReadonlyArray<Raw>
    if (list[0] === "constraint") {
      return Effect.fail(
        new StoreError({
          reason: "Constraint",
          operation: "submit",
          detail: `job id ${list[1] as string} already exists`
        })
      )
    }
    const reply = split(list)
    return Effect.succeed({
      now: reply.now,
      results: reply.results.map((r, k): SubmitOutcome => {
        const item = items[k]!
        return r[0] === "Created"
          ? { _tag: "Created", job: createdJob(queue, item, reply.now) }
          : r[0] === "Existing"
            ? { _tag: "Existing", job: job(queue, r[1]!) }
            : { _tag: "KeyReused", requestKey: item.requestKey!, existingJobId: r[1] as JobId }
      })
    })
  }

  /**
   * A submit to one queue of a single server in one round trip: the routes (HSETNX) and the submit script travel in
   * one write, the routes first, so a job never exists before its route. A route that was there already is looked
   * at afterwards: the same queue's (an earlier try, or the job exists and the script refused it), an orphan of a
   * failed submit (taken over), or another queue's job with this id, a caller's bug: the jobs this submit created
   * are taken back while untouched (`retract`) and the call fails with `Constraint`.
   */
  const submitOneQueue = (queue: string, items: ReadonlyArray<SubmitItem>, now: number | undefined) =>
    Effect.gen(function* () {
      const client = ctx.client
      const [reserved, scripted] = yield* Effect.promise(() =>
        Promise.allSettled([
          guarded(client, () =>
            Promise.all(items.map((item) => client.hsetnx(ctx.keys.route(item.id), item.id, queue)))
          ),
          run(client, "submit", [ctx.keys.meta(queue)], submitArgs(items, now))
        ])
      )
      if (scripted.status === "rejected") return yield* Effect.fail(toStoreError("submit", scripted.reason, true))
      const taken: Array<SubmitItem> =
        reserved.status === "fulfilled" ? items.filter((_, i) => reserved.value[i] === 0) : [...items]
      const mine = reserved.status === "fulfilled" ? items.filter((_, i) => reserved.value[i] === 1) : []
      const reply = yield* submitReply(queue, items, scripted.value).pipe(
        Effect.tapError(() => ctx.routes.release(mine.map((item) => ({ id: item.id, queue }))))
      )
      if (taken.length > 0) {
        const clash = yield* ctx.routes.claimRoutes("submit", queue, taken)
        if (clash !== undefined) {
          const created = reply.results.flatMap((r) => (r._tag === "Created" ? [r.job.id] : []))
          if (created.length > 0) yield* script(ctx, "submit", "retract", queue, created, true)
          yield* ctx.routes.release(mine.map((item) => ({ id: item.id, queue })))
          return yield* new StoreError({
            reason: "Constraint",
            operation: "submit",
            detail: `job id ${clash} already exists`
          })
        }
      }
      for (const item of items) ctx.routes.learn(item.id, queue)
      return reply
    })

  /** The most items one submit script carries (its arguments are one command's; the rest go in later calls). */
  const submitChunk = 1_000

  const submit: StoreService["submit"] = (options) =>
    options.items.length <= submitChunk
      ? submitBatch(options)
      : Effect.gen(function* () {
          // An id given twice anywhere in the batch is refused before any chunk is written.
          const ids = new Set<string>()
          for (const item of options.items) {
            if (ids.has(item.id)) {
              return yield* new StoreError({
                reason: "Constraint",
                operation: "submit",
                detail: `job id ${item.id} given twice`
              })
            }
            ids.add(item.id)
          }
          // Consecutive chunks in item order, all at the first one's store time: as if one batch.
          const first = yield* submitBatch({ ...options, items: options.items.slice(0, submitChunk) })
          const results = [...first.results]
          for (let i = submitChunk; i < options.items.length; i += submitChunk) {
            const next = yield* submitBatch({
              ...options,
              now: options.now ?? first.now,
              items: options.items.slice(i, i + submitChunk)
            })
            results.push(...next.results)
          }
          return { now: first.now, results }
        })

  const submitBatch: StoreService["submit"] = (options) =>
    Effect.gen(function* () {
      const items = options.items
      if (items.length === 0) return { now: options.now ?? (yield* serverNow(ctx, "submit")), results: [] }
      const seen = new Set<string>()
      for (const item of items) {
        if (seen.has(item.id)) {
          return yield* new StoreError({
            reason: "Constraint",
            operation: "submit",
            detail: `job id ${item.id} given twice`
          })
        }
        seen.add(item.id)
      }
      const groups = new Map<string, Array<number>>()
      items.forEach((item, i) => {
        const group = groups.get(item.queue)
        if (group === undefined) groups.set(item.queue, [i])
        else group.push(i)
      })
      // One queue (the common case) registers without the fibers a concurrent forEach would start.
      if (groups.size === 1) yield* ctx.routes.register("submit", items[0]!.queue)
      else
        yield* Effect.forEach(groups.keys(), (queue) => ctx.routes.register("submit", queue), {
          concurrency: "unbounded",
          discard: true
        })
      const reply: Reply<SubmitOutcome> =
        !ctx.cluster && groups.size === 1
          ? yield* submitOneQueue(items[0]!.queue, items, options.now)
          : yield* submitByQueue(groups, items, options.now)
      // An item that met an existing job created nothing: its route goes back.
      const unused = items.filter((_, i) => reply.results[i]?._tag !== "Created")
      if (unused.length > 0) yield* ctx.routes.release(unused)
      return reply
    })

  /**
   * A submit over several queues, or on a Cluster (where the routes live on other nodes): the routes first, in a
   * round trip of their own, then one script per queue at one store time.
   */
  const submitByQueue = (
    groups: ReadonlyMap<string, ReadonlyArray<number>>,
    items: ReadonlyArray<SubmitItem>,
    requestedNow: number | undefined
  ) =>
    Effect.gen(function* () {
      yield* ctx.routes.reserve("submit", items)
      const results: Array<SubmitOutcome | undefined> = new Array(items.length)
      const runGroup = (queue: string, indexes: ReadonlyArray<number>, now: number | undefined) =>
        Effect.gen(function* () {
          const chunk = indexes.map((i) => items[i]!)
          const raw = yield* script(ctx, "submit", "submit", queue, submitArgs(chunk, now), true)
          const reply = yield* submitReply(queue, chunk, raw)
          indexes.forEach((index, k) => {
            results[index] = reply.results[k]
          })
          return reply.now
        })
      const [first, ...rest] = [...groups]
      const all = Effect.gen(function* () {
        let now = requestedNow
        if (now === undefined) now = yield* runGroup(first![0], first![1], undefined)
        else rest.unshift(first!)
        const at = now
        yield* Effect.forEach(rest, ([queue, indexes]) => runGroup(queue, indexes, at), {
          concurrency: "unbounded",
          discard: true
        })
        return at
      })
      // A refused submit (an id that exists in its queue) created nothing: its routes go back.
      const now = yield* all.pipe(
        Effect.tapError((error) => (error.reason === "Constraint" ? ctx.routes.release(items) : Effect.void))
      )
      return { now, results: results as ReadonlyArray<SubmitOutcome> }
    })

  const claimResult = (queue: string, r: ReadonlyArray<Raw>, jobId: JobId): ClaimResult => {
    switch (r[0]) {
      case "Claimed":
        return { _tag: "Claimed", job: job(queue, r[1]!), takeover: r[2] === "1" }
      case "Busy":
        return { _tag: "Busy", job: job(queue, r[1]!), until: Number(r[2] as string) }
      case "NotDue":
        return { _tag: "NotDue", job: job(queue, r[1]!), until: Number(r[2] as string) }
      case "Settled":
        return { _tag: "Settled", job: job(queue, r[1]!) }
      default:
        return { _tag: "NotFound", jobId }
    }
  }

  const claim: StoreService["claim"] = (options) =>
    byQueue<ClaimItem, ClaimResult>(
      ctx,
      "claim",
      options.items,
      options.now,
      (item) => ({ _tag: "NotFound", jobId: item.jobId }),
      (queue, items, now) =>
        Effect.map(
          script(
            ctx,
            "claim",
            "claim",
            queue,
            [
              nowArg(now),
              retention,
              ...items.flatMap((i) => [i.jobId, i.owner, String(i.leaseMs), optNumber(i.estimateCents)])
            ],
            true
          ),
          (raw) => {
            const reply = split(raw)
            return { now: reply.now, results: reply.results.map((r, k) => claimResult(queue, r, items[k]!.jobId)) }
          }
        )
    )

  const settleResult = (queue: string, item: SettleItem, r: ReadonlyArray<Raw>): SettleResult =>
    r[0] === "Settled"
      ? {
          _tag: "Settled",
          // A completed job's result is the one this item sent (the script does not send it back).
          job: job(queue, r[1]!, item.outcome._tag === "Complete" ? item.outcome.result : undefined)
        }
      : lost(item.jobId, item.token, r)

  /** The claims of a `claimNext` script or a cycle's claim part, in its order. */
  const claimNextResults = (queue: string, rs: ReadonlyArray<ReadonlyArray<Raw>>): Array<ClaimNextResult> =>
    rs.map((r) => claimResult(queue, r, r[1]![0] as JobId) as ClaimNextResult)

  /** claimNext, plain or fair: one script (a bad `fair` fails before anything is sent). */
  const claimNext: StoreService["claimNext"] = (options) => {
    const problem = claimNextProblem(options)
    if (problem !== undefined) return Effect.fail(problem)
    const claim = claimNextArgs(options)
    return Effect.map(
      script(ctx, "claimNext", claim.script, options.queue, [nowArg(options.now), retention, ...claim.args], true),
      (raw) => {
        const reply = split(raw)
        return { now: reply.now, results: claimNextResults(options.queue, reply.results) }
      }
    )
  }

  const heartbeat: StoreService["heartbeat"] = (options) =>
    byQueue<HeartbeatItem, HeartbeatResult>(
      ctx,
      "heartbeat",
      options.items,
      options.now,
      unroutedFenced,
      (queue, items, now) =>
        Effect.map(
          script(ctx, "heartbeat", "heartbeat", queue, [nowArg(now), ...heartbeatArgs(items)], true),
          (raw) => {
            const reply = split(raw)
            return { now: reply.now, results: reply.results.map((r, k) => heartbeatResult(items[k]!, r)) }
          }
        )
    )

  const charge: StoreService["charge"] = (options) => {
    const problem = chargeProblem(options.items)
    if (problem !== undefined) return Effect.fail(problem)
    return byQueue<ChargeItem, ChargeResult>(
      ctx,
      "charge",
      options.items,
      options.now,
      unroutedCharge,
      (queue, items, now) =>
        Effect.map(script(ctx, "charge", "charge", queue, [nowArg(now), ...chargeArgs(items)], true), (raw) => {
          const reply = split(raw)
          return { now: reply.now, results: reply.results.map((r, k) => chargeResult(items[k]!, r)) }
        })
    )
  }

  const settle: StoreService["settle"] = (options) =>
    byQueue<SettleItem, SettleResult>(ctx, "settle", options.items, options.now, unroutedFenced, (queue, items, now) =>
      Effect.map(
        script(ctx, "settle", "settle", queue, [nowArg(now), retention, ...settleArgs(items)], true),
        (raw) => {
          const reply = split(raw)
          return { now: reply.now, results: reply.results.map((r, k) => settleResult(queue, items[k]!, r)) }
        }
      )
    )

  /**
   * cycle: the parts' items grouped by queue (their routes), with the claim part on its own queue, and one `cycle`
   * script per queue at one store time (the caller's `now`, else the first script's server time, which the others
   * are given). Items of different queues name different jobs and a claim picks only its own queue's jobs, so the
   * scripts side by side give every item what the four verbs one after another would. An item whose job has no
   * route gets its "no such job" answer without a script. A refused part fails before anything is sent.
   */
  const cycle: NonNullable<StoreService["cycle"]> = (options) => {
    const settles = options.settle ?? []
    const renewals = options.heartbeat ?? []
    const charges = options.charge ?? []
    const claim = options.claimNext
    const problem = chargeProblem(charges) ?? (claim === undefined ? undefined : claimNextProblem(claim))
    if (problem !== undefined) return Effect.fail(problem)
    return Effect.gen(function* () {
      const ids = [...settles, ...renewals, ...charges].map((item) => item.jobId)
      const routes = ids.length === 0 ? new Map<string, string>() : yield* ctx.routes.resolve("cycle", ids)
      const settled: Array<SettleResult> = settles.map(unroutedFenced)
      const renewed: Array<HeartbeatResult> = renewals.map(unroutedFenced)
      const charged: Array<ChargeResult> = charges.map(unroutedCharge)
      let claimed: ReadonlyArray<ClaimNextResult> = []
      const shares = new Map<string, Share>()
      const shareOf = (queue: string): Share => {
        let share = shares.get(queue)
        if (share === undefined) {
          share = { settle: [], heartbeat: [], charge: [], claim: false }
          shares.set(queue, share)
        }
        return share
      }
      const route = (items: ReadonlyArray<{ readonly jobId: JobId }>, part: "settle" | "heartbeat" | "charge") =>
        items.forEach((item, i) => {
          const queue = routes.get(item.jobId)
          if (queue !== undefined) shareOf(queue)[part].push(i)
        })
      route(settles, "settle")
      route(renewals, "heartbeat")
      route(charges, "charge")
      if (claim !== undefined) shareOf(claim.queue).claim = true
      const runShare = (queue: string, share: Share, now: number | undefined) => {
        const mine = {
          settle: share.settle.map((i) => settles[i]!),
          heartbeat: share.heartbeat.map((i) => renewals[i]!),
          charge: share.charge.map((i) => charges[i]!)
        }
        const claimArgs = share.claim && claim !== undefined ? claimNextArgs(claim) : undefined
        const args = [
          nowArg(now),
          retention,
          String(mine.settle.length),
          String(mine.heartbeat.length),
          String(mine.charge.length),
          claimArgs === undefined ? "-" : claimArgs.script === "claimNext" ? "plain" : "fair",
          ...settleArgs(mine.settle),
          ...heartbeatArgs(mine.heartbeat),
          ...chargeArgs(mine.charge),
          ...(claimArgs?.args ?? [])
        ]
        return Effect.map(script(ctx, "cycle", "cycle", queue, args, true), (raw) => {
          const reply = split(raw)
          let k = 0
          share.settle.forEach((i) => {
            settled[i] = settleResult(queue, settles[i]!, reply.results[k++]!)
          })
          share.heartbeat.forEach((i) => {
            renewed[i] = heartbeatResult(renewals[i]!, reply.results[k++]!)
          })
          share.charge.forEach((i) => {
            charged[i] = chargeResult(charges[i]!, reply.results[k++]!)
          })
          if (claimArgs !== undefined) claimed = claimNextResults(queue, reply.results.slice(k))
          return reply.now
        })
      }
      const entries = [...shares]
      let now = options.now
      if (entries.length === 0) now ??= yield* serverNow(ctx, "cycle")
      else {
        const [first, ...rest] = entries
        if (now === undefined) now = yield* runShare(first![0], first![1], undefined)
        else rest.unshift(first!)
        const at = now
        yield* Effect.forEach(rest, ([queue, share]) => runShare(queue, share, at), {
          concurrency: "unbounded",
          discard: true
        })
      }
      return { now: now!, settle: settled, heartbeat: renewed, charge: charged, claimNext: claimed }
    })
  }

  const cancel: StoreService["cancel"] = (options) =>
    byQueue<CancelItem, CancelResult>(
      ctx,
      "cancel",
      options.items,
      options.now,
      (item) => ({ _tag: "NotFound", jobId: item.jobId }),
      (queue, items, now) =>
        Effect.map(
          script(
            ctx,
            "cancel",
            "cancel",
            queue,
            [nowArg(now), retention, ...items.flatMap((i) => [i.jobId, optString(i.tenant)])],
            true
          ),
          (raw) => {
            const reply = split(raw)
            return {
              now: reply.now,
              results: reply.results.map((r, k): CancelResult => {
                switch (r[0]) {
                  case "Cancelled":
                    return { _tag: "Cancelled", job: job(queue, r[1]!) }
                  case "AlreadyTerminal":
                    return { _tag: "AlreadyTerminal", job: job(queue, r[1]!) }
                  default:
                    return { _tag: "NotFound", jobId: items[k]!.jobId }
                }
              })
            }
          }
        )
    )

  const replay: StoreService["replay"] = (options) => {
    const filter = options.filter ?? {}
    return byQueue<{ readonly jobId: JobId }, ReplayItemResult>(
      ctx,
      "replay",
      options.items,
      options.now,
      (item) => ({ _tag: "Skipped", jobId: item.jobId, state: null }),
      (queue, items, now) =>
        Effect.map(
          script(
            ctx,
            "replay",
            "replay",
            queue,
            [
              nowArg(now),
              queue,
              optString(filter.queue),
              optString(filter.tenant),
              optString(filter.errorClass),
              optString(filter.type),
              optString(filter.inputHash),
              ...items.map((i) => i.jobId)
            ],
            true
          ),
          (raw) => {
            const reply = split(raw)
            return {
              now: reply.now,
              results: reply.results.map(
                (r, k): ReplayItemResult =>
                  r[0] === "Replayed"
                    ? { _tag: "Replayed", job: job(queue, r[1]!) }
                    : { _tag: "Skipped", jobId: items[k]!.jobId, state: (r[1] ?? null) as JobState | null }
              )
            }
          }
        )
    )
  }

  const sweepQueue = (queue: string, options: Parameters<StoreService["sweep"]>[0], limit: number, now: string) =>
    Effect.map(
      script(
        ctx,
        "sweep",
        "sweep",
        queue,
        [now, retention, String(options.republishAfterMs ?? Protocol.defaults.republishAfterMs), String(limit)],
        true
      ),
      (raw): SweepResult => {
        const [at, requeued, expiredFailed, abandoned, stale] = raw as [
          string,
          ReadonlyArray<Raw>,
          ReadonlyArray<string>,
          ReadonlyArray<string>,
          ReadonlyArray<Raw>
        ]
        return {
          now: Number(at),
          requeued: requeued.map((r) => job(queue, r)),
          expiredFailed: expiredFailed as ReadonlyArray<JobId>,
          abandoned: abandoned as ReadonlyArray<JobId>,
          stale: stale.map((r) => job(queue, r))
        }
      }
    )

  const sweep: StoreService["sweep"] = (options) =>
    Effect.gen(function* () {
      const limit = options.limit ?? Protocol.defaults.sweepLimit
      if (options.queue !== undefined) return yield* sweepQueue(options.queue, options, limit, nowArg(options.now))
      // Every queue in turn, one limit for the pass; the first queue's store time serves all of them.
      const queues = yield* ctx.routes.queues("sweep")
      let now = options.now
      let left = limit
      const requeued: Array<Job> = []
      const expiredFailed: Array<JobId> = []
      const abandoned: Array<JobId> = []
      const stale: Array<Job> = []
      for (const queue of [...queues].sort()) {
        const result = yield* sweepQueue(queue, options, Math.max(0, left), nowArg(now))
        now ??= result.now
        requeued.push(...result.requeued)
        expiredFailed.push(...result.expiredFailed)
        abandoned.push(...result.abandoned)
        stale.push(...result.stale)
        left -= result.requeued.length + result.expiredFailed.length + result.abandoned.length + result.stale.length
      }
      return { now: now ?? (yield* serverNow(ctx, "sweep")), requeued, expiredFailed, abandoned, stale }
    })

  return {
    submit,
    claim,
    claimNext,
    heartbeat,
    charge,
    settle,
    cancel,
    replay,
    sweep,
    now: serverNow(ctx),
    cycle
  } satisfies StoreService
}
