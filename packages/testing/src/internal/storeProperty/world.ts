/**
 * The two sides of one run of the model-based property: the `World` (the reference model, the sequence's store
 * time, its queue and tenants, the jobs it created) and the `Real` backend under test, plus the comparisons the
 * property makes after every step. Both sides always get identical inputs: every value a command needs (a job id,
 * a token, a time) is resolved once, from the world, before either side runs.
 *
 * @internal
 */
import type { BatchId, BatchStore } from "@slowcall/core/Batch"
import type { StoreError } from "@slowcall/core/Errors"
import type { JobId, Json } from "@slowcall/core/Job"
import type { Query } from "@slowcall/core/Query"
import type { Store } from "@slowcall/core/Store"
import type { Effect } from "effect"
import type { JobFactory } from "../../JobFactory.js"
import type * as StoreModel from "../../StoreModel.js"

/** The model side of a run. @internal */
export interface World {
  readonly model: StoreModel.StoreModel
  /** Store time of the sequence: only moves forward, passed as `now` to every write on both sides. */
  clock: number
  readonly queue: string
  /** Tenant names by index; index 2 stands for no tenant. */
  readonly tenants: readonly [string, string]
  /** Jobs the sequence created, in order: what job references resolve against. */
  readonly jobs: Array<JobId>
  /** Batches the sequence opened, in order: what batch references resolve against. */
  readonly batches: Array<BatchId>
  readonly factory: JobFactory
  readonly inputs: ReadonlyArray<{ readonly input: Json; readonly hash: string }>
}

/** A backend's retention purge (`PgStore.purge`, `RedisStore.purge`). @internal */
export type Purge = (options: StoreModel.PurgeOptions) => Effect.Effect<ReadonlyArray<JobId>, StoreError>

/** The backend side of a run. @internal */
export interface Real {
  readonly store: Store["Type"]
  readonly query: Query["Type"]
  /** The backend's batch verbs, when the run covers them. */
  readonly batches?: BatchStore["Type"] | undefined
  /** The backend's retention purge, when the run covers it. */
  readonly purge?: Purge | undefined
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
}

/** A plain-data copy: fields compared, not identity; `undefined` fields and `-0` gone. @internal */
export const plain = (value: unknown): unknown => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)))

/** The path of the first field where two plain values differ, or undefined when they are equal. */
const firstDifference = (a: unknown, b: unknown, path: string): string | undefined => {
  if (a === b) return undefined
  if (
    typeof a !== "object" ||
    typeof b !== "object" ||
    a === null ||
    b === null ||
    Array.isArray(a) !== Array.isArray(b)
  ) {
    return path
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)])
  for (const key of keys) {
    const found = firstDifference(
      (a as Record<string, unknown>)[key],
      (b as Record<string, unknown>)[key],
      `${path}.${key}`
    )
    if (found !== undefined) return found
  }
  return undefined
}

/**
 * Requires the backend's answer to equal the model's, field by field; otherwise fails naming the first field that
 * differs and both answers in full.
 *
 * @internal
 */
export const same = (what: string, real: unknown, model: unknown): void => {
  const found = difference(what, real, model)
  if (found !== undefined) throw new Error(found)
}

/**
 * `same` as a value: undefined when the backend's answer equals the model's, else the message `same` would throw.
 *
 * @internal
 */
export const difference = (what: string, real: unknown, model: unknown): string | undefined => {
  const backend = plain(real)
  const expected = plain(model)
  const at = firstDifference(backend, expected, what)
  return at === undefined
    ? undefined
    : `${at} differs\n  backend: ${JSON.stringify(backend)}\n  model:   ${JSON.stringify(expected)}`
}

/** The tenant a tenant index names (2: none). @internal */
export const tenantOf = (world: World, index: number): string | null =>
  index === 2 ? null : world.tenants[index === 1 ? 1 : 0]

/**
 * How a command names a job: the n-th job the sequence created (modulo their number), the first or second job that
 * is running now, the first queued or failed one, or an id that names no job.
 *
 * @internal
 */
export type JobRef = number | "queued" | "running" | "running2" | "failed" | "unknown"

/** A job reference resolved against the model; `unknown` (a fresh id) when nothing matches. @internal */
export const resolveJob = (world: World, ref: JobRef, unknown: JobId): JobId => {
  if (ref === "unknown" || world.jobs.length === 0) return unknown
  if (typeof ref === "number") return world.jobs[ref % world.jobs.length]!
  const state = ref === "running2" ? "running" : ref
  const matching = world.jobs.filter((jobId) => world.model.row(jobId)?.job.state === state)
  const picked = ref === "running2" ? (matching[1] ?? matching[0]) : matching[0]
  return picked ?? world.jobs[world.jobs.length - 1]!
}

