/**
 * Store calls made by a worker are retried a few times with a short exponential backoff when the Store reports a
 * retryable failure (connection, timeout, conflict, ambiguous). Fenced writes stay safe to repeat: a repeated write
 * whose first try applied is rejected with `LeaseLost` and changes nothing.
 *
 * @internal
 */
import { Duration, Effect, Schedule } from "effect"
import type { StoreError } from "../Errors.js"

const isRetryableStoreError = (error: unknown): boolean =>
  typeof error === "object" &&
  error !== null &&
  (error as { _tag?: unknown })._tag === "StoreError" &&
  (error as StoreError).isRetryable

/** @internal */
export const retryStore = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  options: { readonly times?: number | undefined; readonly baseMs?: number | undefined } = {}
): Effect.Effect<A, E, R> =>
  Effect.retry(effect, {
    schedule: Schedule.exponential(Duration.millis(options.baseMs ?? 50)),
    times: options.times ?? 3,
    while: isRetryableStoreError
  })
