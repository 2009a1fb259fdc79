/**
 * The lease protocol, stated once: every rule a Store applies to a job record, as pure functions over the record,
 * store time and the caller's options. The memory Store is built from these functions and nothing else; the
 * Worker and the Client use them where they decide locally; SQL and Lua adapters are separate, atomic versions of
 * the same rules, checked against these functions by the model-based property in `@slowcall/testing`.
 *
 * Each transition returns the new record (its `updatedAt` already bumped with `bump`) and what it does to the
 * attempt rows, so a backend only has to store what it is given. Nothing here reads a clock: `now` is always the
 * store time of the write.
 *
 * @since 0.2.0
 */

import type { ErrorClass } from "./ErrorClass.js"
import { sha256Hex } from "./internal/sha256.js"
import type { AbandonReason, AttemptOutcome, Job, JobId, Json } from "./Job.js"
import { attemptsLeft, isTerminal } from "./Job.js"
import * as StateMachine from "./StateMachine.js"

/**
 * The next strictly monotonic `updatedAt`: store time, or one microsecond past the previous value when the clock
 * has not moved (or moved back). Every accepted write to a job record uses it.
 *
 * @since 0.2.0
 * @category rules
 */
export const bump = (previous: number, now: number): number => Math.max(now, (Math.round(previous * 1000) + 1) / 1000)

/**
 * The state an event leads to; an event the state machine does not allow there is a bug in the caller (a defect).
 */
const step = (from: Job["state"], event: StateMachine.Event): Job["state"] => {
  const to = StateMachine.next(from, event)
  if (to === undefined) throw new Error(`protocol: illegal transition ${event} from ${from}`)
  return to
}

/** The record after a write at `now`: the patch applied and `updatedAt` bumped. */
const write = (job: Job, now: number, patch: Partial<Job>): Job => ({
  ...job,
  ...patch,
  updatedAt: bump(job.updatedAt, now)
})

const leaseCleared = { leaseOwner: null, leaseUntil: null } as const

// ---------------------------------------------------------------------------------------------------------------
// Spend
// ---------------------------------------------------------------------------------------------------------------

/**
 * The budget fit: whether a call (or an attempt) estimated at `estimateCents` may start on a job that has spent
 * `costCents` of `budgetCents`. Nothing may start once the spend has reached the budget, and nothing whose estimate
 * would take the spend past it. Without a budget everything fits.
 *
 * @since 0.2.0
 * @category rules
 */
export const budgetFits = (budgetCents: number | null, costCents: number, estimateCents: number): boolean =>
  budgetCents === null || (costCents < budgetCents && costCents + estimateCents <= budgetCents)

/**
 * The fallback estimate of the next attempt when the handler declares none: the largest total charged under any one
 * earlier token (0 with no charges).
 *
 * @since 0.2.0
 * @category rules
 */
export const fallbackEstimate = (
  charges: Iterable<{ readonly token: number; readonly amountCents: number }>
): number => {
  const byToken = new Map<number, number>()
  for (const charge of charges) byToken.set(charge.token, (byToken.get(charge.token) ?? 0) + charge.amountCents)
  let largest = 0
  for (const total of byToken.values()) largest = Math.max(largest, total)
  return largest
}

/**
 * Why a charge call cannot be written, or `undefined` when it can: an item whose amount is negative or not a finite
 * number. Ledger amounts are never negative, so the spend of a job is 0 exactly when every amount in its ledger is 0,
 * and then its `fallbackEstimate` is 0 too (a store may answer it without reading the ledger).
 *
 * @since 0.4.0
 * @category rules
 */
export const chargeProblem = (
  items: ReadonlyArray<{ readonly jobId: string; readonly callId: string; readonly amountCents: number }>
): string | undefined => {
  for (const item of items) {
    if (!(Number.isFinite(item.amountCents) && item.amountCents >= 0)) {
      return `charge ${item.callId} of job ${item.jobId}: amount ${item.amountCents} is not a finite number >= 0`
    }
  }
  return undefined
}