/** Whether a reference by state (`queued`, `running`, `failed`) finds a job in that state now; others always do. */
export const refHolds = (world: World, ref: JobRef): boolean => {
  if (typeof ref === "number" || ref === "unknown") return true
  const state = ref === "running2" ? "running" : ref
  return world.jobs.some((jobId) => world.model.row(jobId)?.job.state === state)
}

/** How a command names a token relative to the job's current one. @internal */
export type TokenRef = "current" | "stale" | "next"

/** A token reference resolved against the model's record of the job (1 for a job that does not exist). @internal */
export const resolveToken = (world: World, jobId: JobId, ref: TokenRef): number => {
  const job = world.model.row(jobId)?.job
  if (job === undefined) return 1
  switch (ref) {
    case "current":
      return job.leaseToken
    case "stale":
      return Math.max(0, job.leaseToken - 1)
    case "next":
      return job.leaseToken + 1
  }
}

/**
 * Adds the jobs the model created since the world last looked (batch items, callback jobs) to `world.jobs`, in the
 * model's insertion order.
 *
 * @internal
 */
export const learnJobs = (world: World): void => {
  const known = new Set(world.jobs)
  for (const row of world.model.rows) if (!known.has(row.job.id)) world.jobs.push(row.job.id)
}

/** What each model row holds right now, by identity: to tell which rows a step wrote. @internal */
export interface Snapshot {
  readonly attempts: Map<JobId, ReadonlyArray<unknown>>
  readonly charges: Map<JobId, ReadonlyArray<unknown>>
}

/** @internal */
export const snapshot = (world: World): Snapshot => ({
  attempts: new Map(world.model.rows.map((row) => [row.job.id, [...row.attempts]])),
  charges: new Map(world.model.rows.map((row) => [row.job.id, [...row.charges]]))
})

const differs = (then: ReadonlyArray<unknown> | undefined, now: ReadonlyArray<unknown>): boolean =>
  then === undefined ? now.length > 0 : then.length !== now.length || then.some((part, i) => part !== now[i])

/**
 * The jobs whose attempt rows, and those whose ledger rows, the model changed since `before`: a job the step removed
 * (purged) changed both. @internal
 */
export const changedSince = (
  world: World,
  before: Snapshot
): { readonly attempts: ReadonlyArray<JobId>; readonly charges: ReadonlyArray<JobId> } => {
  const removed = [...before.attempts.keys()].filter((jobId) => world.model.row(jobId) === undefined)
  return {
    attempts: [
      ...world.model.rows.filter((row) => differs(before.attempts.get(row.job.id), row.attempts)).map((r) => r.job.id),
      ...removed
    ],
    charges: [
      ...world.model.rows.filter((row) => differs(before.charges.get(row.job.id), row.charges)).map((r) => r.job.id),
      ...removed
    ]
  }
}

/**
 * The records comparison: every job of the sequence's queue (one listing, oldest first), the attempt rows of the
 * jobs in `attempts` and the ledger rows of the jobs in `charges` (all read at once).
 *
 * @internal
 */
export const compareRecords = async (
  world: World,
  real: Real,
  rows: { readonly attempts: Iterable<JobId>; readonly charges: Iterable<JobId> }
): Promise<void> => {
  const attemptIds = [...new Set(rows.attempts)]
  const chargeIds = [...new Set(rows.charges)]
  const [jobs, attempts, charges] = await Promise.all([
    real.run(real.query.list({ queue: world.queue, limit: null, order: "oldest" })),
    Promise.all(attemptIds.map((jobId) => real.run(real.query.attempts({ jobId })))),
    Promise.all(chargeIds.map((jobId) => real.run(real.query.charges({ jobId }))))
  ])
  same("jobs of the queue", jobs, world.model.list({ queue: world.queue, limit: null, order: "oldest" }))
  const batchStore = real.batches
  if (batchStore !== undefined) {
    const batches = await Promise.all(world.batches.map((batchId) => real.run(batchStore.get({ batchId }))))
    for (const [i, batchId] of world.batches.entries())
      same(`batch ${batchId}`, batches[i], world.model.getBatch(batchId))
  }
  for (const [i, jobId] of attemptIds.entries()) same(`attempts of ${jobId}`, attempts[i], world.model.attempts(jobId))
  for (const [i, jobId] of chargeIds.entries()) same(`charges of ${jobId}`, charges[i], world.model.charges(jobId))
}
