/**
 * The commands of the concurrent property. Each is plain data (what a failure report prints) that names its job the
 * way the sequential property does (by index or by state) and its token relative to the job's current one. Before a
 * batch is sent, every command of the batch is resolved against the model as it stands before the batch: the same
 * concrete items then go to the backend (all at once) and, during the check, to the model (in every order tried).
 *
 * A command carries one item (or, for `claimNext` and `sweep`, the store's own pick): the unit that must be atomic.
 * A batch of several items is applied "as if one after another" but is not promised to be atomic as a whole, so it
 * is not what concurrent commands send.
 *
 * @internal
 */

import type * as Batch from "@slowcall/core/Batch"
import type { JobId } from "@slowcall/core/Job"
import type { SubmitItem } from "@slowcall/core/Protocol"
import type { ClaimResult, Reply, SubmitOutcome, SweepResult } from "@slowcall/core/Store"
import { Effect } from "effect"
import type * as StoreModel from "../../StoreModel.js"
import {
  type OutcomeSpec,
  outcomeOf,
  type SubmitSpec,
  submitItemOf,
  tenantOption,
  unknownId
} from "../storeProperty/commands.js"
import {
  type JobRef,
  plain,
  type Real,
  resolveJob,
  resolveToken,
  type TokenRef,
  type World
} from "../storeProperty/world.js"

/** One command as data. */
export type Command =
  | { readonly kind: "Submit"; readonly specs: ReadonlyArray<SubmitSpec> }
  | {
      readonly kind: "Claim"
      readonly job: JobRef
      readonly owner: number
      readonly leaseMs: number
      readonly estimateCents: number | null
    }
  | {
      readonly kind: "ClaimNext"
      readonly owner: number
      readonly max: number
      readonly leaseMs: number
      /** A fair claim (`Fairness.pick` with the default weight and half-life) when true. */
      readonly fair?: boolean | undefined
    }
  | {
      readonly kind: "Heartbeat"
      readonly job: JobRef
      readonly token: TokenRef
      readonly leaseMs: number
      readonly progress: number | null
    }
  | { readonly kind: "Settle"; readonly job: JobRef; readonly token: TokenRef; readonly outcome: OutcomeSpec }
  | {
      readonly kind: "Charge"
      readonly job: JobRef
      readonly call: number
      readonly token: TokenRef
      readonly amountCents: number
      readonly settled: boolean
    }
  | { readonly kind: "Cancel"; readonly job: JobRef; readonly tenant: "own" | "other" | "none" }
  | { readonly kind: "Replay"; readonly job: JobRef }
  | { readonly kind: "Sweep"; readonly republishAfterMs: number | null; readonly limit: number | null }
  | { readonly kind: "Get"; readonly job: JobRef; readonly tenant: "own" | "other" | "none" }
  /**
   * `Store.cycle` (for a backend that has it): each part as its verb's command carries it, all resolved against the
   * model before the batch (`claimNext` null: no claim). It must linearize as one step.
   */
  | {
      readonly kind: "Cycle"
      readonly settle: ReadonlyArray<Part<"Settle">>
      readonly heartbeat: ReadonlyArray<Part<"Heartbeat">>
      readonly charge: ReadonlyArray<Part<"Charge">>
      readonly claimNext: Part<"ClaimNext"> | null
    }
  /** A batch of `size` items with both callbacks (the n-th batch of the sequence after it). */
  | { readonly kind: "BatchOpen"; readonly size: number }
  /** `count` items added to the n-th batch at its landed items. */
  | { readonly kind: "BatchAdd"; readonly batch: number; readonly count: number }
  | { readonly kind: "BatchCancel"; readonly batch: number }

/** A command of one kind without its kind: a part of a cycle. */
export type Part<K extends Command["kind"]> = Omit<Extract<Command, { readonly kind: K }>, "kind">

/** How store time moves before a batch: by a step, or onto a job's lease end, run-after or deadline (+-1 ms). */
export type TimeStep =
  | { readonly kind: "Tick"; readonly ms: number }
  | {
      readonly kind: "TickTo"
      readonly job: JobRef
      readonly field: "leaseUntil" | "runAfter" | "deadlineAt"
      readonly offset: number
    }

/**
 * One round of a sequence: a few commands one at a time (which bring jobs into the states the batch aims at), a
 * step of store time, then the batch: commands sent at once from several clients, all at one store time.
 */
export interface Round {
  readonly before: ReadonlyArray<Command>
  readonly time: TimeStep | null
  readonly batch: ReadonlyArray<Command>
}

