/**
 * Conformance suites that every Store, Transport and Limiter adapter runs, the keep-alive takeover through a real
 * Worker, the model-based properties of the Store (one command at a time, and concurrent batches checked for
 * linearizability) and of the Limiter with their reference models, a stress run of the Limiter, and the job factory
 * they arrange state with.
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
 * @since 0.9.0
 */
export * as KeepAliveTakeover from "./KeepAliveTakeover.js"
/**
 * @since 0.4.0
 */
export * as LimiterConcurrency from "./LimiterConcurrency.js"
/**
 * @since 0.4.0
 */
export * as LimiterConcurrentProperty from "./LimiterConcurrentProperty.js"
/**
 * @since 0.4.0
 */
export * as LimiterConformance from "./LimiterConformance.js"
/**
 * @since 0.4.0
 */
export * as LimiterModel from "./LimiterModel.js"
/**
 * @since 0.4.0
 */
export * as LimiterProperty from "./LimiterProperty.js"
/**
 * @since 0.4.0
 */
export * as LimiterStress from "./LimiterStress.js"
/**
 * @since 0.3.0
 */
export * as StoreConcurrency from "./StoreConcurrency.js"
/**
 * @since 0.3.0
 */
export * as StoreConcurrentProperty from "./StoreConcurrentProperty.js"
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
 * @since 0.8.0
 */
export * as StorePropertyCheck from "./StorePropertyCheck.js"
/**
 * @since 0.1.0
 */
export * as TransportConformance from "./TransportConformance.js"