/**
 * One charge write against the ledger row of its call id (or none): the row to store and by how much the job's
 * `costCents` moves, or `undefined` when the write changes nothing. A new call id inserts; a settlement of an
 * unsettled row sets the amount and marks it settled; a reservation for an existing call id and anything on a
 * settled row change nothing. Charges are not fenced: the money was spent whatever the token.
 *
 * @since 0.2.0
 * @category rules
 */
export const chargeStep = (
  existing: ChargeRow | undefined,
  charge: {
    readonly callId: string
    readonly token: number
    readonly amountCents: number
    readonly settled: boolean
  },
  now: number
): { readonly row: ChargeRow; readonly deltaCents: number } | undefined => {
  if (existing === undefined) {
    return {
      row: {
        callId: charge.callId,
        token: charge.token,
        amountCents: charge.amountCents,
        settled: charge.settled,
        createdAt: now,
        updatedAt: now
      },
      deltaCents: charge.amountCents
    }
  }
  if (existing.settled || !charge.settled) return undefined
  return {
    row: { ...existing, amountCents: charge.amountCents, settled: true, updatedAt: bump(existing.updatedAt, now) },
    deltaCents: charge.amountCents - existing.amountCents
  }
}

/**
 * A ledger row as the protocol sees it (the job id is the row's owner and left to the backend).
 *
 * @since 0.2.0
 * @category models
 */
export interface ChargeRow {
  readonly callId: string
  readonly token: number
  readonly amountCents: number
  readonly settled: boolean
  readonly createdAt: number
  readonly updatedAt: number
}

/**
 * The job after a charge moved its spend by `deltaCents`.
 *
 * @since 0.2.0
 * @category rules
 */
export const charged = (job: Job, deltaCents: number, now: number): Job =>
  write(job, now, { costCents: job.costCents + deltaCents })

// ---------------------------------------------------------------------------------------------------------------
// Attempt rows
// ---------------------------------------------------------------------------------------------------------------

/**
 * What a transition does to the attempt row of one token: end it (when it is still `running`) with an outcome.
 *
 * @since 0.2.0
 * @category models
 */
export interface AttemptEnd {
  readonly token: number
  readonly outcome: AttemptOutcome
  readonly errorClass: ErrorClass | null
  readonly evidence: string | null
}

/**
 * The attempt row a claim appends.
 *
 * @since 0.2.0
 * @category models
 */
export interface AttemptStart {
  readonly token: number
  readonly worker: string
}

/**
 * A transition of one job record: the new record, the attempt row it ends (if any), the one it starts (if any),
 * and whether the job became `failed` by it (the dead-letter arrival time backends keep for `stats`).
 *
 * @since 0.2.0
 * @category models
 */
export interface Transition {
  readonly job: Job
  readonly end?: AttemptEnd | undefined
  readonly start?: AttemptStart | undefined
  readonly becameFailed: boolean
}

const transition = (
  before: Job,
  now: number,
  patch: Partial<Job>,
  attempt: { readonly end?: AttemptEnd | undefined; readonly start?: AttemptStart | undefined } = {}
): Transition => {
  const job = write(before, now, patch)
  return {
    job,
    end: attempt.end,
    start: attempt.start,
    becameFailed: job.state === "failed" && before.state !== "failed"
  }
}

const expiredEnd = (job: Job): AttemptEnd => ({
  token: job.leaseToken,
  outcome: "expired",
  errorClass: "lease_expired",
  evidence: null
})

// ---------------------------------------------------------------------------------------------------------------
// Submit
// ---------------------------------------------------------------------------------------------------------------

/**
 * What a submitter asks for, one job. `input` must be plain JSON (checked by `Canonical.ts` before it gets here).
 * `delayMs` is measured from the store time of the submit. `fingerprint` is the request's `fingerprint`, stored on
 * the job and compared by `submitVerdict` when the request key is already taken.
 *
 * @since 0.2.0
 * @category models
 */
export interface SubmitItem {
  readonly id: JobId
  readonly queue: string
  readonly tenant?: string | null | undefined
  readonly type: string
  readonly version: number
  readonly requestKey?: string | null | undefined
  readonly inputHash: string
  readonly input: Json | null
  readonly inputRef?: string | null | undefined
  readonly priority?: number | undefined
  readonly delayMs?: number | undefined
  readonly deadlineAt?: number | null | undefined
  readonly budgetCents?: number | null | undefined
  readonly maxAttempts: number
  readonly traceId?: string | null | undefined
  readonly fingerprint?: string | null | undefined
}

