/**
 * The concurrent model-based property of the Limiter as one vitest test per backend: `LimiterConcurrency.check` (see
 * there for what it checks) with the figures printed and the number of sequences and concurrent batches asserted.
 *
 * @since 0.4.0
 */
import { expect, it } from "vitest"
import { check, type LimiterConcurrencyOptions, scenarioNames } from "./LimiterConcurrency.js"

/**
 * `LimiterConcurrency.check`'s options, and the vitest timeout of the registered test (default 5 minutes).
 *
 * @since 0.4.0
 * @category models
 */
export interface LimiterConcurrentPropertyOptions extends LimiterConcurrencyOptions {
  readonly timeoutMs?: number | undefined
}

/**
 * Registers the property as one vitest test named after the backend. It passes when every batch of every sequence
 * had an order that explains it, and prints how many sequences, concurrent batches, calls and grants ran, and how
 * long they took.
 *
 * @since 0.4.0
 * @category testing
 */
export const LimiterConcurrentProperty = (options: LimiterConcurrentPropertyOptions): void => {
  const numRuns = options.numRuns ?? 110
  const fixed = Math.min(numRuns, scenarioNames.length)
  it(
    `LimiterConcurrentProperty: ${options.name} is linearizable against the reference model over ${numRuns} sequences of concurrent batches`,
    async () => {
      const result = await check(options)
      console.info(
        `[LimiterConcurrentProperty: ${options.name}] ${result.runs} sequences, ${result.concurrentSteps} concurrent batches, ${result.calls} calls (${result.grants} grants) in ${(result.ms / 1000).toFixed(1)} s`
      )
      expect(result.runs).toBe(numRuns)
      expect(result.concurrentSteps).toBeGreaterThanOrEqual(fixed + (numRuns - fixed) * (options.minRounds ?? 10))
      expect(result.grants).toBeGreaterThan(0)
    },
    options.timeoutMs ?? 300_000
  )
}
