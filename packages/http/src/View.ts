/**
 * The JSON shapes the HTTP API returns. A view is a pure function of the job record: the same record always gives
 * the same view, the same `ETag` and the same SSE event id, so clients can cache and resume on them.
 *
 * @since 0.1.0
 */
import { type Attempt, type Charge, isTerminal, type Job, JobState } from "@slowcall/core/Job"
import { redact, truncate } from "@slowcall/core/Normalize"
import { throttleOf } from "@slowcall/core/Protocol"
import { redactJson } from "@slowcall/core/Redact"
import { Schema } from "effect"

const IsoOrNull = Schema.NullOr(Schema.String)

/**
 * How much of a job's input a view shows: `input` whole up to `inputLimitBytes` of JSON (UTF-8), and a preview of
 * `previewLength` characters.
 *
 * @since 0.5.0
 * @category constants
 */
export const inputLimits = { inputLimitBytes: 8192, previewLength: 300 } as const

/**
 * The job's input as a view shows it, always after `Redact.redactJson` (the rules evidence is redacted by):
 * - `input`: the redacted input, or `null` when the job has only an `inputRef` or when the redacted JSON is longer
 *   than `inputLimits.inputLimitBytes` (then `inputTruncated` is true);
 * - `inputPreview`: the redacted input as compact JSON, cut to `inputLimits.previewLength` characters (the last one
 *   `…` when cut); `null` when the job has no inline input (only an `inputRef`);
 * - `inputRef`: the reference of input kept elsewhere, redacted like text (a signed URL loses its signature).
 *
 * @since 0.5.0
 * @category models
 */
export interface InputView {
  readonly input: unknown
  readonly inputPreview: string | null
  readonly inputTruncated: boolean
  readonly inputRef: string | null
}

/** At most `length` characters of `text` (whole code points), the last one `…` when something was cut. */
const cut = (text: string, length: number): string => {
  if (text.length <= length) return text
  let out = ""
  let count = 0
  for (const char of text) {
    if (count === length - 1) return `${out}…`
    out += char
    count += 1
  }
  return out
}

const encoder = new TextEncoder()

/**
 * The input fields of a job's views (`InputView`). A pure function of the record, so a view's `ETag` still changes
 * exactly when the record does.
 *
 * @since 0.5.0
 * @category constructors
 */
export const inputView = (job: Pick<Job, "input" | "inputRef">): InputView => {
  if (job.inputRef !== null) {
    return { input: null, inputPreview: null, inputTruncated: false, inputRef: redact(job.inputRef) }
  }
  const redacted = redactJson(job.input)
  const text = JSON.stringify(redacted)
  // A UTF-8 encoding is never shorter than the string's UTF-16 length: only a short text needs encoding to measure.
  const truncated =
    text.length > inputLimits.inputLimitBytes || encoder.encode(text).length > inputLimits.inputLimitBytes
  return {
    input: truncated ? null : redacted,
    inputPreview: cut(text, inputLimits.previewLength),
    inputTruncated: truncated,
    inputRef: null
  }
}

/**
 * The job view of the HTTP contract: every time is an ISO-8601 string, store time. `attempts` counts every claim
 * of the job's life, `runAttempts` those of its current run, the ones `maxAttempts` caps (a replayed dead letter
 * starts a new run: 5 attempts in all, 1 of 3 in this run). `leaseUntil` is when the running attempt's lease ends
 * (null unless running): a running job whose lease ended before the store's `now` has a worker that stopped
 * renewing it, and the next claim or sweep takes it over. `throttled` is set while the job waits for its provider
 * resource (`Protocol.throttleOf`): the resource, why, and until when (its `runAfter`); such a wait used no attempt.
 * The input fields are `InputView`'s: redacted, bounded.
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
  deadline: IsoOrNull,
  leaseUntil: IsoOrNull,
  throttled: Schema.NullOr(
    Schema.Struct({ resource: Schema.String, reason: Schema.String, until: Schema.String })
  ).annotations({
    description:
      "set while the job waits for its provider resource (no capacity, a paused resource, a 429): which resource, why, and until when; its attempt was not used"
  }),
  input: Schema.Unknown.annotations({
    description: "the input, redacted; null when only inputRef is set or when it is longer than 8 KB of JSON"
  }),
  inputPreview: Schema.NullOr(Schema.String).annotations({
    description: "the redacted input as compact JSON, at most 300 characters (ending in … when cut)"
  }),
  inputTruncated: Schema.Boolean.annotations({ description: "input was withheld: its JSON is longer than 8 KB" }),
  inputRef: Schema.NullOr(Schema.String).annotations({ description: "the reference of input kept elsewhere" })
})
/**
 * @since 0.1.0
 * @category models
 */
