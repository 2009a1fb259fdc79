/**
 * Group commit for a worker's store and transport calls. Every attempt of a worker hands its one item (a settlement,
 * a charge, an ack) to a queue of its verb. While no call of that verb is in flight, the item goes out at once, as
 * a call of one, sent by the caller's own fiber (an idle worker pays nothing for batching). While one is in flight,
 * items queue up, and when it ends everything queued goes out as the next call, sent by the queue's flusher fiber.
 * A busy worker therefore makes one call per verb per round trip however many jobs it runs: a batch statement per
 * tick out of per-job steps.
 *
 * Invariants:
 * - Every item handed in is sent in exactly one call (never two, never none while the flusher runs), at most
 *   `maxBatch` items per call, queued items in the order they were handed in.
 * - Each waiting caller gets its own item's result with the reply's store time, or the whole call's failure (a
 *   failed call may have applied any subset of its items, as the Store and Transport contracts say); a caller then
 *   retries by handing its item in again, under its own retry rules.
 * - A caller interrupted while its item is queued takes the item back (it is never sent); one interrupted while its
 *   call is in flight drops only the answer.
 *
 * @internal
 */
import { type Cause, Effect, Exit } from "effect"
import { masked } from "../steps.js"

/** What one sent call answers: the store time of the writes and one result per item, in item order. */
interface Reply<R> {
  readonly now: number
  readonly results: ReadonlyArray<R>
}

/**
 * One item's share of a reply.
 *
 * @internal
 */
export interface Answer<R> {
  readonly now: number
  readonly result: R
}

/** A flusher's wait for work: resumed by `fire`, or at once when it fired while no one waited. */
class Signal {
  private resume: ((effect: Effect.Effect<void>) => void) | undefined = undefined
  private pending = false

  readonly wait: Effect.Effect<void> = Effect.async<void>((resume) => {
    if (this.pending) {
      this.pending = false
      resume(Effect.void)
      return
    }
    this.resume = resume
  })

  fire(): void {
    const resume = this.resume
    if (resume === undefined) {
      this.pending = true
      return
    }
    this.resume = undefined
    resume(Effect.void)
  }
}

const noop = (): void => {}

/** A loop that runs `once` again after each round, without yielding between rounds (each round waits on its own). */
const loop = (once: Effect.Effect<void>): Effect.Effect<never> => {
  const again: Effect.Effect<never> = Effect.flatMap(once, () => again)
  return again
}

/** One queued item: what is sent, who waits for it, and the caller's last word on whether to send it. */
interface Entry<I, R, E> {
  readonly item: I
  readonly resume: (effect: Effect.Effect<Answer<R>, E>) => void
  readonly veto: (() => E | undefined) | undefined
}

/**
 * A queue of items sent in group-committed calls, each caller waiting for its answer.
 *
 * @internal
 */
export interface Batcher<I, R, E> {
  /**
   * Hand one item in and wait for its answer. `veto`, when given, is asked once more when a queued item is put into
   * a call: an error it returns answers the item instead, and the item is not sent (what the caller learned while
   * it waited, such as a lost lease, still stops the write).
   */
  readonly submit: (item: I, veto?: () => E | undefined) => Effect.Effect<Answer<R>, E>
  /**
   * The flusher: run it forked in the owner's scope for as long as items may be handed in, unless the batcher was
   * made with `start` (then it is started there, the first time a queued call is due).
   */
  readonly flusher: Effect.Effect<never>
  /** Items waiting for the next call. */
  /**
   * Hand one item in now, in the caller's step, and get an effect that waits for its answer: the item is queued for
   * the flusher at once, so any item handed in after it goes out after it (in the same call or a later one). Needs a
   * batcher made with `start`.
   */
  readonly post: (item: I) => Effect.Effect<Answer<R>, E>
  readonly queued: () => number
}

/**
 * How a batcher or an outbox starts its flusher on first need: given the flusher, returns the function that starts it
 * (the first call starts it in a fiber of the owner's, later calls do nothing). An owner whose calls rarely overlap
 * then runs no flusher fiber at all.
 *
 * @internal
 */
export type Start = (flusher: Effect.Effect<never>) => () => void

/**
 * A batcher over `send`. `missing` is the failure an item gets when the reply has no result for it (a backend bug:
 * a reply must have one result per item).
 *
 * @internal
 */