/**
 * A new queued record: no attempt, no spend, due `delayMs` after `now`, created and updated at `now`.
 *
 * @since 0.2.0
 * @category rules
 */
export const newJob = (item: SubmitItem, now: number): Job => ({
  id: item.id,
  queue: item.queue,
  tenant: item.tenant ?? null,
  type: item.type,
  version: item.version,
  requestKey: item.requestKey ?? null,
  inputHash: item.inputHash,
  input: item.input,
  inputRef: item.inputRef ?? null,
  fingerprint: item.fingerprint ?? null,
  state: "queued",
  abandonReason: null,
  attempts: 0,
  attemptsBase: 0,
  maxAttempts: item.maxAttempts,
  leaseToken: 0,
  leaseOwner: null,
  leaseUntil: null,
  runAfter: now + Math.max(0, item.delayMs ?? 0),
  priority: item.priority ?? 0,
  deadlineAt: item.deadlineAt ?? null,
  budgetCents: item.budgetCents ?? null,
  costCents: 0,
  errorClass: null,
  lastError: null,
  progress: 0,
  result: null,
  cancelRequestedAt: null,
  traceId: item.traceId ?? null,
  createdAt: now,
  updatedAt: now
})

/**
 * The parts of a submit request its idempotency key vouches for: everything that changes what runs or what it may
 * cost, as the caller gave it (defaults applied), so that a client repeating a request after a timeout repeats its
 * fingerprint exactly. `schedule` is the due time in the form the caller used: a delay from store time, or an
 * absolute time; never the other form computed from a clock, which would differ between two tries. Left out on
 * purpose: the trace id (a retry may carry a new one) and the queue, tenant and key themselves (they are the key's
 * scope, not what it vouches for).
 *
 * @since 0.3.0
 * @category models
 */
export interface FingerprintFields {
  readonly type: string
  readonly version: number
  /** The input hash: covers the inline input, or the input reference (`Canonical.inputHash`). */
  readonly inputHash: string
  readonly maxAttempts: number
  readonly priority: number
  readonly budgetCents: number | null
  readonly deadlineAt: number | null
  readonly schedule: { readonly delayMs: number } | { readonly runAfter: number }
}

/**
 * The request fingerprint: lowercase hex sha-256 over the `FingerprintFields` in a fixed order, prefixed with a
 * format version. Equal fields give equal fingerprints; any difference in one of them gives another (numbers are
 * written as JSON writes them, `-0` as `0`). The one place the fingerprint is computed: `Client` fills
 * `SubmitItem.fingerprint` with it, and a Store only stores and compares it.
 *
 * @since 0.3.0
 * @category rules
 */
export const fingerprint = (fields: FingerprintFields): string => {
  const schedule = "runAfter" in fields.schedule ? ["at", fields.schedule.runAfter] : ["in", fields.schedule.delayMs]
  const text = JSON.stringify([
    fields.type,
    fields.version,
    fields.inputHash,
    fields.maxAttempts,
    fields.priority,
    fields.budgetCents,
    fields.deadlineAt,
    ...schedule
  ])
  return `f1:${sha256Hex(text)}`
}

/**
 * The idempotency verdict of a submit whose request key already names `existing`: the same request returns that
 * job and writes nothing; any other request is a reused key and writes nothing. When both the job and the item
 * carry a fingerprint, the fingerprints decide (type, version, input and every option of `FingerprintFields`);
 * when either has none (a job stored before fingerprints, a submitter that gives none), the input hash alone
 * decides.
 *
 * @since 0.2.0
 * @category rules
 */
export const submitVerdict = (existing: Job, item: SubmitItem): "Existing" | "KeyReused" => {
  const given = item.fingerprint ?? null
  if (existing.fingerprint !== null && given !== null) return existing.fingerprint === given ? "Existing" : "KeyReused"
  return existing.inputHash === item.inputHash ? "Existing" : "KeyReused"
}