export type JobView = typeof JobView.Type

const iso = (ms: number): string => new Date(Math.floor(ms)).toISOString()

/**
 * The view of one job record. Internal fields (lease token and owner, tenant) never leave the server through it;
 * the input leaves redacted and bounded (`inputView`), and `lastError` redacted.
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
  deadline: job.deadlineAt === null ? null : iso(job.deadlineAt),
  leaseUntil: job.state === "running" && job.leaseUntil !== null ? iso(job.leaseUntil) : null,
  throttled: throttledView(job),
  ...inputView(job)
})

/** The `throttled` field: `Protocol.throttleOf` with its time as ISO 8601. */
const throttledView = (job: Job): { resource: string; reason: string; until: string } | null => {
  const note = throttleOf(job)
  return note === undefined ? null : { resource: note.resource, reason: note.why, until: iso(note.until) }
}

/**
 * An amount of cents as money, the one rule of every amount the dashboard and the job page's timeline show: US
 * dollars with two decimals (`$10.00`, `$0.03`), more decimals only when two cannot show the amount (`$0.025`,
 * `$0.004`), at most six (a millionth of a dollar, 0.0001¢; anything smaller rounds), thousands grouped
 * (`$1,234.50`).
 *
 * @since 0.4.0
 * @category combinators
 */
export const money = (cents: number): string => {
  const millionths = Math.round(cents * 10_000)
  const sign = millionths < 0 ? "-" : ""
  const abs = Math.abs(millionths)
  const whole = String(Math.floor(abs / 1_000_000)).replace(/\B(?=(\d{3})+(?!\d))/g, ",")
  const fraction = String(abs % 1_000_000)
    .padStart(6, "0")
    .replace(/0+$/, "")
    .padEnd(2, "0")
  return `${sign}$${whole}.${fraction}`
}

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
  /** Store time when the detail was read: what `job.leaseUntil` and the ages on the page are measured against. */
  now: Schema.String,
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
 * Builds the job page's data as read at store time `now`. The timeline is ordered by time, ties kept in the order
 * the facts happen.
 *
 * @since 0.1.0
 * @category constructors
 */
export const jobDetail = (
  job: Job,
  attempts: ReadonlyArray<Attempt>,
  charges: ReadonlyArray<Charge>,
  now: number
): JobDetail => {
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
      detail: `${money(charge.amountCents)} (${charge.callId})`
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
    now: iso(now),
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

/**
 * A job's attempts as people read them: the current run's count against `maxAttempts`, the cap it counts towards,
 * and the lifetime count when a replay started a new run (`3/3 (9 in all)`; `2/3` when they are the same). A count
 * above the cap never shows: a run stops at its cap, only the lifetime count grows past it. The CLI prints this text,
 * and the dashboard's job list writes the same.
 *
 * @since 0.3.0
 * @category combinators
 */
export const attemptsText = (job: Pick<JobView, "attempts" | "runAttempts" | "maxAttempts">): string =>
  `${job.runAttempts}/${job.maxAttempts}${job.attempts === job.runAttempts ? "" : ` (${job.attempts} in all)`}`
