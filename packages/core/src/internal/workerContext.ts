/**
 * Builds the `HandlerContext` of one attempt. A model call passes a chain of named gates, in this order:
 * 1. `checkpoint`: a stopped attempt (cancel, deadline, lease lost, shutdown) starts nothing;
 * 2. `budget`: the estimate must fit the spend the Store last reported (`Protocol.budgetFits`), else
 *    `BudgetExceeded` and nothing is written;
 * 3. `reserve`: the reservation is written on the call id `${jobId}:${token}:${n}` before the call (charges are not
 *    fenced, so the spend of a call made under a lost lease is still recorded);
 * 4. `deadline`: the reservation's reply carries store time; at or past the job's deadline the reservation is
 *    settled at 0 and the call fails with `DeadlineExceeded` (no model call starts after the deadline);
 * 5. `admit`: the worker's admission hook wraps the call (fleet-wide concurrency and rate limits);
 * 6. `lease`: at the instant the call would start, the local lease end (send time of the last granted claim or
 *    renewal, plus the lease) must still be ahead; else the reservation is settled at 0, the attempt stops as
 *    self-fenced and no call starts (a call now could overlap the next holder's);
 * 7. `call`, then `settle`: the actual cost settles the reservation; a call that failed settles at the handler's
 *    cost for the error, else at its class's default (`ErrorClass.defaultCostOnError`: nothing for what providers
 *    do not bill, the reservation kept where they may have); a call interrupted once it had started settles at the
 *    handler's `costOnInterrupt` when it gives an amount, else its reservation stays.
 * The budget check, the call numbering and the reservation run under the attempt's ledger lock, so parallel calls of
 * one handler never reserve past the budget together; the settlement of a call that returned runs uninterruptibly,
 * so a cancel or a lost lease cannot drop the actual cost.
 *
 * @internal
 */
import { Cause, Clock, Context, Effect, Either, Exit, FiberRef, Metric, type MetricLabel } from "effect"
import { defaultCostOnError } from "../ErrorClass.js"
import type { StoreError } from "../Errors.js"
import { BudgetExceeded, type CallOptions, DeadlineExceeded, type HandlerContext } from "../Handler.js"
import type { Job } from "../Job.js"
import * as Metrics from "../Metrics.js"
import { normalize } from "../Normalize.js"
import * as Protocol from "../Protocol.js"
import type { ChargeItem } from "../Store.js"
import { catchFailure, countThen } from "./steps.js"
import * as Tracing from "./tracing.js"
import * as Control from "./workerControl.js"
import { retryStore } from "./workerStore.js"

/**
 * Wraps one model call of an attempt: may wait before running it (a permit, a rate limit) and must run it at most
 * once. The identity when the worker has no admission hook.
 *
 * @internal
 */
export type AroundCall = <A, E, R>(
  info: { readonly job: Job; readonly estimateCents: number },
  call: Effect.Effect<A, E, R>
) => Effect.Effect<A, E, R>

/**
 * One charge write: the job's spend after it and the store time of the write (the worker's group-committed charge
 * call).
 *
 * @internal
 */
export type Charge = (
  item: ChargeItem
) => Effect.Effect<{ readonly costCents: number; readonly now: number }, StoreError>

const settleFailed = "charge settlement failed; the reservation stays as the record"

/** When a started call began, on which Clock and under which metric labels: read where the lease gate passed it. */
interface Timing {
  clock: Clock.Clock | undefined
  startedAt: number
  labels: ReadonlyArray<MetricLabel.MetricLabel>
}

/** A model call's duration into its histogram. */
const recordDuration = (
  clock: Clock.Clock,
  startedAt: number,
  labels: ReadonlyArray<MetricLabel.MetricLabel>
): void => {
  Metrics.modelCallDurationSeconds.unsafeUpdate((clock.unsafeCurrentTimeMillis() - startedAt) / 1_000, labels)
}

