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
  Cause,
  Clock,
  Context,
  Effect,
  Either,
  Exit,
  FiberRef,
  Metric,
  type MetricLabel,
  Option,
  ParseResult,
  Schema
} from "effect"
import * as Canonical from "../../Canonical.js"
import { policy as classPolicy } from "../../ErrorClass.js"
import * as Handler from "../../Handler.js"
import * as Metrics from "../../Metrics.js"
import * as Normalize from "../../Normalize.js"
import type { Outcome } from "../../Protocol.js"
import * as Protocol from "../../Protocol.js"
import * as Retry from "../../Retry.js"
import { withNow } from "../now.js"
import { countThen, inOrder } from "../steps.js"
import * as Tracing from "../tracing.js"
import * as WorkerContext from "./context.js"
import * as Control from "./control.js"
import { type Env, handOff, inAttemptFiber, logFor, persist, settleWith, wakeIntake } from "./env.js"
import type { Held } from "./held.js"
import { type Decision, decide, type Ended } from "./outcome.js"

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

/** Redacted, truncated evidence. @internal */
export const evidenceOf = (text: string): string => Normalize.truncate(Normalize.redact(text))

/** A schema step's failure as evidence: the parse error, or the defect a throwing transformation left. */
const formatSchemaCause = (cause: Cause.Cause<ParseResult.ParseError>): string => {
  const failure = Cause.failureOption(cause)
  return Option.isSome(failure) ? formatParseError(failure.value) : evidenceOf(Cause.pretty(cause))
}

/**
 * Runs a schema parse in the calling fiber and continues with `f` of its exit. The parser settles a fully synchronous
 * schema at once and returns an `Either`: then `f` is called right here, without an effect step; a schema with
 * effectful transformations returns an effect, which runs in this fiber (its Clock, logger and tracer), once, before
 * `f`. A throw while the parser is built or run is a defect of the exit, never a crash of the attempt. Called inside a
 * step of the fiber (a `suspend`): a synchronous parse runs where it is called.
 */
const withSchema = <A, B, R>(
  parse: (value: any) => Effect.Effect<A, ParseResult.ParseError>,
  value: unknown,
  f: (exit: Exit.Exit<A, ParseResult.ParseError>) => Effect.Effect<B, never, R>
): Effect.Effect<B, never, R> => {
  let result: Effect.Effect<A, ParseResult.ParseError>
  try {
    result = parse(value)
  } catch (defect) {
    return f(Exit.die(defect))
  }
  if (Either.isEither(result)) {
    const settled = result as Either.Either<A, ParseResult.ParseError>
    return f(Either.isRight(settled) ? Exit.succeed(settled.right) : Exit.fail(settled.left))
  }
  return Effect.flatMap(Effect.exit(result), f)
}

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

/** A returned value as the decision sees it: encoded by the result schema, then checked to be storable JSON. */
const succeededOf = (encoded: Exit.Exit<unknown, ParseResult.ParseError>): Ended => {
  if (Exit.isFailure(encoded)) {
    const error = `result does not match the handler's result schema: ${formatSchemaCause(encoded.cause)}`
    return { _tag: "Unstorable", error }
  }
  const result = Canonical.validateJson(encoded.value)
  if (Either.isLeft(result)) {
    const error = evidenceOf(`result is not storable JSON at ${result.left.path}: ${result.left.message}`)
    return { _tag: "Unstorable", error }
  }
  return { _tag: "Succeeded", result: result.right }
}

/**
 * How the handler ended, for the decision (the result encoded and checked, or the failure normalised), handed to `f`.
 * Plain steps, no generator: this runs once per attempt, inside a step of its fiber.
 */
const endedOf = <R>(
  handler: Handler.Handler<any, any, R>,
  exit: Exit.Exit<unknown, unknown>,
  f: (ended: Ended) => Effect.Effect<void>
): Effect.Effect<void> => {
  if (Exit.isSuccess(exit))
    return withSchema(Schema.encode(handler.result), exit.value, (encoded) => f(succeededOf(encoded)))
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure) && failure.value instanceof Handler.BudgetExceeded) {
    return f({ _tag: "BudgetExceeded", error: failure.value.message })
  }
  if (Option.isSome(failure) && failure.value instanceof Handler.DeadlineExceeded) {
    return f({ _tag: "DeadlineExceeded", error: failure.value.message })
  }
  return Effect.flatMap(
    Normalize.normalizeWithClock(Option.isSome(failure) ? failure.value : exit.cause),
    (normalized) => f({ _tag: "Failed", normalized })
  )
}

/** Decide and persist the outcome of an attempt whose handler has ended. */
const finish = <R>(
  env: Env<R>,
  held: Held,
  handler: Handler.Handler<any, any, R>,
  input: unknown,
  exit: Exit.Exit<unknown, unknown>
): Effect.Effect<void> =>
  Effect.suspend(() =>
    endedOf(handler, exit, (ended) => {
      const { control, job } = held
      const spentCents = control.knownCostCents
      // The next attempt's estimate: the handler's, else what this attempt spent (the claim applies the full fallback).
      const declared = Either.getOrUndefined(estimateEither(handler, input))
      const decision = decide({
        job,
        ended,
        stop: control.stopReason,
        throttled: control.throttled,
        spentCents,
        nextEstimateCents: declared ?? Math.max(0, spentCents - job.costCents)
      })
      const written = write(env, held, decision)
      if (env.tracer === undefined) return written
      return Effect.zipRight(
        Effect.annotateCurrentSpan({
          "slowcall.decision": decision._tag,
          "slowcall.ended": ended._tag,
          "slowcall.cost_cents": spentCents
        }),
        written
      )
    })
  )

/** What a decision writes: nothing (hand off), its settlement, or a retry after its delay. */
const write = <R>(env: Env<R>, held: Held, decision: Decision): Effect.Effect<void> => {
  switch (decision._tag) {
    case "HandOff":
      return decision.selfFenced
        ? Effect.zipRight(
            logFor(
              env,
              held,
              Effect.logWarning("lease could not be renewed in time; attempt interrupted, nothing committed")
            ),
            handOff(env, held)
          )
        : handOff(env, held)
    case "Settle":
      return persist(env, held, settleWith(env, held, decision.outcome, evidenceOf))
    case "Retry": {
      const { normalized } = decision
      const { job } = held
      return Effect.flatMap(
        Retry.delayFor(normalized, job.attempts - job.attemptsBase, {
          ...classPolicy(normalized.errorClass),
          ...(env.retry?.baseMs !== undefined ? { baseMs: env.retry.baseMs } : {}),
          ...(env.retry?.capMs !== undefined ? { capMs: env.retry.capMs } : {})
        }),
        (delayMs) => {
          const outcome: Outcome = {
            _tag: "Retry",
            delayMs,
            errorClass: normalized.errorClass,
            error: normalized.evidence
          }
          return countThen(Metrics.retries, 1, persist(env, held, settleWith(env, held, outcome, evidenceOf)))
        }
      )
    }
  }
}

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
  // Read from this fiber in the step that starts the handler: the Clock and metric labels it runs with, so the
  // duration is timed and recorded without effect steps of its own.
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
    // Nothing can start: no clock read, no step.
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
