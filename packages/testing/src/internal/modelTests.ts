/**
 * The vitest registration of the sequential model-based properties (`StoreProperty`, `LimiterProperty`): one test per
 * backend that prints how many sequences ran.
 *
 * @internal
 */
import { expect, it } from "vitest"
import type { RunOptions } from "./modelRuns.js"

/**
 * Registers the property as one vitest test named after the backend: it passes when every sequence agreed, and
 * prints how many sequences ran and how long they took. @internal
 */
export const registerProperty = <O extends RunOptions>(
  label: string,
  options: O,
  check: (options: O) => Promise<{ readonly runs: number; readonly ms: number }>,
  defaultTimeoutMs: number
): void => {
  const numRuns = options.numRuns ?? 1000
  it(
    `${label}: ${options.name} agrees with the reference model over ${numRuns} random sequences`,
    async () => {
      const { runs, ms } = await check(options)
      console.info(`[${label}: ${options.name}] ${runs} sequences in ${(ms / 1000).toFixed(1)} s`)
      expect(runs).toBe(numRuns)
    },
    options.timeoutMs ?? defaultTimeoutMs
  )
}
