/**
 * Effects run one after another with no step spent on the sequencing itself where there is nothing to sequence.
 *
 * @internal
 */
import { Effect } from "effect"

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