// ---------------------------------------------------------------------------------------------------------------
// Claim
// ---------------------------------------------------------------------------------------------------------------

/**
 * Why a claimable job is settled instead of run, in the contract's order: a cancel was requested, the deadline has
 * passed, no attempt is left in the run, the budget cannot cover the next attempt.
 *
 * @since 0.2.0
 * @category models
 */
export type SettleReason = "cancelled" | "deadline" | "exhausted" | "budget"

/**
 * The verdict of a claim on a record at store time `now`, in the contract's order:
 * - `Settled`: the job is terminal already (a transport acks the message);
 * - `Busy`: running under a live lease (`leaseUntil >= now`) until `until`;
 * - `NotDue`: queued with `runAfter > now`, due at `until`;
 * - otherwise the job is claimable (queued and due, or running with an expired lease: a `takeover`) and the claim
 *   either settles it (`Settle` with the first `SettleReason` that holds) or runs it (`Claim`).
 *
 * `estimateCents` is the estimate of the next attempt (the handler's, else `fallbackEstimate`); the budget reason
 * holds when it does not fit (`budgetFits`).
 *
 * @since 0.2.0
 * @category rules
 */
export type ClaimVerdict =
  | { readonly _tag: "Settled" }
  | { readonly _tag: "Busy"; readonly until: number }
  | { readonly _tag: "NotDue"; readonly until: number }
  | { readonly _tag: "Settle"; readonly takeover: boolean; readonly reason: SettleReason }
  | { readonly _tag: "Claim"; readonly takeover: boolean }

/**
 * The first reason a job whose lease is gone (or that was never leased) must be settled rather than run, or
 * `undefined`. `estimateCents` undefined skips the budget (the sweeper requeues without judging spend; the next
 * claim does).
 *
 * @since 0.2.0
 * @category rules
 */
export const settleReason = (job: Job, now: number, estimateCents: number | undefined): SettleReason | undefined => {
  if (job.cancelRequestedAt !== null) return "cancelled"
  if (job.deadlineAt !== null && job.deadlineAt <= now) return "deadline"
  if (attemptsLeft(job) === 0) return "exhausted"
  if (estimateCents !== undefined && !budgetFits(job.budgetCents, job.costCents, estimateCents)) return "budget"
  return undefined
}

/**
 * See `ClaimVerdict`.
 *
 * @since 0.2.0
 * @category rules
 */
export const claimVerdict = (job: Job, now: number, estimateCents: number): ClaimVerdict => {
  if (isTerminal(job.state)) return { _tag: "Settled" }
  // A running record always has a lease end; one without is read as held, never as lapsed (as `isClaimable`).
  if (job.state === "running" && (job.leaseUntil === null || job.leaseUntil >= now)) {
    return { _tag: "Busy", until: job.leaseUntil ?? now }
  }
  if (job.state === "queued" && job.runAfter > now) return { _tag: "NotDue", until: job.runAfter }
  const takeover = job.state === "running"
  const reason = settleReason(job, now, estimateCents)
  return reason === undefined ? { _tag: "Claim", takeover } : { _tag: "Settle", takeover, reason }
}

/**
 * Whether a record may be claimed at `now` at all (queued and due, or running with an expired lease): the
 * condition a backend's conditional write selects on.
 *
 * @since 0.2.0
 * @category rules
 */
export const isClaimable = (job: Job, now: number): boolean =>
  (job.state === "queued" && job.runAfter <= now) ||
  (job.state === "running" && job.leaseUntil !== null && job.leaseUntil < now)

/**
 * The order `Store.claimNext` picks in among the jobs `isClaimable` at a store time: running jobs whose lease ended
 * first (takeovers: their holder went unheard for a whole keep-alive, so no sweep needs to run before another worker
 * takes them), oldest insertion first; then due queued jobs, highest priority first, then earliest `runAfter`, then
 * insertion. `seq` is the job's insertion order in its store. Negative when `a` goes first.
 *
 * @since 0.9.0
 * @category rules
 */
