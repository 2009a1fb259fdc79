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
 *    handler's) is admitted by the fleet limiter (`workerLimits.ts`): granted, it runs under a permit released after
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
 * The budget check, the call numbering and the reservation run under the attempt's ledger lock, so parallel calls of
 * one handler never reserve past the budget together; the settlement of a call that was made runs uninterruptibly,
 * so a cancel or a lost lease cannot drop the actual cost, and its write is retried until it lands (a store outage
 * as the call returns delays the attempt's end, never loses the cost): only a failure the Store reports as final, or
 * the end of a closing worker's grace periods, leaves the reservation as the record, and that is logged.
 *
 * @internal
 */
import { Cause, Clock, Context, Effect, Either, Exit, FiberRef, Metric, type MetricLabel, Option } from "effect"
import { defaultCostOnError } from "../../ErrorClass.js"
import type { StoreError } from "../../Errors.js"
import { BudgetExceeded, type CallOptions, DeadlineExceeded, type HandlerContext } from "../../Handler.js"
import type { Job } from "../../Job.js"
import type * as Limiter from "../../Limiter.js"
import * as Metrics from "../../Metrics.js"
import { normalize } from "../../Normalize.js"
import * as Protocol from "../../Protocol.js"
import type { ChargeItem } from "../../Store.js"
import { withNow } from "../now.js"
import { catchFailure, countThen } from "../steps.js"
import * as Tracing from "../tracing.js"
import * as Control from "./control.js"
import {
  type PauseAsk,
  pauseAfterFailure,
  pauseAfterSuccess,
  type Throttled,
  throttledBy,
  usageOf,
  type WorkerLimits
} from "./limits.js"
import { type Charged, retryStore } from "./store.js"

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
 * One charge write: the job's spend after it and the store time of the write, and whether the Store refused a
 * reservation for the batch's budget (the worker's group-committed charge call).
 *
 * @internal
 */
export type Charge = (item: ChargeItem) => Effect.Effect<Charged, StoreError>

const settleFailed = "charge settlement failed; the reservation stays as the record"

