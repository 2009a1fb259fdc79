/**
 * @since 0.1.0
 */

/**
 * The API description (endpoints, bodies, error shapes).
 *
 * @since 0.1.0
 */
export * as Api from "./Api.js"

/**
 * The dashboard page.
 *
 * @since 0.1.0
 */
export * as Dashboard from "./Dashboard.js"

/**
 * The server layers.
 *
 * @since 0.1.0
 */
export * as Server from "./Server.js"

/**
 * Job views, ETags, SSE revisions and polling hints.
 *
 * @since 0.1.0
 */
export * as View from "./View.js"
