/**
 * Rows to models. Statements already convert timestamps to epoch milliseconds; this rounds them to the
 * microsecond (the store's resolution) and renames columns.
 *
 * @internal
 */

import type { ErrorClass } from "@slowcall/core/ErrorClass"
import type { AbandonReason, Attempt, AttemptOutcome, Charge, Job, JobId, JobState, Json } from "@slowcall/core/Job"

/** @internal */
export type Row = Record<string, unknown>

/**
 * Epoch milliseconds rounded to the microsecond, the store's resolution.
 *
 * @internal
 */
export const micros = (value: unknown): number => Math.round(Number(value) * 1000) / 1000

const nullableMicros = (value: unknown): number | null => (value === null || value === undefined ? null : micros(value))

const str = (value: unknown): string | null => (value === null || value === undefined ? null : String(value))

const num = (value: unknown): number => Number(value)

/** @internal */
export const toJob = (row: Row): Job => ({
  id: String(row.id) as JobId,
  queue: String(row.queue),
  tenant: str(row.tenant),
  type: String(row.type),
  version: num(row.version),
  requestKey: str(row.request_key),
  inputHash: String(row.input_hash),
  input: (row.input ?? null) as Json | null,
  inputRef: str(row.input_ref),
  fingerprint: str(row.fingerprint),
  state: row.state as JobState,
  abandonReason: (row.abandon_reason ?? null) as AbandonReason | null,
  attempts: num(row.attempts),
  attemptsBase: num(row.attempts_base),
  maxAttempts: num(row.max_attempts),
  leaseToken: num(row.lease_token),
  leaseOwner: str(row.lease_owner),
  leaseUntil: nullableMicros(row.lease_until),
  runAfter: micros(row.run_after),
  priority: num(row.priority),
  deadlineAt: nullableMicros(row.deadline_at),
  budgetCents: row.budget_cents === null || row.budget_cents === undefined ? null : num(row.budget_cents),
  costCents: num(row.cost_cents),
  errorClass: (row.error_class ?? null) as ErrorClass | null,
  lastError: str(row.last_error),
  progress: num(row.progress),
  result: (row.result ?? null) as Json | null,
  cancelRequestedAt: nullableMicros(row.cancel_requested_at),
  traceId: str(row.trace_id),
  createdAt: micros(row.created_at),
  updatedAt: micros(row.updated_at)
})

/**
 * The job of a reply row, or undefined when the row carries none (no such job).
 *
 * @internal
 */
export const toJobOrUndefined = (row: Row | undefined): Job | undefined =>
  row === undefined || row.id === null || row.id === undefined ? undefined : toJob(row)

/** @internal */
export const toAttempt = (row: Row): Attempt => ({
  jobId: String(row.job_id) as JobId,
  token: num(row.token),
  worker: String(row.worker),
  startedAt: micros(row.started_at),
  endedAt: nullableMicros(row.ended_at),
  outcome: row.outcome as AttemptOutcome,
  errorClass: (row.error_class ?? null) as ErrorClass | null,
  evidence: str(row.evidence)
})

/** @internal */
export const toCharge = (row: Row): Charge => ({
  jobId: String(row.job_id) as JobId,
  callId: String(row.call_id),
  token: num(row.token),
  amountCents: num(row.amount_cents),
  settled: row.settled === true,
  createdAt: micros(row.created_at),
  updatedAt: micros(row.updated_at)
})

/** JSON for a `jsonb` parameter: always text, so arrays are never turned into SQL arrays by the driver. */
export const jsonParam = (value: Json | null | undefined): string | null =>
  value === null || value === undefined ? null : JSON.stringify(value)

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Whether a string can name a row at all (anything else is simply not found, never a cast error). */
export const isUuid = (value: string): boolean => UUID.test(value)
