/**
 * One window of the concurrent property: resolve a batch of commands against the model, send them all at once from
 * the clients, record each command's invocation and reply instants, read what the backend holds afterwards, and
 * search for an order of the commands that explains the replies and the records (`linearize.ts`). The states that
 * explain the window become the start of the next one. When none does, the failure names the window: the minimal
 * history that is not linearizable, since every window before it was explained.
 *
 * @internal
 */

import type * as Batch from "@slowcall/core/Batch"
import type { Attempt, Charge, Job, JobId } from "@slowcall/core/Job"
import * as StoreModel from "../../StoreModel.js"
import { difference, learnJobs, plain, type Real, type World } from "../storeProperty/world.js"
import { type Command, type ConcurrentWorld, nameOf, type Resolved, repliedJobs, resolve } from "./commands.js"
import { linearize, type Model, type Timed } from "./linearize.js"

/** Counters a run keeps across its windows. */
export interface Stats {
  concurrentSteps: number
  commands: number
  /** The `cycle` commands among them. */
  cycles: number
}

/** One command of a window as it happened. */
interface Recorded extends Timed {
  readonly resolved: Resolved
  readonly client: number
  readonly outcome:
    | { readonly _tag: "Reply"; readonly value: unknown }
    | { readonly _tag: "Error"; readonly message: string }
  /** The jobs a `claimNext` or `sweep` may have passed over (see the property's header). */
  readonly skip: StoreModel.SkipOption
}

/** The attempt and ledger rows the backend holds after a window, of the jobs read. */
interface Rows {
  readonly attempts: ReadonlyMap<JobId, ReadonlyArray<Attempt>>
  readonly charges: ReadonlyMap<JobId, ReadonlyArray<Charge>>
}

const describeError = (error: unknown): string => {
  if (error instanceof Error) return `${error.name}: ${error.message}`
  const tagged = error as { readonly _tag?: unknown; readonly message?: unknown } | null
  return typeof tagged?._tag === "string" ? `${tagged._tag}: ${String(tagged.message ?? "")}` : String(error)
}

const sameItems = (a: ReadonlyArray<unknown>, b: ReadonlyArray<unknown>): boolean =>
  a.length === b.length && a.every((x, i) => x === b[i])

/**
 * A key of model states for the search: the rows that differ from `reference` (by identity: the model replaces a
 * record or a row when it writes it), in full, with their place. Equal states derived from `reference` get equal
 * keys; different states always get different keys.
 */
const keyAgainst =
  (reference: StoreModel.StoreModel) =>
  (state: StoreModel.StoreModel): string => {
    const parts: Array<string> = [String(state.rows.length)]
    state.rows.forEach((row, i) => {
      const ref = reference.rows[i]
      if (
        ref !== undefined &&
        row.job === ref.job &&
        row.failedAt === ref.failedAt &&
        row.republishedAt === ref.republishedAt &&
        sameItems(row.attempts, ref.attempts) &&
        sameItems(row.charges, ref.charges)
      ) {
        return
      }
      parts.push(`${i}:${JSON.stringify(row)}`)
    })
    state.batches.forEach((b, i) => {
      if (b.batch !== reference.batches[i]?.batch) parts.push(`batch ${i}:${JSON.stringify(b.batch)}`)
    })
    return parts.join("\n")
  }

const listing = (queue: string) => ({ queue, limit: null, order: "oldest" as const })

/**
 * The jobs whose attempt rows, and those whose ledger rows, some end state changed (the model replaces a row it
 * writes, so identity tells): what must be read from the backend to tell the end states apart and confirm one. Rows
 * no end state changed are compared once more at the end of the sequence, for every job.
 */
