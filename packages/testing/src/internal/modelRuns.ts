/**
 * What the sequential model-based properties (`StoreProperty`, `LimiterProperty`) share: running the fast-check
 * property with the caller's budget, seed and replay path, one error naming the property, the backend and the model's
 * difference when a sequence disagrees. The vitest registration is in `modelTests.ts`, so that a script can run a
 * property without the test runner.
 *
 * @internal
 */
import fc from "fast-check"

/** The budget and replay options every property takes. @internal */
export interface RunOptions {
  readonly name: string
  readonly numRuns?: number | undefined
  readonly seed?: number | undefined
  readonly path?: string | undefined
  readonly timeoutMs?: number | undefined
}

/**
 * Asserts `property` over `options.numRuns` sequences (default 1,000); a counterexample becomes one error that
 * names `label` and the backend, with the model's difference. `dispose` runs whatever the outcome. @internal
 */
export const assertAgainstModel = async (
  label: string,
  property: fc.IAsyncProperty<any>,
  options: RunOptions,
  dispose: () => Promise<void>
): Promise<void> => {
  try {
    await fc.assert(property, {
      numRuns: options.numRuns ?? 1000,
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      ...(options.path === undefined ? {} : { path: options.path })
    })
  } catch (error) {
    const report = error instanceof Error ? error.message : String(error)
    const cause =
      error instanceof Error && error.cause instanceof Error ? `\nThe difference:\n${error.cause.message}` : ""
    throw new Error(
      `${label} (${options.name}) found a difference between the backend and the model:\n${report}${cause}`
    )
  } finally {
    await dispose()
  }
}
