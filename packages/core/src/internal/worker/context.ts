/**
 * Builds the `HandlerContext` of one attempt. A model call passes a chain of named gates, in this order:
 * 1. `checkpoint`: a stopped attempt (cancel, deadline, lease lost, shutdown) starts nothing;
 * 2. `budget`: the estimate must fit the spend the Store last reported (`Protocol.budgetFits`), else
 *    `BudgetExceeded` and nothing is written;
 * 3. `reserve`: the reservation is written on the call id `${jobId}:${token}:${n}` before the call (charges are not
 *    fenced, so the spend of a call made under a lost lease is still recorded); for an item of a batch with a budget
 *    the Store refuses it, writing nothing, when it does not fit what is left of the batch's budget
 *    (`Batch.chargeVerdict`), and the call fails with `BudgetExceeded` naming the batch;
 * 4. `deadline`: the reservation's reply carries store time; at or past the job's deadline the reservation is
 *    settled at 0 and the call fails with `DeadlineExceeded` (no model call starts after the deadline);
 * 5. `admit`: the worker's admission hook wraps the call; a call that names a provider resource (its own, else its
 *    handler's) is admitted by the fleet limiter (`limited.ts`): granted, it runs under a permit released after
 *    it with the provider's usage; told to wait (or paused), it does not start, its reservation is settled at 0 and
 *    the attempt stops as `throttled` (the job goes back to queued until the wait ends, no attempt used); a 429 it
 *    runs into pauses the resource for the fleet and throttles the job the same way;
 * 6. `lease`: at the instant the call would start, the local lease end (send time of the last granted claim or
 *    renewal, plus the lease) must still be ahead; else the reservation is settled at 0, the attempt stops as
 *    self-fenced and no call starts (a call now could overlap the next holder's);
 * 7. `call`, then `settle`: the actual cost settles the reservation; a call that failed settles at the handler's
 *    cost for the error, else at its class's default (`ErrorClass.defaultCostOnError`: nothing for what providers
 *    do not bill, the reservation kept where they may have); a call interrupted once it had started settles at the
 *    handler's `costOnInterrupt` when it gives an amount, else its reservation stays.
 * The budget check, the call numbering and the reservation run under the attempt's ledger lock (`ledger.ts`), so
 * parallel calls of one handler never reserve past the budget together; the settlement of a call that was made runs
 * uninterruptibly, so a cancel or a lost lease cannot drop the actual cost.
 *
 * @internal
 */
import { Cause, Clock, Context, Effect, Either, Exit, FiberRef, Metric, type MetricLabel } from "effect"
import { defaultCostOnError } from "../../ErrorClass.js"
import type { StoreError } from "../../Errors.js"
import { BudgetExceeded, type CallOptions, DeadlineExceeded, type HandlerContext } from "../../Handler.js"
import type { Job } from "../../Job.js"
import * as Metrics from "../../Metrics.js"
import { normalize } from "../../Normalize.js"
import * as Protocol from "../../Protocol.js"
import { countThen } from "../steps.js"
import * as Tracing from "../tracing.js"
import * as Control from "./control.js"
import { type Attempt, type Charge, charge, chargeRead, locked, settle } from "./ledger.js"
import { limited } from "./limited.js"
import type { WorkerLimits } from "./limits.js"
import { retryStore } from "./store.js"

export type { Charge } from "./ledger.js"

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

/** What `make` takes. @internal */
export interface Options {
  readonly charge: Charge
  readonly job: Job
  readonly control: Control.Control
  readonly aroundCall?: AroundCall | undefined
  /** Whether each call gets a `slowcall.model_call` span (a tracer other than Effect's built-in one is installed). */
  readonly tracing?: boolean | undefined
  /**
   * Whether the worker has given up on what is still in flight (a closing worker's grace periods are over): the one
   * thing that stops the settlement of a made call from being retried. Never, when not given.
   */
  readonly abandoned?: (() => boolean) | undefined
  /** The fleet limiter, when the worker has one: calls that name a resource are admitted by it. */
  readonly limits?: WorkerLimits | undefined
  /** The lease of a limiter permit (the job's lease: permits are renewed with its heartbeats). */
  readonly permitLeaseMs?: number | undefined
  /** The handler's resource, for calls that name none. */
  readonly defaultResource?: string | undefined
}

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

