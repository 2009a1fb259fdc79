/**
 * One attempt of a held job, from a free slot to its stored outcome: dispatch from the local queue, the gates
 * before the handler (its input decodes, its estimate fits the budget, the worker is not closing, the claim's lease
 * is still ahead), the handler in its own fiber under the kept lease, the pure outcome decision, and the one persist
 * step. The slot is given back when the handler ends, so the next job starts while this one's outcome is written
 * (group-committed with the others').
 *
 * @internal
 */
import {
  Clock,
  Context,
  Effect,
  Either,
  Exit,
  FiberRef,
  Metric,
  type MetricLabel,
  Option,
  type ParseResult,
  Schema
} from "effect"
import type * as Handler from "../../Handler.js"
import * as Metrics from "../../Metrics.js"
import type { Outcome } from "../../Protocol.js"
import * as Protocol from "../../Protocol.js"
import { withNow } from "../now.js"
import { countThen, inOrder } from "../steps.js"
import * as Tracing from "../tracing.js"
import * as WorkerContext from "./context.js"
import * as Control from "./control.js"
import { estimateEither, evidenceOf, formatSchemaCause, withSchema } from "./ending.js"
import { type Env, inAttemptFiber, logFor, wakeIntake } from "./env.js"
import { finish } from "./finish.js"
import type { Held } from "./held.js"
import { handOff, persist, settleWith } from "./persist.js"

/** The gates before a handler may start: its input decodes, its estimate is computable and fits the budget. */
const admitOf = <R>(
  handler: Handler.Handler<any, any, R>,
  held: Held,
  decoded: Exit.Exit<unknown, ParseResult.ParseError>
): Either.Either<unknown, Outcome> => {
  const { job } = held
  if (Exit.isFailure(decoded)) {
    return Either.left<Outcome>({
      _tag: "Fail",
      errorClass: "invalid_input",
      error: formatSchemaCause(decoded.cause)
    })
  }
  const estimate = estimateEither(handler, decoded.value)
  if (Either.isLeft(estimate)) {
    return Either.left<Outcome>({ _tag: "Fail", errorClass: "unknown", error: estimate.left })
  }
  if (
    estimate.right !== undefined &&
    !Protocol.budgetFits(job.budgetCents, held.control.knownCostCents, estimate.right)
  ) {
    return Either.left<Outcome>({
      _tag: "Abandon",
      reason: "budget",
      error: `estimate ${estimate.right} does not fit the budget`
    })
  }
  return Either.right<unknown>(decoded.value)
}

/** The slot of an attempt is free again: the next waiting job may start, and the intake may claim more. */
const freeSlot = <R>(env: Env<R>, held: Held): Effect.Effect<void, never, R> =>
  Effect.suspend(() => {
    env.busy -= 1
    env.running.delete(held)
    wakeIntake(env)
    return dispatch(env)
  })

/**
 * An admitted attempt's start (or, refused at its gates or once the worker is closing, its settlement): the handler
 * in this fiber under the kept lease, then the decision and the one persist step.
 */
const startAttempt = <R>(
  env: Env<R>,
  held: Held,
  handler: Handler.Handler<any, any, R>,
  admitted: Either.Either<unknown, Outcome>
): Effect.Effect<void, never, R> => {
  const { control, job } = held
  if (Either.isLeft(admitted)) {
    return Effect.zipRight(freeSlot(env, held), persist(env, held, settleWith(env, held, admitted.left, evidenceOf)))
  }
  // The worker began closing while this job waited: hand it back before any model call.
  if (env.closing) {
    return Effect.zipRight(
      freeSlot(env, held),
      persist(env, held, settleWith(env, held, { _tag: "Release" }, evidenceOf), 0)
    )
  }
  const ctx = WorkerContext.make({
    charge: env.writes.charge,
    job,
    control,
    aroundCall: env.admission?.aroundCall,
    tracing: env.tracer !== undefined,
    abandoned: () => env.abandoning,
    limits: env.limits,
    permitLeaseMs: held.leaseMs,
    defaultResource: handler.resource
  })
  // Built inside the fiber: a handler that throws while building its effect fails this attempt like any defect.
  const run = Effect.suspend(() => handler.run(admitted.right, ctx))
  // Read from this fiber where the handler starts: the Clock and metric labels it runs with, which time the attempt
  // and record its duration.
  let clock: Clock.Clock | undefined
  let labels: ReadonlyArray<MetricLabel.MetricLabel> = []
  let startedAt = 0
  const finished = (exit: Exit.Exit<unknown, unknown>) => {
    const written = finish(env, held, handler, admitted.right, exit)
    return env.tracer === undefined
      ? written
      : Effect.withSpan(written, "slowcall.settle", {
          captureStackTrace: false,
          attributes: { "slowcall.job_id": job.id, "slowcall.token": job.leaseToken }
        })
  }
  // The handler runs in this fiber, the only part of it a stop may interrupt (`Control.stop` interrupts the fiber
  // named `handlerFiber`, set only while the handler runs); all that follows is uninterruptible, so the outcome is
  // always decided and written. The fiber is this attempt's alone and ends with it.
  const started = Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime<Exit.Exit<unknown, unknown>, never, R>((self) => {
      control.handlerFiber = self
      clock = Context.get(self.currentDefaultServices, Clock.Clock)
      labels = self.getFiberRef(FiberRef.currentMetricLabels)
      startedAt = clock.unsafeCurrentTimeMillis()
      // A stop that came while the job waited (a cancel seen by a renewal) interrupts the handler at once.
      return Effect.exit(restore(control.stopReason !== undefined ? Effect.interrupt : run))
    }).pipe(
      Effect.flatMap((exit) => {
        control.handlerFiber = undefined
        control.persisting = true
        const endedAt = clock!.unsafeCurrentTimeMillis()
        Metrics.attemptDurationSeconds.unsafeUpdate((endedAt - startedAt) / 1_000, labels)
        // The slot is free: the next waiting job starts (at this same instant) while this outcome is written.
        env.busy -= 1
        env.running.delete(held)
        wakeIntake(env)
        return Effect.zipRight(dispatchAt(env, endedAt), finished(exit))
      })
    )
  )
  if (env.tracer === undefined) return started
  return Effect.flatMap(Effect.option(Effect.currentSpan), (span) => {
    held.span = Option.getOrUndefined(span)
    return started
  })
}

