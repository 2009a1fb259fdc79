/**
 * Conformance suites that every Store and Transport adapter runs, the model-based property of the Store with its
 * reference model, and the job factory they arrange state with.
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 */
export * as FaultProxy from "./FaultProxy.js"
/**
 * @since 0.1.0
 */
export * as JobFactory from "./JobFactory.js"
/**
 * @since 0.1.0
 */
export * as StoreConformance from "./StoreConformance.js"
/**
 * @since 0.2.0
 */
export * as StoreModel from "./StoreModel.js"
/**
 * @since 0.2.0
 */
export * as StoreProperty from "./StoreProperty.js"
/**
 * @since 0.1.0
 */
export * as TransportConformance from "./TransportConformance.js"
