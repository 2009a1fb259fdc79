/**
 * The Worker: receives deliveries from a Transport, claims each job in the Store before any model call, runs the
 * registered handler under a heartbeated lease, persists the outcome with fenced writes, and only then acks.
 *
 * Guarantees it keeps (with any Store and Transport that pass the conformance suites):
 * - A model call happens only under a lease this worker claimed; a duplicate delivery costs one claim.
 * - A worker that lost its lease (taken over, or unable to renew before its local lease end) stops its handler and
 *   commits nothing; what it spent stays in the charge ledger.
 * - A claim whose reply was lost is recognised by its unique owner tag and adopted, never counted as someone else's.
 * - The lease is kept (heartbeat and self-fencing watchdog) until the attempt's outcome is durable: a store outage
 *   shorter than the lease at commit time costs retries, never a second model call.
 * - A message is acked only after the job's outcome is durable; a failed persist leaves the message to return. A
 *   result the Store refuses for good (a non-retryable `StoreError`) fails the job with that evidence instead of
 *   being retried forever.
 * - No model call starts after the job's deadline (store time); a deadline seen at a heartbeat stops the handler.
 *   Both end the job `abandoned(deadline)`.
 * - An unknown (type, version) is deferred, never claimed: deploy skew loses nothing.
 * - Closing the scope stops receiving and starts no handler any more (a claim that lands later is released at once),
 *   lets running handlers finish for `shutdownGraceMs`, then interrupts the rest and releases their leases so another
 *   worker can claim them at once.
 *
 * Each attempt runs in a `slowcall.attempt` span (job id, type, version, token, trace id) when tracing is enabled
 * where the worker starts, and log lines of a delivery carry `worker`, `jobId`, `token` and `traceId` when the minimum
 * log level there is not `None`. Each is decided once at start (what is off costs no effect steps per delivery).
 *
 * @since 0.1.0
 */
import {
  Cause,
  Clock,
  Effect,
  Either,
  Exit,
  Fiber,
  FiberRef,
  FiberSet,
  Layer,
  Metric,
  Option,
  ParseResult,
  Schema,
  type Scope
} from "effect"
import * as Canonical from "./Canonical.js"
import { policy as classPolicy } from "./ErrorClass.js"
import type { LeaseLost, StoreError } from "./Errors.js"
import * as Handler from "./Handler.js"
import * as Ids from "./Ids.js"
import * as WorkerContext from "./internal/workerContext.js"
import * as Control from "./internal/workerControl.js"
import * as WorkerLease from "./internal/workerLease.js"
import { decide, type Ended } from "./internal/workerOutcome.js"
import { claimOne, retryStore, settleOne } from "./internal/workerStore.js"
import type { Job } from "./Job.js"
import * as Metrics from "./Metrics.js"
import * as Normalize from "./Normalize.js"
import type { Outcome } from "./Protocol.js"
import * as Protocol from "./Protocol.js"
import * as Retry from "./Retry.js"
import { Store } from "./Store.js"
import { type Delivery, Transport } from "./Transport.js"

/**
 * Worker configuration. Defaults: `concurrency` 1, `receiveWaitMs` 1 s, `shutdownGraceMs` 10 s,
 * `unknownHandlerDelayMs` 30 s, `busyMarginMs` 250 ms, retry delays from each error class's policy.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkerOptions<R> {
  readonly queue: string
  /**
   * Worker identity; generated when omitted. Each claim records `${id}/${tag}` as the lease owner, with a tag unique
   * to that claim, so the worker can tell its own lease from another process's even when ids are shared.
   */
  readonly id?: string | undefined
  readonly handlers: ReadonlyArray<Handler.Handler<any, any, R>>
  /** Jobs run at once. */
  readonly concurrency?: number | undefined
  /** Longest wait of one receive call. */
  readonly receiveWaitMs?: number | undefined
  /** How long a closing worker lets running handlers finish before interrupting them. */
  readonly shutdownGraceMs?: number | undefined
  /** Overrides of the backoff base and cap of every error class (Retry-After handling stays per class). */
  readonly retry?: { readonly baseMs?: number | undefined; readonly capMs?: number | undefined } | undefined
  /** How long a delivery with no handler here stays hidden before another worker may see it. */
  readonly unknownHandlerDelayMs?: number | undefined
  /** Added to a live lease's end when hiding a delivery of a busy job. */
  readonly busyMarginMs?: number | undefined
  /** Pause after a failed receive. */
  readonly receiveErrorDelayMs?: number | undefined
  /** How long a delivery is hidden when its claim could not reach the Store. */
  readonly storeErrorDelayMs?: number | undefined
  /** Admission hooks before each claim and around each model call (fleet-wide limits). */
  readonly admission?: Admission<R> | undefined
}

