/**
 * Virtual time for simulated runs. One `VirtualClock` per run holds every pending timer in a list sorted by due
 * time, ties in the order they were set (FIFO), so the same plan always wakes fibers in the same order. Time only
 * moves when the run loop fires the next timer; nothing here reads the machine's clock.
 *
 * `WorkerClock` is the clock one worker incarnation sees: the true virtual time plus an offset, a drift and
 * jumps (fault F12), frozen while the process is paused (fault F11), and dead once the incarnation crashed (its
 * timers never fire again, like a process that is gone).
 *
 * @since 0.1.0
 */
import { Clock, Duration, Effect } from "effect"
import { stuck } from "./internal/stuck.js"

interface Timer {
  readonly at: number
  readonly seq: number
  readonly task: () => void
  cancelled: boolean
}

/**
 * The run's true clock. Invariant: `now` never decreases, and timers fire in (due time, insertion order).
 *
 * @since 0.1.0
 * @category models
 */
export class VirtualClock implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  private current: number
  private readonly timers: Array<Timer> = []
  private seq = 0
  private live = 0

  constructor(startMs = 0) {
    this.current = startMs
  }

  /** Virtual epoch milliseconds. */
  get now(): number {
    return this.current
  }

  unsafeCurrentTimeMillis(): number {
    return this.current
  }
  unsafeCurrentTimeNanos(): bigint {
    return BigInt(Math.round(this.current * 1_000_000))
  }
  readonly currentTimeMillis: Effect.Effect<number> = Effect.sync(() => this.current)
  readonly currentTimeNanos: Effect.Effect<bigint> = Effect.sync(() => this.unsafeCurrentTimeNanos())

  sleep(duration: Duration.Duration): Effect.Effect<void> {
    return this.sleepMillis(Duration.isFinite(duration) ? Duration.toMillis(duration) : Number.POSITIVE_INFINITY)
  }

  /**
   * Sleep `ms` of virtual time (infinite: never wakes). An interrupted sleep leaves its timer behind: firing it later
   * resumes nothing (Effect ignores a resume after the interruption) and runs no task, so the order of everything
   * observable is unchanged. Not cancelling saves the interruption handler Effect would wrap around every sleep.
   */
  sleepMillis(ms: number): Effect.Effect<void> {
    return this.sleepThen(ms, Effect.void)
  }

  /** Sleep `ms` of virtual time, then run `next` in the sleeping fiber, resumed with it. */
  sleepThen<A, E = never>(ms: number, next: Effect.Effect<A, E>): Effect.Effect<A, E> {
    if (!Number.isFinite(ms)) return stuck
    return Effect.async<A, E>((resume) => {
      this.push(ms, () => resume(next))
    })
  }

  /**
   * Wait until `subscribe`'s wake-up is called or `ms` of virtual time have passed, whichever comes first.
   * `subscribe` registers the wake-up (it may call it at once) and returns its removal; the timer and the
   * subscription are each removed when the other ends the wait (or the waiter is interrupted), so neither resumes
   * anything later.
   */
  wakeOrAfter(ms: number, subscribe: (wake: () => void) => () => void): Effect.Effect<void> {
    return Effect.async<void>((resume) => {
      let done = false
      let unsubscribe: (() => void) | undefined
      const end = (): void => {
        done = true
        timer.cancel()
        unsubscribe?.()
      }
      const wake = (): void => {
        if (done) return
        end()
        resume(Effect.void)
      }
      const timer = this.schedule(ms, wake)
      unsubscribe = subscribe(wake)
      if (done) unsubscribe()
      return Effect.sync(end)
    })
  }

  /** Run `task` after `ms` of virtual time. Ties keep insertion order. */
  schedule(ms: number, task: () => void): { readonly cancel: () => void } {
    const timer = this.push(ms, task)
    return { cancel: () => this.cancel(timer) }
  }

  private push(ms: number, task: () => void): Timer {
    const timer: Timer = { at: this.current + Math.max(0, ms), seq: this.seq++, task, cancelled: false }
    const timers = this.timers
    let lo = 0
    let hi = timers.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (timers[mid]!.at <= timer.at) lo = mid + 1
      else hi = mid
    }
    timers.splice(lo, 0, timer)
    this.live++
    return timer
  }

  private cancel(timer: Timer): void {
    if (!timer.cancelled) {
      timer.cancelled = true
      this.live--
    }
  }

  /** Number of timers still pending. */
  get pending(): number {
    return this.live
  }

  /** Due time of the next pending timer, if any. */
  nextAt(): number | undefined {
    this.dropCancelled()
    return this.timers[0]?.at
  }

  private dropCancelled(): void {
    let n = 0
    while (n < this.timers.length && this.timers[n]!.cancelled) n++
    if (n > 0) this.timers.splice(0, n)
  }

  /** Advance to the next timer and fire it. Returns false when no timer is pending. */
  fireNext(): boolean {
    this.dropCancelled()
    const timer = this.timers.shift()
    if (timer === undefined) return false
    timer.cancelled = true
    this.live--
    if (timer.at > this.current) this.current = timer.at
    timer.task()
    return true
  }
}

