import { Effect } from "effect"

/**
 * Blocks forever without holding any machine resource (Effect's `never` keeps a real interval alive, which a
 * simulated run must not do). Interrupting it resumes the fiber with the interruption.
 *
 * @internal
 */
export const stuck: Effect.Effect<never> = Effect.async<never>(() => {})
