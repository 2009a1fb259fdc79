/**
 * The protocol Store verbs over one `Queryable`: each batch runs as the statements of `statements.ts` (see
 * `batch.ts` for how a batch becomes statements). The rules are the SQL's; this file only shapes parameters and
 * reads replies. Where a reply must be interpreted (why a claim, a fenced write, a cancel or a replay missed), it
 * asks `Protocol` about the row the statement returned, and runs the item again when that row says the write
 * should have applied (a concurrent writer won the row in between). `cycle` is those verbs over one transaction.
 *
 * @internal
 */
import type { BatchId } from "@slowcall/core/Batch"
import { StoreError } from "@slowcall/core/Errors"
import * as Fairness from "@slowcall/core/Fairness"
import type { Job, JobId } from "@slowcall/core/Job"
import * as Protocol from "@slowcall/core/Protocol"
import type {
  CancelItem,
  CancelResult,
  ChargeItem,
  ChargeResult,
  ClaimItem,
  ClaimResult,
  CycleOptions,
  CycleReply,
  Fenced,
  HeartbeatItem,
  HeartbeatResult,
  ReplayItemResult,
  Reply,
  SettleItem,
  SettleResult,
  Store,
  SubmitOutcome
} from "@slowcall/core/Store"
import { Effect, Runtime } from "effect"
import { type BatchSpec, type ChunkReply, runBatch } from "./batch.js"
import type { Queryable } from "./driver.js"
import { toStoreError } from "./errors.js"
import { isUuid, jsonParam, micros, type Row, toJob, toJobOrUndefined } from "./rows.js"
import type { Statements } from "./statements.js"

type StoreService = Store["Type"]

const lost = (jobId: JobId, token: number, job: Job | undefined): Fenced => ({
  _tag: "LeaseLost",
  jobId,
  token,
  currentToken: job === undefined ? null : job.leaseToken,
  state: job === undefined ? null : job.state
})

/** Reply rows by item ordinal (1-based), and the statement's store time. */
const indexed = (rows: ReadonlyArray<Row>) => {
  const byOrd = new Map<number, Row>()
  for (const row of rows) byOrd.set(Number(row.ord), row)
  return { now: micros(rows[0]?.now_ms), row: (k: number) => byOrd.get(k + 1) }
}

/** The settle statement's columns for one outcome (NULL where the outcome has no such field). */
const outcomeFields = (outcome: Protocol.Outcome) => {
  const none = { result: null, delayMs: null, errorClass: null, evidence: null, reason: null }
  switch (outcome._tag) {
    case "Complete":
      return { ...none, kind: "complete", result: jsonParam(outcome.result) }
    case "Retry":
      return {
        ...none,
        kind: "retry",
        delayMs: outcome.delayMs,
        errorClass: outcome.errorClass,
        evidence: outcome.error
      }
    case "Fail":
      return { ...none, kind: "fail", errorClass: outcome.errorClass, evidence: outcome.error }
    case "Abandon":
      return {
        ...none,
        kind: "abandon",
        errorClass: outcome.errorClass ?? null,
        evidence: outcome.error ?? null,
        reason: outcome.reason
      }
    case "Release":
      return { ...none, kind: "release" }
    case "Throttle":
      return {
        ...none,
        kind: "throttle",
        delayMs: outcome.delayMs,
        errorClass: "rate_limited" as const,
        evidence: outcome.error
      }
  }
}

/** A claim reply row as a `ClaimResult`, or undefined when the row says the claim should have applied. */
const claimResult = (item: ClaimItem, row: Row | undefined, now: number): ClaimResult | undefined => {
  const job = toJobOrUndefined(row)
  if (job === undefined) return { _tag: "NotFound", jobId: item.jobId }
  if (row?.applied === true) {
    return job.state === "running"
      ? { _tag: "Claimed", job, takeover: row.takeover === true }
      : { _tag: "Settled", job }
  }
  const verdict = Protocol.claimVerdict(job, now, item.estimateCents ?? 0)
  switch (verdict._tag) {
    case "Settled":
      return { _tag: "Settled", job }
    case "Busy":
      return { _tag: "Busy", job, until: verdict.until }
    case "NotDue":
      return { _tag: "NotDue", job, until: verdict.until }
    default:
      return undefined
  }
}

