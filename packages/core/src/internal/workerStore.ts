/**
 * Store calls made by a worker are retried a few times with a short exponential backoff when the Store reports a
 * retryable failure (connection, timeout, conflict, ambiguous). Fenced writes stay safe to repeat: a repeated write
 * whose first try applied is rejected with `LeaseLost` and changes nothing.
 *
 * @internal
 */
import { Effect } from "effect"
import type { StoreError } from "../Errors.js"

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
