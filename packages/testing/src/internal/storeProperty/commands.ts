/**
 * The commands of the model-based property: one per Store verb (in batch form; `cycle` where the backend has it), the derived `Query.replay`, the
 * Query reads, the batch verbs and the retention purge where the backend has them, and two that move store time (by a step, or onto a job's lease end, run-after or deadline, give or
 * take a millisecond). Each command is plain data (what the shrunk counterexample prints); running it resolves that
 * data against the world into concrete items, sends the same items at the same `now` to the backend and to the
 * model, requires equal replies, then equal records.
 *
 * @internal
 */

import * as Batch from "@slowcall/core/Batch"
import type { ErrorClass } from "@slowcall/core/ErrorClass"
import type { FairOptions } from "@slowcall/core/Fairness"
import { type AbandonReason, isTerminal, type JobId, type JobState, type Json } from "@slowcall/core/Job"
import { fingerprint, type Outcome, type SubmitItem } from "@slowcall/core/Protocol"
import * as Query from "@slowcall/core/Query"
import { Effect } from "effect"
import type fc from "fast-check"
import type * as StoreModel from "../../StoreModel.js"
import {
  changedSince,
  compareRecords,
  type JobRef,
  learnJobs,
  plain,
  type Real,
  refHolds,
  resolveJob,
  resolveToken,
  same,
  snapshot,
  type TokenRef,
  tenantOf,
  type World
} from "./world.js"

/** One submit item as data: indexes into the run's tenants, keys, inputs and types, and times relative to now. */
export interface SubmitSpec {
  readonly tenant: number
  readonly key: string | null
  readonly input: number
  readonly type: number
  readonly delayMs: number
  readonly deadlineMs: number | null
  readonly budgetCents: number | null
  readonly maxAttempts: number
  readonly priority: number
  /** Whether the item carries its request fingerprint (without one, the input hash alone decides). */
  readonly fingerprinted: boolean
}

/** A `fair` option as data. */
export interface FairSpec {
  readonly weights: readonly [number | null, number | null]
  readonly defaultWeight: number | null
  readonly halfLifeMs: number | null
}

/** The `fair` option a spec stands for, over the run's tenant names. */
const fairOf = (world: World, spec: FairSpec): FairOptions => {
  const weights: Record<string, number> = {}
  spec.weights.forEach((weight, index) => {
    const tenant = tenantOf(world, index)
    if (weight !== null && tenant !== null) weights[tenant] = weight
  })
  return {
    weights,
    ...(spec.defaultWeight === null ? {} : { defaultWeight: spec.defaultWeight }),
    ...(spec.halfLifeMs === null ? {} : { halfLifeMs: spec.halfLifeMs })
  }
}

/** A settle outcome as data. */
export type OutcomeSpec =
  | { readonly _tag: "Complete"; readonly result: Json | null }
  | { readonly _tag: "Retry"; readonly delayMs: number; readonly errorClass: ErrorClass }
  | { readonly _tag: "Fail"; readonly errorClass: ErrorClass }
  | { readonly _tag: "Abandon"; readonly reason: AbandonReason; readonly errorClass: ErrorClass | null }
  | { readonly _tag: "Release" }
  | { readonly _tag: "Throttle"; readonly delayMs: number }

/** A replay or read filter as data (the queue is always the run's own; `input` names one of the run's inputs). */
export interface FilterSpec {
  readonly tenant?: number | undefined
  readonly errorClass?: ErrorClass | undefined
  readonly type?: number | undefined
  readonly input?: number | undefined
}

/**
 * A purge as data: the cutoff is a job's `createdAt` (one of the sequence's jobs, or the first failed one) or the
 * store time now, give or take a millisecond; `states` as sent (null: the default), possibly empty, repeated or in
 * any order.
 */
export interface PurgeSpec {
  readonly cutoff: JobRef | "now"
  readonly offset: number
  readonly limit: number | null
  readonly states: ReadonlyArray<StoreModel.PurgeState> | null
}

