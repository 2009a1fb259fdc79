/**
 * @slowcall/core: the job model, the lease protocol's rules (Protocol) and seams (Store, Query, Transport) with
 * in-memory layers, the fleet's provider limits (the Limits rules and the Limiter seam), the Worker, Client and
 * Sweeper, error normalisation, the queue-or-not decision rule, and metrics. Each module is also importable on its
 * own path (`@slowcall/core/Worker`).
 *
 * @since 0.1.0
 */

/** @since 0.7.0 */
export * as Batch from "./Batch.js"
/** @since 0.1.0 */
export * as Canonical from "./Canonical.js"
/** @since 0.1.0 */
export * as Client from "./Client.js"
/** @since 0.5.0 */
export * as DeadLetters from "./DeadLetters.js"
/** @since 0.1.0 */
export * as Decide from "./Decide.js"
/** @since 0.2.0 */
export * as ErrorClass from "./ErrorClass.js"
/** @since 0.1.0 */
export * as Errors from "./Errors.js"
/** @since 0.6.0 */
export * as Fairness from "./Fairness.js"
/** @since 0.1.0 */
export * as Handler from "./Handler.js"
/** @since 0.1.0 */
export * as Ids from "./Ids.js"
/** @since 0.2.0 */
export * as Job from "./Job.js"
/** @since 0.1.0 */
export * as Lease from "./Lease.js"
/** @since 0.4.0 */
export * as Limiter from "./Limiter.js"
/** @since 0.4.0 */
export * as Limits from "./Limits.js"
/** @since 0.1.0 */
export * as Metrics from "./Metrics.js"
/** @since 0.1.0 */
export * as Normalize from "./Normalize.js"
/** @since 0.2.0 */
export * as Protocol from "./Protocol.js"
/** @since 0.2.0 */
export * as Query from "./Query.js"
/** @since 0.4.0 */
export * as RateLimit from "./RateLimit.js"
/** @since 0.3.0 */
export * as Redact from "./Redact.js"
/** @since 0.1.0 */
export * as Retry from "./Retry.js"
/** @since 0.1.0 */
export * as StateMachine from "./StateMachine.js"
/** @since 0.1.0 */
export * as Store from "./Store.js"
/** @since 0.1.0 */
export * as Sweeper from "./Sweeper.js"
/** @since 0.1.0 */
export * as Transport from "./Transport.js"
/** @since 0.1.0 */
export * as Worker from "./Worker.js"