/**
 * A running worker. `inFlight` counts deliveries being processed (claims, handlers and outcome writes).
 *
 * @since 0.1.0
 * @category models
 */
export interface Worker {
  readonly id: string
  readonly inFlight: Effect.Effect<number>
}

/**
 * Hooks that admit work before it starts, for fleet-wide concurrency and rate limits. `beforeClaim` runs before a
 * delivery is claimed (`Defer` hides the delivery for `delayMs` without claiming: nothing is written); `aroundCall`
 * wraps each model call (it may wait for a permit before running the call, and must run it at most once). Without
 * hooks a worker admits everything and pays nothing for it.
 *
 * @since 0.2.0
 * @category models
 */
export interface Admission<R = never> {
  readonly beforeClaim?:
    | ((
        delivery: Delivery
      ) => Effect.Effect<{ readonly _tag: "Admit" } | { readonly _tag: "Defer"; readonly delayMs: number }, never, R>)
    | undefined
  readonly aroundCall?: WorkerContext.AroundCall | undefined
}

/** At most this many issues of a parse error are kept as evidence; the rest are counted. */
const maxIssues = 10

/**
 * A parse error as evidence: one line per issue, `path: message` (`(value)` for the value itself), at most
 * `maxIssues` of them and a count of the rest; short enough to read, unlike the schema's whole tree.
 */
const formatParseError = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const lines = issues
    .slice(0, maxIssues)
    .map((issue) => `${issue.path.length === 0 ? "(value)" : issue.path.map(String).join(".")}: ${issue.message}`)
  if (issues.length > maxIssues) lines.push(`and ${issues.length - maxIssues} more`)
  return evidenceOf(lines.join("\n"))
}

const evidenceOf = (text: string): string => Normalize.truncate(Normalize.redact(text))

/** A schema step's failure as evidence: the parse error, or the defect a throwing transformation left. */
const formatSchemaCause = (cause: Cause.Cause<ParseResult.ParseError>): string => {
  const failure = Cause.failureOption(cause)
  return Option.isSome(failure) ? formatParseError(failure.value) : evidenceOf(Cause.pretty(cause))
}

/**
 * Runs a schema parse in the calling fiber, as an exit. The parser settles a fully synchronous schema at once and
 * returns an `Either`, which is read here without an effect step; a schema with effectful transformations returns an
 * effect, which runs in this fiber (its Clock, logger and tracer), once. A throw while the parser is built or run is a
 * defect of the exit, never a crash of the delivery.
 */
const runSchema = <A>(
  parse: (value: any) => Effect.Effect<A, ParseResult.ParseError>,
  value: unknown
): Effect.Effect<Exit.Exit<A, ParseResult.ParseError>> => {
  let result: Effect.Effect<A, ParseResult.ParseError>
  try {
    result = parse(value)
  } catch (defect) {
    return Effect.succeed(Exit.die(defect))
  }
  if (Either.isEither(result)) {
    const settled = result as Either.Either<A, ParseResult.ParseError>
    return Effect.succeed(Either.isRight(settled) ? Exit.succeed(settled.right) : Exit.fail(settled.left))
  }
  return Effect.exit(result)
}

const isRetryableStoreError = (error: LeaseLost | StoreError): boolean =>
  error._tag === "StoreError" && error.isRetryable

/** Delay before retry `n` (0-based) of an outcome write while the lease is held: 50 ms doubling, at most 1 s. */
const heldRetryDelayMs = (n: number): number => Math.min(50 * 2 ** n, 1_000)

