/**
 * The concurrent model-based property of the Store as one vitest test per backend: `StoreConcurrency.check` (see
 * there for what it checks) with the figures printed and the number of sequences and concurrent batches asserted.
 *
 * @since 0.3.0
 */
import { expect, it } from "vitest"
import { check, type StoreConcurrencyOptions } from "./StoreConcurrency.js"

/**
 * `StoreConcurrency.check`'s options, and the vitest timeout of the registered test (default 5 minutes).
 *
 * @since 0.3.0
 * @category models
 */
export interface StoreConcurrentPropertyOptions extends StoreConcurrencyOptions {
  readonly timeoutMs?: number | undefined
}

/**
 * Registers the property as one vitest test named after the backend. It passes when every batch of every sequence
 * had an order that explains it, and prints how many sequences, concurrent batches and commands ran, and how long
 * they took. It prints the seed before it starts (one drawn at random unless `seed` is given), so that a run cut off
 * by the timeout can be replayed with it.
 *
 * @since 0.3.0
 * @category testing
 */
export const StoreConcurrentProperty = (options: StoreConcurrentPropertyOptions): void => {
  const numRuns = options.numRuns ?? 110
  it(
    `StoreConcurrentProperty: ${options.name} is linearizable against the reference model over ${numRuns} sequences of concurrent batches`,
    async () => {
      // The seed is chosen here and printed first, so a run that never ends can still be replayed from its log.
      const seed = options.seed ?? Date.now() ^ Math.floor(Math.random() * 0x1_0000_0000)
      console.info(`[StoreConcurrentProperty: ${options.name}] seed ${seed}`)
      const result = await check({ ...options, seed })
      console.info(
        `[StoreConcurrentProperty: ${options.name}] ${result.runs} sequences, ${result.concurrentSteps} concurrent batches, ${result.commands} commands${result.cycle ? ` (${result.cycles} cycles)` : ""} in ${(result.ms / 1000).toFixed(1)} s`
      )
      expect(result.runs).toBe(numRuns)
      expect(result.concurrentSteps).toBeGreaterThanOrEqual(
        result.scenarios + (numRuns - result.scenarios) * (options.minRounds ?? 10)
      )
    },
    options.timeoutMs ?? 300_000
  )
}