const changedRows = (
  before: StoreModel.StoreModel,
  ends: ReadonlyArray<StoreModel.StoreModel>
): { readonly attempts: ReadonlyArray<JobId>; readonly charges: ReadonlyArray<JobId> } => {
  const attempts = new Set<JobId>()
  const charges = new Set<JobId>()
  for (const end of ends) {
    end.rows.forEach((row, i) => {
      const ref = before.rows[i]
      if (ref === undefined ? row.attempts.length > 0 : !sameItems(row.attempts, ref.attempts)) attempts.add(row.job.id)
      if (ref === undefined ? row.charges.length > 0 : !sameItems(row.charges, ref.charges)) charges.add(row.job.id)
    })
  }
  return { attempts: [...attempts], charges: [...charges] }
}

const readRows = async (
  real: Real,
  ids: { readonly attempts: ReadonlyArray<JobId>; readonly charges: ReadonlyArray<JobId> }
): Promise<Rows> => {
  const [attempts, charges] = await Promise.all([
    Promise.all(ids.attempts.map((jobId) => real.run(real.query.attempts({ jobId })))),
    Promise.all(ids.charges.map((jobId) => real.run(real.query.charges({ jobId }))))
  ])
  return {
    attempts: new Map(ids.attempts.map((id, i) => [id, attempts[i]!])),
    charges: new Map(ids.charges.map((id, i) => [id, charges[i]!]))
  }
}

/** Whether an end state holds the rows the backend holds: undefined, or the first difference. */
const rowsAgree = (world: ConcurrentWorld, rows: Rows, state: StoreModel.StoreModel): string | undefined => {
  for (const [jobId, held] of rows.attempts) {
    const found = difference(`attempts of ${nameOf(world, jobId)}`, held, state.attempts(jobId))
    if (found !== undefined) return found
  }
  for (const [jobId, held] of rows.charges) {
    const found = difference(`charges of ${nameOf(world, jobId)}`, held, state.charges(jobId))
    if (found !== undefined) return found
  }
  return undefined
}

/** Equality of plain data (`plain`'s view: an undefined field is no field). */
const equal = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  const x = a as Record<string, unknown>
  const y = b as Record<string, unknown>
  for (const key in x) if (x[key] !== undefined && !equal(x[key], y[key])) return false
  for (const key in y) if (y[key] !== undefined && x[key] === undefined) return false
  return true
}

/** Replies that say the command wrote nothing, and would say so in any state where they are the answer. */
const inertTags: ReadonlySet<string> = new Set([
  "Busy",
  "NotDue",
  "NotFound",
  "LeaseLost",
  "AlreadyTerminal",
  "Skipped",
  "JobNotFound",
  "Existing",
  "KeyReused"
])

const inert = (op: Recorded): boolean => {
  if (op.resolved.reads) return true
  if (op.outcome._tag !== "Reply" || op.resolved.picks) return false
  const { results } = op.outcome.value as { readonly results?: ReadonlyArray<{ readonly _tag: string }> }
  return results !== undefined && results.length > 0 && results.every((r) => inertTags.has(r._tag))
}

const storeModel: Omit<Model<StoreModel.StoreModel, Recorded>, "key" | "observe"> = {
  step: (state, op) => {
    const outcome = op.outcome
    if (outcome._tag === "Error") return { refused: () => `the backend failed the command: ${outcome.message}` }
    const next = StoreModel.clone(state)
    const reply = op.resolved.model(next, op.skip)
    return equal(outcome.value, plain(reply))
      ? { state: next }
      : { refused: () => difference("reply", outcome.value, reply) ?? "reply differs" }
  },
  inert
}

/** The jobs a `claimNext` or `sweep` may have passed over: those its overlapping writers named or wrote. */
const skipOf = (ops: ReadonlyArray<Omit<Recorded, "skip">>, i: number): StoreModel.SkipOption => {
  const op = ops[i]!
  if (!op.resolved.picks) return undefined
  const own = new Set(op.outcome._tag === "Reply" ? repliedJobs(op.outcome.value) : [])
  const held = new Set<JobId>()
  ops.forEach((other, j) => {
    const overlaps = !(other.returnedAt < op.invokedAt || op.returnedAt < other.invokedAt)
    if (j === i || !overlaps || other.resolved.reads) return
    for (const id of other.resolved.named) held.add(id)
    if (other.outcome._tag === "Reply") for (const id of repliedJobs(other.outcome.value)) held.add(id)
  })
  for (const id of own) held.delete(id)
  return held.size === 0 ? undefined : held
}

