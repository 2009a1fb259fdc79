/**
 * @since 0.1.0
 */

/**
 * Store and Transport selection for commands.
 *
 * @since 0.1.0
 */
export * as Backend from "./Backend.js"
/**
 * `slowcall batches`: follow, cancel and replay batches on a running server.
 *
 * @since 0.7.0
 */
export * as Batches from "./Batches.js"
/**
 * The command tree and its runner.
 *
 * @since 0.1.0
 */
export * as Cli from "./Cli.js"
/**
 * The commands' error.
 *
 * @since 0.1.0
 */
export * as CliError from "./CliError.js"
/**
 * The demo job types.
 *
 * @since 0.1.0
 */
export * as Demo from "./Demo.js"
/**
 * `slowcall dlq`.
 *
 * @since 0.1.0
 */
export * as Dlq from "./Dlq.js"
/**
 * `slowcall jobs`.
 *
 * @since 0.1.0
 */
export * as Jobs from "./Jobs.js"
/**
 * `slowcall migrate`.
 *
 * @since 0.1.0
 */
export * as Migrate from "./Migrate.js"

/**
 * `slowcall resources`: the fleet's provider limits on a running server.
 *
 * @since 0.4.0
 */
export * as Resources from "./Resources.js"

/**
 * `slowcall schedules`: the fleet's cron schedules on a running server.
 *
 * @since 0.5.0
 */
export * as Schedules from "./Schedules.js"

/**
 * `slowcall serve`.
 *
 * @since 0.1.0
 */
export * as Serve from "./Serve.js"

/**
 * What `slowcall serve` starts.
 *
 * @since 0.3.0
 */
export * as Serving from "./Serving.js"
