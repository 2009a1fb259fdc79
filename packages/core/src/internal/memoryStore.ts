/**
 * The in-memory Store: plain Maps, every verb one synchronous step, so each verb is atomic among fibers.
 *
 * Store time comes from the Clock captured when the store is made (or an explicit `now`), never from the caller's
 * Clock: simulated workers run with skewed clocks while the store's clock stays true.
 *
 * @internal
 */
import { Effect } from "effect"
import { AlreadyTerminal, IdempotencyKeyReused, JobNotFound, LeaseLost, StoreError } from "../Errors.js"
import type { AbandonReason, Attempt, AttemptOutcome, Charge, ErrorClass, Job, JobId, JobState } from "../Models.js"
import { attemptsLeft, isTerminal, nextUpdatedAt } from "../Models.js"
import * as StateMachine from "../StateMachine.js"
import type {
  ClaimResult,
  DeadLetterGroup,
  DeadLetterOptions,
  Store as StoreService,
  StoreStats,
  SubmitResult
} from "../Store.js"

type MemoryStore = StoreService["Type"]
type FailedFilter = DeadLetterOptions

interface Row {
  job: Job
  /** Insertion order, the tie-break for equal `createdAt`. */
  readonly seq: number
  /** Store time at which the job last became failed, for `stats.failedInWindow`. */
  failedAt: number | null
  /** Store time at which a sweep last returned the job in `stale`; not part of the job record. */
  republishedAt: number | null
}

interface Filter {
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly state?: JobState | undefined
  readonly type?: string | undefined
  readonly errorClass?: ErrorClass | undefined
}

const matches = (job: Job, filter: Filter): boolean =>
  (filter.queue === undefined || job.queue === filter.queue) &&
  (filter.tenant === undefined || job.tenant === filter.tenant) &&
  (filter.state === undefined || job.state === filter.state) &&
  (filter.type === undefined || job.type === filter.type) &&
  (filter.errorClass === undefined || job.errorClass === filter.errorClass)

const DEFAULT_LIMIT = 50
const DEFAULT_SWEEP_LIMIT = 1000
const DEFAULT_REPUBLISH_AFTER_MS = 30_000

const leaseCleared = { leaseOwner: null, leaseUntil: null } as const

/**
 * A memory store and a synchronous read of its rows: `peek` returns the job record as it is right now (or undefined),
 * without going through an effect. For the simulator's recorders, which read ground truth around every write.
 *
 * @internal
 */
export interface Inspectable {
  readonly store: MemoryStore
  readonly peek: (jobId: JobId) => Job | undefined
}

