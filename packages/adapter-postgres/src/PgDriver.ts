/**
 * The connection every Postgres layer of this package shares: a node-postgres pool on a real server, or PGlite in
 * this process. `PgStore.layerFromDriver` and `PgTransport.layerFromDriver` read it from the context, so a Store
 * and a Transport built over one `PgDriver` layer use one pool (or one embedded database), and each seam can also be
 * composed with another package's implementation of the other.
 *
 * @since 0.2.0
 */
import { hostname } from "node:os"
import { resolve } from "node:path"
import type { PGlite } from "@electric-sql/pglite"
import type { StoreError } from "@slowcall/core/Errors"
import { Config, type ConfigError, Context, Data, Effect, Layer, type Scope } from "effect"
import * as DataDirLock from "./internal/dataDirLock.js"
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
 * already uses (it stays the caller's to close). A `dataDir` on disk is this process's alone while the driver is
 * open (see `DataDirLocked`).
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
 * The warning logged when a pool passed in runs with JIT on: the driver's own pools turn it off (see
 * `sessionOptions` in the driver), a caller's pool keeps its sessions' settings.
 *
 * @since 0.9.0
 * @category constants
 */
export const jitWarning =
  "the pool passed to the Postgres adapter runs with jit = on: behind a large backlog the server compiles every " +
  "claim with LLVM before running it (about 14 ms against 0.3 ms per claim at a million queued jobs). Turn it off " +
  "for the pool's connections (new pg.Pool({ ..., options: '-c jit=off' })), or let the adapter make its pool " +
  "(connectionString, max)."

/**
 * Asks a caller's pool once whether its sessions run with JIT, and logs `jitWarning` when they do. Runs beside the
 * layer's start, never before it: a server that cannot be reached, or a pool that is ended, makes it say nothing.
 */
const checkCallersPool = (pool: NonNullable<PgDriverOptions["pool"]>) =>
  Effect.tryPromise(() => pool.query<{ jit: string }>("SELECT current_setting('jit') AS jit")).pipe(
    Effect.flatMap((result) => (result.rows[0]?.jit === "on" ? Effect.logWarning(jitWarning) : Effect.void)),
    Effect.ignore
  )

/**
 * A node-postgres driver for the scope: the pool (when the driver created it) and every LISTEN connection end when
 * the scope closes. A pool passed in keeps its sessions' settings; when they run with JIT on, a warning
 * (`jitWarning`) is logged once, beside the start.
 *
 * @since 0.2.0
 * @category constructors
 */
export const acquire = (options: PgDriverOptions): Effect.Effect<Driver, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => internal.makePgDriver(options)),
    (driver) => Effect.promise(() => driver.close())
  ).pipe(
    Effect.tap(() => (options.pool === undefined ? Effect.void : Effect.forkScoped(checkCallersPool(options.pool))))
  )

/**
 * Another process holds the PGlite data directory. PGlite runs the database inside the process that opens it, so a
 * second process on the same directory would keep a diverging copy and overwrite the first one's files: it is
 * refused instead. The holder is named by `slowcall.lock` in the directory (its pid, host and start time); a lock
 * whose process has ended, or whose pid now belongs to another process, is stale and taken over without a word.
 *
 * @since 0.3.0
 * @category errors
 */
export class DataDirLocked extends Data.TaggedError("DataDirLocked")<{
  readonly dataDir: string
  readonly lockFile: string
  readonly pid: number
  readonly host: string
  readonly since: string
}> {
  override get message() {
    const where = this.host === hostname() ? "" : ` on ${this.host}`
    return `data directory ${this.dataDir} is in use by process ${this.pid}${where} (see ${this.lockFile})`
  }
}

/** A directory on disk, as opposed to PGlite's `memory://`, `idb://` and other storage URLs. */
const onDisk = (dataDir: string): string | undefined =>
  dataDir.startsWith("file://")
    ? dataDir.slice("file://".length)
    : /^[a-z][a-z0-9+.-]*:\/\//i.test(dataDir)
      ? undefined
      : dataDir

/**
 * The lock of a PGlite data directory for the scope: fails with `DataDirLocked` while another live process holds it,
 * released when the scope closes (or the process exits). `acquirePglite` takes it before opening a directory on
 * disk; use it directly for a directory opened some other way.
 *
 * @since 0.3.0
 * @category constructors
 */
export const lockDataDir = (dataDir: string): Effect.Effect<void, DataDirLocked | StoreError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.flatMap(
      Effect.try({ try: () => DataDirLock.acquire(dataDir), catch: (error) => toStoreError("open", error) }),
      (result) =>
        result._tag === "Acquired"
          ? Effect.succeed(result)
          : Effect.fail(
              new DataDirLocked({
                dataDir: resolve(dataDir),
                lockFile: result.file,
                pid: result.holder.pid,
                host: result.holder.host,
                since: result.holder.since
              })
            )
    ),
    (held) => Effect.sync(() => held.release())
  ).pipe(Effect.asVoid)

/**
 * A PGlite driver for the scope, closed with it (unless the caller passed its own `db`). A `dataDir` on disk is
 * locked first (`lockDataDir`) and unlocked after the database has closed.
 *
 * @since 0.2.0
 * @category constructors
 */
export const acquirePglite = (
  options: PgliteDriverOptions = {}
): Effect.Effect<Driver, StoreError | DataDirLocked, Scope.Scope> => {
  const open = Effect.acquireRelease(
    Effect.tryPromise({ try: () => internal.makePgliteDriver(options), catch: (error) => toStoreError("open", error) }),
    (driver) => Effect.promise(() => driver.close())
  )
  const dir = options.db === undefined && options.dataDir !== undefined ? onDisk(options.dataDir) : undefined
  return dir === undefined ? open : Effect.zipRight(lockDataDir(dir), open)
}

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
export const layerPglite = (options: PgliteDriverOptions = {}): Layer.Layer<PgDriver, StoreError | DataDirLocked> =>
  Layer.scoped(PgDriver, acquirePglite(options))
