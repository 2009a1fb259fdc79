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
import { policy as classPolicy } from "./ErrorClasses.js"
import type { LeaseLost, StoreError } from "./Errors.js"
import * as Handler from "./Handler.js"
import * as Ids from "./Ids.js"
import * as WorkerContext from "./internal/workerContext.js"
import * as Control from "./internal/workerControl.js"
import { retryStore } from "./internal/workerStore.js"
import * as Lease from "./Lease.js"
import * as Metrics from "./Metrics.js"
import { attemptsLeft, type ErrorClass, type Job, type Json } from "./Models.js"
import * as Normalize from "./Normalize.js"
import * as Retry from "./Retry.js"
import { type FencedOptions, Store } from "./Store.js"
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

type After = { readonly _tag: "ack" } | { readonly _tag: "defer"; readonly delayMs: number }
/** An attempt whose lease is kept alive (heartbeat, watchdog) while its outcome is written. */
interface Held {
  readonly control: Control.Control
  readonly leaseMs: number
}
const ack: After = { _tag: "ack" }
const deferBy = (delayMs: number): After => ({ _tag: "defer", delayMs })

const formatParseError = (error: ParseResult.ParseError): string =>
  Normalize.truncate(Normalize.redact(ParseResult.TreeFormatter.formatErrorSync(error)))

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
    const store = yield* Store
    const transport = yield* Transport
    const registry = Handler.registry(options.handlers)
    const owner = options.id ?? (yield* Ids.makeId("worker"))
    const concurrency = Math.max(1, Math.floor(options.concurrency ?? 1))
    const receiveWaitMs = options.receiveWaitMs ?? 1_000
    const shutdownGraceMs = options.shutdownGraceMs ?? 10_000
    const unknownHandlerDelayMs = options.unknownHandlerDelayMs ?? 30_000
    const busyMarginMs = options.busyMarginMs ?? 250
    const receiveErrorDelayMs = options.receiveErrorDelayMs ?? 1_000
    const storeErrorDelayMs = options.storeErrorDelayMs ?? 1_000
    const visibilityMs = Math.max(1, registry.maxLeaseMs)
    // Read once where the worker starts: with logging off (minimum level None) no log line can carry the per-job
    // annotations, and with tracing off no attempt span is made; both cost effect steps on every delivery.
    const logging = (yield* FiberRef.get(FiberRef.currentMinimumLogLevel))._tag !== "None"
    const tracing = yield* FiberRef.get(FiberRef.currentTracerEnabled)

    const fibers = yield* FiberSet.make<void, never>()
    // Free delivery slots. Only the receive loop takes them (all free ones at once, for one receive call); a finished
    // delivery gives its slot back and wakes the loop if it was waiting for one. Changed only in synchronous steps.
    let free = concurrency
    let slotWaiter: ((resume: Effect.Effect<void>) => void) | undefined
    const releaseSlots = (n: number): void => {
      free += n
      const waiter = slotWaiter
      slotWaiter = undefined
      if (n > 0 && waiter !== undefined) waiter(Effect.void)
    }
    const releaseSlot = Effect.sync(() => releaseSlots(1))
    // No canceller: a waiter left by an interrupted loop is called at most once, by the next release, and Effect
    // ignores a resume after the interruption (a canceller would cost an interruption handler on every wait).
    const awaitSlot = Effect.async<void>((resume) => {
      if (free > 0) return resume(Effect.void)
      slotWaiter = resume
    })
    const running = new Map<string, Control.Control>()
    // Set once when the scope starts closing; read and written only in synchronous steps, so a handler is either
    // registered in `running` before shutdown looks at it, or never started.
    let closing = false
    // Claim owner tags: unique per worker instance (random) and per claim (counter).
    const instance = yield* Ids.makeId("i")
    let claims = 0

    // Transport operations never fail the worker: a lost ack or defer only means the message returns, and the
    // claim in the Store decides what happens then.
    const ackDelivery = (delivery: Delivery) =>
      transport
        .ack({ delivery })
        .pipe(Effect.catchAll((error) => Effect.logWarning("ack failed; the message will return", error)))
    const deferDelivery = (delivery: Delivery, delayMs: number) =>
      transport
        .defer({ delivery, delayMs: Math.max(0, Math.ceil(delayMs)) })
        .pipe(Effect.catchAll((error) => Effect.logWarning("defer failed; the message will return", error)))

    /**
     * Retry an outcome write. Outside an attempt (no lease kept alive): a few quick retries. Inside one: while the
     * lease is this worker's (the heartbeat keeps it), for at most one lease length after the handler ended.
     */
    const retryWrite = (write: Effect.Effect<Job, LeaseLost | StoreError>, held: Held | undefined) =>
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
            const attempt = (n: number): Effect.Effect<Job, LeaseLost | StoreError> =>
              Effect.catchAll(write, (error) =>
                Effect.flatMap(mayRetry(error), (retry) =>
                  retry ? Effect.zipRight(Effect.sleep(heldRetryDelayMs(n)), attempt(n + 1)) : Effect.fail(error)
                )
              )
            return attempt(0)
          })

    /** Persist an outcome (fenced, retried on retryable store errors), then ack or defer. */
    const persist = (
      delivery: Delivery,
      write: Effect.Effect<Job, LeaseLost | StoreError>,
      after: After,
      held?: Held | undefined
    ) =>
      retryWrite(write, held).pipe(
        Effect.matchEffect({
          onFailure: (error) =>
            error._tag === "LeaseLost"
              ? Metric.increment(Metrics.fencedWritesRejected).pipe(
                  Effect.zipRight(Effect.logWarning("outcome rejected: lease lost", error)),
                  Effect.zipRight(deferDelivery(delivery, 0))
                )
              : Effect.logError("outcome not persisted; the message is left to return", error),
          onSuccess: (job) =>
            Effect.zipRight(
              job.state === "failed" ? Metric.increment(Metrics.deadLetterArrivals) : Effect.void,
              after._tag === "ack" ? ackDelivery(delivery) : deferDelivery(delivery, after.delayMs)
            )
        })
      )

    /**
     * Store a handler's result. A result the Store refuses for good (a non-retryable `StoreError`, e.g. a value its
     * column type cannot hold) would be refused on every attempt, and each attempt calls the model again: the job
     * fails with that evidence instead. (A repeat of the whole write after a retryable failure tries `complete`
     * again first: it is fenced, so at most one of the two writes applies.)
     */
    const completeWith = (fenced: FencedOptions, result: Json) =>
      store.complete({ ...fenced, result }).pipe(
        Effect.catchIf(
          (error): error is StoreError => error._tag === "StoreError" && !error.isRetryable,
          (error) =>
            Effect.logError("the store refused the result; the job fails", error).pipe(
              Effect.zipRight(
                store.fail({
                  ...fenced,
                  errorClass: "unknown",
                  error: evidenceOf(`result not storable: ${error.detail}`)
                })
              )
            )
        )
      )

    /** The largest spend of any earlier attempt: the estimate of the next one when the handler declares none. */
    const largestAttemptSpend = (job: Job) =>
      store.charges({ jobId: job.id }).pipe(
        Effect.map((charges) => {
          const byToken = new Map<number, number>()
          for (const charge of charges) byToken.set(charge.token, (byToken.get(charge.token) ?? 0) + charge.amountCents)
          return Math.max(0, ...byToken.values())
        }),
        Effect.orElseSucceed(() => 0)
      )

    /** The handler's estimate for this input; a throwing estimate function is a handler bug, reported as such. */
    const estimateEither = (
      handler: Handler.Handler<any, any, R>,
      input: unknown
    ): Either.Either<number | undefined, string> => {
      try {
        return Either.right(Handler.estimateFor(handler, input))
      } catch (error) {
        return Either.left(evidenceOf(`estimate failed: ${error instanceof Error ? error.message : String(error)}`))
      }
    }
    const estimateOf = (handler: Handler.Handler<any, any, R>, input: unknown) =>
      Effect.suspend(() => estimateEither(handler, input))

    /**
     * Renews the lease every third of it until the lease is gone or the attempt's outcome is stored (the caller
     * interrupts it then). A renewal reports a cancel request and, through its store-time lease end, a passed
     * deadline; both stop the handler while the lease stays held for the outcome write.
     */
    const heartbeatLoop = (delivery: Delivery, job: Job, leaseMs: number, control: Control.Control) => {
      const beat = Effect.gen(function* () {
        const progress = control.pendingProgress
        control.pendingProgress = undefined
        const sentAt = yield* Clock.currentTimeMillis
        const beat = yield* Effect.either(store.heartbeat({ jobId: job.id, token: job.leaseToken, leaseMs, progress }))
        if (Either.isRight(beat)) {
          control.localLeaseEnd = sentAt + leaseMs
          if (beat.right.cancelRequested) yield* Control.stop(control, "cancelled")
          // The store granted `leaseUntil = now + leaseMs`, so its clock read `leaseUntil - leaseMs`.
          if (job.deadlineAt !== null && beat.right.leaseUntil - leaseMs >= job.deadlineAt) {
            yield* Control.stop(control, "deadline")
          }
          yield* transport
            .extend({ delivery, visibilityMs: leaseMs })
            .pipe(Effect.catchAll((error) => Effect.logWarning("visibility extend failed", error)))
        } else if (beat.left._tag === "LeaseLost") {
          // While the outcome is being written, its own write reports a lost lease (and counts it); a renewal that
          // races a write which already applied must not count one more.
          if (!control.persisting) yield* Metric.increment(Metrics.fencedWritesRejected)
          yield* Control.stop(control, "lease_lost")
        } else {
          if (progress !== undefined) control.pendingProgress = control.pendingProgress ?? progress
          yield* Effect.logWarning("heartbeat failed", beat.left)
        }
      })
      const interval = Lease.heartbeatIntervalFor(leaseMs)
      const loop: Effect.Effect<void> = Effect.zipRight(Effect.sleep(interval), beat).pipe(
        Effect.flatMap(() => (Control.leaseGone(control.stopReason) ? Effect.void : loop))
      )
      return loop
    }

    /** Self-fencing: past the local lease end without a renewal, stop the handler and any outcome retries. */
    const watchdog = (control: Control.Control): Effect.Effect<void> =>
      Effect.gen(function* () {
        while (true) {
          const now = yield* Clock.currentTimeMillis
          const end = control.localLeaseEnd
          if (now >= end) break
          yield* Effect.sleep(end - now)
        }
        if (yield* Control.stop(control, "self_fenced")) yield* Metric.increment(Metrics.selfFenced)
      })

    const onFailure = (
      delivery: Delivery,
      handler: Handler.Handler<any, any, R>,
      job: Job,
      input: unknown,
      held: Held,
      cause: Cause.Cause<unknown>
    ) =>
      Effect.gen(function* () {
        const fenced = { jobId: job.id, token: job.leaseToken }
        const failure = Cause.failureOption(cause)
        if (Option.isSome(failure) && failure.value instanceof Handler.BudgetExceeded) {
          return yield* persist(
            delivery,
            store.abandon({ ...fenced, reason: "budget", error: failure.value.message }),
            ack,
            held
          )
        }
        if (Option.isSome(failure) && failure.value instanceof Handler.DeadlineExceeded) {
          return yield* persist(
            delivery,
            store.abandon({ ...fenced, reason: "deadline", error: failure.value.message }),
            ack,
            held
          )
        }
        const normalized = yield* Normalize.normalizeWithClock(Option.isSome(failure) ? failure.value : cause)
        const failWith = (errorClass: ErrorClass) =>
          persist(delivery, store.fail({ ...fenced, errorClass, error: normalized.evidence }), ack, held)
        if (!normalized.retryable || attemptsLeft(job) === 0) return yield* failWith(normalized.errorClass)
        const delayMs = yield* Retry.delayFor(normalized, job.attempts - job.attemptsBase, {
          ...classPolicy(normalized.errorClass),
          ...(options.retry?.baseMs !== undefined ? { baseMs: options.retry.baseMs } : {}),
          ...(options.retry?.capMs !== undefined ? { capMs: options.retry.capMs } : {})
        })
        const now = yield* Effect.either(retryStore(store.now))
        if (Either.isLeft(now)) {
          return yield* Effect.logError("store unreachable after a failed attempt; the message is left", now.left)
        }
        const abandon = (reason: "deadline" | "budget") =>
          persist(
            delivery,
            store.abandon({ ...fenced, reason, errorClass: normalized.errorClass, error: normalized.evidence }),
            ack,
            held
          )
        if (job.deadlineAt !== null && now.right + delayMs >= job.deadlineAt) return yield* abandon("deadline")
        if (job.budgetCents !== null) {
          const spent = held.control.knownCostCents
          const declared = yield* Effect.orElseSucceed(estimateOf(handler, input), () => undefined)
          const estimate = declared ?? (yield* largestAttemptSpend(job))
          if (spent >= job.budgetCents || spent + estimate > job.budgetCents) return yield* abandon("budget")
        }
        yield* Metric.increment(Metrics.retries)
        return yield* persist(
          delivery,
          store.retry({
            ...fenced,
            errorClass: normalized.errorClass,
            error: normalized.evidence,
            runAfter: now.right + delayMs
          }),
          deferBy(delayMs),
          held
        )
      })

    /** What to write once the handler has ended, given its exit and why it was stopped (if it was). */
    const outcome = (
      delivery: Delivery,
      handler: Handler.Handler<any, any, R>,
      job: Job,
      input: unknown,
      held: Held,
      exit: Exit.Exit<unknown, unknown>,
      reason: Control.StopReason | undefined
    ) =>
      Effect.gen(function* () {
        const fenced = { jobId: job.id, token: job.leaseToken }
        if (reason === "lease_lost") {
          // Someone else holds the job now: write nothing, let the message return to the claim.
          return yield* deferDelivery(delivery, 0)
        }
        if (Exit.isSuccess(exit)) {
          const encoded = yield* runSchema(Schema.encode(handler.result), exit.value)
          if (Exit.isFailure(encoded)) {
            const error = `result does not match the handler's result schema: ${formatSchemaCause(encoded.cause)}`
            return yield* persist(delivery, store.fail({ ...fenced, errorClass: "unknown", error }), ack, held)
          }
          const result = Canonical.validateJson(encoded.value)
          if (Either.isLeft(result)) {
            const error = evidenceOf(`result is not storable JSON at ${result.left.path}: ${result.left.message}`)
            return yield* persist(delivery, store.fail({ ...fenced, errorClass: "unknown", error }), ack, held)
          }
          return yield* persist(delivery, completeWith(fenced, result.right), ack, held)
        }
        switch (reason) {
          case "cancelled":
            return yield* persist(
              delivery,
              store.abandon({ ...fenced, reason: "cancelled", errorClass: "cancelled", error: "cancel requested" }),
              ack,
              held
            )
          case "deadline":
            return yield* persist(
              delivery,
              store.abandon({ ...fenced, reason: "deadline", error: "the deadline passed while the attempt ran" }),
              ack,
              held
            )
          case "self_fenced":
            yield* Effect.logWarning("lease could not be renewed in time; attempt interrupted, nothing committed")
            return yield* deferDelivery(delivery, 0)
          case "shutdown":
            return yield* persist(delivery, store.release(fenced), deferBy(0), held)
          case undefined:
            return yield* onFailure(delivery, handler, job, input, held, exit.cause)
        }
      })

    const runAttempt = (
      delivery: Delivery,
      handler: Handler.Handler<any, any, R>,
      job: Job,
      takeover: boolean,
      claimSentAt: number
    ) =>
      Effect.gen(function* () {
        const fenced = { jobId: job.id, token: job.leaseToken }
        if (takeover) yield* Metric.increment(Metrics.leaseTakeovers)
        const decoded = yield* runSchema(Schema.decodeUnknown(handler.input), job.input)
        if (Exit.isFailure(decoded)) {
          return yield* persist(
            delivery,
            store.fail({ ...fenced, errorClass: "invalid_input", error: formatSchemaCause(decoded.cause) }),
            ack
          )
        }
        const input = decoded.value
        const estimate = estimateEither(handler, input)
        if (Either.isLeft(estimate)) {
          return yield* persist(delivery, store.fail({ ...fenced, errorClass: "unknown", error: estimate.left }), ack)
        }
        if (
          job.budgetCents !== null &&
          estimate.right !== undefined &&
          job.costCents + estimate.right > job.budgetCents
        ) {
          return yield* persist(
            delivery,
            store.abandon({ ...fenced, reason: "budget", error: `estimate ${estimate.right} does not fit the budget` }),
            ack
          )
        }

        if (closing) {
          // The worker began closing while this claim was on its way: hand the job back before any model call.
          return yield* persist(delivery, store.release(fenced), deferBy(0))
        }
        const control = Control.make({ localLeaseEnd: claimSentAt + handler.leaseMs, costCents: job.costCents })
        running.set(job.id, control)
        const held: Held = { control, leaseMs: handler.leaseMs }
        const ctx = WorkerContext.make({ store, job, control })
        // Built inside the fiber: a handler that throws while building its effect fails this attempt like any defect.
        const handlerFiber = yield* Effect.fork(Effect.suspend(() => handler.run(input, ctx)))
        control.handlerFiber = handlerFiber
        // A stop that came between registration and the line above could not interrupt the handler: do it now.
        if (control.stopReason !== undefined) yield* Fiber.interruptFork(handlerFiber)
        const heartbeat = yield* Effect.fork(heartbeatLoop(delivery, job, handler.leaseMs, control))
        const fence = yield* Effect.fork(watchdog(control))
        const exit = yield* Fiber.await(handlerFiber)
        running.delete(job.id)
        control.persisting = true
        const reason = control.stopReason
        // The heartbeat and the watchdog keep the lease until the outcome is stored, then stop. They are told to stop
        // and not awaited (neither writes anything once interrupted): awaiting costs an interruption handler each.
        yield* outcome(delivery, handler, job, input, held, exit, reason).pipe(
          Effect.ensuring(
            Effect.withFiberRuntime<void>((self) => {
              heartbeat.unsafeInterruptAsFork(self.id())
              fence.unsafeInterruptAsFork(self.id())
              return Effect.void
            })
          )
        )
      }).pipe(
        // This worker runs at most one attempt of a job at a time (it holds the lease), so the entry is this one's.
        Effect.ensuring(Effect.sync(() => running.delete(job.id))),
        (attempt) =>
          logging ? Effect.annotateLogs(attempt, { token: job.leaseToken, traceId: job.traceId ?? "" }) : attempt,
        (attempt) =>
          tracing
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
    const runHeld = (delivery: Delivery, job: Job, takeover: boolean, claimSentAt: number) =>
      Effect.gen(function* () {
        const actual = registry.get(job.type, job.version)
        if (actual === undefined) {
          // The message named another (type, version) than the job: hand the job back untouched.
          yield* Metric.increment(Metrics.unknownHandlerDeferred)
          return yield* persist(
            delivery,
            store.release({ jobId: job.id, token: job.leaseToken }),
            deferBy(unknownHandlerDelayMs)
          )
        }
        return yield* runAttempt(delivery, actual, job, takeover, claimSentAt)
      })

    const processDelivery = (delivery: Delivery) =>
      Effect.gen(function* () {
        const handler = registry.get(delivery.type, delivery.version)
        if (handler === undefined) {
          yield* Metric.increment(Metrics.unknownHandlerDeferred)
          return yield* deferDelivery(delivery, unknownHandlerDelayMs)
        }
        // A closing worker claims nothing more; the message returns for another worker.
        if (closing) return yield* deferDelivery(delivery, 0)
        const sentAt = yield* Clock.currentTimeMillis
        // A retried claim whose first try applied but lost its reply finds the job Busy under this very tag.
        const claimOwner = `${owner}/${instance}.${++claims}`
        const claimed = yield* Effect.either(
          retryStore(
            store.claim({
              jobId: delivery.jobId,
              owner: claimOwner,
              leaseMs: handler.leaseMs,
              estimateCents: typeof handler.estimateCents === "number" ? handler.estimateCents : undefined
            })
          )
        )
        if (Either.isLeft(claimed)) {
          if (claimed.left._tag === "JobNotFound") return yield* ackDelivery(delivery)
          yield* Effect.logWarning("claim failed", claimed.left)
          return yield* deferDelivery(delivery, storeErrorDelayMs)
        }
        const claim = claimed.right
        switch (claim._tag) {
          case "Settled":
            yield* Metric.increment(Metrics.duplicateDeliveriesDropped)
            return yield* ackDelivery(delivery)
          case "Busy":
            if (claim.job.leaseOwner === claimOwner) return yield* runHeld(delivery, claim.job, false, sentAt)
            return yield* deferUntil(delivery, claim.until, busyMarginMs)
          case "NotDue":
            return yield* deferUntil(delivery, claim.until, 0)
          case "Claimed":
            return yield* runHeld(delivery, claim.job, claim.takeover, sentAt)
        }
      }).pipe((process) => (logging ? Effect.annotateLogs(process, { worker: owner, jobId: delivery.jobId }) : process))

    /** Hide a delivery until a store-time instant (plus a margin). */
    const deferUntil = (delivery: Delivery, until: number, marginMs: number) =>
      Effect.flatMap(Effect.either(store.now), (now) =>
        deferDelivery(delivery, Math.max(0, Either.isRight(now) ? until - now.right + marginMs : storeErrorDelayMs))
      )

    /** Wait for a free slot, take every free slot, receive up to that many deliveries and start one fiber each. */
    const receiveOnce = Effect.zipRight(
      awaitSlot,
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend(() => {
          const taken = free
          free = 0
          return Effect.exit(
            restore(
              transport
                .receive({ queue: options.queue, max: taken, visibilityMs, waitMs: receiveWaitMs })
                .pipe(
                  Effect.catchAll((error) =>
                    Effect.logWarning("receive failed", error).pipe(
                      Effect.zipRight(Effect.sleep(receiveErrorDelayMs)),
                      Effect.as([] as ReadonlyArray<Delivery>)
                    )
                  )
                )
            )
          ).pipe(
            Effect.flatMap((exit) => {
              // Failures are caught above, so a failed exit is an interruption (or a defect): the slots go back.
              if (Exit.isFailure(exit)) {
                releaseSlots(taken)
                return Effect.failCause(exit.cause)
              }
              const deliveries = exit.value
              releaseSlots(taken - deliveries.length)
              // An empty receive that did not wait (a zero wait, a failing transport) yields, so it cannot spin.
              if (deliveries.length === 0) return Effect.yieldNow()
              // Forked from an uninterruptible region: the delivery's fiber must be interruptible again.
              return Effect.forEach(
                deliveries,
                (delivery) =>
                  FiberSet.run(fibers, Effect.interruptible(Effect.ensuring(processDelivery(delivery), releaseSlot))),
                { discard: true }
              )
            })
          )
        })
      )
    )
    const receiveLoop: Effect.Effect<void, never, R> = Effect.flatMap(receiveOnce, () => receiveLoop)

    const loop = yield* Effect.forkScoped(receiveLoop)

    // Finalizers run uninterruptibly; the waits must be interruptible or their timeouts could never cut them short.
    // An idle worker (no delivery in flight) has nothing to wait for: no timer, no race.
    const drain = (ms: number) =>
      Effect.flatMap(FiberSet.size(fibers), (inFlight) =>
        inFlight === 0
          ? Effect.succeedSome(undefined)
          : Effect.timeoutOption(Effect.interruptible(FiberSet.awaitEmpty(fibers)), ms)
      )
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Effect.sync(() => {
          closing = true
        })
        yield* Fiber.interrupt(loop)
        if (Option.isSome(yield* drain(shutdownGraceMs))) return
        for (const control of running.values()) yield* Control.stop(control, "shutdown")
        yield* drain(Math.max(1_000, shutdownGraceMs))
      }).pipe(Effect.annotateLogs({ worker: owner }))
    )

    return { id: owner, inFlight: FiberSet.size(fibers) }
  })

/**
 * A layer that runs a worker for the lifetime of the layer's scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <R = never>(options: WorkerOptions<R>): Layer.Layer<never, never, Store | Transport | R> =>
  Layer.scopedDiscard(make(options))
