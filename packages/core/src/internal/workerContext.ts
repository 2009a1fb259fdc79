/**
 * Builds the `HandlerContext` of one attempt. `call` writes the charge reservation before the model call and the
 * settlement after it, on the call id `${jobId}:${token}:${n}`; charges are not fenced, so the spend of a call made
 * under a lost lease is still recorded.
 *
 * @internal
 */
import { Effect, Metric, Option, Ref } from "effect"
import type { StoreError } from "../Errors.js"
import { BudgetExceeded, type CallOptions, type HandlerContext } from "../Handler.js"
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

  const charge = (callId: string, amountCents: number, settled: boolean): Effect.Effect<void, StoreError> =>
    retryStore(store.charge({ jobId: job.id, callId, token, amountCents, settled })).pipe(
      Effect.catchTag("JobNotFound", (error) => Effect.die(error)),
      Effect.flatMap(({ costCents }) => Ref.set(control.knownCostCents, costCents))
    )

  const settle = (callId: string, amountCents: number): Effect.Effect<void> =>
    charge(callId, Math.max(0, amountCents), true).pipe(
      Effect.catchAll((error) =>
        Effect.logWarning("charge settlement failed; the reservation stays as the record", error)
      )
    )

  const checkpoint: Effect.Effect<void> = Effect.flatMap(Ref.get(control.stopReason), (reason) =>
    Option.isSome(reason) ? Effect.interrupt : Effect.void
  )

  const call = <A, E, R>(call: CallOptions<A, E, R>): Effect.Effect<A, E | BudgetExceeded | StoreError, R> =>
    Effect.gen(function* () {
      yield* checkpoint
      const estimate = Math.max(0, call.estimateCents)
      if (job.budgetCents !== null) {
        const spent = yield* Ref.get(control.knownCostCents)
        if (spent + estimate > job.budgetCents) {
          return yield* new BudgetExceeded({
            jobId: job.id,
            costCents: spent,
            estimateCents: estimate,
            budgetCents: job.budgetCents
          })
        }
      }
      const n = yield* Ref.updateAndGet(control.callCount, (count) => count + 1)
      const callId = `${job.id}:${token}:${n}`
      yield* charge(callId, estimate, false)
      yield* Metric.increment(Metrics.modelCalls)
      const result = yield* call.run.pipe(
        Effect.tapError((error) => {
          const reported = call.costOnError?.(error)
          return reported === undefined ? Effect.void : settle(callId, reported)
        })
      )
      yield* settle(callId, call.cost(result))
      return result
    })

  return {
    jobId: job.id,
    token,
    attempt: job.attempts - job.attemptsBase,
    traceId: job.traceId,
    progress: (value) => Ref.set(control.pendingProgress, Math.min(1, Math.max(0, value))),
    checkpoint,
    call
  }
}
