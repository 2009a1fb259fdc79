import { Effect } from "effect"

/**
 * Blocks forever without holding any machine resource (Effect's `never` keeps a real interval alive, which a
 * simulated run must not do). Interrupting it resumes the fiber with the interruption.
 *
 * The register function declares its one parameter on purpose: Effect gives a register function of any other arity
 * an `AbortSignal`, and so makes an `AbortController` (a Node `EventTarget`) for every wait.
 *
 * @internal
 */
export const stuck: Effect.Effect<never> = Effect.async<never>((_resume) => {})
