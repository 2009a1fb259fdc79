/**
 * The deterministic executor. One simulated run is one fresh fiber tree driven by a plain loop: a custom Effect
 * `Scheduler` collects runnable tasks and the loop runs them one at a time, in an order chosen by a seeded
 * pseudo-random stream; when nothing is runnable the loop advances the `VirtualClock` to its next timer. No
 * machine timer, microtask ordering or wall-clock read takes part, so a seed replays bit for bit.
 *
 * "Nothing runnable and no timer while the program is unfinished" is an exact deadlock, reported as such.
 *
 * @since 0.1.0
 */
import { Effect, type Exit, GlobalValue, Random, type Scheduler } from "effect"
import { prng } from "./internal/prng.js"
import { VirtualClock } from "./SimClock.js"

/**
 * A scheduler whose queue is drained by `SimRuntime.run`. Invariant: tasks run only when the loop asks, one at a
 * time; which pending task runs next is decided by `pick`, a pure function of the run's seed.
 *
 * @since 0.1.0
 * @category models
 */
export class SimScheduler implements Scheduler.Scheduler {
  private readonly tasks: Array<Scheduler.Task> = []
  /** Tasks run so far. */
  steps = 0

  constructor(
    private readonly pick: (n: number) => number,
    private readonly opsBeforeYield: number
  ) {}

  shouldYield(fiber: { readonly currentOpCount: number }): number | false {
    return fiber.currentOpCount > this.opsBeforeYield ? 0 : false
  }

  scheduleTask(task: Scheduler.Task): void {
    this.tasks.push(task)
  }

  /** Runs one pending task; false when none is pending. */
  runNext(): boolean {
    const n = this.tasks.length
    if (n === 0) return false
    const i = n === 1 ? 0 : this.pick(n)
    const task = this.tasks[i]!
    this.tasks[i] = this.tasks[n - 1]!
    this.tasks.pop()
    this.steps++
    task()
    return true
  }
}

/**
 * How a run ended: the program's exit, or an exact deadlock / step-budget overrun with the virtual time it
 * happened at.
 *
 * @since 0.1.0
 * @category models
 */
export type RunOutcome<A, E> =
  | { readonly _tag: "Done"; readonly exit: Exit.Exit<A, E>; readonly steps: number; readonly now: number }
  | { readonly _tag: "Deadlock"; readonly steps: number; readonly now: number }
  | { readonly _tag: "StepLimit"; readonly steps: number; readonly now: number }

/**
 * @since 0.1.0
 * @category models
 */
export interface RunOptions {
  readonly seed: number
  readonly clock?: VirtualClock | undefined
  /** Give up after this many scheduled tasks (a livelock guard). Default 5,000,000. */
  readonly maxSteps?: number | undefined
  /** Fiber ops between forced yields; smaller values interleave more finely. Default 256. */
  readonly opsBeforeYield?: number | undefined
}

/**
 * Runs `effect` to completion on virtual time. The same effect and options always produce the same outcome and
 * the same sequence of observable events. `Random` is `Random.make(seed)`; the `Clock` is the virtual clock.
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = <A, E>(effect: Effect.Effect<A, E>, options: RunOptions): RunOutcome<A, E> => {
  const clock = options.clock ?? new VirtualClock(0)
  const next = prng(options.seed ^ 0x5bd1e995)
  const scheduler = new SimScheduler((n) => next() % n, options.opsBeforeYield ?? 256)
  const maxSteps = options.maxSteps ?? 5_000_000
  const program = effect.pipe(
    Effect.withClock(clock),
    Effect.withRandom(Random.make(options.seed)),
    Effect.withScheduler(scheduler)
  )
  // Every fiber Effect registers in its global scope while the loop runs goes into a set of the run's own (see
  // `globalRoots`).
  const scope = globalRoots()
  const saved = scope?.roots
  if (scope !== undefined) scope.roots = new Set()
  try {
    const fiber = Effect.runFork(program, { scheduler })
    for (;;) {
      while (scheduler.runNext()) {
        if (scheduler.steps > maxSteps) return { _tag: "StepLimit", steps: scheduler.steps, now: clock.now }
      }
      const exit = fiber.unsafePoll()
      if (exit !== null) return { _tag: "Done", exit, steps: scheduler.steps, now: clock.now }
      if (!clock.fireNext()) return { _tag: "Deadlock", steps: scheduler.steps, now: clock.now }
    }
  } finally {
    if (scope !== undefined && saved !== undefined) scope.roots = saved
  }
}

/**
 * Effect keeps every root and daemon fiber in one process-wide set (`roots` of its global fiber scope) until the
 * fiber exits. A simulated process that crashed never exits (its clock and gates block forever, by design), so a
 * run's fibers must not go into that set: memory would grow by the whole world of each run. Deleting them from it
 * afterwards is not enough either: the set is old-generation memory, and what it held stays reachable from there
 * for young-generation collections. So while a run's loop runs (it is synchronous: every fiber added meanwhile is
 * the run's), the scope holds a set of the run's own, which is garbage with the rest of the run once the scope has
 * its own set back. Undefined when the scope is not where Effect 3 keeps it (nothing to do).
 */
const globalRoots = (): { roots: Set<unknown> } | undefined => {
  const scope: unknown = GlobalValue.globalValue(Symbol.for("effect/FiberScope/Global"), () => undefined)
  return typeof scope === "object" && scope !== null && (scope as { roots?: unknown }).roots instanceof Set
    ? (scope as { roots: Set<unknown> })
    : undefined
}