/** A fenced reply row: the written job, `LeaseLost`, or undefined when the snapshot still shows the lease held. */
const fencedResult = <A>(
  item: { readonly jobId: JobId; readonly token: number },
  row: Row | undefined,
  written: (job: Job) => A
): A | Fenced | undefined => {
  const job = toJobOrUndefined(row)
  if (job !== undefined && row?.applied === true) return written(job)
  if (job !== undefined && Protocol.holds(job, item.token)) return undefined
  return lost(item.jobId, item.token, job)
}

/** What every verb runs statements with. */
interface Sql {
  readonly st: Statements
  readonly run: (
    operation: string,
    text: string,
    params: ReadonlyArray<unknown>
  ) => Effect.Effect<Array<Row>, StoreError>
  readonly readNow: Effect.Effect<number, StoreError>
  /** Runs `fn` in one transaction (or in the caller's, when the store runs inside one). */
  readonly transaction: <A>(operation: string, fn: (tx: Queryable) => Promise<A>) => Effect.Effect<A, StoreError>
}

/** A statement whose reply rows are read item by item. */
const perItem =
  (sql: Sql) =>
  <I, R>(operation: string, text: string, params: (chunk: ReadonlyArray<I>, now: number | null) => Array<unknown>) =>
  (read: (item: I, row: Row | undefined, now: number) => R | undefined) =>
  (chunk: ReadonlyArray<I>, now: number | null): Effect.Effect<ChunkReply<R>, StoreError> =>
    Effect.map(sql.run(operation, text, params(chunk, now)), (rows) => {
      const reply = indexed(rows)
      return { now: reply.now, results: chunk.map((item, k) => read(item, reply.row(k), reply.now)) }
    })

/** A batch whose items must not name one job twice within a statement. */
const byJob = <I extends { readonly jobId: JobId }, R>(
  sql: Sql,
  spec: Omit<BatchSpec<I, R>, "keys" | "readNow">
): BatchSpec<I, R> => ({ ...spec, keys: (item) => [item.jobId], readNow: sql.readNow })

const requestKeyOf = (item: Protocol.SubmitItem): ReadonlyArray<string> =>
  item.requestKey == null ? [] : [JSON.stringify([item.queue, item.tenant ?? null, item.requestKey])]