/** The handler's estimate for this input; a throwing estimate function is a handler bug, reported as such. */
const estimateEither = <R>(
  handler: Handler.Handler<any, any, R>,
  input: unknown
): Either.Either<number | undefined, string> => {
  try {
    return Either.right(Handler.estimateFor(handler, input))
  } catch (error) {
    return Either.left(evidenceOf(`estimate failed: ${error instanceof Error ? error.message : String(error)}`))
  }
}

/** An attempt whose lease is kept alive (heartbeat, watchdog) while its outcome is written. */
interface Held {
  readonly control: Control.Control
  readonly leaseMs: number
}

/** A written settlement: the job as it was left and the store time of the write. */
type Written = { readonly job: Job; readonly now: number }

/** Everything a worker's steps share: its services, resolved options and the state of its deliveries. */
interface Env<R> {
  readonly store: Store["Type"]
  readonly transport: Transport["Type"]
  readonly registry: Handler.Registry<R>
  readonly owner: string
  readonly instance: string
  readonly queue: string
  readonly concurrency: number
  readonly receiveWaitMs: number
  readonly shutdownGraceMs: number
  readonly unknownHandlerDelayMs: number
  readonly busyMarginMs: number
  readonly receiveErrorDelayMs: number
  readonly storeErrorDelayMs: number
  readonly visibilityMs: number
  /** The transport's longest delay (`capabilities.maxDelayMs`), or infinity. */
  readonly maxDelayMs: number
  readonly retry: WorkerOptions<R>["retry"]
  readonly admission: Admission<R> | undefined
  readonly logging: boolean
  readonly tracing: boolean
  readonly fibers: FiberSet.FiberSet<void, never>
  readonly running: Map<string, Control.Control>
  /** Set once when the scope starts closing; read and written only in synchronous steps. */
  closing: boolean
  /** Claims made, for owner tags unique per claim. */
  claims: number
  /** Free delivery slots; changed only in synchronous steps. */
  free: number
  slotWaiter: ((resume: Effect.Effect<void>) => void) | undefined
}

// Transport operations never fail the worker: a lost ack or defer only means the message returns, and the claim in
// the Store decides what happens then.
const ackDelivery = <R>(env: Env<R>, delivery: Delivery) =>
  env.transport
    .ack({ delivery })
    .pipe(Effect.catchAll((error) => Effect.logWarning("ack failed; the message will return", error)))

// A delay beyond the transport's longest is cut to it: the message returns early, and its claim defers it again.
const deferDelivery = <R>(env: Env<R>, delivery: Delivery, delayMs: number) =>
  env.transport
    .defer({ delivery, delayMs: Math.min(Math.max(0, Math.ceil(delayMs)), env.maxDelayMs) })
    .pipe(Effect.catchAll((error) => Effect.logWarning("defer failed; the message will return", error)))

/**
 * Retry an outcome write. Outside an attempt (no lease kept alive): a few quick retries. Inside one: while the lease
 * is this worker's (the heartbeat keeps it), for at most one lease length after the handler ended.
 */
const retryWrite = <A>(write: Effect.Effect<A, LeaseLost | StoreError>, held: Held | undefined) =>
  held === undefined
    ? retryStore(write)
    : Effect.flatMap(Clock.currentTimeMillis, (startedAt) => {
        const mayRetry = (error: LeaseLost | StoreError): Effect.Effect<boolean> =>
          isRetryableStoreError(error)
            ? Effect.map(
                Clock.currentTimeMillis,
                (now) => !Control.leaseGone(held.control.stopReason) && now - startedAt < held.leaseMs
              )
            : Effect.succeed(false)
        // The lease may be learned lost while a retry waits (a heartbeat's reply): then the write is not sent again.
        const again = (n: number, error: LeaseLost | StoreError): Effect.Effect<A, LeaseLost | StoreError> =>
          Effect.suspend(() => (Control.leaseGone(held.control.stopReason) ? Effect.fail(error) : attempt(n)))
        const attempt = (n: number): Effect.Effect<A, LeaseLost | StoreError> =>
          Effect.catchAll(write, (error) =>
            Effect.flatMap(mayRetry(error), (retry) =>
              retry ? Effect.zipRight(Effect.sleep(heldRetryDelayMs(n)), again(n + 1, error)) : Effect.fail(error)
            )
          )
        return attempt(0)
      })

