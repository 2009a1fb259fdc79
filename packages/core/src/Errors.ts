/**
 * Typed failures. Domain facts get a class named for the fact; infrastructure failures get one error per seam
 * (`StoreError`, `TransportError`) with a `reason` and `isRetryable`. Bugs are defects, never typed errors.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { JobId, JobState } from "./Job.js"

/**
 * A fenced write (heartbeat, progress, complete, fail, retry, abandon, release) whose token is no longer the
 * job's current token, or whose job is no longer running. The write changed nothing. Never a silent no-op.
 *
 * @since 0.1.0
 * @category errors
 */
export class LeaseLost extends Schema.TaggedError<LeaseLost>()("LeaseLost", {
  jobId: JobId,
  token: Schema.Int,
  currentToken: Schema.NullOr(Schema.Int),
  state: Schema.NullOr(JobState)
}) {
  override get message() {
    return `lease lost on job ${this.jobId}: token ${this.token}, current ${this.currentToken}, state ${this.state}`
  }
}

/**
 * A submit reused an idempotency key for another request: a different input, type, version or option the key's
 * fingerprint covers (`Protocol.fingerprint`). The existing job is untouched.
 *
 * @since 0.1.0
 * @category errors
 */
export class IdempotencyKeyReused extends Schema.TaggedError<IdempotencyKeyReused>()("IdempotencyKeyReused", {
  requestKey: Schema.String,
  existingJobId: JobId
}) {
  override get message() {
    return `idempotency key ${JSON.stringify(this.requestKey)} was used for job ${this.existingJobId} by another request`
  }
}

/**
 * A submit refused because the queue (or the tenant's share of it) already holds as many queued jobs as the Client's
 * bound allows (`Client.ClientOptions.maxQueued`, `maxQueuedPerTenant`). Nothing was written; `retryAfterMs` is
 * when trying again is worth it. `tenant` is set when the tenant's bound was the one reached.
 *
 * @since 0.3.0
 * @category errors
 */
export class QueueFull extends Schema.TaggedError<QueueFull>()("QueueFull", {
  queue: Schema.String,
  tenant: Schema.NullOr(Schema.String),
  limit: Schema.Number,
  retryAfterMs: Schema.Number
}) {
  override get message() {
    const whose = this.tenant === null ? `queue ${JSON.stringify(this.queue)}` : `tenant ${JSON.stringify(this.tenant)}`
    return `${whose} already holds ${this.limit} queued jobs; try again in ${this.retryAfterMs} ms`
  }
}

/**
 * A transition outside the table of `StateMachine.ts`. Stores never perform one.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidTransition extends Schema.TaggedError<InvalidTransition>()("InvalidTransition", {
  from: JobState,
  event: Schema.String
}) {
  override get message() {
    return `invalid transition: ${this.event} is not allowed in state ${this.from}`
  }
}

/**
 * No job with this id (or not visible to this tenant).
 *
 * @since 0.1.0
 * @category errors
 */
export class JobNotFound extends Schema.TaggedError<JobNotFound>()("JobNotFound", { jobId: Schema.String }) {
  override get message() {
    return `job ${this.jobId} not found`
  }
}

/**
 * No batch with this id (or not visible to this tenant).
 *
 * @since 0.7.0
 * @category errors
 */
export class BatchNotFound extends Schema.TaggedError<BatchNotFound>()("BatchNotFound", { batchId: Schema.String }) {
  override get message() {
    return `batch ${this.batchId} not found`
  }
}

/**
 * An operation that only applies to live jobs (cancel) hit a terminal one. Nothing changed.
 *
 * @since 0.1.0
 * @category errors
 */
export class AlreadyTerminal extends Schema.TaggedError<AlreadyTerminal>()("AlreadyTerminal", {
  jobId: JobId,
  state: JobState
}) {
  override get message() {
    return `job ${this.jobId} is already ${this.state}`
  }
}

/**
 * Input that is not plain JSON (undefined, NaN, Infinity, functions, symbols, BigInt, cycles, class instances),
 * or that fails a handler's input schema. Rejected before anything is written.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  path: Schema.String,
  message: Schema.String
}) {}

/**
 * The Store failed. `reason` tells whether the write may have applied: `Ambiguous` means it may have (a timeout
 * or a lost reply after the request was sent); every other reason means it did not.
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreError extends Schema.TaggedError<StoreError>()("StoreError", {
  reason: Schema.Literal("Connection", "Timeout", "Conflict", "Ambiguous", "Constraint", "Unknown"),
  operation: Schema.String,
  detail: Schema.String
}) {
  /** Whether repeating the same operation is sensible. */
  get isRetryable(): boolean {
    return this.reason !== "Constraint" && this.reason !== "Unknown"
  }
  override get message() {
    return `store ${this.operation} failed (${this.reason}): ${this.detail}`
  }
}

/**
 * The Transport failed. Transports are at-least-once: any failure here only delays work, because the sweeper
 * republishes queued jobs that have no message in flight.
 *
 * @since 0.1.0
 * @category errors
 */
export class TransportError extends Schema.TaggedError<TransportError>()("TransportError", {
  reason: Schema.Literal("Connection", "Timeout", "Throttled", "Unknown"),
  operation: Schema.String,
  detail: Schema.String
}) {
  /** Whether repeating the same operation is sensible. */
  get isRetryable(): boolean {
    return this.reason !== "Unknown"
  }
  override get message() {
    return `transport ${this.operation} failed (${this.reason}): ${this.detail}`
  }
}
