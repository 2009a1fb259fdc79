/**
 * Effects run one after another with no step spent on the sequencing itself where there is nothing to sequence.
 *
 * Why these exist, measured on 7 December 2026 by counting Effect operations (machine-independent) with these four
 * helpers and with each replaced by the plain Effect form it stands for (`Effect.all` with `discard`,
 * `Effect.uninterruptibleMask`, `Effect.catchAll`, `Metric.incrementBy` then the effect):
 * - `COUNT=1 node scripts/bundled.mjs bench/worker-overhead.ts 5000` (no-op jobs through one worker): 46.5
 *   operations per job with them, 52.5 without (13% more);
 * - `npm run bench:sim -- --runs 100 --trials 1 --warmup 0 --count-ops` (the simulator's bench, all fault kinds):
 *   28,690 operations per run with them, 30,459 without (6% more).
 *
 * @internal
 */
import { Effect, FiberRef, type Metric, RuntimeFlags } from "effect"

/**
 * Runs `effects` one after another, in order, discarding their values; the first failure stops the rest. What
 * `Effect.all(effects, { discard: true })` does, except that none is `Effect.void` (no step) and one is that effect
 * with its value dropped (no loop around it).
 *
 * @internal
 */
export const inOrder = <E, R>(effects: ReadonlyArray<Effect.Effect<unknown, E, R>>): Effect.Effect<void, E, R> => {
  if (effects.length === 0) return Effect.void
  if (effects.length === 1) return Effect.asVoid(effects[0]!)
  return Effect.all(effects, { discard: true })
}

/** What `Effect.uninterruptibleMask` hands its body: runs an effect with the caller's interruptibility. */
export type Restore = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

const keep: Restore = (effect) => effect

/**
 * `Effect.uninterruptibleMask`, without its steps where the fiber is uninterruptible already: the body then runs
 * at once with `restore` as the identity (what Effect's own `restore` amounts to there: the region stays
 * uninterruptible). Invariant: the body runs uninterruptibly and `restore` gives back exactly the caller's
 * interruptibility, as with `Effect.uninterruptibleMask`. For regions mostly entered from uninterruptible code (a
 * settlement's write); where the caller is usually interruptible, one step dearer than the plain mask.
 *
 * @internal
 */
export const masked = <A, E, R>(body: (restore: Restore) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime<A, E, R>((_, status) =>
    RuntimeFlags.interruption(status.runtimeFlags) ? Effect.uninterruptibleMask(body) : body(keep)
  )

/**
 * `Effect.catchAll`, without a step on success: Effect's own catches through a match whose success side returns the
 * value again (one more step each time the effect succeeds); this catches through the cause, whose handler a
 * success passes without a step, and hands the cause to `Effect.catchAll` itself (so a failure is caught exactly as
 * `catchAll` would: a typed failure goes to `f`, defects and interruptions pass through).
 *
 * @internal
 */
export const catchFailure = <A, E, R, A2, E2, R2>(
  self: Effect.Effect<A, E, R>,
  f: (error: E) => Effect.Effect<A2, E2, R2>
): Effect.Effect<A | A2, E2, R | R2> =>
  Effect.catchAllCause(self, (cause) => Effect.catchAll(Effect.failCause(cause), f))

/**
 * Adds `by` to `counter`, then runs `next`, in one step: what `Metric.incrementBy(counter, by)` followed by `next`
 * does (the same labels: this fiber's metric labels), without the four steps of the metric's own effect.
 *
 * @internal
 */
export const countThen = <A, E, R>(
  counter: Metric.Metric.Counter<number>,
  by: number,
  next: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime<A, E, R>((fiber) => {
    counter.unsafeUpdate(by, fiber.getFiberRef(FiberRef.currentMetricLabels))
    return next
  })
