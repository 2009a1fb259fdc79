/**
 * The attempt fibers of a worker: each one started as a daemon (it outlives whatever step dispatched it) and known
 * here until it ends, so shutdown can wait for them all, then interrupt what is left. A plain set and one observer
 * per fiber: no effect steps beyond the fork itself.
 *
 * @internal
 */
import { Effect, Fiber } from "effect"

/** @internal */
export interface Fibers {
  /** Starts `effect` in a fiber of its own. */
  readonly run: <R>(effect: Effect.Effect<void, never, R>) => Effect.Effect<void, never, R>
  readonly size: () => number
  /** Waits until no attempt fiber is left. */
  readonly awaitEmpty: Effect.Effect<void>
  /** Interrupts every attempt fiber left, and waits for them. */
  readonly interruptAll: Effect.Effect<void>
}

/** @internal */
export const make = (): Fibers => {
  const live = new Set<Fiber.RuntimeFiber<void, never>>()
  let waiters: Array<(effect: Effect.Effect<void>) => void> = []
  const ended = (fiber: Fiber.RuntimeFiber<void, never>): void => {
    live.delete(fiber)
    if (live.size > 0 || waiters.length === 0) return
    const all = waiters
    waiters = []
    for (const resume of all) resume(Effect.void)
  }
  return {
    run: (effect) =>
      Effect.map(Effect.forkDaemon(effect), (fiber) => {
        live.add(fiber)
        fiber.addObserver(() => ended(fiber))
      }),
    size: () => live.size,
    awaitEmpty: Effect.async<void>((resume) => {
      if (live.size === 0) return resume(Effect.void)
      waiters.push(resume)
    }),
    interruptAll: Effect.suspend(() => Fiber.interruptAll([...live]))
  }
}