/**
 * The one persist step: write a settlement (fenced, retried on retryable store errors), then ack a job that is
 * terminal or defer a queued one until it is due (`deferMs` overrides that wait). A lost lease stops the attempt's
 * lease keeping at once (no fenced write follows a `LeaseLost`) and defers the message; a write that could not be
 * made leaves the message to return.
 */
const persist = <R>(
  env: Env<R>,
  delivery: Delivery,
  write: Effect.Effect<Written, LeaseLost | StoreError>,
  held?: Held | undefined,
  deferMs?: number | undefined
) =>
  retryWrite(write, held).pipe(
    Effect.matchEffect({
      onFailure: (error) =>
        error._tag === "LeaseLost"
          ? (held === undefined ? Effect.void : Control.stop(held.control, "lease_lost")).pipe(
              Effect.zipRight(Metric.increment(Metrics.fencedWritesRejected)),
              Effect.zipRight(Effect.logWarning("outcome rejected: lease lost", error)),
              Effect.zipRight(deferDelivery(env, delivery, 0))
            )
          : Effect.logError("outcome not persisted; the message is left to return", error),
      onSuccess: ({ job, now }) =>
        Effect.zipRight(
          job.state === "failed" ? Metric.increment(Metrics.deadLetterArrivals) : Effect.void,
          job.state === "queued"
            ? deferDelivery(env, delivery, deferMs ?? Math.max(0, job.runAfter - now))
            : ackDelivery(env, delivery)
        )
    })
  )

/**
 * A settlement as a write. A result the Store refuses for good (a non-retryable `StoreError`, e.g. a value its
 * column type cannot hold) would be refused on every attempt, and each attempt calls the model again: the job fails
 * with that evidence instead. (A repeat of the whole write after a retryable failure tries `Complete` again first: it
 * is fenced, so at most one of the two writes applies.)
 */
const settleWith = <R>(env: Env<R>, job: Job, outcome: Outcome): Effect.Effect<Written, LeaseLost | StoreError> => {
  const write = settleOne(env.store, { jobId: job.id, token: job.leaseToken, outcome })
  if (outcome._tag !== "Complete") return write
  return Effect.catchIf(
    write,
    (error): error is StoreError => error._tag === "StoreError" && !error.isRetryable,
    (error) =>
      Effect.logError("the store refused the result; the job fails", error).pipe(
        Effect.zipRight(
          settleOne(env.store, {
            jobId: job.id,
            token: job.leaseToken,
            outcome: { _tag: "Fail", errorClass: "unknown", error: evidenceOf(`result not storable: ${error.detail}`) }
          })
        )
      )
  )
}

/** How the handler ended, for the decision: the result encoded and checked, or the failure normalised. */
const endedOf = <R>(handler: Handler.Handler<any, any, R>, exit: Exit.Exit<unknown, unknown>): Effect.Effect<Ended> =>
  Effect.gen(function* () {
    if (Exit.isSuccess(exit)) {
      const encoded = yield* runSchema(Schema.encode(handler.result), exit.value)
      if (Exit.isFailure(encoded)) {
        const error = `result does not match the handler's result schema: ${formatSchemaCause(encoded.cause)}`
        return { _tag: "Unstorable", error } as const
      }
      const result = Canonical.validateJson(encoded.value)
      if (Either.isLeft(result)) {
        const error = evidenceOf(`result is not storable JSON at ${result.left.path}: ${result.left.message}`)
        return { _tag: "Unstorable", error } as const
      }
      return { _tag: "Succeeded", result: result.right } as const
    }
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure) && failure.value instanceof Handler.BudgetExceeded) {
      return { _tag: "BudgetExceeded", error: failure.value.message } as const
    }
    if (Option.isSome(failure) && failure.value instanceof Handler.DeadlineExceeded) {
      return { _tag: "DeadlineExceeded", error: failure.value.message } as const
    }
    const normalized = yield* Normalize.normalizeWithClock(Option.isSome(failure) ? failure.value : exit.cause)
    return { _tag: "Failed", normalized } as const
  })

