/**
 * @since 0.1.0
 */

/**
 * The shared connection: one ioredis client (a server or a Cluster) and the key prefix.
 *
 * @since 0.1.0
 */
export * as RedisConnection from "./RedisConnection.js"
/**
 * The Store and Query on Redis: one Lua script per state change, native indexes for the reads.
 *
 * @since 0.1.0
 */
export * as RedisStore from "./RedisStore.js"
/**
 * The Transport on the Store's own keys: sorted sets by delivery time, receipts per delivery, pub/sub wake-ups.
 *
 * @since 0.1.0
 */
export * as RedisTransport from "./RedisTransport.js"
