/**
 * The step every attempt ends with: its outcome written (`persist`, fenced, retried while the lease is held), then
 * the message acked or deferred and the lease let go; or the job handed back without a write (`handOff`).
 *
 * @internal
 */
import { Effect } from "effect"
import type { LeaseLost, StoreError } from "../../Errors.js"
import * as Metrics from "../../Metrics.js"
import type { Outcome } from "../../Protocol.js"
import { withNow } from "../now.js"
import { catchFailure, countThen } from "../steps.js"
import * as Control from "./control.js"
import { ack, defer, type Env, logFor, wakeIntake } from "./env.js"
import type { Held } from "./held.js"
import { isRetryableStoreError, type Written } from "./store.js"

/** Delay before retry `n` (0-based) of an outcome write while the lease is held: 50 ms doubling, at most 1 s. */
const heldRetryDelayMs = (n: number): number => Math.min(50 * 2 ** n, 1_000)

/**
 * Retry an outcome write while the lease is this worker's (the keeper keeps it), for at most one lease length after
 * the first failure (and never past the lease: the watchdog fences an attempt whose lease was not renewed in time).
 * The lease may be learned lost while a retry waits (a heartbeat's reply): then the write is not sent again. A write
 * that succeeds at once reads no clock.
 */
export const retryWrite = <A>(
  write: Effect.Effect<A, LeaseLost | StoreError>,
  held: Held,
  abandoned: () => boolean
): Effect.Effect<A, LeaseLost | StoreError> => {
  let firstFailureAt: number | undefined
  const mayRetry = (error: LeaseLost | StoreError): Effect.Effect<boolean> =>
    isRetryableStoreError(error) && !abandoned()
      ? withNow((now) => {
          firstFailureAt ??= now
          return Effect.succeed(!Control.leaseGone(held.control.stopReason) && now - firstFailureAt < held.leaseMs)
        })
      : Effect.succeed(false)
  const again = (n: number, error: LeaseLost | StoreError): Effect.Effect<A, LeaseLost | StoreError> =>
    Effect.suspend(() => (Control.leaseGone(held.control.stopReason) ? Effect.fail(error) : attempt(n)))
  const attempt = (n: number): Effect.Effect<A, LeaseLost | StoreError> =>
    catchFailure(write, (error) =>
      Effect.flatMap(mayRetry(error), (retry) =>
        retry ? Effect.zipRight(Effect.sleep(heldRetryDelayMs(n)), again(n + 1, error)) : Effect.fail(error)
      )
    )
  return attempt(0)
}

/**
 * A settlement as a write. A result the Store refuses for good (a non-retryable `StoreError`, e.g. a value its
 * column type cannot hold) would be refused on every attempt, and each attempt calls the model again: the job fails
 * with that evidence instead. (A repeat of the whole write after a retryable failure tries `Complete` again first: it
 * is fenced, so at most one of the two writes applies.)
 */
export const settleWith = <R>(
  env: Env<R>,
  held: Held,
  outcome: Outcome,
  evidenceOf: (text: string) => string
): Effect.Effect<Written, LeaseLost | StoreError> => {
  const { control, job } = held
  const gone = () => Control.leaseGone(control.stopReason)
  const write = env.writes.settle({ jobId: job.id, token: job.leaseToken, outcome }, gone)
  if (outcome._tag !== "Complete") return write
  return Effect.catchIf(
    write,
    (error): error is StoreError => error._tag === "StoreError" && !error.isRetryable,
    (error) =>
      logFor(env, held, Effect.logError("the store refused the result; the job fails", error)).pipe(
        Effect.zipRight(
          env.writes.settle(
            {
              jobId: job.id,
              token: job.leaseToken,
              outcome: {
                _tag: "Fail",
                errorClass: "unknown",
                error: evidenceOf(`result not storable: ${error.detail}`)
              }
            },
            gone
          )
        )
      )
  )
}

/**
 * The one persist step: write a settlement (fenced, retried on retryable store errors while the lease is held), then
 * ack a job that is terminal or defer a queued one until it is due (`deferMs` overrides that wait), and let the lease
 * go. A lost lease stops the attempt's lease keeping at once (no fenced write follows a `LeaseLost`) and defers the
 * message; a write that could not be made leaves the message to return.
 */
export const persist = <R>(
  env: Env<R>,
  held: Held,
  write: Effect.Effect<Written, LeaseLost | StoreError>,
  deferMs?: number | undefined
): Effect.Effect<void> =>
  retryWrite(write, held, () => env.abandoning).pipe(
    Effect.matchEffect({
      onFailure: (error) => {
        letGo(env, held)
        if (error._tag !== "LeaseLost") {
          return logFor(env, held, Effect.logError("outcome not persisted; the message is left to return", error))
        }
        // Known lost before the write went out (a heartbeat's reply): nothing was sent, nothing was rejected.
        if (Control.leaseGone(held.control.stopReason)) return defer(env, held.delivery, 0)
        return Control.stop(held.control, "lease_lost").pipe(
          Effect.zipRight(
            countThen(
              Metrics.fencedWritesRejected,
              1,
              logFor(env, held, Effect.logWarning("outcome rejected: lease lost", error))
            )
          ),
          Effect.zipRight(defer(env, held.delivery, 0))
        )
      },
      onSuccess: ({ job, now }) => {
        letGo(env, held)
        const reply =
          job.state === "queued"
            ? defer(env, held.delivery, deferMs ?? Math.max(0, job.runAfter - now))
            : ack(env, held.delivery)
        return job.state === "failed" ? countThen(Metrics.deadLetterArrivals, 1, reply) : reply
      }
    })
  )

/** The lease is no longer kept: the outcome is written, handed back, or could not be written. */
export const letGo = <R>(env: Env<R>, held: Held): void => {
  env.keeper.remove(held)
  wakeIntake(env)
}

/** Hand a held job back without writing: its lease lapses (or was lost) and the message returns. */
export const handOff = <R>(env: Env<R>, held: Held): Effect.Effect<void> =>
  Effect.suspend(() => {
    letGo(env, held)
    return defer(env, held.delivery, 0)
  })