/** What each command carries. */
export interface Specs {
  readonly Submit: ReadonlyArray<SubmitSpec>
  readonly Claim: ReadonlyArray<{
    readonly job: JobRef
    readonly owner: number
    readonly leaseMs: number
    readonly estimateCents: number | null
  }>
  readonly ClaimNext: {
    readonly owner: number
    readonly max: number
    readonly leaseMs: number
    /** The `types` filter, as submit type numbers (all version 1); null: none. */
    readonly types: ReadonlyArray<number> | null
    /** The `fair` option: weights of tenants 0 and 1 (null: the default), default weight, half-life; null: none. */
    readonly fair: FairSpec | null
  }
  readonly Heartbeat: ReadonlyArray<{
    readonly job: JobRef
    readonly token: TokenRef
    readonly leaseMs: number
    readonly progress: number | null
  }>
  readonly Settle: ReadonlyArray<{ readonly job: JobRef; readonly token: TokenRef; readonly outcome: OutcomeSpec }>
  readonly Charge: ReadonlyArray<{
    readonly job: JobRef
    readonly call: number
    readonly token: TokenRef
    readonly amountCents: number
    readonly settled: boolean
  }>
  /** `Store.cycle`: each part as its verb's command carries it (`claimNext` null: no claim). */
  readonly Cycle: {
    readonly settle: Specs["Settle"]
    readonly heartbeat: Specs["Heartbeat"]
    readonly charge: Specs["Charge"]
    readonly claimNext: Specs["ClaimNext"] | null
  }
  readonly Cancel: ReadonlyArray<{ readonly job: JobRef; readonly tenant: "own" | "other" | "none" }>
  readonly Replay: { readonly jobs: ReadonlyArray<JobRef>; readonly filter: FilterSpec | null }
  readonly ReplayWhere: {
    readonly filter: FilterSpec
    readonly jobs: ReadonlyArray<JobRef> | null
    readonly limit: number | null
    readonly dryRun: boolean
  }
  readonly Sweep: { readonly republishAfterMs: number | null; readonly limit: number | null }
  readonly Tick: { readonly ms: number }
  readonly TickTo: {
    readonly job: JobRef
    readonly field: "leaseUntil" | "runAfter" | "deadlineAt"
    readonly offset: number
  }
  readonly List: {
    readonly filter: FilterSpec
    readonly state: JobState | null
    readonly limit: number | null | "all"
    readonly order: "newest" | "oldest"
    readonly requestKey: string | null
    readonly after: JobRef | null
  }
  readonly DeadLetters: { readonly filter: FilterSpec; readonly limit: number | null }
  readonly Stats: {
    readonly tenant: number | null
    readonly sinceMs: number
    readonly spendMs: number | null
    readonly upTo: number
  }
  readonly Get: { readonly job: JobRef; readonly tenant: "own" | "other" | "none" }
  readonly Purge: PurgeSpec
  readonly BatchOpen: {
    readonly key: string | null
    readonly tenant: number
    readonly size: number
    /** Which of two item lists the fingerprint covers: the same key with the other variant is a reused key. */
    readonly variant: number
    readonly budgetCents: number | null
    readonly deadlineMs: number | null
    readonly onComplete: boolean
    readonly onSuccess: boolean
  }
  readonly BatchAdd: {
    readonly batch: BatchRef
    /** Where the chunk starts: at the landed items, one back (a repeated chunk), one past them (a gap). */
    readonly offset: "next" | "back" | "gap"
    readonly items: ReadonlyArray<SubmitSpec>
  }
  /** Charges of a batch's items (by position), under each item's current token: mostly reservations. */
  readonly BatchCharge: {
    readonly batch: BatchRef
    readonly items: ReadonlyArray<{
      readonly item: number
      readonly call: number
      readonly amountCents: number
      readonly settled: boolean
    }>
  }
  readonly BatchCancel: { readonly batch: BatchRef; readonly tenant: "own" | "other" | "none" }
  readonly BatchReplay: { readonly batch: BatchRef; readonly tenant: "own" | "other" | "none" }
  readonly BatchGet: { readonly batch: BatchRef; readonly tenant: "own" | "other" | "none" }
  readonly BatchJobs: {
    readonly batch: BatchRef
    readonly tenant: "own" | "other" | "none"
    readonly state: JobState | null
    /** The item (by position) the page starts after. */
    readonly after: number | null
    readonly limit: number | null
  }
}

