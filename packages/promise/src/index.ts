/**
 * @slowcall/promise: slowcall for async/await code. `open` a queue from a URL, submit and follow jobs, and run
 * workers of plain async handlers, with every guarantee of the Effect core (claim before call, fenced writes, spend
 * reserved and settled, budgets, deadlines, safe replay) and typed error classes.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Backend from "./Backend.js"
/** @since 0.1.0 */
export * from "./Errors.js"
/** @since 0.1.0 */
export * from "./Queue.js"
/** @since 0.1.0 */
export * as StandardSchema from "./StandardSchema.js"