/** Decide and persist the outcome of an attempt whose handler has ended. */
const finish = <R>(
  env: Env<R>,
  delivery: Delivery,
  handler: Handler.Handler<any, any, R>,
  job: Job,
  input: unknown,
  held: Held,
  exit: Exit.Exit<unknown, unknown>
) =>
  Effect.gen(function* () {
    const ended = yield* endedOf(handler, exit)
    const spentCents = held.control.knownCostCents
    // The next attempt's estimate: the handler's, else what this attempt spent (the claim applies the full fallback).
    const declared = Either.getOrUndefined(estimateEither(handler, input))
    const decision = decide({
      job,
      ended,
      stop: held.control.stopReason,
      spentCents,
      nextEstimateCents: declared ?? Math.max(0, spentCents - job.costCents)
    })
    switch (decision._tag) {
      case "HandOff":
        if (decision.selfFenced) {
          yield* Effect.logWarning("lease could not be renewed in time; attempt interrupted, nothing committed")
        }
        return yield* deferDelivery(env, delivery, 0)
      case "Settle":
        return yield* persist(env, delivery, settleWith(env, job, decision.outcome), held)
      case "Retry": {
        const { normalized } = decision
        const delayMs = yield* Retry.delayFor(normalized, job.attempts - job.attemptsBase, {
          ...classPolicy(normalized.errorClass),
          ...(env.retry?.baseMs !== undefined ? { baseMs: env.retry.baseMs } : {}),
          ...(env.retry?.capMs !== undefined ? { capMs: env.retry.capMs } : {})
        })
        yield* Metric.increment(Metrics.retries)
        const outcome: Outcome = {
          _tag: "Retry",
          delayMs,
          errorClass: normalized.errorClass,
          error: normalized.evidence
        }
        return yield* persist(env, delivery, settleWith(env, job, outcome), held)
      }
    }
  })

/** The gates before a handler may start: its input decodes, its estimate is computable and fits the budget. */
const admitAttempt = <R>(handler: Handler.Handler<any, any, R>, job: Job) =>
  Effect.gen(function* () {
    const decoded = yield* runSchema(Schema.decodeUnknown(handler.input), job.input)
    if (Exit.isFailure(decoded)) {
      return Either.left<Outcome>({
        _tag: "Fail",
        errorClass: "invalid_input",
        error: formatSchemaCause(decoded.cause)
      })
    }
    const estimate = estimateEither(handler, decoded.value)
    if (Either.isLeft(estimate))
      return Either.left<Outcome>({ _tag: "Fail", errorClass: "unknown", error: estimate.left })
    if (estimate.right !== undefined && !Protocol.budgetFits(job.budgetCents, job.costCents, estimate.right)) {
      return Either.left<Outcome>({
        _tag: "Abandon",
        reason: "budget",
        error: `estimate ${estimate.right} does not fit the budget`
      })
    }
    return Either.right<unknown>(decoded.value)
  })