export const claimNextOrder = (
  a: { readonly job: Job; readonly seq: number },
  b: { readonly job: Job; readonly seq: number }
): number => {
  const aHeld = a.job.state === "running"
  const bHeld = b.job.state === "running"
  if (aHeld !== bHeld) return aHeld ? -1 : 1
  if (aHeld) return a.seq - b.seq
  return b.job.priority - a.job.priority || a.job.runAfter - b.job.runAfter || a.seq - b.seq
}

/**
 * A (type, version) pair a claimer can run: the filter `Store.claimNext` takes so that a worker never picks a job it
 * has no handler for (deploy skew leaves such a job queued for a worker that has one).
 *
 * @since 0.3.0
 * @category models
 */
export interface Runnable {
  readonly type: string
  readonly version: number
}

/**
 * Whether `claimNext` with the filter `types` may pick the job: no filter, or its (type, version) is listed.
 *
 * @since 0.3.0
 * @category rules
 */
export const runnableBy = (job: Job, types: ReadonlyArray<Runnable> | undefined): boolean => {
  if (types === undefined) return true
  for (const t of types) if (t.type === job.type && t.version === job.version) return true
  return false
}

/** The settlement a `SettleReason` stands for on a job being claimed or swept. */
const settleBy = (job: Job, now: number, reason: SettleReason, takeover: boolean, end: AttemptEnd | undefined) => {
  switch (reason) {
    case "cancelled":
      return transition(
        job,
        now,
        { state: step(job.state, takeover ? "abandon" : "cancel"), abandonReason: "cancelled", ...leaseCleared },
        { end }
      )
    case "deadline":
    case "budget":
      return transition(
        job,
        now,
        { state: step(job.state, "abandon"), abandonReason: reason, ...leaseCleared },
        { end }
      )
    case "exhausted":
      return transition(
        job,
        now,
        { state: step(job.state, "fail"), errorClass: takeover ? "lease_expired" : job.errorClass, ...leaseCleared },
        { end }
      )
  }
}

/**
 * The write a claim verdict of `Settle` or `Claim` makes. A takeover ends the previous holder's attempt row
 * `expired`. `Claim`: running, `attempts + 1`, `leaseToken + 1`, the lease to `owner` until `now + leaseMs`, any
 * old cancel request cleared, and a new attempt row.
 *
 * @since 0.2.0
 * @category rules
 */
export const claimTransition = (
  job: Job,
  now: number,
  verdict: Extract<ClaimVerdict, { readonly _tag: "Settle" | "Claim" }>,
  lease: { readonly owner: string; readonly leaseMs: number }
): Transition => {
  const end = verdict.takeover ? expiredEnd(job) : undefined
  if (verdict._tag === "Settle") return settleBy(job, now, verdict.reason, verdict.takeover, end)
  const token = job.leaseToken + 1
  return transition(
    job,
    now,
    {
      state: step(job.state, verdict.takeover ? "takeover" : "claim"),
      attempts: job.attempts + 1,
      leaseToken: token,
      leaseOwner: lease.owner,
      leaseUntil: now + lease.leaseMs,
      cancelRequestedAt: null
    },
    { end, start: { token, worker: lease.owner } }
  )
}

// ---------------------------------------------------------------------------------------------------------------
// Fenced writes
// ---------------------------------------------------------------------------------------------------------------

/**
 * The fence: a worker write under `token` applies only while the job is running under exactly that token.
 *
 * @since 0.2.0
 * @category rules
 */
export const holds = (job: Job, token: number): boolean => job.state === "running" && job.leaseToken === token

/**
 * A heartbeat under the current token: the lease runs to `now + leaseMs` (also when it had lapsed but nobody took
 * over), or stays where it is when that is later: a heartbeat never moves a lease's end back. So two renewals of one
 * lease in flight at once, applied in either order (a Postgres statement reads `now` at its transaction's start, and
 * an older one held on a lock may commit after a newer one), leave the later end, never below the end the holder
 * learned from either reply. `progress` is stored when given (clamped to 0..1).
 *
 * @since 0.2.0
 * @category rules
 */
export const heartbeatTransition = (
  job: Job,
  now: number,
  options: { readonly leaseMs: number; readonly progress?: number | undefined }
): Transition =>
  transition(job, now, {
    leaseUntil: Math.max(job.leaseUntil ?? Number.NEGATIVE_INFINITY, now + options.leaseMs),
    ...(options.progress === undefined ? {} : { progress: Math.min(1, Math.max(0, options.progress)) })
  })