/** Delay before retry `n` (0-based) of a made call's settlement: 50 ms doubling, at most 1 s. */
const settleRetryDelayMs = (n: number): number => Math.min(50 * 2 ** n, 1_000)

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
}): HandlerContext => {
  const { aroundCall, control, job, limits } = options
  const token = job.leaseToken
  const abandoned = options.abandoned ?? (() => false)
  const locked = <A, E, R>(effect: Effect.Effect<A, E, R>) => Control.withLock(Control.ledgerOf(control), effect)

  /**
   * One charge write, sent once; the caller holds the ledger lock so `knownCostCents` follows the ledger in write
   * order. Its value is the write's store time.
   */
  const chargeOnce = (callId: string, amountCents: number, settled: boolean): Effect.Effect<number, StoreError> =>
    Effect.map(chargeRead(callId, amountCents, settled), ({ now }) => now)

  /** `chargeOnce` with the whole reply: the store time, and the batch's refusal of a reservation when there was one. */
  const chargeRead = (callId: string, amountCents: number, settled: boolean): Effect.Effect<Charged, StoreError> =>
    Effect.map(options.charge({ jobId: job.id, callId, token, amountCents, settled }), (charged) => {
      control.knownCostCents = charged.costCents
      return charged
    })

  /** One charge write with the worker's few short retries (a reservation, or a refund of a call never made). */
  const charge = (callId: string, amountCents: number, settled: boolean): Effect.Effect<number, StoreError> =>
    retryStore(chargeOnce(callId, amountCents, settled))

  /**
   * The settlement of a call that was made, sent until it lands: a retryable store failure is tried again (50 ms
   * doubling, at most 1 s apart), whatever becomes of the lease meanwhile (charges are not fenced: the money was
   * spent, and a charge is idempotent by call id, so a retry of a write that applied changes nothing). A failure the
   * Store reports as final, or one once the worker has `abandoned` what it holds, ends it. The ledger lock is taken
   * per try, so the attempt's other calls are not held up between tries.
   */
  const settleMade = (callId: string, amountCents: number): Effect.Effect<number, StoreError> => {
    const attempt = (n: number): Effect.Effect<number, StoreError> =>
      catchFailure(locked(chargeOnce(callId, amountCents, true)), (error) =>
        error.isRetryable && !abandoned()
          ? Effect.zipRight(Effect.sleep(settleRetryDelayMs(n)), attempt(n + 1))
          : Effect.fail(error)
      )
    return attempt(0)
  }

  /**
   * Settle `callId` with the amount `amount` gives; a throwing cost function leaves the reservation as the record.
   * `made`: the call was made (its settlement is retried until it lands, see `settleMade`), else it never started
   * (a refund at 0, with the few short retries: a lost refund leaves the reservation, an over-count). Its value is
   * the store time of the write (or nothing): callers discard it.
   */
  const settle = (callId: string, amount: () => number | undefined, made: boolean): Effect.Effect<unknown> =>
    Effect.suspend(() => {
      let amountCents: number | undefined
      try {
        amountCents = amount()
      } catch (error) {
        return Effect.logWarning(settleFailed, new Cause.UnknownException(error))
      }
      if (amountCents === undefined) return Effect.void
      const settled = Math.max(0, amountCents)
      if (!made)
        return catchFailure(locked(charge(callId, settled, true)), (error) => Effect.logWarning(settleFailed, error))
      // The cost of a made call is lost from the ledger here: an error, with what an operator needs to record it.
      return catchFailure(settleMade(callId, settled), (error) =>
        Effect.logError(settleFailed, error).pipe(Effect.annotateLogs({ callId, amountCents: settled }))
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
        return Effect.flatMap(
          retryStore(chargeRead(callId, estimate, false)),
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
                  charge(callId, 0, true),
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
  const fenceSelf: Effect.Effect<never> = Control.stop(control, "self_fenced").pipe(
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
  const gatedCall = <A, E, R>(run: Effect.Effect<A, E, R>, timing?: Timing): Effect.Effect<A, E, R> =>
    Effect.withFiberRuntime<A, E, R>((fiber) => {
      const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
      const startedAt = clock.unsafeCurrentTimeMillis()
      if (startedAt >= control.localLeaseEnd) return fenceSelf
      const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
      if (timing !== undefined) {
        timing.clock = clock
        timing.startedAt = startedAt
        timing.labels = labels
        return run
      }
      return Effect.onExit(run, () => Effect.sync(() => recordDuration(clock, startedAt, labels)))
    })

  /** Stop the attempt as throttled (the first wait counts): the job goes back to queued until `throttled.until`. */
  const throttle = (throttled: Throttled): Effect.Effect<boolean> =>
    Effect.suspend(() => {
      control.throttled ??= throttled
      return Control.stop(control, "throttled")
    })

  /** A limiter write after a call: its failure is logged, never the call's (a permit lapses by itself). */
  const logged = <A>(effect: Effect.Effect<A, StoreError>): Effect.Effect<A | undefined> =>
    catchFailure(effect, (error) =>
      Effect.as(Effect.logWarning("limiter write after a model call failed", error), undefined)
    )

  /**
   * A reserved call admitted by the fleet limiter: `Acquire` (one request and the call's token reservation), then
   * the call under its permit, then `Release` corrected by the reported usage, and the pause a 429 asks for.
   */
  const limited = <A, E, R>(
    wl: WorkerLimits,
    call: CallOptions<A, E, R>,
    callId: string,
    resource: string,
    run: Effect.Effect<A, E, R>,
    started: () => boolean
  ): Effect.Effect<A, E | StoreError, R> => {
    const holder = { jobId: job.id, token }
    const afterCall = (exit: Exit.Exit<A, E>): Effect.Effect<unknown> =>
      Effect.suspend(() => {
        control.permits?.delete(callId)
        const reached = started()
        let usage: Limiter.Usage | undefined
        let ask: PauseAsk | undefined
        // A 429 (rate limited) teaches the fleet the resource's concurrency (`Limits.learn`).
        let rateLimited = false
        if (Exit.isSuccess(exit)) {
          try {
            usage = usageOf(call.usage?.(exit.value))
          } catch {
            usage = undefined
          }
          try {
            ask = pauseAfterSuccess(call.rateLimit?.(exit.value))
          } catch {
            ask = undefined
          }
        } else if (reached) {
          const failure = Cause.failureOption(exit.cause)
          if (Option.isSome(failure)) {
            ask = pauseAfterFailure(failure.value)
            rateLimited = normalize(failure.value).errorClass === "rate_limited"
          }
        }
        const release: Limiter.Release = {
          _tag: "Release",
          resource,
          callId,
          holder,
          reached,
          ...(usage === undefined ? {} : { usage }),
          ...(rateLimited ? { rateLimited } : {})
        }
        // A call that returned hands its result back at once: its permit goes back (and any pause it asks for goes
        // out) beside the settlement, not before it. Its Release is handed in before the result is handed back, so
        // the handler's next call cannot be told to wait for this call's own permit (with a cap of one, every chained
        // call would wait so, and its job would never get past the first call). One that failed waits for its pause,
        // which may throttle the job.
        if (Exit.isSuccess(exit)) {
          return Effect.forkDaemon(ask === undefined ? logged(wl.post(release)) : tell(ask, release, exit))
        }
        return ask === undefined ? logged(wl.apply(release)) : tell(ask, release, exit)
      })
    const tell = (pauseAsk: PauseAsk, release: Limiter.Release, exit: Exit.Exit<A, E>): Effect.Effect<unknown> =>
      withNow((local) => {
        const estimate = pauseAsk.kind === "rate_limited" ? wl.storeNow(local) + pauseAsk.waitMs : null
        const pause: Limiter.Pause = {
          _tag: "Pause",
          resource,
          kind: pauseAsk.kind,
          until: estimate,
          reason: pauseAsk.why
        }
        return Effect.flatMap(logged(wl.apply(pause)), (answer): Effect.Effect<unknown> => {
          const released = logged(wl.apply(release))
          // A call that succeeded keeps its result; one that failed on the 429 waits out the pause, no attempt used.
          if (Exit.isSuccess(exit)) return released
          const now = answer?.now ?? wl.storeNow(local)
          const result = answer?.result
          const throttled: Throttled =
            result?._tag === "Paused"
              ? throttledBy(wl, resource, now, result)
              : estimate === null
                ? throttledBy(wl, resource, now, { _tag: "Paused", until: null, kind: pauseAsk.kind })
                : { resource, why: pauseAsk.why, until: estimate, delayMs: Math.max(0, estimate - now) }
          return Effect.zipRight(released, throttle(throttled))
        })
      })
    /**
     * Nothing was called: the attempt stops and the job waits without using an attempt. The reservation goes back in
     * the settlement step of `made`, uninterruptibly, as for every call stopped before it started (one refund write).
     */
    const waitOut = (now: number, result: Parameters<typeof throttledBy>[3]): Effect.Effect<never> =>
      Effect.zipRight(throttle(throttledBy(wl, resource, now, result)), Effect.interrupt)
    /**
     * An attempt that has made calls already waits for the room in place, its reservation kept: queued again, it
     * would start over and pay for those calls again, and under steady contention a chain of calls could lose its
     * place this way without end (a 429 of another job's call pauses the resource for every worker, the job holding
     * the provider's slot mid-chain too). A stop (cancel, lease lost, shutdown) ends the wait; stopped while it
     * waits, nothing was called: `made` gives the reservation back. A first call's job waits out of its attempt.
     */
    const waitFor = (now: number, result: Parameters<typeof throttledBy>[3]): Effect.Effect<A, E | StoreError, R> =>
      control.callCount > 1
        ? Effect.zipRight(Effect.sleep(throttledBy(wl, resource, now, result).delayMs), acquire())
        : waitOut(now, result)
    const acquire = (): Effect.Effect<A, E | StoreError, R> =>
      Effect.flatMap(
        wl.apply({
          _tag: "Acquire",
          resource,
          callId,
          holder,
          leaseMs: Math.max(1, options.permitLeaseMs ?? 60_000),
          tenant: job.tenant,
          priority: job.priority,
          cost: { requests: 1, inputTokens: call.tokens?.input ?? 0, outputTokens: call.tokens?.maxOutput ?? 0 }
        }),
        ({ now, result }): Effect.Effect<A, E | StoreError, R> => {
          switch (result._tag) {
            case "Granted": {
              control.permits ??= new Map()
              control.permits.set(callId, resource)
              return Effect.onExit(run, afterCall)
            }
            case "Wait":
              return waitFor(now, result)
            case "Paused":
              // A pause with an end is waited for as a wait is; one until an operator resumes sends the job back.
              return result.until === null ? waitOut(now, result) : waitFor(now, result)
            default:
              return Effect.die(new Error(`limiter answered ${result._tag} to an Acquire`))
          }
        }
      )
    return acquire()
  }

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
  const made = <A, E, R>(
    call: CallOptions<A, E, R>,
    estimateCents: number,
    callId: string
  ): Effect.Effect<A, E | StoreError, R> => {
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
      Effect.suspend(() => {
        started = true
        return call.run
      }),
      timing
    )
    const hooked = aroundCall === undefined ? gated : aroundCall({ job, estimateCents }, gated)
    const admitted: Effect.Effect<A, E | StoreError, R> =
      resource === undefined || limits === undefined
        ? hooked
        : limited(limits, call, callId, resource, hooked, () => started)
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
              // A call that never started (its admission failed) consumed nothing; the error is the call's own once it
              // started.
              const error = failure.left as E
              return Effect.zipRight(
                settle(
                  callId,
                  () => (started ? (call.costOnError?.(error) ?? defaultCostOnError(normalize(error).errorClass)) : 0),
                  started
                ),
                Exit.failCause(cause)
              )
            }
            if (onInterrupt !== undefined && started && Cause.isInterruptedOnly(cause)) {
              return Effect.zipRight(settle(callId, onInterrupt, true), Exit.failCause(cause))
            }
            // Stopped before the call started (in its admission: an Acquire in flight, a wait for room, a job sent
            // back to wait, a gate): nothing was consumed, the reservation goes back, here and nowhere else.
            if (!started && Cause.isInterruptedOnly(cause)) {
              return Effect.zipRight(
                settle(callId, () => 0, false),
                Exit.failCause(cause)
              )
            }
            return Exit.failCause(cause)
          },
          onSuccess: (result) => {
            timed()
            return Effect.zipRight(
              settle(callId, () => Either.getOrThrowWith(costOf(result), (error) => error), true),
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