/** How a command names a batch: the n-th the sequence opened (modulo their number), or an id that names none. */
export type BatchRef = number | "unknown"

type Kind = keyof Specs

/** Runs a command's data on both sides and requires equal answers. */
type Exec<K extends Kind> = (world: World, real: Real, spec: Specs[K]) => Promise<void>

const filterOf = (world: World, spec: FilterSpec) => ({
  queue: world.queue,
  tenant: spec.tenant === undefined ? undefined : (tenantOf(world, spec.tenant) ?? undefined),
  errorClass: spec.errorClass,
  type: spec.type === undefined ? undefined : `prop.${spec.type}`,
  inputHash: spec.input === undefined ? undefined : world.inputs[spec.input % world.inputs.length]!.hash
})

/** The settle outcome a spec describes. @internal */
export const outcomeOf = (spec: OutcomeSpec): Outcome => {
  switch (spec._tag) {
    case "Complete":
      return { _tag: "Complete", result: spec.result }
    case "Retry":
      return { _tag: "Retry", delayMs: spec.delayMs, errorClass: spec.errorClass, error: `${spec.errorClass} evidence` }
    case "Fail":
      return { _tag: "Fail", errorClass: spec.errorClass, error: `${spec.errorClass} evidence` }
    case "Abandon":
      return spec.errorClass === null
        ? { _tag: "Abandon", reason: spec.reason }
        : { _tag: "Abandon", reason: spec.reason, errorClass: spec.errorClass, error: `${spec.reason} evidence` }
    case "Release":
      return { _tag: "Release" }
    case "Throttle":
      return { _tag: "Throttle", delayMs: spec.delayMs, error: `throttled: waiting for prop:model:key (requests)` }
  }
}

/** The tenant option of a cancel or read: the job's own tenant, the other one, or none. @internal */
export const tenantOption = (world: World, jobId: JobId, which: "own" | "other" | "none"): string | undefined => {
  if (which === "none") return undefined
  const row = world.model.row(jobId)
  const own = row === undefined ? world.tenants[0] : row.job.tenant
  return which === "own" ? (own ?? undefined) : own === world.tenants[1] ? world.tenants[0] : world.tenants[1]
}

/** A comparator over the JSON text of a key. */
const byKey =
  <A>(key: (a: A) => ReadonlyArray<unknown>) =>
  (a: A, b: A): number => {
    const ka = JSON.stringify(key(a))
    const kb = JSON.stringify(key(b))
    return ka < kb ? -1 : ka > kb ? 1 : 0
  }

/** A fresh id naming no job, for the references that resolve to none. */
export const unknownId = (world: World): Promise<JobId> => Effect.runPromise(world.factory.jobId)

/**
 * The submit item a spec describes, at the world's store time, under a fresh job id.
 *
 * @internal
 */
export const submitItemOf = async (world: World, spec: SubmitSpec): Promise<SubmitItem> => {
  const input = world.inputs[spec.input % world.inputs.length]!
  const deadlineAt = spec.deadlineMs === null ? null : world.clock + spec.deadlineMs
  const fields = {
    type: `prop.${spec.type}`,
    version: 1,
    inputHash: input.hash,
    maxAttempts: spec.maxAttempts,
    priority: spec.priority,
    budgetCents: spec.budgetCents,
    deadlineAt,
    schedule: { delayMs: spec.delayMs }
  }
  return {
    id: await unknownId(world),
    queue: world.queue,
    tenant: tenantOf(world, spec.tenant),
    type: `prop.${spec.type}`,
    version: 1,
    requestKey: spec.key,
    inputHash: input.hash,
    input: input.input,
    priority: spec.priority,
    delayMs: spec.delayMs,
    deadlineAt,
    budgetCents: spec.budgetCents,
    maxAttempts: spec.maxAttempts,
    fingerprint: spec.fingerprinted ? fingerprint(fields) : null
  }
}