/** The world of a concurrent run: the sequential world whose model is replaced after every batch. */
export interface ConcurrentWorld extends Omit<World, "model"> {
  /** One of the states that explain every batch so far (they differ only in what the backend never shows). */
  model: StoreModel.StoreModel
  /** Every state that explains every batch so far, `model` first. */
  frontier: ReadonlyArray<StoreModel.StoreModel>
}

/** A command resolved into concrete items: what each side runs, and what it names. */
export interface Resolved {
  readonly command: Command
  /** The command with its jobs and tokens resolved, for reports. */
  readonly label: string
  /** The jobs the items name (the rows a store locks or writes for it). */
  readonly named: ReadonlyArray<JobId>
  /** Whether the command reads only (it holds no row). */
  readonly reads: boolean
  /** Whether the store picks the rows itself and may pass over rows a concurrent writer holds. */
  readonly picks: boolean
  readonly real: (real: Real) => Promise<unknown>
  readonly model: (model: StoreModel.StoreModel, skip: StoreModel.SkipOption) => unknown
}

/** The text of a job id in reports: its place among the sequence's jobs. */
export const nameOf = (world: ConcurrentWorld, jobId: JobId): string => {
  const index = world.jobs.indexOf(jobId)
  return index >= 0 ? `job#${index}` : `unknown job ${jobId.slice(-6)}`
}

const label = (world: ConcurrentWorld, kind: string, fields: Record<string, unknown>): string =>
  `${kind}(${JSON.stringify(
    Object.fromEntries(
      Object.entries(fields).map(([k, v]) => [
        k,
        k === "jobId" && typeof v === "string" ? nameOf(world, v as JobId) : v
      ])
    )
  )})`

/** A sweep's answer with `abandoned` as a set: the contract orders it within each of the two phases that fill it. */
const sweepSet = (result: SweepResult): SweepResult => ({ ...result, abandoned: [...result.abandoned].sort() })

/** The claimNext options a part describes (its queue: the sequence's). */
const claimNextOptionsOf = (world: ConcurrentWorld, part: Part<"ClaimNext">) => ({
  queue: world.queue,
  max: part.max,
  owner: `owner-${part.owner}`,
  leaseMs: part.leaseMs,
  ...(part.fair === true ? { fair: {} } : {})
})

const heartbeatItemOf = (world: ConcurrentWorld, jobId: JobId, part: Part<"Heartbeat">) => ({
  jobId,
  token: resolveToken(world as World, jobId, part.token),
  leaseMs: part.leaseMs,
  progress: part.progress ?? undefined
})

const settleItemOf = (world: ConcurrentWorld, jobId: JobId, part: Part<"Settle">) => ({
  jobId,
  token: resolveToken(world as World, jobId, part.token),
  outcome: outcomeOf(part.outcome)
})

const chargeItemOf = (world: ConcurrentWorld, jobId: JobId, part: Part<"Charge">) => ({
  jobId,
  callId: `call-${part.call}`,
  token: resolveToken(world as World, jobId, part.token),
  amountCents: part.amountCents,
  settled: part.settled
})

/**
 * Resolves a command against the world as it stands before its batch. `unknown` stands for references that find no
 * job.
 */