/**
 * The `HandlerContext` of one attempt: `call` passes the gates above in order.
 *
 * @internal
 */
export const make = (options: Options): HandlerContext => {
  const { control, job } = options
  const attempt: Attempt = {
    job,
    token: job.leaseToken,
    control,
    charge: options.charge,
    abandoned: options.abandoned ?? (() => false)
  }
  return {
    jobId: job.id,
    token: attempt.token,
    attempt: job.attempts - job.attemptsBase,
    traceId: job.traceId,
    progress: (value) =>
      Effect.sync(() => {
        control.pendingProgress = Math.min(1, Math.max(0, value))
      }),
    checkpoint: Effect.suspend(() => (control.stopReason !== undefined ? Effect.interrupt : Effect.void)),
    call: (call) =>
      Effect.suspend(() => {
        // The checkpoint: a stopped attempt starts nothing.
        if (control.stopReason !== undefined) return Effect.interrupt
        const estimateCents = Math.max(0, call.estimateCents)
        return Effect.flatMap(reserve(attempt, estimateCents), (callId) =>
          made(attempt, options, call, estimateCents, callId)
        )
      })
  }
}

/** Budget, numbering, reservation and deadline as one step under the ledger lock; returns the call id. */
const reserve = (
  attempt: Attempt,
  estimate: number
): Effect.Effect<string, BudgetExceeded | DeadlineExceeded | StoreError> =>
  locked(
    attempt,
    Effect.suspend((): Effect.Effect<string, BudgetExceeded | DeadlineExceeded | StoreError> => {
      const { control, job } = attempt
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
      const callId = `${job.id}:${attempt.token}:${n}`
      return Effect.flatMap(
        retryStore(chargeRead(attempt, callId, estimate, false)),
        ({ now, refused }): Effect.Effect<string, BudgetExceeded | DeadlineExceeded | StoreError> => {
          // The Store wrote nothing: the batch's budget cannot cover this call.
          if (refused !== undefined) {
            return Effect.fail(
              new BudgetExceeded({
                jobId: job.id,
                costCents: refused.batchCostCents,
                estimateCents: estimate,
                budgetCents: refused.budgetCents,
                batchId: refused.batchId
              })
            )
          }
          return job.deadlineAt !== null && now >= job.deadlineAt
            ? Effect.zipRight(
                charge(attempt, callId, 0, true),
                Effect.fail(new DeadlineExceeded({ jobId: job.id, deadlineAt: job.deadlineAt, now }))
              )
            : Effect.succeed(callId)
        }
      )
    })
  )

/**
 * Past the local lease end: the attempt is stopped as self-fenced. The call never started, so its reservation goes
 * back in the settlement step of `made`.
 */
const fenceSelf = (control: Control.Control): Effect.Effect<never> =>
  Control.stop(control, "self_fenced").pipe(
    Effect.flatMap((first) => (first ? Metric.increment(Metrics.selfFenced) : Effect.void)),
    Effect.zipRight(Effect.interrupt)
  )

/**
 * The lease gate, then the call timed into the model-call histogram (success, failure or interruption). The gate runs
 * where the call would start: past the local lease end nothing is sent to the provider. The fiber's Clock and metric
 * labels are read once, where the call starts, and the gate and the timing use them as plain values. With `timing`, the call's end is recorded by its owner (`made`, whose settlement step is the instant the call
 * ends when no admission hook wraps it); without, by an exit handler of its own.
 */
const gatedCall = <A, E, R>(
  control: Control.Control,
  run: Effect.Effect<A, E, R>,
  timing?: Timing
): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime<A, E, R>((fiber) => {
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    const startedAt = clock.unsafeCurrentTimeMillis()
    if (startedAt >= control.localLeaseEnd) return fenceSelf(control)
    const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
    if (timing !== undefined) {
      timing.clock = clock
      timing.startedAt = startedAt
      timing.labels = labels
      return run
    }
    return Effect.onExit(run, () => Effect.sync(() => recordDuration(clock, startedAt, labels)))
  })