const submit =
  (sql: Sql): StoreService["submit"] =>
  (options) =>
    Effect.suspend(() => {
      const ids = new Set<string>()
      for (const item of options.items) {
        if (ids.has(item.id)) {
          return Effect.fail(
            new StoreError({ reason: "Constraint", operation: "submit", detail: `job id ${item.id} given twice` })
          )
        }
        ids.add(item.id)
      }
      // Ids this call inserted: every other id of the batch must not exist yet when its chunk runs.
      const created = new Set<string>()
      const statement = (chunk: ReadonlyArray<Protocol.SubmitItem>, now: number | null) =>
        Effect.flatMap(
          sql.run("submit", sql.st.submit, [
            chunk.map((i) => i.id),
            chunk.map((i) => i.queue),
            chunk.map((i) => i.tenant ?? null),
            chunk.map((i) => i.type),
            chunk.map((i) => i.version),
            chunk.map((i) => i.requestKey ?? null),
            chunk.map((i) => i.inputHash),
            chunk.map((i) => jsonParam(i.input)),
            chunk.map((i) => i.inputRef ?? null),
            chunk.map((i) => i.priority ?? null),
            chunk.map((i) => i.delayMs ?? null),
            chunk.map((i) => i.deadlineAt ?? null),
            chunk.map((i) => i.budgetCents ?? null),
            chunk.map((i) => i.maxAttempts),
            chunk.map((i) => i.traceId ?? null),
            options.items.flatMap((i) => (created.has(i.id) ? [] : [i.id])),
            now,
            chunk.map((i) => i.fingerprint ?? null)
          ]),
          (rows): Effect.Effect<ChunkReply<SubmitOutcome>, StoreError> => {
            const clash = rows[0]?.clash
            if (clash !== null && clash !== undefined) {
              return Effect.fail(
                new StoreError({ reason: "Constraint", operation: "submit", detail: `job id ${clash} already exists` })
              )
            }
            const reply = indexed(rows)
            const results = chunk.map((item, k): SubmitOutcome | undefined => {
              const row = reply.row(k)
              if (row?.kind === "created") {
                created.add(item.id)
                return { _tag: "Created", job: toJob(row) }
              }
              const existing = toJobOrUndefined(row)
              if (existing === undefined || item.requestKey == null) return undefined
              return Protocol.submitVerdict(existing, item) === "Existing"
                ? { _tag: "Existing", job: existing }
                : { _tag: "KeyReused", requestKey: item.requestKey, existingJobId: existing.id }
            })
            return Effect.succeed({ now: reply.now, results })
          }
        )
      return runBatch(
        { operation: "submit", keys: requestKeyOf, local: () => undefined, statement, readNow: sql.readNow },
        options.items,
        options.now
      )
    })

const claim =
  (sql: Sql): StoreService["claim"] =>
  (options) =>
    runBatch(
      byJob(sql, {
        operation: "claim",
        local: (item) => (isUuid(item.jobId) ? undefined : { _tag: "NotFound", jobId: item.jobId }),
        statement: perItem(sql)<ClaimItem, ClaimResult>("claim", sql.st.claim, (chunk, now) => [
          chunk.map((i) => i.jobId),
          chunk.map((i) => i.owner),
          chunk.map((i) => i.leaseMs),
          chunk.map((i) => i.estimateCents ?? null),
          now
        ])(claimResult)
      }),
      options.items,
      options.now
    )

const claimNext =
  (sql: Sql): StoreService["claimNext"] =>
  (options) =>
    options.fair !== undefined
      ? claimNextFair(sql, options, options.fair)
      : Effect.map(
          sql.run("claimNext", sql.st.claimNext(options.max), [
            options.queue,
            Math.max(0, options.max),
            options.owner,
            options.leaseMs,
            options.now ?? null,
            options.types === undefined ? null : options.types.map((t) => t.type),
            options.types === undefined ? null : options.types.map((t) => t.version)
          ]),
          (rows) => ({ now: options.now ?? micros(rows[0]?.now_ms), results: claimNextResults(rows) })
        )

/** claimNext reply rows: only the written ones, in pick order. */
const claimNextResults = (
  rows: ReadonlyArray<Row>
): Array<Extract<ClaimResult, { readonly _tag: "Claimed" | "Settled" }>> =>
  rows.flatMap((row): Array<Extract<ClaimResult, { readonly _tag: "Claimed" | "Settled" }>> => {
    if (row.applied !== true) return []
    const job = toJob(row)
    return [
      job.state === "running" ? { _tag: "Claimed", job, takeover: row.takeover === true } : { _tag: "Settled", job }
    ]
  })

/**
 * claimNext with `fair`: `fairLock` on the queue, then `claimNextFair`, in one transaction, so fair claims of one
 * queue never read each other's service stale. A bad `fair` fails before anything is sent.
 */