/** A batch reference resolved against the world; a fresh id when it names none. */
const resolveBatch = async (world: World, ref: BatchRef): Promise<Batch.BatchId> =>
  ref === "unknown" || world.batches.length === 0
    ? ((await unknownId(world)) as string as Batch.BatchId)
    : world.batches[ref % world.batches.length]!

/** The tenant option of a batch verb: the batch's own tenant, the other one, or none. */
const batchTenant = (world: World, batchId: Batch.BatchId, which: "own" | "other" | "none"): string | undefined => {
  if (which === "none") return undefined
  const batch = world.model.getBatch(batchId)
  const own = batch === undefined ? world.tenants[0] : batch.tenant
  return which === "own" ? (own ?? undefined) : own === world.tenants[1] ? world.tenants[0] : world.tenants[1]
}

/** The backend's purge: the command runs only where the run covers it. */
const purgeOf = (real: Real): NonNullable<Real["purge"]> => {
  if (real.purge === undefined) throw new Error("a purge command ran on a backend without a purge")
  return real.purge
}

/** The backend's batch verbs: a command that needs them runs only where the run covers batches. */
const batchStoreOf = (real: Real): Batch.BatchStore["Type"] => {
  if (real.batches === undefined) throw new Error("a batch command ran on a backend without batch verbs")
  return real.batches
}

/** A callback job spec under a fresh id. */
const callbackOf = async (world: World, kind: Batch.CallbackKind): Promise<Batch.Callback> => ({
  id: await unknownId(world),
  queue: world.queue,
  type: `prop.${kind}`,
  version: 1,
  inputHash: world.inputs[0]!.hash,
  input: world.inputs[0]!.input,
  maxAttempts: 1
})

/** The options of a `claimNext` a spec describes, on the run's queue. */
const claimNextOf = (world: World, spec: Specs["ClaimNext"]) => ({
  queue: world.queue,
  max: spec.max,
  owner: `owner-${spec.owner}`,
  leaseMs: spec.leaseMs,
  types: spec.types === null ? undefined : spec.types.map((n) => ({ type: `prop.${n}`, version: 1 })),
  fair: spec.fair === null ? undefined : fairOf(world, spec.fair)
})

/** The heartbeat items specs describe; `unknown` stands for a reference to no job. */
const heartbeatItemsOf = (world: World, specs: Specs["Heartbeat"], unknown: JobId) =>
  specs.map((spec) => {
    const jobId = resolveJob(world, spec.job, unknown)
    return {
      jobId,
      token: resolveToken(world, jobId, spec.token),
      leaseMs: spec.leaseMs,
      progress: spec.progress ?? undefined
    }
  })

/** The settle items specs describe; `unknown` stands for a reference to no job. */
const settleItemsOf = (world: World, specs: Specs["Settle"], unknown: JobId) =>
  specs.map((spec) => {
    const jobId = resolveJob(world, spec.job, unknown)
    return { jobId, token: resolveToken(world, jobId, spec.token), outcome: outcomeOf(spec.outcome) }
  })

/** The charge items specs describe; `unknown` stands for a reference to no job. */
const chargeItemsOf = (world: World, specs: Specs["Charge"], unknown: JobId) =>
  specs.map((spec) => {
    const jobId = resolveJob(world, spec.job, unknown)
    return {
      jobId,
      callId: `call-${spec.call}`,
      token: resolveToken(world, jobId, spec.token),
      amountCents: spec.amountCents,
      settled: spec.settled
    }
  })

