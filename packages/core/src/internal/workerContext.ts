/**
 * Builds the `HandlerContext` of one attempt. `call` writes the charge reservation before the model call and the
 * settlement after it, on the call id `${jobId}:${token}:${n}`; charges are not fenced, so the spend of a call made
 * under a lost lease is still recorded. The budget check, the call numbering and the reservation run under the
 * attempt's ledger lock, so parallel calls of one handler never reserve past the budget together; the settlement of
 * a call that returned runs uninterruptibly, so a cancel or a lost lease cannot drop the actual cost.
 *
 * @internal
 */
import { Effect, Metric } from "effect"
import type { StoreError } from "../Errors.js"
import { BudgetExceeded, type CallOptions, DeadlineExceeded, type HandlerContext } from "../Handler.js"
import * as Metrics from "../Metrics.js"
import type { Job } from "../Models.js"
import type { Store } from "../Store.js"
import type { Control } from "./workerControl.js"
import { retryStore } from "./workerStore.js"

/** @internal */
export const make = (options: {
  readonly store: Store["Type"]
  readonly job: Job
  readonly control: Control
}): HandlerContext => {
  const { control, job, store } = options
  const token = job.leaseToken
  const locked = control.ledger.withPermits(1)

  /** One charge write; the caller holds the ledger lock so `knownCostCents` follows the ledger in write order. */
  const charge = (callId: string, amountCents: number, settled: boolean): Effect.Effect<void, StoreError> =>
    retryStore(store.charge({ jobId: job.id, callId, token, amountCents, settled })).pipe(
      Effect.catchTag("JobNotFound", (error) => Effect.die(error)),
      Effect.flatMap(({ costCents }) => {
        control.knownCostCents = costCents
        return Effect.void
      })
    )

  /** Settle `callId` with the amount `amount` gives; a throwing cost function leaves the reservation as the record. */
  const settle = (callId: string, amount: () => number | undefined): Effect.Effect<void> =>
    Effect.try(amount).pipe(
      Effect.flatMap((amountCents) =>
        amountCents === undefined ? Effect.void : locked(charge(callId, Math.max(0, amountCents), true))
      ),
      Effect.catchAll((error) =>
        Effect.logWarning("charge settlement failed; the reservation stays as the record", error)
      )
    )

  const checkpoint: Effect.Effect<void> = Effect.suspend(() =>
    control.stopReason !== undefined ? Effect.interrupt : Effect.void
  )

  const checkDeadline: Effect.Effect<void, DeadlineExceeded | StoreError> =
    job.deadlineAt === null
      ? Effect.void
      : Effect.flatMap(retryStore(store.now), (now) =>
          job.deadlineAt !== null && now >= job.deadlineAt
            ? Effect.fail(new DeadlineExceeded({ jobId: job.id, deadlineAt: job.deadlineAt, now }))
            : Effect.void
        )

  /** Budget check, numbering and reservation as one step; returns the call id. */
  const reserve = (estimate: number): Effect.Effect<string, BudgetExceeded | StoreError> =>
    locked(
      Effect.gen(function* () {
        if (job.budgetCents !== null) {
          const spent = control.knownCostCents
          if (spent + estimate > job.budgetCents) {
            return yield* new BudgetExceeded({
              jobId: job.id,
              costCents: spent,
              estimateCents: estimate,
              budgetCents: job.budgetCents
            })
          }
        }
        const n = ++control.callCount
        const callId = `${job.id}:${token}:${n}`
        yield* charge(callId, estimate, false)
        return callId
      })
    )

  const call = <A, E, R>(
    call: CallOptions<A, E, R>
  ): Effect.Effect<A, E | BudgetExceeded | DeadlineExceeded | StoreError, R> =>
    Effect.gen(function* () {
      yield* checkpoint
      yield* checkDeadline
      const callId = yield* reserve(Math.max(0, call.estimateCents))
      yield* Metric.increment(Metrics.modelCalls)
      return yield* Effect.uninterruptibleMask((restore) =>
        restore(call.run).pipe(
          Effect.tapError((error) => settle(callId, () => call.costOnError?.(error))),
          Effect.tap((result) => settle(callId, () => call.cost(result)))
        )
      )
    })

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
