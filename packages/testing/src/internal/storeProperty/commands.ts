/**
 * The commands of the model-based property: one per Store verb (in batch form), the derived `Query.replay`, the
 * Query reads, and two that move store time (by a step, or onto a job's lease end, run-after or deadline, give or
 * take a millisecond). Each command is plain data (what the shrunk counterexample prints); running it resolves that
 * data against the world into concrete items, sends the same items at the same `now` to the backend and to the
 * model, requires equal replies, then equal records.
 *
 * @internal
 */

import type { ErrorClass } from "@slowcall/core/ErrorClass"
import type { AbandonReason, JobId, JobState, Json } from "@slowcall/core/Job"
import { fingerprint, type Outcome } from "@slowcall/core/Protocol"
import * as Query from "@slowcall/core/Query"
import { Effect } from "effect"
import type fc from "fast-check"
import {
  changedSince,
  compareRecords,
  type JobRef,
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

/** A settle outcome as data. */
export type OutcomeSpec =
  | { readonly _tag: "Complete"; readonly result: Json | null }
  | { readonly _tag: "Retry"; readonly delayMs: number; readonly errorClass: ErrorClass }
  | { readonly _tag: "Fail"; readonly errorClass: ErrorClass }
  | { readonly _tag: "Abandon"; readonly reason: AbandonReason; readonly errorClass: ErrorClass | null }
  | { readonly _tag: "Release" }

/** A replay or read filter as data (the queue is always the run's own). */
export interface FilterSpec {
  readonly tenant?: number | undefined
  readonly errorClass?: ErrorClass | undefined
  readonly type?: number | undefined
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
  readonly Cancel: ReadonlyArray<{ readonly job: JobRef; readonly tenant: "own" | "other" | "none" }>
  readonly Replay: { readonly jobs: ReadonlyArray<JobRef>; readonly filter: FilterSpec | null }
  readonly ReplayWhere: {
    readonly filter: FilterSpec
    readonly jobs: ReadonlyArray<JobRef> | null
    readonly limit: number | null
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
}

type Kind = keyof Specs

/** Runs a command's data on both sides and requires equal answers. */
type Exec<K extends Kind> = (world: World, real: Real, spec: Specs[K]) => Promise<void>

const filterOf = (world: World, spec: FilterSpec) => ({
  queue: world.queue,
  tenant: spec.tenant === undefined ? undefined : (tenantOf(world, spec.tenant) ?? undefined),
  errorClass: spec.errorClass,
  type: spec.type === undefined ? undefined : `prop.${spec.type}`
})

const outcomeOf = (spec: OutcomeSpec): Outcome => {
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
  }
}

const tenantOption = (world: World, jobId: JobId, which: "own" | "other" | "none"): string | undefined => {
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
const unknownId = (world: World): Promise<JobId> => Effect.runPromise(world.factory.jobId)

const execs: { readonly [K in Kind]: Exec<K> } = {
  Submit: async (world, real, specs) => {
    const items = []
    for (const spec of specs) {
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
      items.push({
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
      })
    }
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
    const options = {
      queue: world.queue,
      max: spec.max,
      owner: `owner-${spec.owner}`,
      leaseMs: spec.leaseMs,
      types: spec.types === null ? undefined : spec.types.map((n) => ({ type: `prop.${n}`, version: 1 }))
    }
    const reply = await real.run(real.store.claimNext({ ...options, now: world.clock }))
    same("claimNext reply", reply, world.model.claimNext(options, world.clock))
  },
  Heartbeat: async (world, real, specs) => {
    const unknown = await unknownId(world)
    const items = specs.map((spec) => {
      const jobId = resolveJob(world, spec.job, unknown)
      return {
        jobId,
        token: resolveToken(world, jobId, spec.token),
        leaseMs: spec.leaseMs,
        progress: spec.progress ?? undefined
      }
    })
    const reply = await real.run(real.store.heartbeat({ items, now: world.clock }))
    same("heartbeat reply", reply, world.model.heartbeat(items, world.clock))
  },
  Settle: async (world, real, specs) => {
    const unknown = await unknownId(world)
    const items = specs.map((spec) => {
      const jobId = resolveJob(world, spec.job, unknown)
      return { jobId, token: resolveToken(world, jobId, spec.token), outcome: outcomeOf(spec.outcome) }
    })
    same(
      "settle reply",
      await real.run(real.store.settle({ items, now: world.clock })),
      world.model.settle(items, world.clock)
    )
  },
  Charge: async (world, real, specs) => {
    const unknown = await unknownId(world)
    const items = specs.map((spec) => {
      const jobId = resolveJob(world, spec.job, unknown)
      return {
        jobId,
        callId: `call-${spec.call}`,
        token: resolveToken(world, jobId, spec.token),
        amountCents: spec.amountCents,
        settled: spec.settled
      }
    })
    same(
      "charge reply",
      await real.run(real.store.charge({ items, now: world.clock })),
      world.model.charge(items, world.clock)
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
  },
  DeadLetters: async (world, real, spec) => {
    const options = { ...filterOf(world, spec.filter), limit: spec.limit ?? undefined }
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

/** The job references a command's data holds (in its items, or its `job`/`jobs` fields). */
const refsOf = (spec: unknown): ReadonlyArray<JobRef> => {
  const parts: ReadonlyArray<unknown> = Array.isArray(spec) ? spec : [spec]
  return parts.flatMap((part) => {
    const { job, jobs } = part as { readonly job?: JobRef; readonly jobs?: ReadonlyArray<JobRef> | null }
    return [...(job === undefined ? [] : [job]), ...(jobs ?? [])]
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
  "Cancel",
  "Replay",
  "ReplayWhere",
  "Sweep"
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

  /** A command whose job references by state find no such job is left out of the sequence. */
  check(world: World): boolean {
    return refsOf(this.spec).every((ref) => refHolds(world, ref))
  }

  async run(world: World, real: Real): Promise<void> {
    const before = snapshot(world)
    await (execs[this.kind] as Exec<K>)(world, real, this.spec)
    if (!writes.has(this.kind)) return
    await compareRecords(world, real, changedSince(world, before))
  }

  toString(): string {
    return `${this.kind}(${JSON.stringify(plain(this.spec))})`
  }
}