const execs: { readonly [K in Kind]: Exec<K> } = {
  Submit: async (world, real, specs) => {
    const items = []
    for (const spec of specs) items.push(await submitItemOf(world, spec))
    const reply = await real.run(real.store.submit({ items, now: world.clock }))
    const expected = world.model.submit(items, world.clock)
    same("submit reply", reply, expected)
    for (const result of expected.results) if (result._tag === "Created") world.jobs.push(result.job.id)
  },
  Claim: async (world, real, specs) => {
    const unknown = await unknownId(world)
    const items = specs.map((spec) => ({
      jobId: resolveJob(world, spec.job, unknown),
      owner: `owner-${spec.owner}`,
      leaseMs: spec.leaseMs,
      estimateCents: spec.estimateCents ?? undefined
    }))
    same(
      "claim reply",
      await real.run(real.store.claim({ items, now: world.clock })),
      world.model.claim(items, world.clock)
    )
  },
  ClaimNext: async (world, real, spec) => {
    const options = claimNextOf(world, spec)
    const reply = await real.run(real.store.claimNext({ ...options, now: world.clock }))
    same("claimNext reply", reply, world.model.claimNext(options, world.clock))
  },
  Heartbeat: async (world, real, specs) => {
    const items = heartbeatItemsOf(world, specs, await unknownId(world))
    const reply = await real.run(real.store.heartbeat({ items, now: world.clock }))
    same("heartbeat reply", reply, world.model.heartbeat(items, world.clock))
  },
  Settle: async (world, real, specs) => {
    const items = settleItemsOf(world, specs, await unknownId(world))
    same(
      "settle reply",
      await real.run(real.store.settle({ items, now: world.clock })),
      world.model.settle(items, world.clock)
    )
  },
  Charge: async (world, real, specs) => {
    const items = chargeItemsOf(world, specs, await unknownId(world))
    same(
      "charge reply",
      await real.run(real.store.charge({ items, now: world.clock })),
      world.model.charge(items, world.clock)
    )
  },
  Cycle: async (world, real, spec) => {
    const cycle = real.store.cycle
    if (cycle === undefined) throw new Error("a cycle command ran on a backend without cycle")
    const unknown = await unknownId(world)
    // Every part resolved against the world as it is before the cycle, as a worker sends what it queued.
    const options = {
      settle: settleItemsOf(world, spec.settle, unknown),
      heartbeat: heartbeatItemsOf(world, spec.heartbeat, unknown),
      charge: chargeItemsOf(world, spec.charge, unknown),
      claimNext: spec.claimNext === null ? undefined : claimNextOf(world, spec.claimNext)
    }
    same(
      "cycle reply",
      await real.run(cycle({ ...options, now: world.clock })),
      world.model.cycle(options, world.clock)
    )
  },
  Cancel: async (world, real, specs) => {
    const unknown = await unknownId(world)
    const items = specs.map((spec) => {
      const jobId = resolveJob(world, spec.job, unknown)
      return { jobId, tenant: tenantOption(world, jobId, spec.tenant) }
    })
    same(
      "cancel reply",
      await real.run(real.store.cancel({ items, now: world.clock })),
      world.model.cancel(items, world.clock)
    )
  },
  Replay: async (world, real, spec) => {
    const unknown = await unknownId(world)
    const items = spec.jobs.map((job) => ({ jobId: resolveJob(world, job, unknown) }))
    const filter = spec.filter === null ? undefined : filterOf(world, spec.filter)
    const reply = await real.run(real.store.replay({ items, filter, now: world.clock }))
    same("replay reply", reply, world.model.replay(items, filter, world.clock))
  },
  ReplayWhere: async (world, real, spec) => {
    const unknown = await unknownId(world)
    const options: Query.ReplayOptions = {
      ...filterOf(world, spec.filter),
      jobIds: spec.jobs === null ? undefined : spec.jobs.map((job) => resolveJob(world, job, unknown)),
      limit: spec.limit ?? undefined,
      dryRun: spec.dryRun,
      now: world.clock
    }
    const result = await real.run(Query.replay(real.store, real.query, options))
    same("Query.replay result", result, world.model.replayWhere(options, world.clock))
  },
  Sweep: async (world, real, spec) => {
    const options = {
      queue: world.queue,
      republishAfterMs: spec.republishAfterMs ?? undefined,
      limit: spec.limit ?? undefined
    }
    const result = await real.run(real.store.sweep({ ...options, now: world.clock }))
    const expected = world.model.sweep(options, world.clock)
    // The contract orders each list by insertion within a phase; `abandoned` mixes two phases, so it is a set.
    const setOf = (r: typeof result) => ({ ...r, abandoned: [...r.abandoned].sort() })
    same("sweep result", setOf(result), setOf(expected))
  },
  Tick: async (world, _real, spec) => {
    world.clock += spec.ms
  },
  TickTo: async (world, _real, spec) => {
    const at = world.model.row(resolveJob(world, spec.job, await unknownId(world)))?.job[spec.field]
    if (at !== null && at !== undefined) world.clock = Math.max(world.clock, at + spec.offset)
  },
  List: async (world, real, spec) => {
    const unknown = await unknownId(world)
    const options = {
      ...filterOf(world, spec.filter),
      state: spec.state ?? undefined,
      limit: spec.limit === "all" ? null : (spec.limit ?? undefined),
      order: spec.order,
      requestKey: spec.requestKey ?? undefined,
      after: spec.after === null ? undefined : resolveJob(world, spec.after, unknown)
    }
    same("list", await real.run(real.query.list(options)), world.model.list(options))
    // The same filters counted, bounded by the page size asked for (or a bound above any run's job count).
    const { after: _after, limit: _limit, order: _order, ...filters } = options
    const count = { ...filters, upTo: typeof spec.limit === "number" ? spec.limit : 1_000 }
    same("count", await real.run(real.query.count(count)), world.model.count(count))
  },
  DeadLetters: async (world, real, spec) => {
    // The dead-letter read has no input filter: its groups are per input.
    const { inputHash: _input, ...filter } = filterOf(world, spec.filter)
    const options = { ...filter, limit: spec.limit ?? undefined }
    const result = await real.run(real.query.deadLetters(options))
    const expected = world.model.deadLetters(options)
    same("dead-letter jobs", result.jobs, expected.jobs)
    // The contract orders groups by count, cost and input hash; equal on all three, any order is allowed.
    const key = (g: Query.DeadLetterGroup) => JSON.stringify([-g.count, -g.costCents, g.inputHash, g.errorClass])
    const sorted = (groups: ReadonlyArray<Query.DeadLetterGroup>) =>
      [...groups].sort((a, b) => (key(a) < key(b) ? -1 : 1))
    same("dead-letter groups", sorted(result.groups), sorted(expected.groups))
    const order = result.groups.map((g) => [g.count, g.costCents, g.inputHash] as const)
    for (let i = 1; i < order.length; i++) {
      const [c0, k0, h0] = order[i - 1]!
      const [c1, k1, h1] = order[i]!
      same("dead-letter group order", c0 > c1 || (c0 === c1 && (k0 > k1 || (k0 === k1 && h0 <= h1))), true)
    }
  },
  Stats: async (world, real, spec) => {
    const options = {
      queue: world.queue,
      tenant: spec.tenant === null ? undefined : (tenantOf(world, spec.tenant) ?? undefined),
      failedSince: world.clock - spec.sinceMs,
      spendSince: spec.spendMs === null ? undefined : world.clock - spec.spendMs
    }
    // Spend and waiting groups come in no particular order: both sides are sorted by their keys.
    const ordered = (stats: Query.StoreStats) => ({
      ...stats,
      spend: [...stats.spend].sort(byKey((g) => [g.queue, g.tenant, g.type, g.state])),
      waiting: [...stats.waiting].sort(byKey((g) => [g.type, g.version]))
    })
    const stats = await real.run(real.query.stats({ ...options, now: world.clock }))
    same("stats", ordered(stats), ordered(world.model.stats(options, world.clock)))
    const count = { queue: world.queue, tenant: options.tenant, upTo: spec.upTo }
    same("countQueued", await real.run(real.query.countQueued(count)), world.model.countQueued(count))
  },
  Purge: async (world, real, spec) => {
    const purge = purgeOf(real)
    const at =
      spec.cutoff === "now"
        ? world.clock
        : (world.model.row(resolveJob(world, spec.cutoff, await unknownId(world)))?.job.createdAt ?? world.clock)
    const options: StoreModel.PurgeOptions = {
      queue: world.queue,
      createdBefore: at + spec.offset,
      states: spec.states ?? undefined,
      limit: spec.limit ?? undefined
    }
    const ids = await real.run(purge(options))
    const expected = world.model.purge(options)
    same("purge ids", ids, expected)
    // Each purged job is gone from the reads by id too (the queue's listing, attempts and ledger follow as a write's).
    const got = await Promise.all(
      expected.map((jobId) =>
        real.run(
          real.query
            .get({ jobId })
            .pipe(
              Effect.catchTag("JobNotFound", (error) => Effect.succeed({ _tag: "JobNotFound", jobId: error.jobId }))
            )
        )
      )
    )
    same(
      "get of the purged jobs",
      got,
      expected.map((jobId) => ({ _tag: "JobNotFound", jobId }))
    )
  },
  BatchOpen: async (world, real, spec) => {
    const batches = batchStoreOf(real)
    const batchSpec: Batch.BatchSpec = {
      id: (await unknownId(world)) as string as Batch.BatchId,
      queue: world.queue,
      // Batch keys are scoped by tenant only: the run's queue name keeps them the run's own on a shared database.
      requestKey: spec.key === null ? null : `${world.queue}:${spec.key}`,
      tenant: tenantOf(world, spec.tenant),
      fingerprint: Batch.fingerprint({
        itemFingerprints: Array.from({ length: spec.size }, (_, i) => `f1:item-${spec.variant}-${i}`),
        budgetCents: spec.budgetCents,
        deadlineAt: null,
        onComplete: spec.onComplete ? "f1:complete" : null,
        onSuccess: spec.onSuccess ? "f1:success" : null,
        parentJobId: null
      }),
      size: spec.size,
      budgetCents: spec.budgetCents,
      deadlineAt: spec.deadlineMs === null ? null : world.clock + spec.deadlineMs,
      onComplete: spec.onComplete ? await callbackOf(world, "onComplete") : null,
      onSuccess: spec.onSuccess ? await callbackOf(world, "onSuccess") : null
    }
    const reply = await real.run(batches.open({ spec: batchSpec, now: world.clock }))
    const expected = world.model.openBatch(batchSpec, world.clock)
    same("batch open reply", reply, expected)
    if (expected.result._tag === "Created") world.batches.push(batchSpec.id)
  },
  BatchAdd: async (world, real, spec) => {
    const batches = batchStoreOf(real)
    const batchId = await resolveBatch(world, spec.batch)
    const added = world.model.getBatch(batchId)?.added ?? 0
    const offset = spec.offset === "next" ? added : spec.offset === "back" ? Math.max(0, added - 1) : added + 1
    const items = []
    for (const item of spec.items) items.push(await submitItemOf(world, item))
    const reply = await real.run(batches.add({ batchId, offset, items, now: world.clock }))
    same("batch add reply", reply, world.model.addBatch({ batchId, offset, items }, world.clock))
  },
  BatchCharge: async (world, real, spec) => {
    const batchId = await resolveBatch(world, spec.batch)
    const landed = world.model.batches.find((b) => b.batch.id === batchId)?.items ?? []
    const unknown = await unknownId(world)
    const items = spec.items.map((charge) => {
      const jobId = landed.length === 0 ? unknown : landed[charge.item % landed.length]!
      return {
        jobId,
        callId: `bcall-${charge.call}`,
        token: resolveToken(world, jobId, "current"),
        amountCents: charge.amountCents,
        settled: charge.settled
      }
    })
    same(
      "batch charge reply",
      await real.run(real.store.charge({ items, now: world.clock })),
      world.model.charge(items, world.clock)
    )
  },
  BatchCancel: async (world, real, spec) => {
    const batches = batchStoreOf(real)
    const batchId = await resolveBatch(world, spec.batch)
    const options = { batchId, tenant: batchTenant(world, batchId, spec.tenant) }
    const reply = await real.run(batches.cancel({ ...options, now: world.clock }))
    same("batch cancel reply", reply, world.model.cancelBatch(options, world.clock))
  },
  BatchReplay: async (world, real, spec) => {
    const batches = batchStoreOf(real)
    const batchId = await resolveBatch(world, spec.batch)
    const options = { batchId, tenant: batchTenant(world, batchId, spec.tenant) }
    const reply = await real.run(batches.replay({ ...options, now: world.clock }))
    same("batch replay reply", reply, world.model.replayBatch(options, world.clock))
  },
  BatchGet: async (world, real, spec) => {
    const batches = batchStoreOf(real)
    const batchId = await resolveBatch(world, spec.batch)
    const tenant = batchTenant(world, batchId, spec.tenant)
    same(
      "batch get",
      (await real.run(batches.get({ batchId, tenant }))) ?? null,
      world.model.getBatch(batchId, tenant) ?? null
    )
  },
  BatchJobs: async (world, real, spec) => {
    const batches = batchStoreOf(real)
    const batchId = await resolveBatch(world, spec.batch)
    const items = world.model.batches.find((b) => b.batch.id === batchId)?.items ?? []
    const options = {
      batchId,
      tenant: batchTenant(world, batchId, spec.tenant),
      state: spec.state ?? undefined,
      after: spec.after === null || items.length === 0 ? undefined : items[spec.after % items.length],
      limit: spec.limit ?? undefined
    }
    same("batch jobs", await real.run(batches.jobs(options)), world.model.batchJobs(options))
  },
  Get: async (world, real, spec) => {
    const unknown = await unknownId(world)
    const jobId = resolveJob(world, spec.job, unknown)
    const tenant = tenantOption(world, jobId, spec.tenant)
    const got = await real.run(
      real.query
        .get({ jobId, tenant })
        .pipe(Effect.catchTag("JobNotFound", (error) => Effect.succeed({ _tag: "JobNotFound", jobId: error.jobId })))
    )
    same("get", got, world.model.get(jobId, tenant) ?? { _tag: "JobNotFound", jobId })
  }
}