const jobLine = (world: ConcurrentWorld, job: Job): string =>
  `  ${nameOf(world, job.id)}: ${JSON.stringify({
    state: job.state,
    leaseToken: job.leaseToken,
    leaseOwner: job.leaseOwner,
    leaseUntil: job.leaseUntil === null ? null : job.leaseUntil - world.clock,
    runAfter: job.runAfter - world.clock,
    attempts: job.attempts,
    maxAttempts: job.maxAttempts,
    costCents: job.costCents,
    budgetCents: job.budgetCents,
    requestKey: job.requestKey,
    cancelRequested: job.cancelRequestedAt !== null
  })}`

const short = (value: unknown): string => {
  const text = JSON.stringify(plain(value))
  return text === undefined ? "undefined" : text.length > 600 ? `${text.slice(0, 600)}...` : text
}

/** The report of a window that no order explains. */
/**
 * What the backend holds after the batch for the jobs it named: each record, and its ledger (rows and their sum),
 * so a spend that lost an update shows beside the ledger that kept it.
 */
const afterLines = async (
  world: ConcurrentWorld,
  reader: Real,
  ops: ReadonlyArray<Recorded>,
  jobs: ReadonlyArray<Job>
): Promise<ReadonlyArray<string>> => {
  const named = [...new Set(ops.flatMap((op) => op.resolved.named))]
  const held = jobs.filter((job) => named.includes(job.id))
  const ledgers = await Promise.all(held.map((job) => reader.run(reader.query.charges({ jobId: job.id }))))
  return held.map((job, i) => {
    const ledger = ledgers[i]!
    const sum = ledger.reduce((total, charge) => total + charge.amountCents, 0)
    return `${jobLine(world, job)}\n      ledger: ${ledger.length} row(s) summing ${sum}`
  })
}

const report = (
  world: ConcurrentWorld,
  ops: ReadonlyArray<Recorded>,
  verdict: Extract<ReturnType<typeof linearize>, { readonly _tag: "NotLinearizable" }>,
  after: ReadonlyArray<string>
): string => {
  const t0 = Math.min(...ops.map((op) => op.invokedAt))
  const at = (t: number) => (t - t0).toFixed(2)
  const lines = [
    `No order of this batch of ${ops.length} commands (sent at once from ${new Set(ops.map((op) => op.client)).size} client(s), store time ${new Date(world.clock).toISOString()}) explains the backend's replies and records; every batch before it was explained.`,
    "The batch (times in ms from the first invocation; a command that returned before another was invoked must come first):",
    ...ops.map(
      (op, i) =>
        `  #${i} client ${op.client} [${at(op.invokedAt)} -> ${at(op.returnedAt)}] ${op.resolved.label}${op.skip === undefined ? "" : ` (may pass over ${[...op.skip].map((id) => nameOf(world, id)).join(", ")})`}\n      -> ${op.outcome._tag === "Reply" ? short(op.outcome.value) : `failed: ${op.outcome.message}`}`
    ),
    "The jobs before the batch (times relative to the batch's store time):",
    ...world.model.rows.map((row) => jobLine(world, row.job)),
    "What the backend holds after the batch, for the jobs the batch named:",
    ...after,
    verdict.exhausted
      ? `The search stopped after ${verdict.nodes} states without an answer (a larger batch than the checker can settle).`
      : verdict.observed !== undefined
        ? `Every reply fits some order, but no order ends in what the backend holds: ${verdict.observed}`
        : `The longest order found: ${verdict.deepest.length === 0 ? "(none)" : verdict.deepest.map((i) => `#${i}`).join(", ")}; after it, every command that could come next was refused:\n${verdict.refusals.map((r) => `  #${r.index}: ${r.reason.replace(/\n/g, "\n      ")}`).join("\n")}`
  ]
  return lines.join("\n")
}