/** @internal */
export const make = (options: {
  readonly charge: Charge
  readonly job: Job
  readonly control: Control.Control
  readonly aroundCall?: AroundCall | undefined
  /** Whether each call gets a `slowcall.model_call` span (a tracer other than Effect's built-in one is installed). */
  readonly tracing?: boolean | undefined
}): HandlerContext => {
  const { aroundCall, control, job } = options
  const token = job.leaseToken
  const locked = <A, E, R>(effect: Effect.Effect<A, E, R>) => Control.withLock(Control.ledgerOf(control), effect)

  /** One charge write; the caller holds the ledger lock so `knownCostCents` follows the ledger in write order. */
  const charge = (callId: string, amountCents: number, settled: boolean): Effect.Effect<number, StoreError> =>
    Effect.map(
      retryStore(options.charge({ jobId: job.id, callId, token, amountCents, settled })),
      ({ costCents, now }) => {
        control.knownCostCents = costCents
        return now
      }
    )

  /**
   * Settle `callId` with the amount `amount` gives; a throwing cost function leaves the reservation as the record.
   * Its value is the store time of the write (or nothing): callers discard it.
   */
  const settle = (callId: string, amount: () => number | undefined): Effect.Effect<unknown> =>
    Effect.suspend(() => {
      let amountCents: number | undefined
      try {
        amountCents = amount()
      } catch (error) {
        return Effect.logWarning(settleFailed, new Cause.UnknownException(error))
      }
      if (amountCents === undefined) return Effect.void
      return catchFailure(locked(charge(callId, Math.max(0, amountCents), true)), (error) =>
        Effect.logWarning(settleFailed, error)
      )
    })

  const checkpoint: Effect.Effect<void> = Effect.suspend(() =>
    control.stopReason !== undefined ? Effect.interrupt : Effect.void
  )

  /** Budget, numbering, reservation and deadline as one step under the ledger lock; returns the call id. */
  const reserve = (estimate: number): Effect.Effect<string, BudgetExceeded | DeadlineExceeded | StoreError> =>
    locked(
      Effect.suspend((): Effect.Effect<string, BudgetExceeded | DeadlineExceeded | StoreError> => {
        const spent = control.knownCostCents
        if (!Protocol.budgetFits(job.budgetCents, spent, estimate)) {
          return Effect.fail(
            new BudgetExceeded({
              jobId: job.id,
              costCents: spent,
              estimateCents: estimate,
              budgetCents: job.budgetCents ?? 0
            })
          )
        }
        const n = ++control.callCount
        const callId = `${job.id}:${token}:${n}`
        return Effect.flatMap(charge(callId, estimate, false), (now) =>
          job.deadlineAt !== null && now >= job.deadlineAt
            ? Effect.zipRight(
                charge(callId, 0, true),
                Effect.fail(new DeadlineExceeded({ jobId: job.id, deadlineAt: job.deadlineAt, now }))
              )
            : Effect.succeed(callId)
        )
      })
    )

  /** Past the local lease end: the reservation is settled at 0 and the attempt is stopped as self-fenced. */
  const fenceSelf = (callId: string): Effect.Effect<never> =>
    settle(callId, () => 0).pipe(
      Effect.zipRight(Control.stop(control, "self_fenced")),
      Effect.flatMap((first) => (first ? Metric.increment(Metrics.selfFenced) : Effect.void)),
      Effect.zipRight(Effect.interrupt)
    )

  /**
   * The lease gate, then the call timed into the model-call histogram (success, failure or interruption). The gate
   * runs where the call would start: past the local lease end nothing is sent to the provider. The fiber's Clock and
   * metric labels are read once, in the step that starts the call, so the gate and the timing take no effect steps of
   * their own. With `timing`, the call's end is recorded by its owner (`made`, whose settlement step is the instant
   * the call ends when no admission hook wraps it); without, by an exit handler of its own.
   */
  const gatedCall = <A, E, R>(callId: string, run: Effect.Effect<A, E, R>, timing?: Timing): Effect.Effect<A, E, R> =>
    Effect.withFiberRuntime<A, E, R>((fiber) => {
      const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
      const startedAt = clock.unsafeCurrentTimeMillis()
      if (startedAt >= control.localLeaseEnd) return fenceSelf(callId)
      const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
      if (timing !== undefined) {
        timing.clock = clock
        timing.startedAt = startedAt
        timing.labels = labels
        return run
      }
      return Effect.onExit(run, () => Effect.sync(() => recordDuration(clock, startedAt, labels)))
    })

  const call = <A, E, R>(
    call: CallOptions<A, E, R>
  ): Effect.Effect<A, E | BudgetExceeded | DeadlineExceeded | StoreError, R> =>
    Effect.suspend(() => {
      // The checkpoint: a stopped attempt starts nothing.
      if (control.stopReason !== undefined) return Effect.interrupt
      const estimateCents = Math.max(0, call.estimateCents)
      return Effect.flatMap(reserve(estimateCents), (callId) => made(call, estimateCents, callId))
    })

  /** A reserved call: counted, admitted, gated and made, its cost settled however it ends. */
  const made = <A, E, R>(call: CallOptions<A, E, R>, estimateCents: number, callId: string): Effect.Effect<A, E, R> => {
    // Set once the call itself starts: an interruption before that (a gate, a permit wait) consumed nothing.
    let started = false
    // Without an admission hook the call ends where its settlement starts: timed there, without an exit handler.
    const timing: Timing | undefined =
      aroundCall === undefined ? { clock: undefined, startedAt: 0, labels: [] } : undefined
    const timed = (): void => {
      if (timing?.clock !== undefined) recordDuration(timing.clock, timing.startedAt, timing.labels)
    }
    const gated = gatedCall(
      callId,
      Effect.suspend(() => {
        started = true
        return call.run
      }),
      timing
    )
    const admitted = aroundCall === undefined ? gated : aroundCall({ job, estimateCents }, gated)
    // The call's `cost` runs once per result, whoever asks first (the span while tracing, else the settlement).
    let costed: { readonly result: A; readonly cost: Either.Either<number, unknown> } | undefined
    const costOf = (result: A): Either.Either<number, unknown> => {
      if (costed === undefined || costed.result !== result) {
        costed = { result, cost: Either.try({ try: () => call.cost(result), catch: (error) => error }) }
      }
      return costed.cost
    }
    const run = options.tracing === true ? Tracing.modelCall(admitted, { call, callId, job, token, costOf }) : admitted
    const onInterrupt = call.costOnInterrupt
    // Counted in the step that starts the region.
    return countThen(
      Metrics.modelCalls,
      1,
      // The settlement runs uninterruptibly, so a cancel or a lost lease cannot drop the actual cost: a failed call
      // settles at its error's cost, a returned one at its cost (a failed cost is thrown again as it was, for
      // `settle` to report), a call interrupted once it had started at `costOnInterrupt`.
      Effect.uninterruptibleMask((restore) =>
        Effect.matchCauseEffect(restore(run), {
          onFailure: (cause) => {
            timed()
            const failure = Cause.failureOrCause(cause)
            if (Either.isLeft(failure)) {
              const error = failure.left
              return Effect.zipRight(
                settle(callId, () => call.costOnError?.(error) ?? defaultCostOnError(normalize(error).errorClass)),
                Exit.failCause(cause)
              )
            }
            if (onInterrupt !== undefined && started && Cause.isInterruptedOnly(cause)) {
              return Effect.zipRight(settle(callId, onInterrupt), Exit.failCause(cause))
            }
            return Exit.failCause(cause)
          },
          onSuccess: (result) => {
            timed()
            return Effect.zipRight(
              settle(callId, () => Either.getOrThrowWith(costOf(result), (error) => error)),
              Exit.succeed(result)
            )
          }
        })
      )
    )
  }

  return {
    jobId: job.id,
    token,
    attempt: job.attempts - job.attemptsBase,
    traceId: job.traceId,
    progress: (value) =>
      Effect.sync(() => {
        control.pendingProgress = Math.min(1, Math.max(0, value))
      }),
    checkpoint,
    call
  }
}