/** An attempt as a scoped lease: claimed already; keep it alive while the handler runs, then settle. */
const runAttempt = <R>(
  env: Env<R>,
  delivery: Delivery,
  handler: Handler.Handler<any, any, R>,
  job: Job,
  takeover: boolean,
  claimSentAt: number
) =>
  Effect.gen(function* () {
    if (takeover) yield* Metric.increment(Metrics.leaseTakeovers)
    const admitted = yield* admitAttempt(handler, job)
    if (Either.isLeft(admitted)) return yield* persist(env, delivery, settleWith(env, job, admitted.left))
    // The worker began closing while this claim was on its way: hand the job back before any model call.
    if (env.closing) return yield* persist(env, delivery, settleWith(env, job, { _tag: "Release" }), undefined, 0)
    const input = admitted.right
    const localLeaseEnd = claimSentAt + handler.leaseMs
    if ((yield* Clock.currentTimeMillis) >= localLeaseEnd) {
      // The claim's reply came back after the lease it granted may have ended (a pause, slow retries): a model call
      // now could overlap the next holder's. Write nothing; the message returns to a fresh claim.
      yield* Metric.increment(Metrics.selfFenced)
      yield* Effect.logWarning("lease ended before the attempt could start; nothing run, nothing committed")
      return yield* deferDelivery(env, delivery, 0)
    }
    const control = Control.make({ localLeaseEnd, costCents: job.costCents })
    env.running.set(job.id, control)
    const held: Held = { control, leaseMs: handler.leaseMs }
    const ctx = WorkerContext.make({ store: env.store, job, control, aroundCall: env.admission?.aroundCall })
    // Built inside the fiber: a handler that throws while building its effect fails this attempt like any defect.
    const handlerFiber = yield* Effect.fork(Effect.suspend(() => handler.run(input, ctx)))
    control.handlerFiber = handlerFiber
    // A stop that came between registration and the line above could not interrupt the handler: do it now.
    if (control.stopReason !== undefined) yield* Fiber.interruptFork(handlerFiber)
    // The lease is kept until the outcome is stored, then let go.
    yield* WorkerLease.keeping(
      { store: env.store, transport: env.transport, delivery, job, leaseMs: handler.leaseMs, control },
      Effect.flatMap(Fiber.await(handlerFiber), (exit) => {
        env.running.delete(job.id)
        control.persisting = true
        return finish(env, delivery, handler, job, input, held, exit)
      })
    )
  }).pipe(
    // This worker runs at most one attempt of a job at a time (it holds the lease), so the entry is this one's.
    Effect.ensuring(Effect.sync(() => env.running.delete(job.id))),
    (attempt) =>
      env.logging ? Effect.annotateLogs(attempt, { token: job.leaseToken, traceId: job.traceId ?? "" }) : attempt,
    (attempt) =>
      env.tracing
        ? Effect.withSpan(attempt, "slowcall.attempt", {
            // The span's source location is this line for every attempt: a stack trace each time buys nothing.
            captureStackTrace: false,
            attributes: {
              "slowcall.job_id": job.id,
              "slowcall.type": job.type,
              "slowcall.version": job.version,
              "slowcall.token": job.leaseToken,
              "slowcall.trace_id": job.traceId ?? ""
            }
          })
        : attempt
  )

/** Run a job this worker holds, or hand it back when its (type, version) has no handler here. */
const runHeld = <R>(env: Env<R>, delivery: Delivery, job: Job, takeover: boolean, claimSentAt: number) => {
  const actual = env.registry.get(job.type, job.version)
  if (actual === undefined) {
    // The message named another (type, version) than the job: hand the job back untouched.
    return Effect.zipRight(
      Metric.increment(Metrics.unknownHandlerDeferred),
      persist(env, delivery, settleWith(env, job, { _tag: "Release" }), undefined, env.unknownHandlerDelayMs)
    )
  }
  return runAttempt(env, delivery, actual, job, takeover, claimSentAt)
}

/** Claim the delivery's job and act on the verdict: run it, defer it, or ack a settled duplicate. */
const claimAndRun = <R>(env: Env<R>, delivery: Delivery, handler: Handler.Handler<any, any, R>) =>
  Effect.gen(function* () {
    // A retried claim whose first try applied but lost its reply finds the job Busy under this very tag.
    const claimOwner = `${env.owner}/${env.instance}.${++env.claims}`
    const item = {
      jobId: delivery.jobId,
      owner: claimOwner,
      leaseMs: handler.leaseMs,
      estimateCents: typeof handler.estimateCents === "number" ? handler.estimateCents : undefined
    }
    // Each try notes its send time: a lease runs from the send of the try that was granted it, never from the
    // reply (which may arrive late) and never from an earlier try that did not apply.
    const sent = { first: -1, last: -1 }
    const claimed = yield* Effect.either(
      retryStore(
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          if (sent.first < 0) sent.first = now
          sent.last = now
          return claimOne(env.store, item)
        })
      )
    )
    if (Either.isLeft(claimed)) {
      yield* Effect.logWarning("claim failed", claimed.left)
      return yield* deferDelivery(env, delivery, env.storeErrorDelayMs)
    }
    const { now, result } = claimed.right
    switch (result._tag) {
      case "NotFound":
        return yield* ackDelivery(env, delivery)
      case "Settled":
        yield* Metric.increment(Metrics.duplicateDeliveriesDropped)
        return yield* ackDelivery(env, delivery)
      case "Busy":
        // Granted by an earlier try whose reply was lost: which one is unknown, so the lease runs from the first send.
        if (result.job.leaseOwner === claimOwner) return yield* runHeld(env, delivery, result.job, false, sent.first)
        return yield* deferDelivery(env, delivery, result.until - now + env.busyMarginMs)
      case "NotDue":
        return yield* deferDelivery(env, delivery, result.until - now)
      case "Claimed":
        return yield* runHeld(env, delivery, result.job, result.takeover, sent.last)
    }
  })

