/**
 * The connection every Postgres layer of this package shares: a node-postgres pool on a real server, or PGlite in
 * this process. `PgStore.layerFromDriver` and `PgTransport.layerFromDriver` read it from the context, so a Store
 * and a Transport built over one `PgDriver` layer use one pool (or one embedded database), and each seam can also be
 * composed with another package's implementation of the other.
 *
 * @since 0.2.0
 */
import type { PGlite } from "@electric-sql/pglite"
import type { StoreError } from "@slowcall/core/Errors"
import { Config, type ConfigError, Context, Effect, Layer, type Scope } from "effect"
import * as internal from "./internal/driver.js"
import { toStoreError } from "./internal/errors.js"

/**
 * What the adapter runs statements through: single statements with positional parameters, transactions on one
 * connection, notifications, and `close`. Statements fail with the driver's own errors; the adapter turns them into
 * `StoreError` or `TransportError` in one place.
 *
 * @since 0.2.0
 * @category models
 */
export type Driver = internal.Driver

/**
 * Options of a node-postgres driver: a `connectionString` (or an existing `pool`, which stays the caller's to end),
 * the pool size `max` (default 10), `queryTimeoutMs` (default 30 s: without it a dead network hangs a statement
 * forever), `connectionTimeoutMs` (default 10 s) and the LISTEN connection's reconnect delay `listenRetryMs`.
 *
 * @since 0.2.0
 * @category models
 */
export type PgDriverOptions = internal.PgDriverOptions

/**
 * Options of a PGlite driver: in memory without `dataDir`, on disk with it; `db` shares an instance the application
 * already uses (it stays the caller's to close).
 *
 * @since 0.2.0
 * @category models
 */
export interface PgliteDriverOptions {
  readonly dataDir?: string | undefined
  readonly db?: PGlite | undefined
}

/**
 * The shared driver. One per database: every layer that reads it runs its statements on that pool or database.
 *
 * @since 0.2.0
 * @category services
 */
export class PgDriver extends Context.Tag("@slowcall/adapter-postgres/PgDriver")<PgDriver, Driver>() {}

/**
 * A node-postgres driver for the scope: the pool (when the driver created it) and every LISTEN connection end when
 * the scope closes.
 *
 * @since 0.2.0
 * @category constructors
 */
export const acquire = (options: PgDriverOptions): Effect.Effect<Driver, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => internal.makePgDriver(options)),
    (driver) => Effect.promise(() => driver.close())
  )

/**
 * A PGlite driver for the scope, closed with it (unless the caller passed its own `db`).
 *
 * @since 0.2.0
 * @category constructors
 */
export const acquirePglite = (options: PgliteDriverOptions = {}): Effect.Effect<Driver, StoreError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({ try: () => internal.makePgliteDriver(options), catch: (error) => toStoreError("open", error) }),
    (driver) => Effect.promise(() => driver.close())
  )

/**
 * A real Postgres server through a node-postgres pool.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (options: PgDriverOptions): Layer.Layer<PgDriver> => Layer.scoped(PgDriver, acquire(options))

/**
 * `layer` on `DATABASE_URL`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerConfig = (
  options: Omit<PgDriverOptions, "connectionString"> = {}
): Layer.Layer<PgDriver, ConfigError.ConfigError> =>
  Layer.unwrapEffect(
    Effect.map(Config.string("DATABASE_URL"), (connectionString) => layer({ ...options, connectionString }))
  )

/**
 * Embedded Postgres (PGlite) in this process: zero setup. A fresh `dataDir` takes a few seconds to initialise,
 * reopening is fast; without one the database lives in memory and ends with the scope.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerPglite = (options: PgliteDriverOptions = {}): Layer.Layer<PgDriver, StoreError> =>
  Layer.scoped(PgDriver, acquirePglite(options))
