/**
 * The JSON shapes the HTTP API returns. A view is a pure function of the job record: the same record always gives
 * the same view, the same `ETag` and the same SSE event id, so clients can cache and resume on them.
 *
 * @since 0.1.0
 */
import { type Attempt, type Charge, isTerminal, type Job, JobState } from "@slowcall/core/Job"
import { redact, truncate } from "@slowcall/core/Normalize"
import { Schema } from "effect"

const IsoOrNull = Schema.NullOr(Schema.String)

/**
 * The job view of the HTTP contract: every time is an ISO-8601 string, store time. `attempts` counts every claim
 * of the job's life, `runAttempts` those of its current run, the ones `maxAttempts` caps (a replayed dead letter
 * starts a new run: 5 attempts in all, 1 of 3 in this run).
 *
 * @since 0.1.0
 * @category models
 */
export const JobView = Schema.Struct({
  id: Schema.String,
  type: Schema.String,
  version: Schema.Int,
  state: JobState,
  abandonReason: Schema.NullOr(Schema.String),
  attempts: Schema.Int,
  /** Attempts counted against `maxAttempts` in the current run (a replay starts a new run). */
  runAttempts: Schema.Int,
  maxAttempts: Schema.Int,
  progress: Schema.Number,
  costCents: Schema.Number,
  budgetCents: Schema.NullOr(Schema.Number),
  errorClass: Schema.NullOr(Schema.String),
  lastError: Schema.NullOr(Schema.String),
  result: Schema.Unknown,
  createdAt: Schema.String,
  updatedAt: Schema.String,
  runAfter: Schema.String,
  deadline: IsoOrNull
})
/**
 * @since 0.1.0
 * @category models
 */
export type JobView = typeof JobView.Type

const iso = (ms: number): string => new Date(Math.floor(ms)).toISOString()

/**
 * The view of one job record. Internal fields (lease, token, tenant, input) never leave the server through it, and
 * `lastError` is shown redacted.
 *
 * @since 0.1.0
 * @category constructors
 */
export const jobView = (job: Job): JobView => ({
  id: job.id,
  type: job.type,
  version: job.version,
  state: job.state,
  abandonReason: job.abandonReason,
  attempts: job.attempts,
  runAttempts: job.attempts - job.attemptsBase,
  maxAttempts: job.maxAttempts,
  progress: job.progress,
  costCents: job.costCents,
  budgetCents: job.budgetCents,
  errorClass: job.errorClass,
  lastError: job.lastError === null ? null : redactEvidence(job.lastError),
  result: job.result,
  createdAt: iso(job.createdAt),
  updatedAt: iso(job.updatedAt),
  runAfter: iso(job.runAfter),
  deadline: job.deadlineAt === null ? null : iso(job.deadlineAt)
})

/**
 * The version of a job record as an integer that strictly increases with every accepted write: `updatedAt` in
 * microseconds. Used as the SSE event id and inside the `ETag`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const revision = (job: Pick<Job, "updatedAt">): number => Math.round(job.updatedAt * 1000)

/**
 * A strong entity tag that changes exactly when the job record changes.
 *
 * @since 0.1.0
 * @category combinators
 */
export const etag = (job: Pick<Job, "id" | "updatedAt">): string => `"${job.id}.${revision(job)}"`

/**
 * Whether an `If-None-Match` header value names the given tag (a list, a weak form or `*` all match).
 *
 * @since 0.1.0
 * @category combinators
 */