/** One delivery: skip what no handler here knows, admit, claim, run. */
const processDelivery = <R>(env: Env<R>, delivery: Delivery): Effect.Effect<void, never, R> => {
  const process = Effect.suspend(() => {
    const handler = env.registry.get(delivery.type, delivery.version)
    if (handler === undefined) {
      return Effect.zipRight(
        Metric.increment(Metrics.unknownHandlerDeferred),
        deferDelivery(env, delivery, env.unknownHandlerDelayMs)
      )
    }
    // A closing worker claims nothing more; the message returns for another worker.
    if (env.closing) return deferDelivery(env, delivery, 0)
    const beforeClaim = env.admission?.beforeClaim
    if (beforeClaim === undefined) return claimAndRun(env, delivery, handler)
    return Effect.flatMap(beforeClaim(delivery), (admit) =>
      admit._tag === "Defer" ? deferDelivery(env, delivery, admit.delayMs) : claimAndRun(env, delivery, handler)
    )
  })
  return env.logging ? Effect.annotateLogs(process, { worker: env.owner, jobId: delivery.jobId }) : process
}

const releaseSlots = <R>(env: Env<R>, n: number): void => {
  env.free += n
  const waiter = env.slotWaiter
  env.slotWaiter = undefined
  if (n > 0 && waiter !== undefined) waiter(Effect.void)
}

/**
 * The receive loop: wait for a free slot, take every free slot, receive up to that many deliveries (at most the
 * transport's largest batch) and start one fiber each.
 */
const receiveLoop = <R>(env: Env<R>): Effect.Effect<void, never, R> => {
  const releaseSlot = Effect.sync(() => releaseSlots(env, 1))
  // No canceller: a waiter left by an interrupted loop is called at most once, by the next release, and Effect
  // ignores a resume after the interruption (a canceller would cost an interruption handler on every wait).
  const awaitSlot = Effect.async<void>((resume) => {
    if (env.free > 0) return resume(Effect.void)
    env.slotWaiter = resume
  })
  const maxBatch = Math.max(1, env.transport.capabilities.maxBatch)
  const receiveOnce = Effect.zipRight(
    awaitSlot,
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        const taken = Math.min(env.free, maxBatch)
        env.free -= taken
        return Effect.exit(
          restore(
            env.transport
              .receive({ queue: env.queue, max: taken, visibilityMs: env.visibilityMs, waitMs: env.receiveWaitMs })
              .pipe(
                Effect.catchAll((error) =>
                  Effect.logWarning("receive failed", error).pipe(
                    Effect.zipRight(Effect.sleep(env.receiveErrorDelayMs)),
                    Effect.as([] as ReadonlyArray<Delivery>)
                  )
                )
              )
          )
        ).pipe(
          Effect.flatMap((exit) => {
            // Failures are caught above, so a failed exit is an interruption (or a defect): the slots go back.
            if (Exit.isFailure(exit)) {
              releaseSlots(env, taken)
              return Effect.failCause(exit.cause)
            }
            const deliveries = exit.value
            releaseSlots(env, taken - deliveries.length)
            // An empty receive that did not wait (a zero wait, a failing transport) yields, so it cannot spin.
            if (deliveries.length === 0) return Effect.yieldNow()
            // Forked from an uninterruptible region: the delivery's fiber must be interruptible again.
            return Effect.forEach(
              deliveries,
              (delivery) =>
                FiberSet.run(
                  env.fibers,
                  Effect.interruptible(Effect.ensuring(processDelivery(env, delivery), releaseSlot))
                ),
              { discard: true }
            )
          })
        )
      })
    )
  )
  const loop: Effect.Effect<void, never, R> = Effect.flatMap(receiveOnce, () => loop)
  return loop
}

