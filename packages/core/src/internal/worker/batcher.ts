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
import { Effect, Exit } from "effect"
import { masked } from "../steps.js"
import { loop, Signal, type Start } from "./wake.js"

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
  /**
   * Hand one item in now, in the caller's step, and get an effect that waits for its answer: the item is queued for
   * the flusher at once, so any item handed in after it goes out after it (in the same call or a later one). Needs a
   * batcher made with `start`.
   */
  readonly post: (item: I) => Effect.Effect<Answer<R>, E>
  /** Items waiting for the next call. */
  readonly queued: () => number
}

/**
 * A batcher over `send`. `missing` is the failure an item gets when the reply has no result for it (a backend bug:
 * a reply must have one result per item).
 *
 * @internal
 */
export const makeBatcher = <I, R, E>(options: BatcherOptions<I, R, E>): Batcher<I, R, E> => new GroupCommit(options)

/** What `makeBatcher` takes. @internal */
export interface BatcherOptions<I, R, E> {
  readonly send: (items: ReadonlyArray<I>) => Effect.Effect<Reply<R>, E>
  readonly maxBatch: number
  readonly missing: () => E
  readonly start?: Start | undefined
}

class GroupCommit<I, R, E> implements Batcher<I, R, E> {
  private readonly maxBatch: number
  private queue: Array<Entry<I, R, E>> = []
  private inFlight = false
  private readonly signal = new Signal()
  private ensureFlusher: () => void = () => {}
  private readonly ended: Effect.Effect<void>
  readonly flusher: Effect.Effect<never>

  constructor(private readonly options: BatcherOptions<I, R, E>) {
    this.maxBatch = Math.max(1, options.maxBatch)
    this.ended = Effect.sync(() => this.end())
    const flushOnce = Effect.zipRight(
      this.signal.wait,
      Effect.suspend(() => this.flush())
    )
    this.flusher = loop(flushOnce).pipe(
      // Callers still queued when the flusher stops are interrupted too.
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          const left = this.queue
          this.queue = []
          for (const entry of left) entry.resume(Effect.interrupt)
        })
      )
    )
    if (options.start !== undefined) this.ensureFlusher = options.start(this.flusher)
  }

  submit = (item: I, veto?: () => E | undefined): Effect.Effect<Answer<R>, E> =>
    Effect.suspend(() => {
      if (this.inFlight) return this.enqueue(item, veto)
      const error = veto?.()
      if (error !== undefined) return Effect.fail(error)
      this.inFlight = true
      // The call's end is noted however it ends (an interruption too): its end is matched uninterruptibly.
      return masked((restore) =>
        Effect.matchCauseEffect(restore(this.options.send([item])), {
          onFailure: (cause) => {
            this.end()
            return Effect.failCause(cause)
          },
          onSuccess: (reply) => {
            this.end()
            return this.answerOfReply(reply, 0)
          }
        })
      )
    })

  post = (item: I): Effect.Effect<Answer<R>, E> => {
    let answer: Effect.Effect<Answer<R>, E> | undefined
    let waiter: ((effect: Effect.Effect<Answer<R>, E>) => void) | undefined
    const resume = (effect: Effect.Effect<Answer<R>, E>): void => {
      if (waiter === undefined) answer = effect
      else waiter(effect)
    }
    this.queue.push({ item, resume, veto: undefined })
    if (!this.inFlight) {
      this.inFlight = true
      this.ensureFlusher()
      this.signal.fire()
    }
    return Effect.async<Answer<R>, E>((resumeWaiter) => {
      if (answer !== undefined) resumeWaiter(answer)
      else waiter = resumeWaiter
    })
  }

  queued = (): number => this.queue.length

  private answerOfReply(reply: Reply<R>, i: number): Effect.Effect<Answer<R>, E> {
    const result = reply.results[i]
    return result === undefined ? Effect.fail(this.options.missing()) : Effect.succeed({ now: reply.now, result })
  }

  private answerOf(exit: Exit.Exit<Reply<R>, E>, i: number): Effect.Effect<Answer<R>, E> {
    return Exit.isFailure(exit) ? Effect.failCause(exit.cause) : this.answerOfReply(exit.value, i)
  }

  /** The call is over: what queued meanwhile goes out with the flusher. */
  private end(): void {
    this.inFlight = false
    if (this.queue.length > 0) {
      this.inFlight = true
      this.ensureFlusher()
      this.signal.fire()
    }
  }

  /** Takes up to `maxBatch` queued entries; vetoed ones are answered at once and left out. */
  private take(): Array<Entry<I, R, E>> {
    const { queue } = this
    const n = Math.min(queue.length, this.maxBatch)
    const taken = queue.length === n ? queue : queue.slice(0, n)
    this.queue = queue.length === n ? [] : queue.slice(n)
    const batch: Array<Entry<I, R, E>> = []
    for (const entry of taken) {
      const error = entry.veto?.()
      if (error === undefined) batch.push(entry)
      else entry.resume(Effect.fail(error))
    }
    return batch
  }

  /** One flush: the queued entries go out in one call, each caller answered with its share of the reply. */
  private flush(): Effect.Effect<void> {
    const batch = this.take()
    if (batch.length === 0) return this.ended
    // A defect of `send` reaches every caller of the batch as its failure cause, never the flusher. A flusher stopped
    // with its owner interrupts the callers of the call in flight, which would otherwise wait forever.
    return Effect.exit(Effect.suspend(() => this.options.send(batch.map((entry) => entry.item)))).pipe(
      Effect.flatMap((exit) =>
        Effect.sync(() => {
          for (let i = 0; i < batch.length; i++) batch[i]!.resume(this.answerOf(exit, i))
        })
      ),
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          for (const entry of batch) entry.resume(Effect.interrupt)
        })
      ),
      Effect.zipRight(this.ended)
    )
  }

  /** An item queued for the flusher; interrupted while queued, it is taken back, never sent. */
  private enqueue(item: I, veto: (() => E | undefined) | undefined): Effect.Effect<Answer<R>, E> {
    return Effect.async<Answer<R>, E>((resume) => {
      const entry: Entry<I, R, E> = { item, resume, veto }
      this.queue.push(entry)
      return Effect.sync(() => {
        const at = this.queue.indexOf(entry)
        if (at >= 0) this.queue.splice(at, 1)
      })
    })
  }
}
