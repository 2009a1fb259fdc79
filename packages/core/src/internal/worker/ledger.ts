/**
 * An attempt's side of the charge ledger: the reservation before a model call and its settlement after it. Charges
 * are not fenced (the money was spent whatever became of the lease) and are idempotent by call id, so a write that
 * is retried after it applied changes nothing.
 *
 * Every write here runs under the attempt's ledger lock (`locked`), so `knownCostCents` follows the ledger in write
 * order and parallel calls of one handler never reserve past the budget together. The settlement of a call that was
 * made is sent until it lands (a store outage as the call returns delays the attempt's end, never loses the cost):
 * only a failure the Store reports as final, or the end of a closing worker's grace periods, leaves the reservation
 * as the record, and that is logged.
 *
 * @internal
 */
import { Cause, Effect } from "effect"
import type { StoreError } from "../../Errors.js"
import type { Job } from "../../Job.js"
import type { ChargeItem } from "../../Store.js"
import { catchFailure } from "../steps.js"
import * as Control from "./control.js"
import { type Charged, retryStore } from "./store.js"

/**
 * One charge write: the job's spend after it and the store time of the write, and whether the Store refused a
 * reservation for the batch's budget (the worker's group-committed charge call).
 *
 * @internal
 */
export type Charge = (item: ChargeItem) => Effect.Effect<Charged, StoreError>

/**
 * What the calls of one attempt share: the job under its lease token, its control block, and how its charges are
 * written.
 *
 * @internal
 */
export interface Attempt {
  readonly job: Job
  readonly token: number
  readonly control: Control.Control
  readonly charge: Charge
  /**
   * Whether the worker has given up on what is still in flight (a closing worker's grace periods are over): the one
   * thing that stops the settlement of a made call from being retried.
   */
  readonly abandoned: () => boolean
}

const settleFailed = "charge settlement failed; the reservation stays as the record"

/** Delay before retry `n` (0-based) of a made call's settlement: 50 ms doubling, at most 1 s. */
const settleRetryDelayMs = (n: number): number => Math.min(50 * 2 ** n, 1_000)

/** `effect` under the attempt's ledger lock. @internal */
export const locked = <A, E, R>(attempt: Attempt, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Control.withLock(Control.ledgerOf(attempt.control), effect)

/**
 * One charge write, sent once, with its whole reply (the store time, and the batch's refusal of a reservation when
 * there was one). The caller holds the ledger lock.
 *
 * @internal
 */
export const chargeRead = (
  attempt: Attempt,
  callId: string,
  amountCents: number,
  settled: boolean
): Effect.Effect<Charged, StoreError> =>
  Effect.map(
    attempt.charge({ jobId: attempt.job.id, callId, token: attempt.token, amountCents, settled }),
    (charged) => {
      attempt.control.knownCostCents = charged.costCents
      return charged
    }
  )

/** `chargeRead` valued by the write's store time. */
const chargeOnce = (
  attempt: Attempt,
  callId: string,
  amountCents: number,
  settled: boolean
): Effect.Effect<number, StoreError> => Effect.map(chargeRead(attempt, callId, amountCents, settled), ({ now }) => now)

/**
 * One charge write with the worker's few short retries (a reservation, or a refund of a call never made). The caller
 * holds the ledger lock.
 *
 * @internal
 */
export const charge = (
  attempt: Attempt,
  callId: string,
  amountCents: number,
  settled: boolean
): Effect.Effect<number, StoreError> => retryStore(chargeOnce(attempt, callId, amountCents, settled))

/**
 * The settlement of a call that was made, sent until it lands: a retryable store failure is tried again (50 ms
 * doubling, at most 1 s apart), whatever becomes of the lease meanwhile. A failure the Store reports as final, or one
 * once the worker has `abandoned` what it holds, ends it. The ledger lock is taken per try, so the attempt's other
 * calls are not held up between tries.
 */
const settleMade = (attempt: Attempt, callId: string, amountCents: number): Effect.Effect<number, StoreError> => {
  const send = (n: number): Effect.Effect<number, StoreError> =>
    catchFailure(locked(attempt, chargeOnce(attempt, callId, amountCents, true)), (error) =>
      error.isRetryable && !attempt.abandoned()
        ? Effect.zipRight(Effect.sleep(settleRetryDelayMs(n)), send(n + 1))
        : Effect.fail(error)
    )
  return send(0)
}

/**
 * Settle `callId` with the amount `amount` gives; a throwing cost function leaves the reservation as the record.
 * `made`: the call was made (its settlement is retried until it lands, see `settleMade`), else it never started (a
 * refund at 0, with the few short retries: a lost refund leaves the reservation, an over-count). Its value is the
 * store time of the write (or nothing): callers discard it.
 *
 * @internal
 */
export const settle = (
  attempt: Attempt,
  callId: string,
  amount: () => number | undefined,
  made: boolean
): Effect.Effect<unknown> =>
  Effect.suspend(() => {
    let amountCents: number | undefined
    try {
      amountCents = amount()
    } catch (error) {
      return Effect.logWarning(settleFailed, new Cause.UnknownException(error))
    }
    if (amountCents === undefined) return Effect.void
    const settled = Math.max(0, amountCents)
    if (!made) {
      return catchFailure(locked(attempt, charge(attempt, callId, settled, true)), (error) =>
        Effect.logWarning(settleFailed, error)
      )
    }
    // The cost of a made call is lost from the ledger here: an error, with what an operator needs to record it.
    return catchFailure(settleMade(attempt, callId, settled), (error) =>
      Effect.logError(settleFailed, error).pipe(Effect.annotateLogs({ callId, amountCents: settled }))
    )
  })