/**
 * Graceful shutdown: stop receiving, let running handlers finish for `shutdownGraceMs`, then stop the rest (their
 * leases are released) and wait for their outcomes. Finalizers run uninterruptibly; the waits must be interruptible
 * or their timeouts could never cut them short. An idle worker has nothing to wait for: no timer, no race.
 */
const shutdown = <R>(env: Env<R>, loop: Fiber.RuntimeFiber<void, never>) => {
  const drain = (ms: number) =>
    Effect.flatMap(FiberSet.size(env.fibers), (inFlight) =>
      inFlight === 0
        ? Effect.succeedSome(undefined)
        : Effect.timeoutOption(Effect.interruptible(FiberSet.awaitEmpty(env.fibers)), ms)
    )
  return Effect.gen(function* () {
    yield* Effect.sync(() => {
      env.closing = true
    })
    yield* Fiber.interrupt(loop)
    if (Option.isSome(yield* drain(env.shutdownGraceMs))) return
    for (const control of env.running.values()) yield* Control.stop(control, "shutdown")
    yield* drain(Math.max(1_000, env.shutdownGraceMs))
  }).pipe(Effect.annotateLogs({ worker: env.owner }))
}

/**
 * Start a worker in the current scope. It runs until the scope closes, then shuts down gracefully.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <R = never>(
  options: WorkerOptions<R>
): Effect.Effect<Worker, never, Store | Transport | Scope.Scope | R> =>
  Effect.gen(function* () {
    const registry = Handler.registry(options.handlers)
    const concurrency = Math.max(1, Math.floor(options.concurrency ?? 1))
    const transport = yield* Transport
    const env: Env<R> = {
      store: yield* Store,
      transport,
      registry,
      owner: options.id ?? (yield* Ids.makeId("worker")),
      // Claim owner tags: unique per worker instance (random) and per claim (counter).
      instance: yield* Ids.makeId("i"),
      queue: options.queue,
      concurrency,
      receiveWaitMs: options.receiveWaitMs ?? 1_000,
      shutdownGraceMs: options.shutdownGraceMs ?? 10_000,
      unknownHandlerDelayMs: options.unknownHandlerDelayMs ?? 30_000,
      busyMarginMs: options.busyMarginMs ?? 250,
      receiveErrorDelayMs: options.receiveErrorDelayMs ?? 1_000,
      storeErrorDelayMs: options.storeErrorDelayMs ?? 1_000,
      visibilityMs: Math.max(1, registry.maxLeaseMs),
      maxDelayMs: transport.capabilities.maxDelayMs ?? Number.POSITIVE_INFINITY,
      retry: options.retry,
      admission: options.admission,
      // Read once where the worker starts: with logging off (minimum level None) no log line can carry the per-job
      // annotations, and with tracing off no attempt span is made; both cost effect steps on every delivery.
      logging: (yield* FiberRef.get(FiberRef.currentMinimumLogLevel))._tag !== "None",
      tracing: yield* FiberRef.get(FiberRef.currentTracerEnabled),
      fibers: yield* FiberSet.make<void, never>(),
      running: new Map(),
      closing: false,
      claims: 0,
      free: concurrency,
      slotWaiter: undefined
    }
    const loop = yield* Effect.forkScoped(receiveLoop(env))
    yield* Effect.addFinalizer(() => shutdown(env, loop))
    return { id: env.owner, inFlight: FiberSet.size(env.fibers) }
  })

/**
 * A layer that runs a worker for the lifetime of the layer's scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <R = never>(options: WorkerOptions<R>): Layer.Layer<never, never, Store | Transport | R> =>
  Layer.scopedDiscard(make(options))
