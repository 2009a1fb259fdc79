/**
 * The attempt fibers of a worker: each one started in the worker's runtime (it outlives whatever step dispatched it,
 * and inherits nothing from that step's fiber) and known here until it ends, so shutdown can wait for them all, then
 * interrupt what is left: a plain set, and one observer per fiber that takes it out of the set when it ends.
 *
 * @internal
 */
import { Effect, Fiber, FiberId, Runtime, RuntimeFlags } from "effect"
import type { Start } from "./wake.js"

/** @internal */
export interface Fibers<R> {
  /** Starts `effect` in a fiber of its own, scheduled like a fork. */
  readonly run: (effect: Effect.Effect<void, never, R>) => Effect.Effect<void>
  readonly size: () => number
  /** Waits until no attempt fiber is left. */
  readonly awaitEmpty: Effect.Effect<void>
  /** Interrupts every attempt fiber left, and waits for them. */
  readonly interruptAll: Effect.Effect<void>
}

/**
 * Attempt fibers started in `runtime` (the worker's, read where it starts), interruptible from their first step
 * whatever the runtime's flags were where it was read.
 *
 * @internal
 */
export const make = <R>(runtime: Runtime.Runtime<R>): Fibers<R> => {
  const live = new Set<Fiber.RuntimeFiber<void, never>>()
  let waiters: Array<(effect: Effect.Effect<void>) => void> = []
  const fork = Runtime.runFork(
    Runtime.make({
      context: runtime.context,
      fiberRefs: runtime.fiberRefs,
      runtimeFlags: RuntimeFlags.enable(runtime.runtimeFlags, RuntimeFlags.Interruption)
    })
  )
  const ended = (fiber: Fiber.RuntimeFiber<void, never>): void => {
    live.delete(fiber)
    if (live.size > 0 || waiters.length === 0) return
    const all = waiters
    waiters = []
    for (const resume of all) resume(Effect.void)
  }
  return {
    run: (effect) =>
      Effect.sync(() => {
        const fiber = fork(effect, { immediate: false })
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

/**
 * A worker's helper fibers: its loops (lease keeping, the flushers of its outboxes), each started in a fiber of its
 * own the first time it is needed instead of when the worker starts (a worker that never holds a lease or never has
 * two acks overlap starts none of them), and the ticks of its store writes (`run`). Invariants: a loop starts at most
 * once; `stop` interrupts every started helper and waits for it, and a helper asked for after `stop` starts
 * interrupted, so none outlives the worker.
 *
 * @internal
 */
export interface Helpers {
  readonly start: Start
  /**
   * Starts `effect` in a fiber of its own (scheduled like a fork; safe inside a fiber's step): one call's work, such
   * as a tick of store writes. `stop` interrupts it if it is still running. `onExit` is called when the fiber ends,
   * however it ends: also when it is interrupted before its first step, which runs none of the effect's own
   * finalizers.
   */
  readonly run: (effect: Effect.Effect<void>, onExit: () => void) => void
  readonly stop: Effect.Effect<void>
  /** Helper fibers started so far. */
  readonly started: () => number
}

/**
 * Helpers started in `runtime` (the worker's, read where it starts). A start schedules the fiber like a fork does;
 * it is safe inside a fiber's step.
 *
 * @internal
 */
export const makeHelpers = (runtime: Runtime.Runtime<never>): Helpers => {
  const started: Array<Fiber.RuntimeFiber<never, never>> = []
  const running = new Set<Fiber.RuntimeFiber<void, never>>()
  let stopped = false
  const run = Runtime.runFork(runtime)
  return {
    run: (effect, onExit) => {
      const fiber = run(Effect.interruptible(effect), { immediate: false })
      fiber.addObserver(() => {
        running.delete(fiber)
        onExit()
      })
      if (stopped) fiber.unsafeInterruptAsFork(FiberId.none)
      else running.add(fiber)
    },
    start: (loop) => {
      let fiber: Fiber.RuntimeFiber<never, never> | undefined
      return () => {
        if (fiber !== undefined) return
        fiber = run(Effect.interruptible(loop), { immediate: false })
        if (stopped) fiber.unsafeInterruptAsFork(FiberId.none)
        else started.push(fiber)
      }
    },
    stop: Effect.suspend(() => {
      stopped = true
      const all = [...started, ...running]
      return all.length === 0 ? Effect.void : Fiber.interruptAll(all)
    }),
    started: () => started.length
  }
}