/**
 * How a holder ends its attempt, the one fenced settle verb's outcome:
 * - `Complete`: succeeded with `result`;
 * - `Retry`: queued again, due `delayMs` after the write (abandoned(deadline) instead when that reaches the
 *   deadline: a retry that could not start in time is not worth queueing);
 * - `Fail`: failed, a dead letter;
 * - `Abandon`: given up for `reason`;
 * - `Release`: handed back untouched, due now, the attempt not counted (a graceful shutdown is not a failure);
 * - `Throttle`: queued again, due `delayMs` after the write, the attempt not counted and no money charged: the
 *   job's model call had to wait for its provider resource (no capacity, a paused resource, a 429). The record shows
 *   why until it runs again: `errorClass` `rate_limited`, `lastError` the worker's `error` (which resource, what for,
 *   until when), `runAfter` the end of the wait. Abandoned(deadline) instead when the wait reaches the deadline,
 *   as a retry is.
 *
 * @since 0.2.0
 * @category models
 */
export type Outcome =
  | { readonly _tag: "Complete"; readonly result: Json | null }
  | {
      readonly _tag: "Retry"
      readonly delayMs: number
      readonly errorClass: ErrorClass
      readonly error: string
    }
  | { readonly _tag: "Fail"; readonly errorClass: ErrorClass; readonly error: string }
  | {
      readonly _tag: "Abandon"
      readonly reason: AbandonReason
      readonly errorClass?: ErrorClass | null | undefined
      readonly error?: string | null | undefined
    }
  | { readonly _tag: "Release" }
  | { readonly _tag: "Throttle"; readonly delayMs: number; readonly error: string }

/**
 * What a throttled job waits for: its provider resource, why (the limiter's wait reason, such as `requests` or
 * `concurrency`, or the pause it found), and the store time the wait ends.
 *
 * @since 0.4.0
 * @category models
 */
export interface ThrottleNote {
  readonly resource: string
  readonly why: string
  readonly until: number
}

const throttlePattern = /^throttled: waiting for (\S+) \((.*)\) until (\S+)$/

/**
 * The `error` of a `Throttle` outcome, which the record keeps as its `lastError`:
 * `throttled: waiting for <resource> (<why>) until <ISO 8601 store time>`. `throttleOf` reads it back.
 *
 * @since 0.4.0
 * @category rules
 */
export const throttleEvidence = (note: ThrottleNote): string =>
  `throttled: waiting for ${note.resource} (${note.why}) until ${new Date(note.until).toISOString()}`

/**
 * What a job is throttled by, when it is: queued after a `Throttle` settlement (error class `rate_limited` and a
 * `lastError` written by `throttleEvidence`), until its `runAfter`. `undefined` for every other record.
 *
 * @since 0.4.0
 * @category rules
 */
export const throttleOf = (
  job: Pick<Job, "state" | "errorClass" | "lastError" | "runAfter">
): ThrottleNote | undefined => {
  if (job.state !== "queued" || job.errorClass !== "rate_limited" || job.lastError === null) return undefined
  const match = throttlePattern.exec(job.lastError)
  if (match === null) return undefined
  return { resource: match[1]!, why: match[2]!, until: job.runAfter }
}

/**
 * The write of a settle under the current token: the new record with the lease cleared, and the attempt row of the
 * token ended with the matching outcome.
 *
 * @since 0.2.0
 * @category rules
 */
