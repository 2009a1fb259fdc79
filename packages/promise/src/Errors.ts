/**
 * The errors a Promise caller sees. Every one is an instance of `SlowcallError` (itself an `Error`), carries a
 * stable `code`, and keeps what it was made from in `.cause` (the core's tagged error, or the validator's issues):
 * `instanceof` picks the case, `.cause` keeps the detail. `fromCore` is the one mapping from the core's typed
 * failures; anything it does not know is passed through untouched, so a handler's own error is never disguised.
 *
 * @since 0.1.0
 */

/**
 * The base of every error this package throws. `code` is stable across releases (match on it, or on the class).
 *
 * @since 0.1.0
 * @category errors
 */
export class SlowcallError extends Error {
  readonly code: string
  constructor(code: string, message: string, options?: { readonly cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.code = code
    this.name = new.target.name
  }
}

/**
 * One problem a validator found: a message and the path to the offending value (empty for the root).
 *
 * @since 0.1.0
 * @category models
 */
export interface Issue {
  readonly message: string
  readonly path: ReadonlyArray<PropertyKey>
}

/**
 * Input refused before anything was written: it failed the handler's schema, is not plain JSON, or an option is
 * out of range. `issues` lists what was wrong (at least one).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidInput extends SlowcallError {
  readonly issues: ReadonlyArray<Issue>
  constructor(issues: ReadonlyArray<Issue>, options?: { readonly cause?: unknown }) {
    super("invalid_input", `invalid input: ${issues.map(formatIssue).join("; ")}`, options)
    this.issues = issues
  }
}

const formatIssue = (issue: Issue): string =>
  issue.path.length === 0 ? issue.message : `${issue.path.map(String).join(".")}: ${issue.message}`

/**
 * An idempotency key already names a job submitted with a different request; nothing was written.
 *
 * @since 0.1.0
 * @category errors
 */
export class KeyReused extends SlowcallError {
  readonly key: string
  readonly existingJobId: string | undefined
  constructor(key: string, existingJobId: string | undefined, options?: { readonly cause?: unknown }) {
    super("key_reused", `idempotency key ${JSON.stringify(key)} was used for a different request`, options)
    this.key = key
    this.existingJobId = existingJobId
  }
}

/**
 * No such job (or it belongs to another tenant).
 *
 * @since 0.1.0
 * @category errors
 */
export class NotFound extends SlowcallError {
  readonly jobId: string
  constructor(jobId: string, options?: { readonly cause?: unknown }) {
    super("not_found", `job ${jobId} not found`, options)
    this.jobId = jobId
  }
}

/**
 * No such batch (or it belongs to another tenant).
 *
 * @since 0.7.0
 * @category errors
 */
export class BatchNotFound extends SlowcallError {
  readonly batchId: string
  constructor(batchId: string, options?: { readonly cause?: unknown }) {
    super("batch_not_found", `batch ${batchId} not found`, options)
    this.batchId = batchId
  }
}

/**
 * The job has already ended (succeeded or abandoned): a cancel cannot undo that.
 *
 * @since 0.1.0
 * @category errors
 */
export class AlreadyTerminal extends SlowcallError {
  readonly jobId: string
  readonly state: string
  constructor(jobId: string, state: string, options?: { readonly cause?: unknown }) {
    super("already_terminal", `job ${jobId} is already ${state}`, options)
    this.jobId = jobId
    this.state = state
  }
}

/**
 * The queue is over its backlog bound; nothing was written. Try again after `retryAfterMs`.
 *
 * @since 0.1.0
 * @category errors
 */
export class QueueFull extends SlowcallError {
  readonly retryAfterMs: number
  constructor(message: string, retryAfterMs: number, options?: { readonly cause?: unknown }) {
    super("queue_full", message, options)
    this.retryAfterMs = retryAfterMs
  }
}

/**
 * A billed call refused because its estimate does not fit the job's budget: nothing was called. Let it propagate
 * out of the handler and the job ends `abandoned(budget)`.
 *
 * @since 0.1.0
 * @category errors
 */
export class BudgetExceeded extends SlowcallError {
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super("budget_exceeded", message, options)
  }
}

/**
 * A billed call refused because the job's deadline has passed (store time): nothing was called. Let it propagate
 * out of the handler and the job ends `abandoned(deadline)`.
 *
 * @since 0.1.0
 * @category errors
 */
export class DeadlineExceeded extends SlowcallError {
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super("deadline_exceeded", message, options)
  }
}

/**
 * This worker no longer holds the job's lease (another worker took it over): nothing more is written under it.
 *
 * @since 0.1.0
 * @category errors
 */
export class LeaseLost extends SlowcallError {
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super("lease_lost", message, options)
  }
}

