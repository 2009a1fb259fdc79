/**
 * The worker's one-job views of the batch Store verbs (group-committed, see `workerBatch.ts`), and its retry of store
 * calls. Store calls made by a worker are
 * retried a few times with a short exponential backoff when the Store reports a
 * retryable failure (connection, timeout, conflict, ambiguous). Fenced writes stay safe to repeat: a repeated write
 * whose first try applied is rejected with `LeaseLost` and changes nothing.
 *
 * @internal
 */
import { Effect } from "effect"
import { LeaseLost, StoreError } from "../Errors.js"
import type { Job } from "../Job.js"
import type { ChargeItem, ChargeResult, Fenced, SettleItem, SettleResult, Store } from "../Store.js"
import { makeBatcher, type Start } from "./workerBatch.js"

const isRetryableStoreError = (error: unknown): boolean =>
  typeof error === "object" &&
  error !== null &&
  (error as { _tag?: unknown })._tag === "StoreError" &&
  (error as StoreError).isRetryable

/**
 * Runs `effect`; while it fails with a retryable `StoreError`, waits `baseMs * 2^n` on the Clock (n = 0, 1, ...) and
 * runs it again, at most `times` more times. The first try costs no more than the effect itself: most store calls
 * succeed at once, and this sits on every store call a worker makes.
 *
 * @internal
 */
export const retryStore = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  options: { readonly times?: number | undefined; readonly baseMs?: number | undefined } = {}
): Effect.Effect<A, E, R> => {
  const times = options.times ?? 3
  const baseMs = options.baseMs ?? 50
  const attempt = (n: number): Effect.Effect<A, E, R> =>
    n >= times
      ? effect
      : Effect.catchIf(effect, isRetryableStoreError, () =>
          Effect.zipRight(Effect.sleep(baseMs * 2 ** n), attempt(n + 1))
        )
  return attempt(0)
}

/**
 * A fenced miss as the `LeaseLost` failure the worker's steps use.
 *
 * @internal
 */
export const leaseLost = (fenced: Fenced): LeaseLost =>
  new LeaseLost({ jobId: fenced.jobId, token: fenced.token, currentToken: fenced.currentToken, state: fenced.state })

/**
 * The failure of an item a reply had no result for (a backend bug: a reply has one result per item).
 *
 * @internal
 */
export const noResult = (operation: string) => () =>
  new StoreError({ reason: "Unknown", operation, detail: "the store returned no result for the item" })

/**
 * A written settlement: the job as it was left and the store time of the write.
 *
 * @internal
 */
export type Written = { readonly job: Job; readonly now: number }

/**
 * The worker's store calls, each group-committed: one call per verb carries every item its attempts handed in while
 * the previous call was in flight.
 *
 * @internal
 */
export interface WorkerStore {
  /**
   * One settlement: the job as it was left and the store time of the write, or `LeaseLost`. `gone`, when given, says
   * whether the caller has learned meanwhile that its lease is lost: then the write is not sent and fails with
   * `LeaseLost` (nothing is written under a token once its lease is known lost, however long the write waited for
   * its call).
   */
  readonly settle: (item: SettleItem, gone?: () => boolean) => Effect.Effect<Written, LeaseLost | StoreError>
  /**
   * One charge: the job's spend after it and the store time of the write, and `refused` when the Store refused a
   * reservation for the job's batch's budget (nothing written). A charge for a job the store does not know is a bug
   * of the caller (the worker charges only jobs it claimed): a defect.
   */
  readonly charge: (item: ChargeItem) => Effect.Effect<Charged, StoreError>
  /** The flushers, to run forked for the worker's lifetime (unless made with `start`, which starts them on need). */
  readonly flushers: ReadonlyArray<Effect.Effect<never>>
  /** Items waiting for their verb's next call. */
  readonly queued: () => number
}

/**
 * A charge as the worker reads it: the job's spend after it, the store time of the write, and, for a reservation the
 * Store refused for the batch's budget, the batch's figures.
 *
 * @internal
 */
export interface Charged {
  readonly costCents: number
  readonly now: number
  readonly refused?:
    | { readonly batchId: string; readonly batchCostCents: number; readonly budgetCents: number }
    | undefined
}

/** @internal */
export const makeWorkerStore = (store: Store["Type"], maxBatch: number, start?: Start): WorkerStore => {
  const settles = makeBatcher<SettleItem, SettleResult, LeaseLost | StoreError>({
    send: (items) => store.settle({ items }),
    maxBatch,
    missing: noResult("settle"),
    start
  })
  const charges = makeBatcher<ChargeItem, ChargeResult, StoreError>({
    send: (items) => store.charge({ items }),
    maxBatch,
    missing: noResult("charge"),
    start
  })
  return {
    settle: (item, gone) =>
      Effect.flatMap(
        settles.submit(
          item,
          gone === undefined
            ? undefined
            : () =>
                gone()
                  ? new LeaseLost({ jobId: item.jobId, token: item.token, currentToken: null, state: null })
                  : undefined
        ),
        ({ now, result }): Effect.Effect<Written, LeaseLost | StoreError> =>
          result._tag === "Settled" ? Effect.succeed({ job: result.job, now }) : Effect.fail(leaseLost(result))
      ),
    charge: (item) =>
      Effect.flatMap(charges.submit(item), ({ now, result }): Effect.Effect<Charged> => {
        switch (result._tag) {
          case "Charged":
            return Effect.succeed({ costCents: result.costCents, now })
          case "BatchBudgetExceeded":
            return Effect.succeed({
              costCents: result.costCents,
              now,
              refused: {
                batchId: result.batchId,
                batchCostCents: result.batchCostCents,
                budgetCents: result.budgetCents
              }
            })
          case "NotFound":
            return Effect.die(new Error(`charge for unknown job ${result.jobId}`))
        }
      }),
    flushers: [settles.flusher, charges.flusher],
    queued: () => settles.queued() + charges.queued()
  }
}
