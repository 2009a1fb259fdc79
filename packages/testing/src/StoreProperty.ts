/**
 * The model-based property of the Store as one vitest test per backend: `StorePropertyCheck.check` (see there for
 * what it checks) with the figures printed and the number of sequences asserted. The check's options and names are
 * re-exported here.
 *
 * @since 0.2.0
 */
import { registerProperty } from "./internal/modelTests.js"
import { check, type StorePropertyOptions } from "./StorePropertyCheck.js"

export { BASE_TIME, check, type Purge, type StorePropertyOptions } from "./StorePropertyCheck.js"

/**
 * Registers the property as one vitest test named after the backend. It passes when every sequence agreed, and
 * prints how many sequences ran and how long they took.
 *
 * @since 0.2.0
 * @category testing
 */
export const StoreProperty = <R = never>(options: StorePropertyOptions<R>): void => {
  registerProperty("StoreProperty", options, check, 600_000)
}
