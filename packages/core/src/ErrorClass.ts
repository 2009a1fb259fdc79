/**
 * The normalised error classes and the retry policy of each. The class, never a vendor string, decides whether a job is
 * attempted again and how long it waits first; attempts, deadline and spend still cap every retry.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * Normalised error classes: stable codes that never carry a vendor string, so dashboards and dead-letter groups
 * stay meaningful across providers. `policies` below gives each its retry policy.
 *
 * @since 0.1.0
 * @category models
 */
export const ErrorClass = Schema.Literal(
  "rate_limited",
  "overloaded",
  "timeout",
  "network",
  "server_error",
  "invalid_request",
  "auth",
  "quota_exhausted",
  "content_filtered",
  "context_length",
  "cancelled",
  "lease_lost",
  "lease_expired",
  "invalid_input",
  "unknown_job_version",
  "unknown"
)
/**
 * @since 0.1.0
 * @category models
 */
export type ErrorClass = typeof ErrorClass.Type

/**
 * How an error class is retried. `retryable: false` means the job fails at once (the same input would fail the
 * same way, or retrying would spend money the account does not have). For retryable classes the delay before
 * attempt `n` is drawn with full jitter from `[0, min(capMs, baseMs * 2^(n-1))]`; when `honoursRetryAfter` is set,
 * a server's Retry-After hint is a floor under that draw.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClassPolicy {
  readonly errorClass: ErrorClass
  readonly retryable: boolean
  readonly baseMs: number
  readonly capMs: number
  readonly honoursRetryAfter: boolean
  /** One line for dashboards and docs: what the class means. */
  readonly description: string
}

const retry = <C extends ErrorClass>(
  errorClass: C,
  baseMs: number,
  capMs: number,
  honoursRetryAfter: boolean,
  description: string
): ClassPolicy & { readonly errorClass: C } => ({
  errorClass,
  retryable: true,
  baseMs,
  capMs,
  honoursRetryAfter,
  description
})

const permanent = <C extends ErrorClass>(
  errorClass: C,
  description: string
): ClassPolicy & { readonly errorClass: C } => ({
  errorClass,
  retryable: false,
  baseMs: 0,
  capMs: 0,
  honoursRetryAfter: false,
  description
})

/**
 * The policy table: exactly one entry per `ErrorClass`, so adding a class to the `ErrorClass` literal without a policy is a
 * type error here.
 *
 * - Transient provider trouble (`rate_limited`, `overloaded`, `timeout`, `network`, `server_error`) is retried;
 *   `overloaded` starts from a longer base because the provider asked everyone to back off.
 * - `lease_expired` is retried: the sweeper hands the job back to the queue while attempts remain.
 * - `unknown` is retried, bounded by attempts and budget, because an unrecognised failure is more often transient
 *   than not; its evidence is kept so the class can be refined.
 * - Everything else is permanent. `quota_exhausted` is permanent because it is about money, not load: retrying
 *   cannot succeed until someone pays. `lease_lost` is permanent for the worker that saw it: it must stop, and the
 *   current lease holder owns the job.
 *
 * @since 0.1.0
 * @category models
 */
export const policies: { readonly [C in ErrorClass]: ClassPolicy & { readonly errorClass: C } } = {
  rate_limited: retry("rate_limited", 1_000, 60_000, true, "the provider throttled this caller; wait as told"),
  overloaded: retry("overloaded", 5_000, 120_000, true, "the provider is overloaded for everyone; back off longer"),
  timeout: retry("timeout", 1_000, 30_000, true, "no answer in time; the provider may still have billed the call"),
  network: retry("network", 500, 30_000, false, "the connection failed (reset, refused, DNS, socket)"),
  server_error: retry("server_error", 1_000, 60_000, true, "the provider failed on its side (5xx)"),
  invalid_request: permanent("invalid_request", "the request is malformed or names something that does not exist"),
  auth: permanent("auth", "the credentials are missing, invalid or not allowed to do this"),
  quota_exhausted: permanent("quota_exhausted", "the account is out of credit or quota; retrying cannot help"),
  content_filtered: permanent("content_filtered", "the provider's safety filter refused the input or output"),
  context_length: permanent("context_length", "the input does not fit the model's context window"),
  cancelled: permanent("cancelled", "the call was cancelled or interrupted on purpose"),
  lease_lost: permanent("lease_lost", "this worker's lease was taken over; it must stop and not commit"),
  lease_expired: retry("lease_expired", 1_000, 60_000, false, "the worker holding the lease stopped heartbeating"),
  invalid_input: permanent("invalid_input", "the job input is not valid for its handler"),
  unknown_job_version: permanent("unknown_job_version", "no handler is registered for this type and version"),
  unknown: retry("unknown", 2_000, 60_000, true, "an unrecognised failure; see the evidence")
}

/**
 * The policy of one error class. Total: every class has exactly one policy.
 *
 * @since 0.1.0
 * @category constructors
 */
export const policy = (errorClass: ErrorClass): ClassPolicy => policies[errorClass]

/**
 * Whether a job that failed with this class may be attempted again (subject to attempts, deadline and budget).
 *
 * @since 0.1.0
 * @category combinators
 */
export const isRetryable = (errorClass: ErrorClass): boolean => policies[errorClass].retryable

/**
 * Every error class, in the order of the `ErrorClass` literal.
 *
 * @since 0.1.0
 * @category models
 */
export const all: ReadonlyArray<ErrorClass> = ErrorClass.literals