export const etagMatches = (header: string | undefined, tag: string): boolean => {
  if (header === undefined) return false
  return header
    .split(",")
    .map((part) => part.trim().replace(/^W\//, ""))
    .some((part) => part === "*" || part === tag)
}

/**
 * The polling hint in whole seconds for a job that is not terminal: 1 s for a young job, growing with the job's
 * age (one more second per 10 s of age) up to 30 s, so a long job is not polled as often as a short one.
 * `undefined` for a terminal job: nothing will change any more.
 *
 * @since 0.1.0
 * @category combinators
 */
export const retryAfterSeconds = (job: Pick<Job, "state" | "createdAt">, now: number): number | undefined => {
  if (isTerminal(job.state)) return undefined
  const ageSeconds = Math.max(0, (now - job.createdAt) / 1000)
  return Math.min(30, 1 + Math.floor(ageSeconds / 10))
}

/**
 * One attempt as the dashboard shows it: times in ISO-8601, evidence redacted.
 *
 * @since 0.1.0
 * @category models
 */
export const AttemptView = Schema.Struct({
  token: Schema.Int,
  worker: Schema.String,
  startedAt: Schema.String,
  endedAt: IsoOrNull,
  outcome: Schema.String,
  errorClass: Schema.NullOr(Schema.String),
  evidence: Schema.NullOr(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type AttemptView = typeof AttemptView.Type

/**
 * One ledger row as the dashboard shows it.
 *
 * @since 0.1.0
 * @category models
 */
export const ChargeView = Schema.Struct({
  callId: Schema.String,
  token: Schema.Int,
  amountCents: Schema.Number,
  settled: Schema.Boolean,
  createdAt: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type ChargeView = typeof ChargeView.Type

/**
 * One moment in a job's life, oldest first.
 *
 * @since 0.1.0
 * @category models
 */
export const TimelineEntry = Schema.Struct({
  at: Schema.String,
  event: Schema.String,
  detail: Schema.NullOr(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type TimelineEntry = typeof TimelineEntry.Type

/**
 * Evidence as it may be shown: credentials removed (`Normalize.redact`) and the text cut to 2,000 characters.
 * Workers store redacted evidence already; the view applies the same rule again so that a screen never shows a key,
 * whatever wrote the row.
 *
 * @since 0.1.0
 * @category combinators
 */
export const redactEvidence = (text: string): string => truncate(redact(text))

/**
 * The detail of one job for the dashboard's job page: the view, attempts, charges and a timeline built from them.
 *
 * @since 0.1.0
 * @category models
 */
export const JobDetail = Schema.Struct({
  job: JobView,
  attempts: Schema.Array(AttemptView),
  charges: Schema.Array(ChargeView),
  timeline: Schema.Array(TimelineEntry)
})
/**
 * @since 0.1.0
 * @category models
 */
export type JobDetail = typeof JobDetail.Type

/**
 * Builds the job page's data. The timeline is ordered by time, ties kept in the order the facts happen.
 *
 * @since 0.1.0
 * @category constructors
 */
export const jobDetail = (job: Job, attempts: ReadonlyArray<Attempt>, charges: ReadonlyArray<Charge>): JobDetail => {
  const events: Array<{ at: number; order: number; event: string; detail: string | null }> = []
  events.push({ at: job.createdAt, order: 0, event: "submitted", detail: `${job.type} v${job.version}` })
  for (const attempt of attempts) {
    events.push({ at: attempt.startedAt, order: 1, event: `attempt ${attempt.token} claimed`, detail: attempt.worker })
    if (attempt.endedAt !== null) {
      events.push({
        at: attempt.endedAt,
        order: 3,
        event: `attempt ${attempt.token} ${attempt.outcome}`,
        detail: attempt.errorClass
      })
    }
  }
  for (const charge of charges) {
    events.push({
      at: charge.createdAt,
      order: 2,
      event: charge.settled ? "charged" : "reserved",
      detail: `${charge.amountCents}¢ (${charge.callId})`
    })
  }
  if (isTerminal(job.state)) {
    events.push({
      at: job.updatedAt,
      order: 4,
      event: job.state,
      detail: job.abandonReason ?? job.errorClass ?? null
    })
  }
  events.sort((a, b) => a.at - b.at || a.order - b.order)
  return {
    job: jobView(job),
    attempts: attempts.map((attempt) => ({
      token: attempt.token,
      worker: attempt.worker,
      startedAt: iso(attempt.startedAt),
      endedAt: attempt.endedAt === null ? null : iso(attempt.endedAt),
      outcome: attempt.outcome,
      errorClass: attempt.errorClass,
      evidence: attempt.evidence === null ? null : redactEvidence(attempt.evidence)
    })),
    charges: charges.map((charge) => ({
      callId: charge.callId,
      token: charge.token,
      amountCents: charge.amountCents,
      settled: charge.settled,
      createdAt: iso(charge.createdAt)
    })),
    timeline: events.map((entry) => ({ at: iso(entry.at), event: entry.event, detail: entry.detail }))
  }
}