export const makeBatcher = <I, R, E>(options: {
  readonly send: (items: ReadonlyArray<I>) => Effect.Effect<Reply<R>, E>
  readonly maxBatch: number
  readonly missing: () => E
  readonly start?: Start | undefined
}): Batcher<I, R, E> => {
  const maxBatch = Math.max(1, options.maxBatch)
  let queue: Array<Entry<I, R, E>> = []
  let inFlight = false
  const signal = new Signal()
  let ensureFlusher = noop

  const answerOfReply = (reply: Reply<R>, i: number): Effect.Effect<Answer<R>, E> => {
    const result = reply.results[i]
    return result === undefined ? Effect.fail(options.missing()) : Effect.succeed({ now: reply.now, result })
  }
  const answerOf = (exit: Exit.Exit<Reply<R>, E>, i: number): Effect.Effect<Answer<R>, E> =>
    Exit.isFailure(exit) ? Effect.failCause(exit.cause) : answerOfReply(exit.value, i)

  /** The call is over: what queued meanwhile goes out with the flusher. */
  const end = (): void => {
    inFlight = false
    if (queue.length > 0) {
      inFlight = true
      ensureFlusher()
      signal.fire()
    }
  }
  const ended = Effect.sync(end)

  /** Takes up to `maxBatch` queued entries; vetoed ones are answered at once and left out. */
  const take = (): Array<Entry<I, R, E>> => {
    const n = Math.min(queue.length, maxBatch)
    const taken = queue.length === n ? queue : queue.slice(0, n)
    queue = queue.length === n ? [] : queue.slice(n)
    const batch: Array<Entry<I, R, E>> = []
    for (const entry of taken) {
      const error = entry.veto?.()
      if (error === undefined) batch.push(entry)
      else entry.resume(Effect.fail(error))
    }
    return batch
  }

  const flushOnce: Effect.Effect<void> = Effect.zipRight(
    signal.wait,
    Effect.suspend(() => {
      const batch = take()
      if (batch.length === 0) return ended
      // A defect of `send` reaches every caller of the batch as its failure cause, never the flusher. A flusher
      // stopped with its owner interrupts the callers of the call in flight, which would otherwise wait forever.
      return Effect.exit(Effect.suspend(() => options.send(batch.map((entry) => entry.item)))).pipe(
        Effect.flatMap((exit) =>
          Effect.sync(() => {
            for (let i = 0; i < batch.length; i++) batch[i]!.resume(answerOf(exit, i))
          })
        ),
        Effect.onInterrupt(() =>
          Effect.sync(() => {
            for (const entry of batch) entry.resume(Effect.interrupt)
          })
        ),
        Effect.zipRight(ended)
      )
    })
  )

  const queued = (item: I, veto: (() => E | undefined) | undefined): Effect.Effect<Answer<R>, E> =>
    Effect.async<Answer<R>, E>((resume) => {
      const entry: Entry<I, R, E> = { item, resume, veto }
      queue.push(entry)
      // Interrupted while queued: the item is taken back, never sent.
      return Effect.sync(() => {
        const at = queue.indexOf(entry)
        if (at >= 0) queue.splice(at, 1)
      })
    })

  const flusher = loop(flushOnce).pipe(
    // Callers still queued when the flusher stops are interrupted too.
    Effect.onInterrupt(() =>
      Effect.sync(() => {
        const left = queue
        queue = []
        for (const entry of left) entry.resume(Effect.interrupt)
      })
    )
  )
  if (options.start !== undefined) ensureFlusher = options.start(flusher)

  return {
    submit: (item, veto) =>
      Effect.suspend(() => {
        if (inFlight) return queued(item, veto)
        const error = veto?.()
        if (error !== undefined) return Effect.fail(error)
        inFlight = true
        // The call's end is noted however it ends (an interruption too): its end is matched uninterruptibly.
        return masked((restore) =>
          Effect.matchCauseEffect(restore(options.send([item])), {
            onFailure: (cause) => {
              end()
              return Effect.failCause(cause)
            },
            onSuccess: (reply) => {
              end()
              return answerOfReply(reply, 0)
            }
          })
        )
      }),
    post: (item) => {
      let answer: Effect.Effect<Answer<R>, E> | undefined
      let waiter: ((effect: Effect.Effect<Answer<R>, E>) => void) | undefined
      const resume = (effect: Effect.Effect<Answer<R>, E>): void => {
        if (waiter === undefined) answer = effect
        else waiter(effect)
      }
      queue.push({ item, resume, veto: undefined })
      if (!inFlight) {
        inFlight = true
        ensureFlusher()
        signal.fire()
      }
      return Effect.async<Answer<R>, E>((resumeWaiter) => {
        if (answer !== undefined) resumeWaiter(answer)
        else waiter = resumeWaiter
      })
    },
    queued: () => queue.length,
    flusher
  }
}

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
  let ensureFlusher = noop

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