/**
 * Runs one window: the commands at once (one alone is a sequential step), then the check. Throws the report when no
 * order explains it; otherwise moves the world to the states that do.
 *
 * @internal
 */
export const window = async (
  world: ConcurrentWorld,
  reader: Real,
  clients: ReadonlyArray<Real>,
  commands: ReadonlyArray<Command>,
  stats: Stats
): Promise<void> => {
  const resolved: Array<Resolved> = []
  for (const command of commands) resolved.push(await resolve(world, command))
  const sent = resolved.map((r, i) => {
    const client = i % clients.length
    const invokedAt = performance.now()
    return r.real(clients[client]!).then(
      (value) => ({
        resolved: r,
        client,
        invokedAt,
        returnedAt: performance.now(),
        outcome: { _tag: "Reply", value: plain(value) }
      }),
      (error: unknown) => ({
        resolved: r,
        client,
        invokedAt,
        returnedAt: performance.now(),
        outcome: { _tag: "Error", message: describeError(error) }
      })
    ) as Promise<Omit<Recorded, "skip">>
  })
  const done = await Promise.all(sent)
  const ops: ReadonlyArray<Recorded> = done.map((op, i) => ({ ...op, skip: skipOf(done, i) }))
  stats.commands += ops.length
  stats.cycles += ops.filter((op) => op.resolved.command.kind === "Cycle").length
  if (ops.length > 1) stats.concurrentSteps += 1
  // The queue's records tell most orders apart; the attempt and ledger rows that an end state changed are read
  // next, for the end states the records left.
  const listed = await reader.run(reader.query.list(listing(world.queue)))
  const jobs = plain(listed)
  // The batches the sequence opened before this window, and any this window opened, as the backend holds them.
  const batchStore = reader.batches
  const opened = [
    ...world.batches,
    ...ops.flatMap((op) => {
      if (op.resolved.command.kind !== "BatchOpen" || op.outcome._tag !== "Reply") return []
      const reply = op.outcome.value as Batch.BatchReply<Batch.OpenResult>
      return reply.result._tag === "Created" ? [reply.result.batch.id] : []
    })
  ]
  const batches =
    batchStore === undefined
      ? []
      : plain(await Promise.all(opened.map((batchId) => reader.run(batchStore.get({ batchId })))))
  const found = linearize(
    {
      ...storeModel,
      key: keyAgainst(world.model),
      observe: (state) =>
        difference("jobs of the queue", jobs, state.list(listing(world.queue))) ??
        (batchStore === undefined
          ? undefined
          : difference(
              "batches",
              batches,
              opened.map((batchId) => state.getBatch(batchId))
            ))
    },
    world.frontier,
    ops
  )
  if (found._tag === "NotLinearizable") {
    throw new Error(report(world, ops, found, await afterLines(world, reader, ops, listed)))
  }
  const rows = await readRows(
    reader,
    changedRows(
      world.model,
      found.ends.map((end) => end.state)
    )
  )
  const ends = found.ends.filter((end) => rowsAgree(world, rows, end.state) === undefined)
  if (ends.length === 0) {
    const observed = rowsAgree(world, rows, found.ends[0]!.state)
    throw new Error(
      report(
        world,
        ops,
        { ...found, _tag: "NotLinearizable", deepest: [], refusals: [], observed, exhausted: false },
        await afterLines(world, reader, ops, listed)
      )
    )
  }
  const verdict = { ...found, ends }
  const [first] = verdict.ends
  for (const i of first!.order) {
    const outcome = ops[i]!.outcome
    if (ops[i]!.resolved.command.kind !== "Submit" || outcome._tag !== "Reply") continue
    for (const result of (outcome.value as { readonly results: ReadonlyArray<{ _tag: string; job?: Job }> }).results) {
      if (result._tag === "Created" && result.job !== undefined) world.jobs.push(result.job.id)
    }
  }
  world.frontier = verdict.ends.map((end) => end.state)
  world.model = first!.state
  world.batches.splice(0, world.batches.length, ...opened)
  learnJobs(world as World)
}