/** The job references a command's data holds (in its items, its `job`/`jobs` fields, or a cycle's parts). */
const refsOf = (spec: unknown): ReadonlyArray<JobRef> => {
  const parts: ReadonlyArray<unknown> = Array.isArray(spec) ? spec : [spec]
  return parts.flatMap((part) => {
    const { charge, heartbeat, job, jobs, settle } = part as {
      readonly job?: JobRef
      readonly jobs?: ReadonlyArray<JobRef> | null
      readonly settle?: ReadonlyArray<unknown>
      readonly heartbeat?: ReadonlyArray<unknown>
      readonly charge?: ReadonlyArray<unknown>
    }
    return [
      ...(job === undefined ? [] : [job]),
      ...(jobs ?? []),
      ...refsOf(settle ?? []),
      ...refsOf(heartbeat ?? []),
      ...refsOf(charge ?? [])
    ]
  })
}

/** The commands that write: after each, the records are compared (reads and time steps compare their answers). */
const writes: ReadonlySet<Kind> = new Set<Kind>([
  "Submit",
  "Claim",
  "ClaimNext",
  "Heartbeat",
  "Settle",
  "Charge",
  "Cycle",
  "Cancel",
  "Replay",
  "ReplayWhere",
  "Sweep",
  "Purge",
  "BatchOpen",
  "BatchAdd",
  "BatchCharge",
  "BatchCancel",
  "BatchReplay"
])

/**
 * One command: its kind and data. Running it compares the replies, then (for a write) the queue's job records and
 * the attempt and ledger rows the model says the step wrote. Rows the model left alone are compared once more, for
 * every job, at the end of the run, so a backend's stray write to them is caught there.
 *
 * @internal
 */
export class Step<K extends Kind = Kind> implements fc.AsyncCommand<World, Real> {
  constructor(
    readonly kind: K,
    readonly spec: Specs[K]
  ) {}

  /**
   * A command whose job references by state find no such job is left out of the sequence, and so is a purge while
   * fewer than two jobs have finished (it would have no order to keep).
   */
  check(world: World): boolean {
    if (this.kind === "Purge" && world.model.rows.filter((row) => isTerminal(row.job.state)).length < 2) return false
    return refsOf(this.spec).every((ref) => refHolds(world, ref))
  }

  async run(world: World, real: Real): Promise<void> {
    const before = snapshot(world)
    await (execs[this.kind] as Exec<K>)(world, real, this.spec)
    if (!writes.has(this.kind)) return
    learnJobs(world)
    await compareRecords(world, real, changedSince(world, before))
  }

  toString(): string {
    return `${this.kind}(${JSON.stringify(plain(this.spec))})`
  }
}
