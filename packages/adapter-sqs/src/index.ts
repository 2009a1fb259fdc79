/**
 * @since 0.1.0
 */

/**
 * Redrive safety: whether a queue's redrive policy could dead-letter a healthy job, and the error that says so.
 *
 * @since 0.1.0
 */
export * as SqsRedrive from "./SqsRedrive.js"
/**
 * The Transport on Amazon SQS: visibility as the lease, batched heartbeats, ack after persist, Standard and FIFO.
 *
 * @since 0.1.0
 */
export * as SqsTransport from "./SqsTransport.js"
