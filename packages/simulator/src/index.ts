/**
 * @since 0.1.0
 */

/**
 * Pure invariant checkers over a run's history.
 *
 * @since 0.1.0
 */
export * as Checkers from "./Checkers.js"

/**
 * The recorded history of a run.
 *
 * @since 0.1.0
 */
export * as History from "./History.js"

/**
 * Counting the Effect operations and fibers a program runs (a machine-independent speed figure).
 *
 * @since 0.1.0
 */
export * as OpCount from "./OpCount.js"

/**
 * Generated, shrinkable plans.
 *
 * @since 0.1.0
 */
export * as Plan from "./Plan.js"

/**
 * Report rendering and corpus entries.
 *
 * @since 0.1.0
 */
export * as Report from "./Report.js"

/**
 * One simulated run of the real Worker.
 *
 * @since 0.1.0
 */
export * as Run from "./Run.js"

/**
 * Virtual clocks.
 *
 * @since 0.1.0
 */
export * as SimClock from "./SimClock.js"

/**
 * The simulated model provider and its billing ledger.
 *
 * @since 0.1.0
 */
export * as SimModel from "./SimModel.js"

/**
 * The deterministic scheduler and run loop.
 *
 * @since 0.1.0
 */
export * as SimRuntime from "./SimRuntime.js"

/**
 * The recording, fault-injecting Store proxy.
 *
 * @since 0.1.0
 */
export * as SimStore from "./SimStore.js"

/**
 * The recording, fault-injecting Transport proxy.
 *
 * @since 0.1.0
 */
export * as SimTransport from "./SimTransport.js"

/**
 * Run sets, shrinking and replay.
 *
 * @since 0.1.0
 */
export * as Simulate from "./Simulate.js"
