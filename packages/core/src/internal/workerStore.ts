/**
 * The worker's one-job views of the batch Store verbs, and its retry of store calls. Store calls made by a worker are
 * retried a few times with a short exponential backoff when the Store reports a
 * retryable failure (connection, timeout, conflict, ambiguous). Fenced writes stay safe to repeat: a repeated write
 * whose first try applied is rejected with `LeaseLost` and changes nothing.
 *
 * @internal
 */
import { Effect } from "effect"
import { LeaseLost, StoreError } from "../Errors.js"
import type { Job } from "../Job.js"
import type {
  ChargeItem,
  ClaimItem,
  ClaimResult,
  Fenced,
  HeartbeatItem,
  HeartbeatResult,
  SettleItem,
  Store
} from "../Store.js"

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

const noResult = (operation: string) =>
  new StoreError({ reason: "Unknown", operation, detail: "the store returned no result for the item" })

type Written = { readonly job: Job; readonly now: number }

/**
 * One settlement as a batch of one: the job as it was left and the store time of the write, or `LeaseLost`.
 *
 * @internal
 */
export const settleOne = (store: Store["Type"], item: SettleItem): Effect.Effect<Written, LeaseLost | StoreError> =>
  Effect.flatMap(store.settle({ items: [item] }), (reply): Effect.Effect<Written, LeaseLost | StoreError> => {
    const result = reply.results[0]
    if (result === undefined) return Effect.fail(noResult("settle"))
    return result._tag === "Settled"
      ? Effect.succeed({ job: result.job, now: reply.now })
      : Effect.fail(leaseLost(result))
  })

/**
 * One claim as a batch of one, with the store time of the write.
 *
 * @internal
 */
export const claimOne = (
  store: Store["Type"],
  item: ClaimItem
): Effect.Effect<{ readonly result: ClaimResult; readonly now: number }, StoreError> =>
  Effect.flatMap(store.claim({ items: [item] }), (reply) => {
    const result = reply.results[0]
    return result === undefined ? Effect.fail(noResult("claim")) : Effect.succeed({ result, now: reply.now })
  })

/**
 * One heartbeat as a batch of one, with the store time of the write.
 *
 * @internal
 */
export const heartbeatOne = (
  store: Store["Type"],
  item: HeartbeatItem
): Effect.Effect<{ readonly result: HeartbeatResult; readonly now: number }, StoreError> =>
  Effect.flatMap(store.heartbeat({ items: [item] }), (reply) => {
    const result = reply.results[0]
    return result === undefined ? Effect.fail(noResult("heartbeat")) : Effect.succeed({ result, now: reply.now })
  })

/**
 * One charge as a batch of one: the job's spend after it and the store time of the write. A charge for a job the
 * store does not know is a bug of the caller (the worker charges only jobs it claimed): a defect.
 *
 * @internal
 */
export const chargeOne = (
  store: Store["Type"],
  item: ChargeItem
): Effect.Effect<{ readonly costCents: number; readonly now: number }, StoreError> =>
  Effect.flatMap(store.charge({ items: [item] }), (reply) => {
    const result = reply.results[0]
    if (result === undefined) return Effect.fail(noResult("charge"))
    return result._tag === "Charged"
      ? Effect.succeed({ costCents: result.costCents, now: reply.now })
      : Effect.die(new Error(`charge for unknown job ${result.jobId}`))
  })