export const resolve = async (world: ConcurrentWorld, command: Command): Promise<Resolved> => {
  const now = world.clock
  const jobOf = async (ref: JobRef) => resolveJob(world as World, ref, await unknownId(world as World))
  const base = { command, reads: false, picks: false }
  switch (command.kind) {
    case "Submit": {
      const items: Array<SubmitItem> = []
      for (const spec of command.specs) items.push(await submitItemOf(world as World, spec))
      return {
        ...base,
        label: `Submit(${JSON.stringify(items.map((i) => ({ key: i.requestKey, tenant: i.tenant, inputHash: i.inputHash.slice(0, 8), fingerprint: i.fingerprint?.slice(0, 8) ?? null })))})`,
        named: [],
        real: (real) => real.run(real.store.submit({ items, now })),
        model: (model): Reply<SubmitOutcome> => model.submit(items, now)
      }
    }
    case "Claim": {
      const item = {
        jobId: await jobOf(command.job),
        owner: `owner-${command.owner}`,
        leaseMs: command.leaseMs,
        estimateCents: command.estimateCents ?? undefined
      }
      return {
        ...base,
        label: label(world, "Claim", item),
        named: [item.jobId],
        real: (real) => real.run(real.store.claim({ items: [item], now })),
        model: (model): Reply<ClaimResult> => model.claim([item], now)
      }
    }
    case "ClaimNext": {
      const options = claimNextOptionsOf(world, command)
      return {
        ...base,
        picks: true,
        label: label(world, "ClaimNext", {
          max: options.max,
          owner: options.owner,
          leaseMs: options.leaseMs,
          ...(command.fair === true ? { fair: true } : {})
        }),
        named: [],
        real: (real) => real.run(real.store.claimNext({ ...options, now })),
        model: (model, skip) => model.claimNext({ ...options, skip }, now)
      }
    }
    case "Heartbeat": {
      const jobId = await jobOf(command.job)
      const item = heartbeatItemOf(world, jobId, command)
      return {
        ...base,
        label: label(world, "Heartbeat", item),
        named: [jobId],
        real: (real) => real.run(real.store.heartbeat({ items: [item], now })),
        model: (model) => model.heartbeat([item], now)
      }
    }
    case "Settle": {
      const jobId = await jobOf(command.job)
      const item = settleItemOf(world, jobId, command)
      return {
        ...base,
        label: label(world, "Settle", { jobId, token: item.token, outcome: item.outcome }),
        named: [jobId],
        real: (real) => real.run(real.store.settle({ items: [item], now })),
        model: (model) => model.settle([item], now)
      }
    }
    case "Charge": {
      const jobId = await jobOf(command.job)
      const item = chargeItemOf(world, jobId, command)
      return {
        ...base,
        label: label(world, "Charge", item),
        named: [jobId],
        real: (real) => real.run(real.store.charge({ items: [item], now })),
        model: (model) => model.charge([item], now)
      }
    }
    case "Cycle": {
      const settle: Array<ReturnType<typeof settleItemOf>> = []
      for (const part of command.settle) settle.push(settleItemOf(world, await jobOf(part.job), part))
      const heartbeat: Array<ReturnType<typeof heartbeatItemOf>> = []
      for (const part of command.heartbeat) heartbeat.push(heartbeatItemOf(world, await jobOf(part.job), part))
      const charge: Array<ReturnType<typeof chargeItemOf>> = []
      for (const part of command.charge) charge.push(chargeItemOf(world, await jobOf(part.job), part))
      const claimNext = command.claimNext === null ? undefined : claimNextOptionsOf(world, command.claimNext)
      const options = { settle, heartbeat, charge, claimNext }
      return {
        ...base,
        // Only the claim part picks its rows; the other parts name theirs.
        picks: claimNext !== undefined,
        label: `Cycle(${JSON.stringify({
          settle: settle.map((item) => ({ job: nameOf(world, item.jobId), token: item.token, outcome: item.outcome })),
          heartbeat: heartbeat.map((item) => ({ job: nameOf(world, item.jobId), token: item.token })),
          charge: charge.map((item) => ({ job: nameOf(world, item.jobId), callId: item.callId, token: item.token })),
          claimNext:
            claimNext === undefined
              ? null
              : { max: claimNext.max, owner: claimNext.owner, ...(claimNext.fair === undefined ? {} : { fair: true }) }
        })}`,
        named: [...new Set([...settle, ...heartbeat, ...charge].map((item) => item.jobId))],
        real: (real) => {
          const cycle = real.store.cycle
          if (cycle === undefined) throw new Error("a cycle command ran on a backend without cycle")
          return real.run(cycle({ ...options, now }))
        },
        model: (model, skip) =>
          model.cycle({ ...options, claimNext: claimNext === undefined ? undefined : { ...claimNext, skip } }, now)
      }
    }
    case "Cancel": {
      const jobId = await jobOf(command.job)
      const item = { jobId, tenant: tenantOption(world as World, jobId, command.tenant) }
      return {
        ...base,
        label: label(world, "Cancel", { jobId, tenant: item.tenant === undefined ? "any" : "given" }),
        named: [jobId],
        real: (real) => real.run(real.store.cancel({ items: [item], now })),
        model: (model) => model.cancel([item], now)
      }
    }
    case "Replay": {
      const jobId = await jobOf(command.job)
      return {
        ...base,
        label: label(world, "Replay", { jobId }),
        named: [jobId],
        real: (real) => real.run(real.store.replay({ items: [{ jobId }], now })),
        model: (model) => model.replay([{ jobId }], undefined, now)
      }
    }
    case "Sweep": {
      const options = {
        queue: world.queue,
        republishAfterMs: command.republishAfterMs ?? undefined,
        limit: command.limit ?? undefined
      }
      return {
        ...base,
        picks: true,
        label: label(world, "Sweep", { republishAfterMs: options.republishAfterMs, limit: options.limit }),
        named: [],
        real: (real) => real.run(real.store.sweep({ ...options, now })).then(sweepSet),
        model: (model, skip) => sweepSet(model.sweep({ ...options, skip }, now))
      }
    }
    case "BatchOpen": {
      const callback = async (kind: Batch.CallbackKind): Promise<Batch.Callback> => ({
        id: await unknownId(world as World),
        queue: world.queue,
        type: `prop.${kind}`,
        version: 1,
        inputHash: world.inputs[0]!.hash,
        input: world.inputs[0]!.input,
        maxAttempts: 1
      })
      const spec: Batch.BatchSpec = {
        id: (await unknownId(world as World)) as string as Batch.BatchId,
        queue: world.queue,
        tenant: world.tenants[0],
        fingerprint: `b1:${command.size}`,
        size: command.size,
        onComplete: await callback("onComplete"),
        onSuccess: await callback("onSuccess")
      }
      return {
        ...base,
        label: `BatchOpen(${JSON.stringify({ size: command.size })})`,
        named: [],
        real: (real) => real.run(batchStoreOf(real).open({ spec, now })),
        model: (model) => model.openBatch(spec, now)
      }
    }
    case "BatchAdd": {
      const batchId = world.batches[command.batch % world.batches.length]!
      const offset = world.model.getBatch(batchId)?.added ?? 0
      const items: Array<SubmitItem> = []
      for (let i = 0; i < command.count; i++) {
        items.push(
          await submitItemOf(world as World, {
            tenant: 0,
            key: null,
            input: 0,
            type: 0,
            delayMs: 0,
            deadlineMs: null,
            budgetCents: null,
            maxAttempts: 1,
            priority: 0,
            fingerprinted: true
          })
        )
      }
      return {
        ...base,
        label: `BatchAdd(${JSON.stringify({ batch: command.batch, offset, count: command.count })})`,
        named: [],
        real: (real) => real.run(batchStoreOf(real).add({ batchId, offset, items, now })),
        model: (model) => model.addBatch({ batchId, offset, items }, now)
      }
    }
    case "BatchCancel": {
      const batchId = world.batches[command.batch % world.batches.length]!
      const items = world.model.batches.find((b) => b.batch.id === batchId)?.items ?? []
      return {
        ...base,
        label: `BatchCancel(${JSON.stringify({ batch: command.batch })})`,
        named: items,
        real: (real) => real.run(batchStoreOf(real).cancel({ batchId, now })),
        model: (model) => model.cancelBatch({ batchId }, now)
      }
    }
    case "Get": {
      const jobId = await jobOf(command.job)
      const tenant = tenantOption(world as World, jobId, command.tenant)
      return {
        ...base,
        reads: true,
        label: label(world, "Get", { jobId, tenant: tenant === undefined ? "any" : "given" }),
        named: [jobId],
        real: (real) =>
          real.run(
            real.query
              .get({ jobId, tenant })
              .pipe(
                Effect.catchTag("JobNotFound", (error) => Effect.succeed({ _tag: "JobNotFound", jobId: error.jobId }))
              )
          ),
        model: (model) => model.get(jobId, tenant) ?? { _tag: "JobNotFound", jobId }
      }
    }
  }
}

