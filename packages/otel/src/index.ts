/**
 * @since 0.1.0
 */
export * as Tracing from "./Tracing.js"