/** @internal */
export const makeInspectable: Effect.Effect<Inspectable> = Effect.gen(function* () {
  const clock = yield* Effect.clock
  const rows = new Map<JobId, Row>()
  const requestKeys = new Map<string, JobId>()
  const attemptRows = new Map<JobId, Array<Attempt>>()
  const chargeRows = new Map<JobId, Map<string, Charge>>()
  let seq = 0

  const storeNow = (now: number | undefined): number => now ?? clock.unsafeCurrentTimeMillis()

  const step = (state: JobState, event: StateMachine.Event): JobState => {
    const to = StateMachine.next(state, event)
    if (to === undefined) throw new Error(`memory store: illegal transition ${event} from ${state}`)
    return to
  }

  /** Writes the job back with the next strictly monotonic `updatedAt`. */
  const write = (row: Row, now: number, patch: Partial<Job>): Job => {
    const previous = row.job
    const job: Job = { ...previous, ...patch, updatedAt: nextUpdatedAt(previous.updatedAt, now) }
    if (job.state === "failed" && previous.state !== "failed") row.failedAt = now
    row.job = job
    return job
  }

  /** Ends the attempt row of `token` (if it is still running). */
  const endAttempt = (
    jobId: JobId,
    token: number,
    now: number,
    outcome: AttemptOutcome,
    errorClass: ErrorClass | null = null,
    evidence: string | null = null
  ): void => {
    const list = attemptRows.get(jobId)
    if (list === undefined) return
    const index = list.findIndex((attempt) => attempt.token === token)
    const attempt = list[index]
    if (attempt === undefined || attempt.outcome !== "running") return
    list[index] = { ...attempt, endedAt: now, outcome, errorClass, evidence }
  }

  const abandonPatch = (row: Row, event: StateMachine.Event, reason: AbandonReason): Partial<Job> => ({
    state: step(row.job.state, event),
    abandonReason: reason,
    ...leaseCleared
  })

  /** The fallback estimate: the largest total charged under any one earlier token. */
  const fallbackEstimate = (jobId: JobId): number => {
    const byToken = new Map<number, number>()
    for (const charge of chargeRows.get(jobId)?.values() ?? []) {
      byToken.set(charge.token, (byToken.get(charge.token) ?? 0) + charge.amountCents)
    }
    let largest = 0
    for (const total of byToken.values()) largest = Math.max(largest, total)
    return largest
  }

  /** The row when `token` is its current lease token on a running job; else a `LeaseLost` failure. */
  const fenced = <A>(jobId: JobId, token: number, body: (row: Row) => A): Effect.Effect<A, LeaseLost> =>
    Effect.suspend(() => {
      const row = rows.get(jobId)
      if (row === undefined) {
        return Effect.fail(new LeaseLost({ jobId, token, currentToken: null, state: null }))
      }
      if (row.job.state !== "running" || row.job.leaseToken !== token) {
        return Effect.fail(new LeaseLost({ jobId, token, currentToken: row.job.leaseToken, state: row.job.state }))
      }
      return Effect.succeed(body(row))
    })

  const visible = (row: Row, tenant: string | undefined): boolean => tenant === undefined || row.job.tenant === tenant

  const newestFirst = (a: Row, b: Row): number => b.job.createdAt - a.job.createdAt || b.seq - a.seq

  const selectFailed = (options: FailedFilter): Array<Row> =>
    [...rows.values()].filter((row) => matches(row.job, { ...options, state: "failed" }))

  const store: MemoryStore = {
    now: Effect.sync(() => clock.unsafeCurrentTimeMillis()),

    submit: (options) =>
      Effect.suspend((): Effect.Effect<SubmitResult, IdempotencyKeyReused | StoreError> => {
        const now = storeNow(options.now)
        const tenant = options.tenant ?? null
        const requestKey = options.requestKey ?? null
        const key = requestKey === null ? null : JSON.stringify([options.queue, tenant, requestKey])
        if (key !== null) {
          const existingId = requestKeys.get(key)
          const existing = existingId === undefined ? undefined : rows.get(existingId)
          if (existing !== undefined) {
            return existing.job.inputHash === options.inputHash
              ? Effect.succeed({ job: existing.job, created: false })
              : Effect.fail(new IdempotencyKeyReused({ requestKey: requestKey!, existingJobId: existing.job.id }))
          }
        }
        if (rows.has(options.id)) {
          return Effect.fail(
            new StoreError({ reason: "Constraint", operation: "submit", detail: `job id ${options.id} already exists` })
          )
        }
        const job: Job = {
          id: options.id,
          queue: options.queue,
          tenant,
          type: options.type,
          version: options.version,
          requestKey,
          inputHash: options.inputHash,
          input: options.input,
          inputRef: options.inputRef ?? null,
          state: "queued",
          abandonReason: null,
          attempts: 0,
          attemptsBase: 0,
          maxAttempts: options.maxAttempts,
          leaseToken: 0,
          leaseOwner: null,
          leaseUntil: null,
          runAfter: options.runAfter ?? now,
          priority: options.priority ?? 0,
          deadlineAt: options.deadlineAt ?? null,
          budgetCents: options.budgetCents ?? null,
          costCents: 0,
          errorClass: null,
          lastError: null,
          progress: 0,
          result: null,
          cancelRequestedAt: null,
          traceId: options.traceId ?? null,
          createdAt: now,
          updatedAt: now
        }
        rows.set(job.id, { job, seq: seq++, failedAt: null, republishedAt: null })
        if (key !== null) requestKeys.set(key, job.id)
        return Effect.succeed({ job, created: true })
      }),

    claim: (options) =>
      Effect.suspend((): Effect.Effect<ClaimResult, JobNotFound> => {
        const now = storeNow(options.now)
        const row = rows.get(options.jobId)
        if (row === undefined) return Effect.fail(new JobNotFound({ jobId: options.jobId }))
        const job = row.job
        if (isTerminal(job.state)) return Effect.succeed({ _tag: "Settled", job })
        if (job.state === "running" && job.leaseUntil !== null && job.leaseUntil >= now) {
          return Effect.succeed({ _tag: "Busy", job, until: job.leaseUntil })
        }
        if (job.state === "queued" && job.runAfter > now) {
          return Effect.succeed({ _tag: "NotDue", job, until: job.runAfter })
        }
        const takeover = job.state === "running"
        if (takeover) endAttempt(job.id, job.leaseToken, now, "expired", "lease_expired")
        const settle = (patch: Partial<Job>): ClaimResult => ({ _tag: "Settled", job: write(row, now, patch) })
        if (job.cancelRequestedAt !== null) {
          return Effect.succeed(settle(abandonPatch(row, takeover ? "abandon" : "cancel", "cancelled")))
        }
        if (job.deadlineAt !== null && job.deadlineAt <= now) {
          return Effect.succeed(settle(abandonPatch(row, "abandon", "deadline")))
        }
        if (attemptsLeft(job) === 0) {
          return Effect.succeed(
            settle({
              state: step(job.state, "fail"),
              errorClass: takeover ? "lease_expired" : job.errorClass,
              ...leaseCleared
            })
          )
        }
        if (job.budgetCents !== null) {
          const estimate = options.estimateCents ?? fallbackEstimate(job.id)
          if (job.costCents >= job.budgetCents || job.costCents + estimate > job.budgetCents) {
            return Effect.succeed(settle(abandonPatch(row, "abandon", "budget")))
          }
        }
        const token = job.leaseToken + 1
        const claimed = write(row, now, {
          state: step(job.state, takeover ? "takeover" : "claim"),
          attempts: job.attempts + 1,
          leaseToken: token,
          leaseOwner: options.owner,
          leaseUntil: now + options.leaseMs,
          cancelRequestedAt: null
        })
        const list = attemptRows.get(job.id) ?? []
        list.push({
          jobId: job.id,
          token,
          worker: options.owner,
          startedAt: now,
          endedAt: null,
          outcome: "running",
          errorClass: null,
          evidence: null
        })
        attemptRows.set(job.id, list)
        return Effect.succeed({ _tag: "Claimed", job: claimed, takeover })
      }),

    heartbeat: (options) =>
      fenced(options.jobId, options.token, (row) => {
        const now = storeNow(options.now)
        const job = write(row, now, {
          leaseUntil: now + options.leaseMs,
          ...(options.progress === undefined ? {} : { progress: options.progress })
        })
        return { leaseUntil: job.leaseUntil!, cancelRequested: job.cancelRequestedAt !== null }
      }),

    charge: (options) =>
      Effect.suspend(() => {
        const now = storeNow(options.now)
        const row = rows.get(options.jobId)
        if (row === undefined) return Effect.fail(new JobNotFound({ jobId: options.jobId }))
        const ledger = chargeRows.get(options.jobId) ?? new Map<string, Charge>()
        chargeRows.set(options.jobId, ledger)
        const existing = ledger.get(options.callId)
        let delta: number | null = null
        if (existing === undefined) {
          ledger.set(options.callId, {
            jobId: options.jobId,
            callId: options.callId,
            token: options.token,
            amountCents: options.amountCents,
            settled: options.settled,
            createdAt: now,
            updatedAt: now
          })
          delta = options.amountCents
        } else if (!existing.settled && options.settled) {
          ledger.set(options.callId, { ...existing, amountCents: options.amountCents, settled: true, updatedAt: now })
          delta = options.amountCents - existing.amountCents
        }
        if (delta !== null) write(row, now, { costCents: row.job.costCents + delta })
        return Effect.succeed({ costCents: row.job.costCents })
      }),

    complete: (options) =>
      fenced(options.jobId, options.token, (row) => {
        const now = storeNow(options.now)
        endAttempt(row.job.id, options.token, now, "succeeded")
        return write(row, now, {
          state: step(row.job.state, "complete"),
          result: options.result,
          progress: 1,
          errorClass: null,
          lastError: null,
          ...leaseCleared
        })
      }),

    fail: (options) =>
      fenced(options.jobId, options.token, (row) => {
        const now = storeNow(options.now)
        endAttempt(row.job.id, options.token, now, "failed", options.errorClass, options.error)
        return write(row, now, {
          state: step(row.job.state, "fail"),
          errorClass: options.errorClass,
          lastError: options.error,
          ...leaseCleared
        })
      }),

    retry: (options) =>
      fenced(options.jobId, options.token, (row) => {
        const now = storeNow(options.now)
        endAttempt(row.job.id, options.token, now, "retried", options.errorClass, options.error)
        return write(row, now, {
          state: step(row.job.state, "retry"),
          runAfter: options.runAfter,
          errorClass: options.errorClass,
          lastError: options.error,
          ...leaseCleared
        })
      }),

    abandon: (options) =>
      fenced(options.jobId, options.token, (row) => {
        const now = storeNow(options.now)
        endAttempt(row.job.id, options.token, now, "abandoned", options.errorClass ?? null, options.error ?? null)
        return write(row, now, {
          ...abandonPatch(row, "abandon", options.reason),
          ...(options.errorClass === undefined ? {} : { errorClass: options.errorClass }),
          ...(options.error === undefined ? {} : { lastError: options.error })
        })
      }),

    release: (options) =>
      fenced(options.jobId, options.token, (row) => {
        const now = storeNow(options.now)
        endAttempt(row.job.id, options.token, now, "released")
        return write(row, now, {
          state: step(row.job.state, "release"),
          runAfter: now,
          attemptsBase: row.job.attemptsBase + 1,
          ...leaseCleared
        })
      }),

    cancel: (options) =>
      Effect.suspend((): Effect.Effect<Job, JobNotFound | AlreadyTerminal> => {
        const now = storeNow(options.now)
        const row = rows.get(options.jobId)
        if (row === undefined || !visible(row, options.tenant)) {
          return Effect.fail(new JobNotFound({ jobId: options.jobId }))
        }
        const job = row.job
        if (isTerminal(job.state)) return Effect.fail(new AlreadyTerminal({ jobId: job.id, state: job.state }))
        if (job.state === "queued") return Effect.succeed(write(row, now, abandonPatch(row, "cancel", "cancelled")))
        if (job.cancelRequestedAt !== null) return Effect.succeed(job)
        return Effect.succeed(write(row, now, { state: step(job.state, "cancel"), cancelRequestedAt: now }))
      }),

    get: (options) =>
      Effect.suspend(() => {
        const row = rows.get(options.jobId)
        return row === undefined || !visible(row, options.tenant)
          ? Effect.fail(new JobNotFound({ jobId: options.jobId }))
          : Effect.succeed(row.job)
      }),

    list: (options) =>
      Effect.sync(() =>
        [...rows.values()]
          .filter((row) => matches(row.job, options))
          .sort(newestFirst)
          .slice(0, options.limit ?? DEFAULT_LIMIT)
          .map((row) => row.job)
      ),

    attempts: (options) =>
      Effect.sync(() => [...(attemptRows.get(options.jobId) ?? [])].sort((a, b) => a.token - b.token)),

    charges: (options) => Effect.sync(() => [...(chargeRows.get(options.jobId)?.values() ?? [])]),

    deadLetters: (options) =>
      Effect.sync(() => {
        const failed = selectFailed(options)
        const groups = new Map<
          string,
          { errorClass: ErrorClass | null; inputHash: string; count: number; costCents: number }
        >()
        for (const { job } of failed) {
          const key = JSON.stringify([job.errorClass, job.inputHash])
          const group = groups.get(key) ?? {
            errorClass: job.errorClass,
            inputHash: job.inputHash,
            count: 0,
            costCents: 0
          }
          group.count += 1
          group.costCents += job.costCents
          groups.set(key, group)
        }
        const ordered: Array<DeadLetterGroup> = [...groups.values()].sort(
          (a, b) =>
            b.count - a.count ||
            b.costCents - a.costCents ||
            (a.inputHash < b.inputHash ? -1 : a.inputHash > b.inputHash ? 1 : 0)
        )
        const jobs = failed
          .sort((a, b) => b.job.updatedAt - a.job.updatedAt || b.seq - a.seq)
          .slice(0, options.limit ?? DEFAULT_LIMIT)
          .map((row) => row.job)
        return { jobs, groups: ordered }
      }),

    replay: (options) =>
      Effect.sync(() => {
        const now = storeNow(options.now)
        const replayed: Array<JobId> = []
        const skipped: Array<JobId> = []
        const targets: Array<JobId> =
          options.jobIds !== undefined
            ? [...options.jobIds]
            : selectFailed(options)
                .sort((a, b) => a.seq - b.seq)
                .map((row) => row.job.id)
        for (const id of targets.slice(0, options.limit ?? targets.length)) {
          const row = rows.get(id)
          if (row === undefined || row.job.state !== "failed" || !matches(row.job, options)) {
            skipped.push(id)
            continue
          }
          write(row, now, {
            state: step(row.job.state, "replay"),
            runAfter: now,
            attemptsBase: row.job.attempts,
            abandonReason: null,
            cancelRequestedAt: null,
            ...leaseCleared
          })
          replayed.push(id)
        }
        return { replayed, skipped }
      }),

    sweep: (options) =>
      Effect.sync(() => {
        const now = storeNow(options.now)
        const republishAfterMs = options.republishAfterMs ?? DEFAULT_REPUBLISH_AFTER_MS
        // One budget for the whole pass: expired leases first, then overdue queued jobs, then republish marks.
        let budget = options.limit ?? DEFAULT_SWEEP_LIMIT
        const requeued: Array<JobId> = []
        const expiredFailed: Array<JobId> = []
        const abandoned: Array<JobId> = []
        const inQueue = [...rows.values()]
          .filter((row) => options.queue === undefined || row.job.queue === options.queue)
          .sort((a, b) => a.seq - b.seq)
        for (const row of inQueue) {
          if (budget <= 0) break
          const job = row.job
          if (job.state !== "running" || job.leaseUntil === null || job.leaseUntil >= now) continue
          budget--
          endAttempt(job.id, job.leaseToken, now, "expired", "lease_expired")
          if (job.cancelRequestedAt !== null) {
            write(row, now, abandonPatch(row, "abandon", "cancelled"))
            abandoned.push(job.id)
          } else if (job.deadlineAt !== null && job.deadlineAt <= now) {
            write(row, now, abandonPatch(row, "abandon", "deadline"))
            abandoned.push(job.id)
          } else if (attemptsLeft(job) === 0) {
            write(row, now, { state: step(job.state, "fail"), errorClass: "lease_expired", ...leaseCleared })
            expiredFailed.push(job.id)
          } else {
            write(row, now, { state: step(job.state, "expire"), runAfter: now, ...leaseCleared })
            requeued.push(job.id)
          }
        }
        for (const row of inQueue) {
          if (budget <= 0) break
          const job = row.job
          if (job.state !== "queued" || job.deadlineAt === null || job.deadlineAt > now) continue
          budget--
          write(row, now, abandonPatch(row, "abandon", "deadline"))
          abandoned.push(job.id)
        }
        const lastTouched = (row: Row): number => Math.max(row.job.updatedAt, row.republishedAt ?? row.job.updatedAt)
        const cutoff = now - republishAfterMs
        // A job this pass requeued is published by the caller as requeued, never also as stale.
        const written = new Set<JobId>(requeued)
        const stale = inQueue
          .filter(
            (row) =>
              !written.has(row.job.id) &&
              row.job.state === "queued" &&
              row.job.runAfter <= now &&
              (row.job.deadlineAt === null || row.job.deadlineAt > now) &&
              lastTouched(row) <= cutoff
          )
          .sort((a, b) => lastTouched(a) - lastTouched(b) || a.seq - b.seq)
          .slice(0, Math.max(0, budget))
        // The republish mark is a write of its own: it leaves `updatedAt` and the job record alone.
        for (const row of stale) row.republishedAt = now
        return { requeued, expiredFailed, abandoned, stale: stale.map((row) => row.job) }
      }),

    stats: (options) =>
      Effect.sync((): StoreStats => {
        const now = clock.unsafeCurrentTimeMillis()
        const byState: Record<JobState, number> = { queued: 0, running: 0, succeeded: 0, failed: 0, abandoned: 0 }
        const oldestQueuedAt: Record<string, number> = {}
        const costCentsByErrorClass: Record<string, number> = {}
        let failedInWindow = 0
        for (const row of rows.values()) {
          const job = row.job
          if (!matches(job, options)) continue
          byState[job.state] += 1
          if (job.state === "queued" && job.runAfter <= now) {
            const key = String(job.priority)
            const current = oldestQueuedAt[key]
            oldestQueuedAt[key] = current === undefined ? job.runAfter : Math.min(current, job.runAfter)
          }
          if (job.errorClass !== null) {
            costCentsByErrorClass[job.errorClass] = (costCentsByErrorClass[job.errorClass] ?? 0) + job.costCents
          }
          if (job.state === "failed" && row.failedAt !== null && row.failedAt >= options.failedSince) failedInWindow++
        }
        return { byState, oldestQueuedAt, costCentsByErrorClass, failedInWindow }
      })
  }
  return { store, peek: (jobId) => rows.get(jobId)?.job }
})

/** @internal */
export const make: Effect.Effect<MemoryStore> = Effect.map(makeInspectable, (inspectable) => inspectable.store)