const claimNextFair = (
  sql: Sql,
  options: Parameters<StoreService["claimNext"]>[0],
  fair: Fairness.FairOptions
): ReturnType<StoreService["claimNext"]> => {
  const problem = Fairness.problem(fair)
  if (problem !== undefined) {
    return Effect.fail(new StoreError({ reason: "Constraint", operation: "claimNext", detail: problem }))
  }
  const weights = Object.entries(fair.weights ?? {})
  const params = [
    options.queue,
    Math.max(0, options.max),
    options.owner,
    options.leaseMs,
    options.now ?? null,
    options.types === undefined ? null : options.types.map((t) => t.type),
    options.types === undefined ? null : options.types.map((t) => t.version),
    weights.map(([tenant]) => tenant),
    weights.map(([, weight]) => weight),
    fair.defaultWeight ?? Fairness.defaults.defaultWeight,
    Fairness.stepMs(fair)
  ]
  return Effect.map(
    sql.transaction("claimNext", async (tx) => {
      await tx.query(sql.st.fairLock, [options.queue])
      return tx.query<Row>(sql.st.claimNextFair(options.max), params)
    }),
    (rows) => ({ now: options.now ?? micros(rows[0]?.now_ms), results: claimNextResults(rows) })
  )
}

const heartbeat =
  (sql: Sql): StoreService["heartbeat"] =>
  (options) =>
    runBatch(
      byJob(sql, {
        operation: "heartbeat",
        local: (item) => (isUuid(item.jobId) ? undefined : lost(item.jobId, item.token, undefined)),
        statement: perItem(sql)<HeartbeatItem, HeartbeatResult>("heartbeat", sql.st.heartbeat, (chunk, now) => [
          chunk.map((i) => i.jobId),
          chunk.map((i) => i.token),
          chunk.map((i) => i.leaseMs),
          chunk.map((i) => i.progress ?? null),
          now
        ])((item, row) =>
          fencedResult(item, row, (job) => ({
            _tag: "Renewed",
            leaseUntil: job.leaseUntil ?? 0,
            cancelRequested: job.cancelRequestedAt !== null,
            costCents: job.costCents
          }))
        )
      }),
      options.items,
      options.now
    )

const charge =
  (sql: Sql): StoreService["charge"] =>
  (options) => {
    const problem = Protocol.chargeProblem(options.items)
    if (problem !== undefined) {
      return Effect.fail(new StoreError({ reason: "Constraint", operation: "charge", detail: problem }))
    }
    return runBatch(
      byJob(sql, {
        operation: "charge",
        local: (item) => (isUuid(item.jobId) ? undefined : { _tag: "NotFound", jobId: item.jobId }),
        statement: perItem(sql)<ChargeItem, ChargeResult>("charge", sql.st.charge, (chunk, now) => [
          chunk.map((i) => i.jobId),
          chunk.map((i) => i.callId),
          chunk.map((i) => i.token),
          chunk.map((i) => i.amountCents),
          chunk.map((i) => i.settled),
          now
        ])((item, row): ChargeResult | undefined => {
          if (row?.found !== true) return { _tag: "NotFound", jobId: item.jobId }
          // The batch's snapshot was stale: nothing of that batch was written; run the item again.
          if (row.held === true) return undefined
          if (row.refused === true) {
            return {
              _tag: "BatchBudgetExceeded",
              jobId: item.jobId,
              batchId: row.batch_id as BatchId,
              costCents: Number(row.cost_cents),
              batchCostCents: Number(row.batch_cost_cents),
              budgetCents: Number(row.budget_cents)
            }
          }
          return { _tag: "Charged", costCents: Number(row.cost_cents) }
        })
      }),
      options.items,
      options.now
    )
  }

const settle =
  (sql: Sql): StoreService["settle"] =>
  (options) =>
    runBatch(
      byJob(sql, {
        operation: "settle",
        local: (item) => (isUuid(item.jobId) ? undefined : lost(item.jobId, item.token, undefined)),
        statement: perItem(sql)<SettleItem, SettleResult>("settle", sql.st.settle, (chunk, now) => {
          const fields = chunk.map((i) => outcomeFields(i.outcome))
          return [
            chunk.map((i) => i.jobId),
            chunk.map((i) => i.token),
            fields.map((f) => f.kind),
            fields.map((f) => f.result),
            fields.map((f) => f.delayMs),
            fields.map((f) => f.errorClass),
            fields.map((f) => f.evidence),
            fields.map((f) => f.reason),
            now
          ]
        })((item, row) => fencedResult(item, row, (job) => ({ _tag: "Settled", job })))
      }),
      options.items,
      options.now
    )

