/**
 * Counting what a program executes: a Supervisor that counts every Effect operation its fibers run, by kind, and the
 * fibers they start. Invariant: the counts are a property of the code and its input, not of the machine (the same
 * program over the same input counts the same), which makes them a way to compare speed changes where wall time is
 * too noisy. `npm run bench:sim -- --count-ops` and the core overhead benches (`COUNT=1`) report them.
 *
 * @since 0.1.0
 */
import { Effect, RuntimeFlags, RuntimeFlagsPatch, type Supervisor } from "effect"
import { AbstractSupervisor } from "effect/Supervisor"

/**
 * The counter. Operations are seen only where operation supervision is on: `watch` (and `Run.runPlan` given it as
 * `supervisor`) switches it on for the program it watches.
 *
 * @since 0.1.0
 * @category models
 */
export class OpCount extends AbstractSupervisor<void> {
  /** Operations executed. */
  ops = 0
  /** Fibers started. */
  fibers = 0
  /** Operations by kind (the runtime's op code: `Sync`, `OnSuccess`, `Async`, ...). */
  readonly byKind = new Map<string, number>()
  readonly value = Effect.void
  override onEffect(_fiber: unknown, effect: unknown): void {
    this.ops++
    const kind = String((effect as { _op?: unknown })._op)
    this.byKind.set(kind, (this.byKind.get(kind) ?? 0) + 1)
  }
  override onStart(): void {
    this.fibers++
  }
}

/**
 * Runs `effect` under `supervisor` with operation supervision switched on, so that every operation of its fibers
 * (and of the fibers they fork) reaches the supervisor. What the effect does is unchanged.
 *
 * @since 0.1.0
 * @category combinators
 */
export const watch = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  supervisor: Supervisor.Supervisor<unknown>
): Effect.Effect<A, E, R> =>
  Effect.withRuntimeFlagsPatch(
    Effect.supervised(effect, supervisor),
    RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision)
  )
