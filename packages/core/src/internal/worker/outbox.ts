/**
 * Group commit for the writes whose callers need no answer (a worker's acks and defers): `batcher.ts`'s rules without
 * the answers.
 *
 * @internal
 */
import { type Cause, Effect } from "effect"
import { masked } from "../steps.js"
import { loop, Signal, type Start } from "./wake.js"

/**
 * A queue of items whose callers need no answer (acks, defers), group-committed the same way: sent by the caller
 * while nothing is in flight, else queued for the flusher without waiting. A failed call is reported to
 * `onFailure` (a lost ack only means the message returns) and never retried here.
 *
 * @internal
 */
export interface Outbox<I> {
  /**
   * Hand items in: sent now in one call (and waited for) when the outbox is idle, else queued for the next call
   * (without waiting).
   */
  readonly offer: (items: ReadonlyArray<I>) => Effect.Effect<void>
  /** The flusher: run it forked in the owner's scope, unless the outbox was made with `start`. */
  readonly flusher: Effect.Effect<never>
  /** Waits until everything handed in so far has been sent (or its call failed). */
  readonly drained: Effect.Effect<void>
  /** Nothing queued and nothing in flight: `drained` would return at once. */
  readonly idle: () => boolean
}

/**
 * An outbox over `send`.
 *
 * @internal
 */
export const makeOutbox = <I, E>(options: {
  readonly send: (items: ReadonlyArray<I>) => Effect.Effect<void, E>
  readonly maxBatch: number
  readonly onFailure: (cause: Cause.Cause<E>, items: ReadonlyArray<I>) => Effect.Effect<void>
  readonly start?: Start | undefined
}): Outbox<I> => {
  const maxBatch = Math.max(1, options.maxBatch)
  let items: Array<I> = []
  let inFlight = false
  let idleWaiters: Array<(effect: Effect.Effect<void>) => void> = []
  const signal = new Signal()
  let ensureFlusher = (): void => {}

  /** The call is over: what was offered meanwhile goes out with the flusher, else whoever waits for idle wakes. */
  const end = (): void => {
    inFlight = false
    if (items.length > 0) {
      inFlight = true
      ensureFlusher()
      signal.fire()
      return
    }
    const waiters = idleWaiters
    idleWaiters = []
    for (const resume of waiters) resume(Effect.void)
  }

  // The call's end is noted however it ends (an interruption too): the exit is taken uninterruptibly, and a failure
  // is reported (interruptibly) before it.
  const sendNow = (batch: ReadonlyArray<I>): Effect.Effect<void> =>
    masked((restore) =>
      Effect.matchCauseEffect(restore(Effect.suspend(() => options.send(batch))), {
        onFailure: (cause) =>
          Effect.flatMap(Effect.exit(restore(options.onFailure(cause, batch))), (reported) => {
            end()
            return reported
          }),
        onSuccess: () => {
          end()
          return Effect.void
        }
      })
    )

  const flushOnce: Effect.Effect<void> = Effect.zipRight(
    signal.wait,
    Effect.suspend(() => {
      const batch = items.length <= maxBatch ? items : items.slice(0, maxBatch)
      items = items.length <= maxBatch ? [] : items.slice(maxBatch)
      return sendNow(batch)
    })
  )

  const flusher = loop(flushOnce)
  if (options.start !== undefined) ensureFlusher = options.start(flusher)

  return {
    offer: (offered) =>
      Effect.suspend(() => {
        if (offered.length === 0) return Effect.void
        if (inFlight || offered.length > maxBatch) {
          for (const item of offered) items.push(item)
          if (!inFlight) {
            inFlight = true
            ensureFlusher()
            signal.fire()
          }
          return Effect.void
        }
        inFlight = true
        return sendNow(offered)
      }),
    flusher,
    drained: Effect.async<void>((resume) => {
      if (items.length === 0 && !inFlight) return resume(Effect.void)
      idleWaiters.push(resume)
    }),
    idle: () => items.length === 0 && !inFlight
  }
}