/** A reserved call: counted, admitted, gated and made, its cost settled however it ends. */
const made = <A, E, R>(
  attempt: Attempt,
  options: Options,
  call: CallOptions<A, E, R>,
  estimateCents: number,
  callId: string
): Effect.Effect<A, E | StoreError, R> => {
  const { aroundCall, limits } = options
  // Set once the call itself starts: an interruption before that (a gate, a permit wait) consumed nothing.
  let started = false
  const resource = limits === undefined ? undefined : (call.resource ?? options.defaultResource)
  // Without an admission hook or a limiter the call ends where its settlement starts: timed there, without an exit
  // handler.
  const timing: Timing | undefined =
    aroundCall === undefined && resource === undefined ? { clock: undefined, startedAt: 0, labels: [] } : undefined
  const timed = (): void => {
    if (timing?.clock !== undefined) recordDuration(timing.clock, timing.startedAt, timing.labels)
  }
  const gated = gatedCall(
    attempt.control,
    Effect.suspend(() => {
      started = true
      return call.run
    }),
    timing
  )
  const hooked = aroundCall === undefined ? gated : aroundCall({ job: attempt.job, estimateCents }, gated)
  const admitted: Effect.Effect<A, E | StoreError, R> =
    resource === undefined || limits === undefined
      ? hooked
      : limited(attempt, limits, call, callId, resource, hooked, () => started, options.permitLeaseMs)
  // The call's `cost` runs once per result, whoever asks first (the span while tracing, else the settlement).
  let costed: { readonly result: A; readonly cost: Either.Either<number, unknown> } | undefined
  const costOf = (result: A): Either.Either<number, unknown> => {
    if (costed === undefined || costed.result !== result) {
      costed = { result, cost: Either.try({ try: () => call.cost(result), catch: (error) => error }) }
    }
    return costed.cost
  }
  const run =
    options.tracing === true
      ? Tracing.modelCall(admitted, { call, callId, job: attempt.job, token: attempt.token, costOf })
      : admitted
  const onInterrupt = call.costOnInterrupt
  // Counted in the step that starts the region.
  return countThen(
    Metrics.modelCalls,
    1,
    // The settlement runs uninterruptibly, so a cancel or a lost lease cannot drop the actual cost: a failed call
    // settles at its error's cost, a returned one at its cost (a failed cost is thrown again as it was, for `settle`
    // to report), a call interrupted once it had started at `costOnInterrupt`.
    Effect.uninterruptibleMask((restore) =>
      Effect.matchCauseEffect(restore(run), {
        onFailure: (cause) => {
          timed()
          const settling = settleFailed(attempt, call, callId, () => started, onInterrupt, cause)
          return settling === undefined ? Exit.failCause(cause) : Effect.zipRight(settling, Exit.failCause(cause))
        },
        onSuccess: (result) => {
          timed()
          return Effect.zipRight(
            settle(attempt, callId, () => Either.getOrThrowWith(costOf(result), (error) => error), true),
            Exit.succeed(result)
          )
        }
      })
    )
  )
}

/**
 * The settlement of a call that failed or was interrupted: a call that never started (its admission failed, or it
 * was stopped in its admission: an Acquire in flight, a wait for room, a job sent back to wait, a gate) consumed
 * nothing, and its reservation goes back, here and nowhere else; one that failed once started settles at its
 * error's cost, one interrupted once started at `costOnInterrupt` (read when the call was made). Nothing to settle otherwise (a defect, or an
 * interruption once started without `costOnInterrupt`: the reservation stays as the record).
 */
const settleFailed = <A, E, R>(
  attempt: Attempt,
  call: CallOptions<A, E, R>,
  callId: string,
  started: () => boolean,
  onInterrupt: CallOptions<A, E, R>["costOnInterrupt"],
  cause: Cause.Cause<E | StoreError>
): Effect.Effect<unknown> | undefined => {
  const failure = Cause.failureOrCause(cause)
  if (Either.isLeft(failure)) {
    // The error is the call's own once it started.
    const error = failure.left as E
    return settle(
      attempt,
      callId,
      () => (started() ? (call.costOnError?.(error) ?? defaultCostOnError(normalize(error).errorClass)) : 0),
      started()
    )
  }
  if (onInterrupt !== undefined && started() && Cause.isInterruptedOnly(cause)) {
    return settle(attempt, callId, onInterrupt, true)
  }
  if (!started() && Cause.isInterruptedOnly(cause)) return settle(attempt, callId, () => 0, false)
  return undefined
}