/** The backend's batch verbs; a batch command runs only where the run covers batches. */
const batchStoreOf = (real: Real): Batch.BatchStore["Type"] => {
  if (real.batches === undefined) throw new Error("a batch command ran on a backend without batch verbs")
  return real.batches
}

/** The jobs a reply names: what the store wrote or returned for the command. */
export const repliedJobs = (reply: unknown): ReadonlyArray<JobId> => {
  const ids = new Set<JobId>()
  const visit = (value: unknown, depth: number): void => {
    if (depth > 4 || value === null || typeof value !== "object") return
    if (Array.isArray(value)) {
      for (const part of value) visit(part, depth + 1)
      return
    }
    const record = value as Record<string, unknown>
    if (typeof record.jobId === "string") ids.add(record.jobId as JobId)
    if (typeof record.id === "string" && typeof record.state === "string") ids.add(record.id as JobId)
    for (const [key, part] of Object.entries(record)) {
      if (key === "input" || key === "result") continue
      if ((key === "expiredFailed" || key === "abandoned") && Array.isArray(part)) {
        for (const id of part) if (typeof id === "string") ids.add(id as JobId)
      } else visit(part, depth + 1)
    }
  }
  visit(plain(reply), 0)
  return [...ids]
}

/** The store time after a time step (onto a job's time that is unset or past: time stays where it is). */
export const timeOf = async (world: ConcurrentWorld, step: TimeStep): Promise<number> => {
  if (step.kind === "Tick") return world.clock + step.ms
  const jobId = resolveJob(world as World, step.job, await unknownId(world as World))
  const at = world.model.row(jobId)?.job[step.field]
  return at === null || at === undefined ? world.clock : Math.max(world.clock, at + step.offset)
}
