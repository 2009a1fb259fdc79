/**
 * The in-memory Transport: SQS-like at-least-once queues over plain Maps. Each operation is one synchronous step;
 * a waiting `receive` registers a wake-up that the next change of its queue fires, and sleeps on the captured Clock
 * until then (or until its deadline or the next visibility change), so a `TestClock` drives long polls and
 * visibility timeouts.
 *
 * @internal
 */
import { Duration, Effect, Fiber } from "effect"
import type {
  AckItem,
  DeferItem,
  Delivery,
  ExtendItem,
  Message,
  PublishItem,
  TransportCapabilities
} from "../Transport.js"

interface Entry {
  readonly seq: number
  readonly message: Message
  visibleAt: number
  receiveCount: number
  receipt: string | null
}

interface QueueState {
  readonly entries: Map<number, Entry>
  readonly byReceipt: Map<string, Entry>
  readonly deadLetters: Array<DeadLetteredMessage>
  /**
   * The receives waiting on this queue: each wake-up with the instant it wakes by itself. An entry is removed when
   * it fires or its wait ends.
   */
  readonly waiters: Map<() => void, number>
}

/** @internal */
export interface DeadLetteredMessage {
  readonly message: Message
  readonly receiveCount: number
}

/** @internal */
export interface MemoryTransportService {
  readonly publish: (options: {
    readonly queue: string
    readonly items: ReadonlyArray<PublishItem>
  }) => Effect.Effect<void>
  readonly receive: (options: {
    readonly queue: string
    readonly max: number
    readonly visibilityMs: number
    readonly waitMs: number
  }) => Effect.Effect<ReadonlyArray<Delivery>>
  readonly extend: (options: { readonly items: ReadonlyArray<ExtendItem> }) => Effect.Effect<void>
  readonly defer: (options: { readonly items: ReadonlyArray<DeferItem> }) => Effect.Effect<void>
  readonly ack: (options: { readonly items: ReadonlyArray<AckItem> }) => Effect.Effect<void>
  readonly awaitWork: (options: { readonly queue: string; readonly waitMs: number }) => Effect.Effect<void>
  readonly capabilities: TransportCapabilities
  /** Messages moved aside after `maxReceiveCount` deliveries, oldest first. */
  readonly deadLettered: (queue: string) => Effect.Effect<ReadonlyArray<DeadLetteredMessage>>
  /** Messages the queue holds, visible or in flight. */
  readonly size: (queue: string) => Effect.Effect<number>
}

const byDeliveryOrder = (a: Entry, b: Entry): number =>
  (b.message.priority ?? 0) - (a.message.priority ?? 0) || a.visibleAt - b.visibleAt || a.seq - b.seq

/**
 * Runs `task` once `ms` have passed on the Clock the transport was made with; the returned function cancels it.
 *
 * @internal
 */
export type Timer = (ms: number, task: () => void) => () => void

/** @internal */
export interface MemoryTransportOptions {
  readonly maxReceiveCount?: number | undefined
  /** When given, a waiting receive wakes by this timer instead of a sleeping fiber (it must follow the Clock). */
  readonly timer?: Timer | undefined
}

