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
 * What a model call that returned an error of a class is taken to have cost, when its handler does not say
 * (`CallOptions.costOnError`):
 * - `nothing`: providers do not bill a request they rejected, throttled or shed (rate limits, overload, invalid or
 *   unauthorised requests, an exhausted quota, an input over the context window): the reservation is settled at 0;
 * - `estimate`: the provider may have billed (the reply was lost to a timeout or a dropped connection, a 5xx may
 *   follow a finished generation, a filter may stop an output already generated, or the failure is not known): the
 *   reservation stays as the record, unsettled, so spend is never under-counted.
 *
 * @since 0.3.0
 * @category models
 */
export type BilledOnError = "nothing" | "estimate"

/**
 * How an error class is retried, and what a failed call of that class cost. `retryable: false` means the job fails
 * at once (the same input would fail the same way, or retrying would spend money the account does not have). For
 * retryable classes the delay before attempt `n` is drawn with full jitter from `[0, min(capMs, baseMs * 2^(n-1))]`;
 * when `honoursRetryAfter` is set, a server's Retry-After hint is a floor under that draw.
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
  /** What a call that failed with this class is taken to have cost when its handler does not say. */
  readonly billedOnError: BilledOnError
  /** One line for dashboards and docs: what the class means. */
  readonly description: string
}

const retry = <C extends ErrorClass>(
  errorClass: C,
  baseMs: number,
  capMs: number,
  honoursRetryAfter: boolean,
  billedOnError: BilledOnError,
  description: string
): ClassPolicy & { readonly errorClass: C } => ({
  errorClass,
  retryable: true,
  baseMs,
  capMs,
  honoursRetryAfter,
  billedOnError,
  description
})

const permanent = <C extends ErrorClass>(
  errorClass: C,
  billedOnError: BilledOnError,
  description: string
): ClassPolicy & { readonly errorClass: C } => ({
  errorClass,
  retryable: false,
  baseMs: 0,
  capMs: 0,
  honoursRetryAfter: false,
  billedOnError,
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
 * - What a failed call cost (`BilledOnError`): `nothing` for `rate_limited`, `overloaded`, `invalid_request`, `auth`,
 *   `quota_exhausted` and `context_length`; the `estimate` for every other class.
 *
 * @since 0.1.0
 * @category models
 */
export const policies: { readonly [C in ErrorClass]: ClassPolicy & { readonly errorClass: C } } = {
  rate_limited: retry(
    "rate_limited",
    1_000,
    60_000,
    true,
    "nothing",
    "the provider throttled this caller; wait as told"
  ),
  overloaded: retry(
    "overloaded",
    5_000,
    120_000,
    true,
    "nothing",
    "the provider is overloaded for everyone; back off longer"
  ),
  timeout: retry(
    "timeout",
    1_000,
    30_000,
    true,
    "estimate",
    "no answer in time; the provider may still have billed the call"
  ),
  network: retry("network", 500, 30_000, false, "estimate", "the connection failed (reset, refused, DNS, socket)"),
  server_error: retry("server_error", 1_000, 60_000, true, "estimate", "the provider failed on its side (5xx)"),
  invalid_request: permanent(
    "invalid_request",
    "nothing",
    "the request is malformed or names something that does not exist"
  ),
  auth: permanent("auth", "nothing", "the credentials are missing, invalid or not allowed to do this"),
  quota_exhausted: permanent(
    "quota_exhausted",
    "nothing",
    "the account is out of credit or quota; retrying cannot help"
  ),
  content_filtered: permanent(
    "content_filtered",
    "estimate",
    "the provider's safety filter refused the input or output"
  ),
  context_length: permanent("context_length", "nothing", "the input does not fit the model's context window"),
  cancelled: permanent("cancelled", "estimate", "the call was cancelled or interrupted on purpose"),
  lease_lost: permanent("lease_lost", "estimate", "this worker's lease was taken over; it must stop and not commit"),
  lease_expired: retry(
    "lease_expired",
    1_000,
    60_000,
    false,
    "estimate",
    "the worker holding the lease stopped heartbeating"
  ),
  invalid_input: permanent("invalid_input", "estimate", "the job input is not valid for its handler"),
  unknown_job_version: permanent(
    "unknown_job_version",
    "estimate",
    "no handler is registered for this type and version"
  ),
  unknown: retry("unknown", 2_000, 60_000, true, "estimate", "an unrecognised failure; see the evidence")
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
 * The amount a model call that failed with this class settles at when its handler gives no cost for the error:
 * 0 where providers do not bill (`billedOnError: "nothing"`), `undefined` where they may have (the reservation then
 * stays as the record). See `BilledOnError`.
 *
 * @since 0.3.0
 * @category combinators
 */
export const defaultCostOnError = (errorClass: ErrorClass): 0 | undefined =>
  policies[errorClass].billedOnError === "nothing" ? 0 : undefined

/**
 * Every error class, in the order of the `ErrorClass` literal.
 *
 * @since 0.1.0
 * @category models
 */
export const all: ReadonlyArray<ErrorClass> = ErrorClass.literals