export const settleTransition = (job: Job, now: number, outcome: Outcome): Transition => {
  const end = (o: AttemptOutcome, errorClass: ErrorClass | null = null, evidence: string | null = null) => ({
    end: { token: job.leaseToken, outcome: o, errorClass, evidence }
  })
  switch (outcome._tag) {
    case "Complete":
      return transition(
        job,
        now,
        {
          state: step(job.state, "complete"),
          result: outcome.result,
          progress: 1,
          errorClass: null,
          lastError: null,
          ...leaseCleared
        },
        end("succeeded")
      )
    case "Retry": {
      const runAfter = now + Math.max(0, outcome.delayMs)
      if (job.deadlineAt !== null && runAfter >= job.deadlineAt) {
        return settleTransition(job, now, {
          _tag: "Abandon",
          reason: "deadline",
          errorClass: outcome.errorClass,
          error: outcome.error
        })
      }
      return transition(
        job,
        now,
        {
          state: step(job.state, "retry"),
          runAfter,
          errorClass: outcome.errorClass,
          lastError: outcome.error,
          ...leaseCleared
        },
        end("retried", outcome.errorClass, outcome.error)
      )
    }
    case "Fail":
      return transition(
        job,
        now,
        { state: step(job.state, "fail"), errorClass: outcome.errorClass, lastError: outcome.error, ...leaseCleared },
        end("failed", outcome.errorClass, outcome.error)
      )
    case "Abandon":
      return transition(
        job,
        now,
        {
          state: step(job.state, "abandon"),
          abandonReason: outcome.reason,
          ...(outcome.errorClass == null ? {} : { errorClass: outcome.errorClass }),
          ...(outcome.error == null ? {} : { lastError: outcome.error }),
          ...leaseCleared
        },
        end("abandoned", outcome.errorClass ?? null, outcome.error ?? null)
      )
    case "Release":
      return transition(
        job,
        now,
        { state: step(job.state, "release"), runAfter: now, attemptsBase: job.attemptsBase + 1, ...leaseCleared },
        end("released")
      )
    case "Throttle": {
      const runAfter = now + Math.max(0, outcome.delayMs)
      if (job.deadlineAt !== null && runAfter >= job.deadlineAt) {
        return settleTransition(job, now, {
          _tag: "Abandon",
          reason: "deadline",
          errorClass: "rate_limited",
          error: outcome.error
        })
      }
      return transition(
        job,
        now,
        {
          state: step(job.state, "release"),
          runAfter,
          attemptsBase: job.attemptsBase + 1,
          errorClass: "rate_limited",
          lastError: outcome.error,
          ...leaseCleared
        },
        end("released", "rate_limited", outcome.error)
      )
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Operator and submitter writes
// ---------------------------------------------------------------------------------------------------------------

/**
 * The verdict of a cancel: a queued job is abandoned(cancelled) at once; a running one gets `cancelRequestedAt`
 * (its holder sees it at the next heartbeat), kept as it is when already requested (`Unchanged`, no write); a
 * terminal one cannot be undone.
 *
 * @since 0.2.0
 * @category rules
 */
export const cancelVerdict = (job: Job): "Abandon" | "Request" | "Unchanged" | "AlreadyTerminal" =>
  isTerminal(job.state)
    ? "AlreadyTerminal"
    : job.state === "queued"
      ? "Abandon"
      : job.cancelRequestedAt === null
        ? "Request"
        : "Unchanged"

/**
 * The write of a cancel verdict of `Abandon` or `Request`.
 *
 * @since 0.2.0
 * @category rules
 */
export const cancelTransition = (job: Job, now: number, verdict: "Abandon" | "Request"): Transition =>
  verdict === "Abandon"
    ? transition(job, now, { state: step(job.state, "cancel"), abandonReason: "cancelled", ...leaseCleared })
    : transition(job, now, { state: step(job.state, "cancel"), cancelRequestedAt: now })

/**
 * Which failed jobs a filtered replay may touch: every given filter must match. `inputHash` names one input (a
 * dead-letter group's hash).
 *
 * @since 0.2.0
 * @category models
 */
export interface ReplayFilter {
  readonly queue?: string | undefined
  readonly tenant?: string | undefined
  readonly errorClass?: ErrorClass | undefined
  readonly type?: string | undefined
  readonly inputHash?: string | undefined
}

/**
 * Replay eligibility: only a failed job (a dead letter) that matches the filter is replayed; a succeeded job never
 * is.
 *
 * @since 0.2.0
 * @category rules
 */
export const replayable = (job: Job, filter: ReplayFilter = {}): boolean =>
  job.state === "failed" &&
  (filter.queue === undefined || job.queue === filter.queue) &&
  (filter.tenant === undefined || job.tenant === filter.tenant) &&
  (filter.errorClass === undefined || job.errorClass === filter.errorClass) &&
  (filter.type === undefined || job.type === filter.type) &&
  (filter.inputHash === undefined || job.inputHash === filter.inputHash)

/**
 * The write of a replay: failed -> queued, due now, a fresh run of `maxAttempts` (`attemptsBase = attempts`), no
 * leftover cancel request; attempt history and spend stay.
 *
 * @since 0.2.0
 * @category rules
 */
export const replayTransition = (job: Job, now: number): Transition =>
  transition(job, now, {
    state: step(job.state, "replay"),
    runAfter: now,
    attemptsBase: job.attempts,
    abandonReason: null,
    cancelRequestedAt: null,
    ...leaseCleared
  })

// ---------------------------------------------------------------------------------------------------------------
// Sweep
// ---------------------------------------------------------------------------------------------------------------

/**
 * The sweep verdict of a record at `now`:
 * - a running job whose lease ended (`leaseUntil < now`): abandoned(cancelled) when a cancel was requested,
 *   abandoned(deadline) past the deadline, failed(`lease_expired`) with no attempt left, else `Requeue`;
 * - a queued job past its deadline: abandoned(deadline);
 * - anything else: `undefined` (the sweep leaves it alone).
 *
 * @since 0.2.0
 * @category rules
 */
export type SweepVerdict =
  | { readonly _tag: "Expired"; readonly reason: Exclude<SettleReason, "budget"> | "requeue" }
  | { readonly _tag: "Overdue" }

/**
 * See `SweepVerdict`.
 *
 * @since 0.2.0
 * @category rules
 */
export const sweepVerdict = (job: Job, now: number): SweepVerdict | undefined => {
  if (job.state === "running" && job.leaseUntil !== null && job.leaseUntil < now) {
    const reason = settleReason(job, now, undefined)
    return { _tag: "Expired", reason: reason === "budget" || reason === undefined ? "requeue" : reason }
  }
  if (job.state === "queued" && job.deadlineAt !== null && job.deadlineAt <= now) return { _tag: "Overdue" }
  return undefined
}

/**
 * The write of a sweep verdict. Every expired lease ends its attempt row `expired`; a requeued job is due now.
 *
 * @since 0.2.0
 * @category rules
 */
export const sweepTransition = (job: Job, now: number, verdict: SweepVerdict): Transition => {
  if (verdict._tag === "Overdue") {
    return transition(job, now, { state: step(job.state, "abandon"), abandonReason: "deadline", ...leaseCleared })
  }
  const end = expiredEnd(job)
  if (verdict.reason === "requeue") {
    return transition(job, now, { state: step(job.state, "expire"), runAfter: now, ...leaseCleared }, { end })
  }
  return settleBy(job, now, verdict.reason, true, end)
}

/**
 * Whether a queued job should be handed to a transport again: due, not past its deadline, and neither written nor
 * republished for more than `republishAfterMs` (its last touch is the later of `updatedAt` and `republishedAt`).
 * Strictly more, so a job touched at `now` is never stale at `now`, even with `republishAfterMs` 0: two sweeps at one
 * store instant never republish one job twice, and a Postgres sweep that locks a row a concurrent sweep has just
 * republished re-checks it out instead of taking it ahead of an older one.
 *
 * @since 0.2.0
 * @category rules
 */
export const isStale = (job: Job, republishedAt: number | null, now: number, republishAfterMs: number): boolean =>
  job.state === "queued" &&
  job.runAfter <= now &&
  (job.deadlineAt === null || job.deadlineAt > now) &&
  lastTouched(job, republishedAt) < now - republishAfterMs

/**
 * The later of `updatedAt` and the last republish mark: what staleness is measured from.
 *
 * @since 0.2.0
 * @category rules
 */
export const lastTouched = (job: Job, republishedAt: number | null): number =>
  Math.max(job.updatedAt, republishedAt ?? job.updatedAt)

/**
 * Defaults every backend applies: a sweep writes at most 1000 jobs and republishes after 30 s; a listing returns 50.
 *
 * @since 0.2.0
 * @category rules
 */
export const defaults = { sweepLimit: 1000, republishAfterMs: 30_000, listLimit: 50 } as const
