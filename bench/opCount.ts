/**
 * A Supervisor that counts every Effect operation the fibers it watches run, by kind, and the fibers they start:
 * how `bench/worker-overhead.ts` and `bench/submit-overhead.ts` report Effect steps per job (`COUNT=1`).
 */
import { Effect, Supervisor } from "effect"

export class OpCount extends Supervisor.AbstractSupervisor<void> {
  ops = 0
  fibers = 0
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
