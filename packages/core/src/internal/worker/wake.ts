/**
 * How a worker's loops wait and wake: a loop that runs its round again, the Alarm the lease keeper's loops sleep on
 * (until an instant, or until something sooner is due), the Signal a flusher waits on, and how a flusher is started
 * on first need.
 *
 * @internal
 */
import { Effect, Fiber } from "effect"

/**
 * A loop that runs `once` again after each round, without yielding between rounds (each round waits on its own).
 *
 * @internal
 */
export const loop = (once: Effect.Effect<void>): Effect.Effect<never> => {
  const again: Effect.Effect<never> = Effect.flatMap(once, () => again)
  return again
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
 * A loop's sleep until an instant, cut short when something sooner is due. The wait is one callback; the timer that
 * ends it is one fiber sleeping on the Clock, kept across waits while it is due no later than needed, so a loop that
 * wakes by its timer forks one fiber per wake and one woken early forks none.
 *
 * @internal
 */
export class Alarm {
  private resume: ((effect: Effect.Effect<void>) => void) | undefined = undefined
  /** When the current wait must end at the latest (infinity: no wait, or a wait for `wake` only). */
  private armedAt = Number.POSITIVE_INFINITY
  private early = false
  private timer: Fiber.RuntimeFiber<void> | undefined = undefined
  private timerAt = Number.POSITIVE_INFINITY

  /** Wake the loop if it sleeps past `at` (or make its next sleep return at once). */
  wake(at: number): void {
    if (this.resume === undefined) {
      this.early = true
      return
    }
    if (at >= this.armedAt) return
    this.fire()
  }

  private fire(): void {
    const resume = this.resume
    this.resume = undefined
    this.armedAt = Number.POSITIVE_INFINITY
    if (resume !== undefined) resume(Effect.void)
  }

  sleepUntil(at: number, now: number): Effect.Effect<void> {
    if (this.early) {
      this.early = false
      return Effect.void
    }
    const arm =
      Number.isFinite(at) && !(this.timer !== undefined && this.timerAt <= at)
        ? Effect.flatMap(
            Effect.forkDaemon(
              Effect.zipRight(
                Effect.sleep(Math.max(0, at - now)),
                Effect.sync(() => {
                  this.timer = undefined
                  this.timerAt = Number.POSITIVE_INFINITY
                  this.fire()
                })
              )
            ),
            (fiber) =>
              Effect.withFiberRuntime<void>((self) => {
                // The timer it replaces is due later than needed now: stopped without waiting for it.
                this.timer?.unsafeInterruptAsFork(self.id())
                this.timer = fiber
                this.timerAt = at
                return Effect.void
              })
          )
        : Effect.void
    // No canceler (it would wrap every wait in an interruption handler): a loop's wait is interrupted only when the
    // loop stops for good, and the resume it leaves behind then does nothing if called (the fiber is gone).
    return Effect.zipRight(
      arm,
      Effect.async<void>((resume) => {
        this.armedAt = at
        this.resume = resume
      })
    )
  }

  /** Stops the timer (the loop is done). */
  readonly stop: Effect.Effect<void> = Effect.suspend(() => {
    const timer = this.timer
    this.timer = undefined
    return timer === undefined ? Effect.void : Fiber.interrupt(timer)
  })
}

/**
 * A flusher's wait for work: resumed by `fire`, or at once when it fired while no one waited.
 *
 * @internal
 */
export class Signal {
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