/** @internal */
export const make: (options?: MemoryTransportOptions) => Effect.Effect<MemoryTransportService> = Effect.fnUntraced(
  function* (options?: MemoryTransportOptions) {
    const clock = yield* Effect.clock
    const maxReceiveCount = options?.maxReceiveCount
    const timer = options?.timer
    const queues = new Map<string, QueueState>()
    let seq = 0

    const now = (): number => clock.unsafeCurrentTimeMillis()

    const queueState = (name: string): QueueState => {
      let state = queues.get(name)
      if (state === undefined) {
        state = {
          entries: new Map(),
          byReceipt: new Map(),
          deadLetters: [],
          waiters: new Map()
        }
        queues.set(name, state)
      }
      return state
    }

    /** When the queue's next message becomes visible (infinity when it is empty). */
    const nextVisibleAt = (state: QueueState): number => {
      let at = Number.POSITIVE_INFINITY
      for (const entry of state.entries.values()) at = Math.min(at, entry.visibleAt)
      return at
    }

    /**
     * After a change, wake the receives it concerns: all of them when a message is visible now, else those that would
     * sleep past the queue's next visibility change. A waiter left asleep wakes by itself no later than that.
     */
    const changed = (state: QueueState): void => {
      if (state.waiters.size === 0) return
      const visibleAt = nextVisibleAt(state)
      const visibleNow = visibleAt <= now()
      const due: Array<() => void> = []
      for (const [wake, wakeAt] of state.waiters) if (visibleNow || visibleAt < wakeAt) due.push(wake)
      for (const wake of due) wake()
    }

    /**
     * Wait until `ms` pass on the captured Clock, or a change of the queue may have a message for this receive sooner.
     * The wake-up is registered at once, in the same synchronous step as the `take` that preceded it, so a change that
     * lands before the wait starts still ends it. With a `timer`, the wait is one callback on it, cancelled when the
     * wait ends; without, one fiber sleeps (interruptible even when the receive is not) and is interrupted then.
     */
    const waitForChange = (state: QueueState, ms: number): Effect.Effect<void> => {
      let fired = false
      let resume: ((effect: Effect.Effect<void>) => void) | undefined
      let cancelTimer: (() => void) | undefined
      /** Ends the wait's registration (and its timer, if any); idempotent. */
      const leave = (): void => {
        fired = true
        state.waiters.delete(wake)
        cancelTimer?.()
      }
      const wake = (): void => {
        if (fired) return
        leave()
        if (resume !== undefined) resume(Effect.void)
      }
      state.waiters.set(wake, now() + ms)
      const done = Effect.sync(leave)
      if (timer !== undefined) {
        return Effect.async<void>((callback) => {
          if (fired) return callback(Effect.void)
          resume = callback
          // An endless wait arms no timer: only a change of the queue ends it.
          if (Number.isFinite(ms)) cancelTimer = timer(ms, wake)
          return done
        })
      }
      return Effect.flatMap(
        Effect.fork(Effect.interruptible(Effect.zipRight(clock.sleep(Duration.millis(ms)), Effect.sync(wake)))),
        (sleeper) =>
          Effect.async<void>((callback) => {
            if (fired) return callback(Effect.void)
            resume = callback
            return done
          }).pipe(Effect.ensuring(Effect.zipRight(done, Fiber.interrupt(sleeper))))
      ).pipe(Effect.onInterrupt(() => done))
    }

    const take = (queue: string, max: number, visibilityMs: number) => {
      const state = queueState(queue)
      const at = now()
      const deliveries: Array<Delivery> = []
      const visible: Array<Entry> = []
      for (const entry of state.entries.values()) if (entry.visibleAt <= at) visible.push(entry)
      if (visible.length > 1) visible.sort(byDeliveryOrder)
      for (const entry of visible) {
        if (deliveries.length >= max) break
        if (entry.receipt !== null) state.byReceipt.delete(entry.receipt)
        if (maxReceiveCount !== undefined && entry.receiveCount >= maxReceiveCount) {
          state.entries.delete(entry.seq)
          state.deadLetters.push({ message: entry.message, receiveCount: entry.receiveCount })
          continue
        }
        entry.receiveCount += 1
        entry.receipt = `m${entry.seq}-r${entry.receiveCount}`
        entry.visibleAt = at + visibilityMs
        state.byReceipt.set(entry.receipt, entry)
        // The same copy as a spread, made with Object.assign: messages come in several shapes (each publisher builds its
        // own), and a spread site that has seen several shapes copies on a slow path (about 20 times slower).
        const delivery: Delivery = Object.assign({}, entry.message, {
          queue,
          receipt: entry.receipt,
          receiveCount: entry.receiveCount
        })
        deliveries.push(delivery)
      }
      return { deliveries, state, nextVisibleAt: nextVisibleAt(state) }
    }

    /** The entry of a delivery when its receipt is still the current one; else undefined (superseded). */
    const current = (delivery: Delivery): { state: QueueState; entry: Entry } | undefined => {
      const state = queues.get(delivery.queue)
      const entry = state?.byReceipt.get(delivery.receipt)
      return state === undefined || entry === undefined ? undefined : { state, entry }
    }

    /** Hide a current delivery for `ms` from now (extend and defer); a superseded receipt changes nothing. */
    const hide = (delivery: Delivery, ms: number): void => {
      const found = current(delivery)
      if (found === undefined) return
      found.entry.visibleAt = now() + Math.max(0, ms)
      changed(found.state)
    }

    const service: MemoryTransportService = {
      publish: (options) =>
        Effect.sync(() => {
          const state = queueState(options.queue)
          for (const item of options.items) {
            const entry: Entry = {
              seq: seq++,
              message: item.message,
              visibleAt: now() + Math.max(0, item.delayMs ?? 0),
              receiveCount: 0,
              receipt: null
            }
            state.entries.set(entry.seq, entry)
          }
          changed(state)
        }),

      receive: (options) =>
        Effect.suspend(() => {
          const deadline = now() + Math.max(0, options.waitMs)
          const attempt: Effect.Effect<ReadonlyArray<Delivery>> = Effect.suspend(() => {
            const { deliveries, state, nextVisibleAt } = take(options.queue, options.max, options.visibilityMs)
            const at = now()
            if (deliveries.length > 0 || options.max <= 0 || at >= deadline) return Effect.succeed(deliveries)
            const wakeAt = Math.min(deadline, nextVisibleAt)
            return Effect.zipRight(waitForChange(state, Math.max(0, wakeAt - at)), attempt)
          })
          return attempt
        }),

      extend: (options) =>
        Effect.sync(() => {
          for (const item of options.items) hide(item.delivery, item.visibilityMs)
        }),

      defer: (options) =>
        Effect.sync(() => {
          for (const item of options.items) hide(item.delivery, item.delayMs)
        }),

      ack: (options) =>
        Effect.sync(() => {
          for (const { delivery } of options.items) {
            const found = current(delivery)
            if (found === undefined) continue
            found.state.byReceipt.delete(delivery.receipt)
            found.state.entries.delete(found.entry.seq)
            changed(found.state)
          }
        }),

      // A publish or a visibility change of the queue ends the wait, as it ends a waiting receive's.
      awaitWork: (options) =>
        Effect.suspend(() => {
          const state = queueState(options.queue)
          return nextVisibleAt(state) <= now() ? Effect.void : waitForChange(state, Math.max(0, options.waitMs))
        }),

      deadLettered: (queue) => Effect.sync(() => [...(queues.get(queue)?.deadLetters ?? [])]),

      size: (queue) => Effect.sync(() => queues.get(queue)?.entries.size ?? 0),

      capabilities: {
        defer: true,
        maxReceiveCount: maxReceiveCount ?? null,
        ackRemoves: true,
        visibilityFollowsLease: false,
        maxBatch: 1_000,
        maxDelayMs: null,
        priority: true,
        claimsFromStore: false
      }
    }
    return service
  }
)
