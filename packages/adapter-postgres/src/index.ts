/**
 * @since 0.1.0
 */

/**
 * The shared connection: a node-postgres pool or PGlite in process, read by the Store and Transport layers.
 *
 * @since 0.2.0
 */
export * as PgDriver from "./PgDriver.js"
/**
 * Forward-only migrations, safe to run from several processes at once.
 *
 * @since 0.1.0
 */
export * as PgMigrator from "./PgMigrator.js"
/**
 * The Store on Postgres (server or embedded PGlite), its layers, transactional enqueue and the outbox relay.
 *
 * @since 0.1.0
 */
export * as PgStore from "./PgStore.js"
/**
 * The Transport on the Store's own tables (LISTEN/NOTIFY wake-ups with a polling fallback).
 *
 * @since 0.1.0
 */
export * as PgTransport from "./PgTransport.js"