/**
 * How one incarnation's clock departs from true time (fault F12): a constant offset, a drift in parts per
 * million, and a jump of `jumpMs` at true time `jumpAt`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Skew {
  readonly offsetMs: number
  readonly driftPpm: number
  readonly jumpAt: number
  readonly jumpMs: number
}

/**
 * No skew at all.
 *
 * @since 0.1.0
 * @category constructors
 */
export const noSkew: Skew = { offsetMs: 0, driftPpm: 0, jumpAt: Number.POSITIVE_INFINITY, jumpMs: 0 }

/**
 * The clock a worker incarnation reads. Invariants: its sleeps end on true virtual time (scaled by the drift);
 * a sleep that would end during a pause ends at the pause's end; after `kill()` no sleep ever ends.
 *
 * @since 0.1.0
 * @category models
 */
export class WorkerClock implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  private readonly start: number
  private dead = false
  pausedUntil = 0

  constructor(
    readonly base: VirtualClock,
    readonly skew: Skew
  ) {
    this.start = base.now
  }

  unsafeCurrentTimeMillis(): number {
    const t = this.base.now
    const jump = t >= this.skew.jumpAt ? this.skew.jumpMs : 0
    return Math.floor(t + this.skew.offsetMs + ((t - this.start) * this.skew.driftPpm) / 1_000_000 + jump)
  }
  unsafeCurrentTimeNanos(): bigint {
    return BigInt(this.unsafeCurrentTimeMillis()) * 1_000_000n
  }
  readonly currentTimeMillis: Effect.Effect<number> = Effect.sync(() => this.unsafeCurrentTimeMillis())
  readonly currentTimeNanos: Effect.Effect<bigint> = Effect.sync(() => this.unsafeCurrentTimeNanos())

  /** How many true (world) ms pass while this clock counts `ms`. */
  toWorldMs(ms: number): number {
    return ms * (1 + this.skew.driftPpm / 1_000_000)
  }

  sleep(duration: Duration.Duration): Effect.Effect<void> {
    if (!Duration.isFinite(duration)) return stuck
    const ms = this.toWorldMs(Duration.toMillis(duration))
    // The gate runs when the sleeper resumes (not when the timer fires): a crash or pause in between still holds it.
    return Effect.suspend(() => (this.dead ? stuck : this.base.sleepThen(ms, this.gate)))
  }

  /** Blocks while the incarnation is paused, forever once it is dead. */
  readonly gate: Effect.Effect<void> = Effect.suspend(() => {
    if (this.dead) return stuck
    const wait = this.pausedUntil - this.base.now
    return wait > 0 ? this.base.sleepThen(wait, this.gate) : Effect.void
  })

  /** Whether the incarnation this clock belongs to has crashed. */
  /** Whether the gate lets a caller through right now (neither crashed nor paused). */
  get isOpen(): boolean {
    return !this.dead && this.pausedUntil <= this.base.now
  }

  get isDead(): boolean {
    return this.dead
  }

  /** The process is gone: no timer of it fires again. */
  kill(): void {
    this.dead = true
  }
}