const cancel =
  (sql: Sql): StoreService["cancel"] =>
  (options) =>
    runBatch(
      byJob(sql, {
        operation: "cancel",
        local: (item) => (isUuid(item.jobId) ? undefined : { _tag: "NotFound", jobId: item.jobId }),
        statement: perItem(sql)<CancelItem, CancelResult>("cancel", sql.st.cancel, (chunk, now) => [
          chunk.map((i) => i.jobId),
          chunk.map((i) => i.tenant ?? null),
          now
        ])((item, row): CancelResult | undefined => {
          const job = toJobOrUndefined(row)
          if (job === undefined) return { _tag: "NotFound", jobId: item.jobId }
          if (row?.applied === true) return { _tag: "Cancelled", job }
          switch (Protocol.cancelVerdict(job)) {
            case "AlreadyTerminal":
              return { _tag: "AlreadyTerminal", job }
            case "Unchanged":
              return { _tag: "Cancelled", job }
            default:
              return undefined
          }
        })
      }),
      options.items,
      options.now
    )

const replay =
  (sql: Sql): StoreService["replay"] =>
  (options) => {
    const filter = options.filter ?? {}
    return runBatch(
      byJob(sql, {
        operation: "replay",
        local: (item) => (isUuid(item.jobId) ? undefined : { _tag: "Skipped", jobId: item.jobId, state: null }),
        statement: perItem(sql)<{ readonly jobId: JobId }, ReplayItemResult>("replay", sql.st.replay, (chunk, now) => [
          chunk.map((i) => i.jobId),
          filter.queue ?? null,
          filter.tenant ?? null,
          filter.errorClass ?? null,
          filter.type ?? null,
          now,
          filter.inputHash ?? null
        ])((item, row): ReplayItemResult | undefined => {
          const job = toJobOrUndefined(row)
          if (job === undefined) return { _tag: "Skipped", jobId: item.jobId, state: null }
          if (row?.applied === true) return { _tag: "Replayed", job }
          return Protocol.replayable(job, filter) ? undefined : { _tag: "Skipped", jobId: item.jobId, state: job.state }
        })
      }),
      options.items,
      options.now
    )
  }

const sweep =
  (sql: Sql): StoreService["sweep"] =>
  (options) =>
    Effect.map(
      sql.run("sweep", sql.st.sweep, [
        options.queue ?? null,
        options.republishAfterMs ?? Protocol.defaults.republishAfterMs,
        options.limit ?? Protocol.defaults.sweepLimit,
        options.now ?? null
      ]),
      (rows) => {
        const requeued: Array<Job> = []
        const expiredFailed: Array<JobId> = []
        const abandoned: Array<JobId> = []
        const stale: Array<Job> = []
        let now = options.now ?? micros(rows[0]?.now_ms)
        for (const row of rows) {
          if (row.kind === "now") now = options.now ?? micros(row.now_ms)
          else if (row.kind === "requeued") requeued.push(toJob(row))
          else if (row.kind === "expiredFailed") expiredFailed.push(String(row.id) as JobId)
          else if (row.kind === "abandoned") abandoned.push(String(row.id) as JobId)
          else stale.push(toJob(row))
        }
        return { now, requeued, expiredFailed, abandoned, stale }
      }
    )

/** A part's `StoreError`, thrown out of the cycle's transaction to roll it back and carried out as its failure. */
class PartFailed {
  constructor(readonly error: StoreError) {}
}

/**
 * The four parts of a cycle, in order, through `verbs` (the Store over the cycle's transaction). Every part runs at
 * one store time: the caller's `now`, else the first statement's, passed on to the later parts (inside one
 * transaction `now()` is that same instant anyway). An empty part sends nothing.
 */
