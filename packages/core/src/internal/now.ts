/**
 * The fiber's Clock time in the one effect step that uses it.
 *
 * @internal
 */
import { Clock, Context, Effect } from "effect"

/**
 * `f` of the current time of the fiber's `Clock`, read in the step that builds `f`'s effect: what
 * `Effect.flatMap(Clock.currentTimeMillis, f)` does (the same Clock, the same reading), in one effect step instead of
 * four, for the worker's per-job paths.
 *
 * @internal
 */
export const withNow = <A, E, R>(f: (now: number) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime<A, E, R>((fiber) =>
    f(Context.get(fiber.currentDefaultServices, Clock.Clock).unsafeCurrentTimeMillis())
  )