/**
 * A billed call was cut while it ran or before it started (cancel, deadline, lost lease, shutdown); `ctx.signal` is
 * aborted too. What it consumed was settled (see `costOnInterrupt`).
 *
 * @since 0.1.0
 * @category errors
 */
export class Interrupted extends SlowcallError {
  constructor(message = "the call was interrupted", options?: { readonly cause?: unknown }) {
    super("interrupted", message, options)
  }
}

/**
 * The Store (database or Redis) failed. `retryable` says whether trying again may help; `ambiguous` that the
 * write may have applied (a timeout or a lost reply after sending).
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreUnavailable extends SlowcallError {
  readonly retryable: boolean
  readonly ambiguous: boolean
  constructor(message: string, retryable: boolean, ambiguous: boolean, options?: { readonly cause?: unknown }) {
    super("store_unavailable", message, options)
    this.retryable = retryable
    this.ambiguous = ambiguous
  }
}

/**
 * The Transport (SQS, or the Store's own message table) failed or refused its configuration.
 *
 * @since 0.1.0
 * @category errors
 */
export class TransportUnavailable extends SlowcallError {
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super("transport_unavailable", message, options)
  }
}

/**
 * `wait` gave up after its `timeoutMs`: the job goes on; only the waiting stopped.
 *
 * @since 0.1.0
 * @category errors
 */
export class Timeout extends SlowcallError {
  readonly jobId: string
  readonly timeoutMs: number
  constructor(jobId: string, timeoutMs: number) {
    super("timeout", `job ${jobId} did not end within ${timeoutMs} ms`)
    this.jobId = jobId
    this.timeoutMs = timeoutMs
  }
}

/**
 * Options `open` or `worker` cannot use (an unknown URL scheme, SQS beside the memory store, a closed queue, a worker
 * option the core `Worker` refuses with `InvalidWorkerOptions`, kept as `.cause`).
 *
 * @since 0.1.0
 * @category errors
 */
export class ConfigError extends SlowcallError {
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super("config", message, options)
  }
}

/**
 * The URL (or the `sqs` option) needs an adapter package that is not installed: the adapters are optional peer
 * dependencies, loaded when `open` first needs one, so an application installs only the ones its URLs name.
 * `packageName` is the package to install; nothing was opened.
 *
 * @since 0.1.0
 * @category errors
 */
export class AdapterNotInstalled extends SlowcallError {
  readonly packageName: string
  constructor(packageName: string, use: string, options?: { readonly cause?: unknown }) {
    super("adapter_not_installed", `install ${packageName} to use ${use} (npm install ${packageName})`, options)
    this.packageName = packageName
  }
}

const tagOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string"
    ? error._tag
    : undefined

const field = (error: unknown, name: string): unknown =>
  typeof error === "object" && error !== null ? (error as Record<string, unknown>)[name] : undefined

const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error)

/**
 * The facade error for one of the core's typed failures (by its `_tag`); a `SlowcallError` or anything the core
 * does not tag is returned as it is. The core error becomes `.cause`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromCore = (error: unknown): unknown => {
  if (error instanceof SlowcallError) return error
  const cause = { cause: error }
  switch (tagOf(error)) {
    case "InvalidInput":
      return new InvalidInput(
        [{ message: String(field(error, "message")), path: pathOf(String(field(error, "path") ?? "")) }],
        cause
      )
    case "IdempotencyKeyReused":
      return new KeyReused(
        String(field(error, "requestKey") ?? ""),
        optionalString(field(error, "existingJobId")),
        cause
      )
    case "JobNotFound":
      return new NotFound(String(field(error, "jobId")), cause)
    case "BatchNotFound":
      return new BatchNotFound(String(field(error, "batchId")), cause)
    case "AlreadyTerminal":
      return new AlreadyTerminal(String(field(error, "jobId")), String(field(error, "state")), cause)
    case "QueueFull":
      return new QueueFull(messageOf(error), Number(field(error, "retryAfterMs") ?? 0), cause)
    case "BudgetExceeded":
      return new BudgetExceeded(messageOf(error), cause)
    case "DeadlineExceeded":
      return new DeadlineExceeded(messageOf(error), cause)
    case "LeaseLost":
      return new LeaseLost(messageOf(error), cause)
    case "StoreError": {
      const reason = field(error, "reason")
      const retryable = reason !== "Constraint" && reason !== "Unknown"
      return new StoreUnavailable(messageOf(error), retryable, reason === "Ambiguous", cause)
    }
    case "InvalidWorkerOptions":
      return new ConfigError(messageOf(error), cause)
    case "TransportError":
    case "RedriveUnsafe":
      return new TransportUnavailable(messageOf(error), cause)
    default:
      return error
  }
}

const optionalString = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

const pathOf = (path: string): ReadonlyArray<PropertyKey> =>
  path === "" ? [] : path.split(".").map((part) => (/^\d+$/.test(part) ? Number(part) : part))