const cycleParts = (verbs: StoreService, options: CycleOptions): Effect.Effect<CycleReply, StoreError> =>
  Effect.gen(function* () {
    let now = options.now
    /** A part's results; the first part that runs sets `now` for the rest. */
    const take = <R>(reply: Reply<R>): ReadonlyArray<R> => {
      now ??= reply.now
      return reply.results
    }
    const some = <I>(items: ReadonlyArray<I> | undefined): items is ReadonlyArray<I> =>
      items !== undefined && items.length > 0
    const settle = some(options.settle) ? take(yield* verbs.settle({ items: options.settle, now })) : []
    const heartbeat = some(options.heartbeat) ? take(yield* verbs.heartbeat({ items: options.heartbeat, now })) : []
    const charge = some(options.charge) ? take(yield* verbs.charge({ items: options.charge, now })) : []
    const claim = options.claimNext
    const claimNext = claim === undefined ? [] : take(yield* verbs.claimNext({ ...claim, now }))
    return { now: now ?? (yield* verbs.now), settle, heartbeat, charge, claimNext }
  })

/**
 * `cycle`: the parts through the existing verbs, over one transaction, so they commit together or not at all. A
 * part its verb refuses as a whole (`Protocol.chargeProblem`, `Fairness.problem`) fails before anything is sent.
 */
const cycle =
  (sql: Sql, over: (tx: Queryable) => StoreService): NonNullable<StoreService["cycle"]> =>
  (options) =>
    Effect.gen(function* () {
      const fair = options.claimNext?.fair
      const problem =
        Protocol.chargeProblem(options.charge ?? []) ?? (fair === undefined ? undefined : Fairness.problem(fair))
      if (problem !== undefined) {
        return yield* new StoreError({ reason: "Constraint", operation: "cycle", detail: problem })
      }
      const runtime = yield* Effect.runtime<never>()
      // Under READ COMMITTED each statement reads a snapshot of its own: a writer that commits between two parts
      // would be seen by the later part only. The jobs the parts name are locked first, so none changes meanwhile.
      const named = [
        ...new Set(
          [...(options.settle ?? []), ...(options.heartbeat ?? []), ...(options.charge ?? [])].map((item) => item.jobId)
        )
      ]
      return yield* sql.transaction("cycle", async (tx) => {
        if (named.length > 0) await tx.query(sql.st.lockJobs, [named])
        const outcome = await Runtime.runPromise(runtime)(Effect.either(cycleParts(over(tx), options)))
        if (outcome._tag === "Left") throw new PartFailed(outcome.left)
        return outcome.right
      })
    })

/**
 * The protocol Store over `q`.
 *
 * @internal
 */
export const makeProtocolStore = (
  q: Queryable,
  st: Statements,
  transaction: <A>(fn: (tx: Queryable) => Promise<A>) => Promise<A> = (fn) => fn(q)
): StoreService => {
  const run = (operation: string, text: string, params: ReadonlyArray<unknown>) =>
    Effect.tryPromise({ try: () => q.query<Row>(text, params), catch: (error) => toStoreError(operation, error) })
  const sql: Sql = {
    st,
    run,
    readNow: Effect.map(run("now", st.now, []), (rows) => micros(rows[0]?.now_ms)),
    transaction: (operation, fn) =>
      Effect.tryPromise({
        try: () => transaction(fn),
        catch: (error) => (error instanceof PartFailed ? error.error : toStoreError(operation, error))
      })
  }
  return {
    submit: submit(sql),
    claim: claim(sql),
    claimNext: claimNext(sql),
    heartbeat: heartbeat(sql),
    charge: charge(sql),
    settle: settle(sql),
    cancel: cancel(sql),
    replay: replay(sql),
    sweep: sweep(sql),
    now: sql.readNow,
    // Inside the cycle's transaction the parts run through a store over it, whose own transactions (a fair claim's)
    // are that one.
    cycle: cycle(sql, (tx) => makeProtocolStore(tx, st))
  } satisfies StoreService
}