/** The attempt: gates, handler under the kept lease, decision and persist. It holds a slot until its handler ends. */
const runAttempt = <R>(env: Env<R>, held: Held, handler: Handler.Handler<any, any, R>): Effect.Effect<void, never, R> =>
  Effect.suspend(() =>
    withSchema(Schema.decodeUnknown(handler.input), held.job.input, (decoded) =>
      startAttempt(env, held, handler, admitOf(handler, held, decoded))
    )
  ).pipe(
    // The attempt's log lines (the handler's and the worker's own) name it: see `withAttemptAnnotations`.
    (attempt) => inAttemptFiber(env, held, attempt),
    (attempt) =>
      env.tracer !== undefined
        ? Effect.withSpan(attempt, "slowcall.attempt", {
            // The span's source location is this line for every attempt: a stack trace each time buys nothing.
            captureStackTrace: false,
            // The submit's span (from the stored traceparent), so the job's whole life is one trace.
            parent: Tracing.parentOf(held.job.traceId),
            attributes: {
              "slowcall.job_id": held.job.id,
              "slowcall.queue": held.job.queue,
              "slowcall.type": held.job.type,
              "slowcall.version": held.job.version,
              "slowcall.token": held.job.leaseToken,
              "slowcall.attempt": held.job.attempts - held.job.attemptsBase,
              "slowcall.trace_id": held.job.traceId ?? ""
            }
          })
        : attempt
  )

/** Whether a waiting job may still start: its lease is this worker's and at least half of it lies ahead. */
const startable = (held: Held, now: number): boolean =>
  !Control.leaseGone(held.control.stopReason) && held.control.localLeaseEnd - now >= held.leaseMs / 2

/**
 * Start attempts for waiting jobs while slots are free, oldest claim first. A job whose lease is no longer safely
 * ahead (no renewal came while it waited, or it was fenced) is handed back instead of run; a job of a (type, version)
 * with no handler here (a message naming another than its job) is released untouched.
 *
 * @internal
 */
export const dispatch = <R>(env: Env<R>): Effect.Effect<void, never, R> =>
  Effect.suspend(() =>
    // Nothing can start: no clock read.
    env.busy >= env.concurrency || env.waiting.length === 0 ? Effect.void : withNow((now) => dispatchAt(env, now))
  )

/** `dispatch` at local clock time `now`, read by the caller: what starts the attempts (built at once, run later). */
const dispatchAt = <R>(env: Env<R>, now: number): Effect.Effect<void, never, R> => {
  const starts: Array<Effect.Effect<void, never, R>> = []
  while (env.busy < env.concurrency && env.waiting.length > 0) {
    const held = env.waiting.shift()!
    const handler = env.registry.get(held.job.type, held.job.version)
    if (handler === undefined) {
      // The release is written whatever happens meanwhile (as it was by the step that dispatches it).
      starts.push(
        env.fibers.run(
          Effect.uninterruptible(
            countThen(
              Metrics.unknownHandlerDeferred,
              1,
              persist(env, held, settleWith(env, held, { _tag: "Release" }, evidenceOf), env.unknownHandlerDelayMs)
            )
          )
        )
      )
      continue
    }
    if (!startable(held, now)) {
      // The claim's reply came back after the lease it granted may have ended (a pause, slow retries), or no
      // renewal came in time while it waited: a model call now could overlap the next holder's. Write nothing;
      // the message returns to a fresh claim.
      const ended = now >= held.control.localLeaseEnd && !Control.leaseGone(held.control.stopReason)
      starts.push(
        ended
          ? Metric.increment(Metrics.selfFenced).pipe(
              Effect.zipRight(
                logFor(
                  env,
                  held,
                  Effect.logWarning("lease ended before the attempt could start; nothing run, nothing committed")
                )
              ),
              Effect.zipRight(handOff(env, held))
            )
          : handOff(env, held)
      )
      continue
    }
    env.busy += 1
    env.running.add(held)
    // An attempt fiber starts interruptible (the dispatching step may be uninterruptible: it does not matter).
    starts.push(env.fibers.run(runAttempt(env, held, handler)))
  }
  // One start (a slot freed, one job taken) is the common case: no loop around it.
  return inOrder(starts)
}

/**
 * Hand every waiting job back (a closing worker): one release each, group-committed; the messages return at once.
 *
 * @internal
 */
export const releaseWaiting = <R>(env: Env<R>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const waiting = env.waiting.splice(0, env.waiting.length)
    return Effect.forEach(
      waiting,
      (held) =>
        Control.leaseGone(held.control.stopReason)
          ? handOff(env, held)
          : persist(env, held, settleWith(env, held, { _tag: "Release" }, evidenceOf), 0),
      { concurrency: "unbounded", discard: true }
    )
  })
