/**
 * What a worker's store calls share: the retry of a call that failed retryably, and the shapes of a written
 * settlement and a charge as the worker reads them. The calls themselves go out in ticks (`ticks.ts`).
 *
 * Store calls made by a worker are retried a few times with a short exponential backoff when the Store reports a
 * retryable failure (connection, timeout, conflict, ambiguous). Fenced writes stay safe to repeat: a repeated write
 * whose first try applied is rejected with `LeaseLost` and changes nothing.
 *
 * @internal
 */
import { Effect } from "effect"
import { LeaseLost, StoreError } from "../../Errors.js"
import type { Job } from "../../Job.js"
import type { Fenced } from "../../Store.js"

/**
 * Whether `error` is a `StoreError` the Store marks retryable (connection, timeout, conflict, ambiguous).
 *
 * @internal
 */
export const isRetryableStoreError = (error: unknown): boolean =>
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
