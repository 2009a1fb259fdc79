/**
 * The Worker: receives deliveries from a Transport, claims each job in the Store before any model call, runs the
 * registered handler under a heartbeated lease, persists the outcome with fenced writes, and only then acks.
 *
 * Guarantees it keeps (with any Store and Transport that pass the conformance suites):
 * - A model call happens only under a lease this worker claimed; a duplicate delivery costs one claim.
 * - A worker that lost its lease (taken over, or unable to renew before its local lease end) stops its handler and
 *   commits nothing; what it spent stays in the charge ledger.
 * - A message is acked only after the job's outcome is durable; a failed persist leaves the message to return.
 * - An unknown (type, version) is deferred, never claimed: deploy skew loses nothing.
 * - Closing the scope stops receiving, lets running handlers finish for `shutdownGraceMs`, then interrupts the rest
 *   and releases their leases so another worker can claim them at once.
 *
 * @since 0.1.0
 */
import {
  Cause,
  Chunk,
  Clock,
  Effect,
  Either,
  Exit,
  Fiber,
  FiberSet,
  Layer,
  Metric,
  Option,
  ParseResult,
  Queue,
  Ref,
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
  /** Worker identity, recorded as lease owner; generated when omitted. */
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
const ack: After = { _tag: "ack" }
const deferBy = (delayMs: number): After => ({ _tag: "defer", delayMs })

const formatParseError = (error: ParseResult.ParseError): string =>
  Normalize.truncate(Normalize.redact(ParseResult.TreeFormatter.formatErrorSync(error)))

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

    const fibers = yield* FiberSet.make<void, never>()
    const slots = yield* Queue.bounded<void>(concurrency)
    yield* Queue.offerAll(
      slots,
      Array.from({ length: concurrency }, () => undefined)
    )
    const running = new Map<string, Control.Control>()

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

    /** Persist an outcome (fenced, retried on retryable store errors), then ack or defer. */
    const persist = (delivery: Delivery, write: Effect.Effect<Job, LeaseLost | StoreError>, after: After) =>
      retryStore(write).pipe(
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

    const heartbeatLoop = (delivery: Delivery, job: Job, leaseMs: number, control: Control.Control) =>
      Effect.gen(function* () {
        const progress = yield* Ref.getAndSet(control.pendingProgress, undefined)
        const sentAt = yield* Clock.currentTimeMillis
        const beat = yield* Effect.either(store.heartbeat({ jobId: job.id, token: job.leaseToken, leaseMs, progress }))
        if (Either.isRight(beat)) {
          yield* Ref.set(control.localLeaseEnd, sentAt + leaseMs)
          if (beat.right.cancelRequested) {
            yield* Control.stop(control, "cancelled")
            return
          }
          yield* transport
            .extend({ delivery, visibilityMs: leaseMs })
            .pipe(Effect.catchAll((error) => Effect.logWarning("visibility extend failed", error)))
        } else if (beat.left._tag === "LeaseLost") {
          yield* Metric.increment(Metrics.fencedWritesRejected)
          yield* Control.stop(control, "lease_lost")
        } else {
          if (progress !== undefined) yield* Ref.update(control.pendingProgress, (p) => p ?? progress)
          yield* Effect.logWarning("heartbeat failed", beat.left)
        }
      }).pipe(
        Effect.delay(Lease.heartbeatIntervalFor(leaseMs)),
        Effect.repeat({ while: () => Effect.map(Ref.get(control.stopReason), Option.isNone) })
      )

    /** Self-fencing: past the local lease end without a renewal, stop the handler. */
    const watchdog = (control: Control.Control): Effect.Effect<void> =>
      Effect.gen(function* () {
        const end = yield* Ref.get(control.localLeaseEnd)
        const now = yield* Clock.currentTimeMillis
        if (now < end) {
          yield* Effect.sleep(end - now)
          return yield* watchdog(control)
        }
        if (yield* Control.stop(control, "self_fenced")) yield* Metric.increment(Metrics.selfFenced)
      })

    const onFailure = (
      delivery: Delivery,
      handler: Handler.Handler<any, any, R>,
      job: Job,
      input: unknown,
      control: Control.Control,
      cause: Cause.Cause<unknown>
    ) =>
      Effect.gen(function* () {
        const fenced = { jobId: job.id, token: job.leaseToken }
        const failure = Cause.failureOption(cause)
        if (Option.isSome(failure) && failure.value instanceof Handler.BudgetExceeded) {
          return yield* persist(
            delivery,
            store.abandon({ ...fenced, reason: "budget", error: failure.value.message }),
            ack
          )
        }
        const normalized = yield* Normalize.normalizeWithClock(Option.isSome(failure) ? failure.value : cause)
        const failWith = (errorClass: ErrorClass) =>
          persist(delivery, store.fail({ ...fenced, errorClass, error: normalized.evidence }), ack)
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
            ack
          )
        if (job.deadlineAt !== null && now.right + delayMs >= job.deadlineAt) return yield* abandon("deadline")
        if (job.budgetCents !== null) {
          const spent = yield* Ref.get(control.knownCostCents)
          const estimate = Handler.estimateFor(handler, input) ?? (yield* largestAttemptSpend(job))
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
          deferBy(delayMs)
        )
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
        const decoded = yield* Effect.either(Schema.decodeUnknown(handler.input)(job.input))
        if (Either.isLeft(decoded)) {
          return yield* persist(
            delivery,
            store.fail({ ...fenced, errorClass: "invalid_input", error: formatParseError(decoded.left) }),
            ack
          )
        }
        const input = decoded.right
        const estimate = Handler.estimateFor(handler, input)
        if (job.budgetCents !== null && estimate !== undefined && job.costCents + estimate > job.budgetCents) {
          return yield* persist(
            delivery,
            store.abandon({ ...fenced, reason: "budget", error: `estimate ${estimate} does not fit the budget` }),
            ack
          )
        }

        const control = yield* Control.make({ localLeaseEnd: claimSentAt + handler.leaseMs, costCents: job.costCents })
        const ctx = WorkerContext.make({ store, job, control })
        const handlerFiber = yield* Effect.fork(handler.run(input, ctx))
        yield* Ref.set(control.handlerFiber, Option.some(handlerFiber))
        running.set(job.id, control)
        const heartbeat = yield* Effect.fork(heartbeatLoop(delivery, job, handler.leaseMs, control))
        const fence = yield* Effect.fork(watchdog(control))
        const exit = yield* Fiber.await(handlerFiber)
        yield* Fiber.interrupt(heartbeat)
        yield* Fiber.interrupt(fence)
        running.delete(job.id)
        const reason = Option.getOrUndefined(yield* Ref.get(control.stopReason))

        if (reason === "lease_lost") {
          // Someone else holds the job now: write nothing, let the message return to the claim.
          return yield* deferDelivery(delivery, 0)
        }
        if (Exit.isSuccess(exit)) {
          const encoded = yield* Effect.either(Schema.encode(handler.result)(exit.value))
          const result = Either.isRight(encoded)
            ? Canonical.validateJson(encoded.right)
            : Either.left({ message: formatParseError(encoded.left) })
          if (Either.isLeft(result)) {
            return yield* persist(
              delivery,
              store.fail({
                ...fenced,
                errorClass: "unknown",
                error: `result does not match the handler's result schema: ${result.left.message}`
              }),
              ack
            )
          }
          return yield* persist(delivery, store.complete({ ...fenced, result: result.right as Json }), ack)
        }
        switch (reason) {
          case "cancelled":
            return yield* persist(
              delivery,
              store.abandon({ ...fenced, reason: "cancelled", errorClass: "cancelled", error: "cancel requested" }),
              ack
            )
          case "self_fenced":
            yield* Effect.logWarning("lease could not be renewed in time; attempt interrupted, nothing committed")
            return yield* deferDelivery(delivery, 0)
          case "shutdown":
            return yield* persist(delivery, store.release(fenced), deferBy(0))
          case undefined:
            return yield* onFailure(delivery, handler, job, input, control, exit.cause)
        }
      }).pipe(
        Effect.annotateLogs({ token: job.leaseToken, traceId: job.traceId ?? "" }),
        Effect.withSpan("slowcall.attempt", {
          attributes: {
            "slowcall.job_id": job.id,
            "slowcall.type": job.type,
            "slowcall.version": job.version,
            "slowcall.token": job.leaseToken,
            "slowcall.trace_id": job.traceId ?? ""
          }
        })
      )

    const processDelivery = (delivery: Delivery) =>
      Effect.gen(function* () {
        const handler = registry.get(delivery.type, delivery.version)
        if (handler === undefined) {
          yield* Metric.increment(Metrics.unknownHandlerDeferred)
          return yield* deferDelivery(delivery, unknownHandlerDelayMs)
        }
        const sentAt = yield* Clock.currentTimeMillis
        const claimed = yield* Effect.either(
          retryStore(
            store.claim({
              jobId: delivery.jobId,
              owner,
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
          case "NotDue": {
            const now = yield* Effect.either(store.now)
            const margin = claim._tag === "Busy" ? busyMarginMs : 0
            const delayMs = Either.isRight(now) ? claim.until - now.right + margin : storeErrorDelayMs
            return yield* deferDelivery(delivery, Math.max(0, delayMs))
          }
          case "Claimed": {
            const job = claim.job
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
            return yield* runAttempt(delivery, actual, job, claim.takeover, sentAt)
          }
        }
      }).pipe(Effect.annotateLogs({ worker: owner, jobId: delivery.jobId }))

    const receiveOnce = Effect.gen(function* () {
      yield* Queue.take(slots)
      const free = 1 + Chunk.size(yield* Queue.takeUpTo(slots, concurrency - 1))
      yield* Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          const deliveries = yield* restore(
            transport.receive({ queue: options.queue, max: free, visibilityMs, waitMs: receiveWaitMs })
          ).pipe(
            Effect.catchAll((error) =>
              Effect.logWarning("receive failed", error).pipe(
                Effect.zipRight(Effect.sleep(receiveErrorDelayMs)),
                Effect.as([] as ReadonlyArray<Delivery>)
              )
            ),
            Effect.onInterrupt(() =>
              Queue.offerAll(
                slots,
                Array.from({ length: free }, () => undefined)
              )
            )
          )
          for (const delivery of deliveries) {
            // Forked from an uninterruptible region: the delivery's fiber must be interruptible again.
            yield* FiberSet.run(
              fibers,
              Effect.interruptible(Effect.ensuring(processDelivery(delivery), Queue.offer(slots, undefined)))
            )
          }
          yield* Queue.offerAll(
            slots,
            Array.from({ length: free - deliveries.length }, () => undefined)
          )
        })
      )
    })

    const loop = yield* Effect.forkScoped(Effect.forever(receiveOnce))

    // Finalizers run uninterruptibly; the waits must be interruptible or their timeouts could never cut them short.
    const drain = (ms: number) => Effect.timeoutOption(Effect.interruptible(FiberSet.awaitEmpty(fibers)), ms)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
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
