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
 * The session settings the adapter's own pools start every connection with, as node-postgres's `options` (the
 * startup message's, as `PGOPTIONS` would give them): `jit = off` and `random_page_cost = 1.1`. Give a pool of your
 * own the same (`new pg.Pool({ ..., options: PgDriver.sessionOptions })`), or the adapter warns once when it starts
 * (`poolSettingsProblem`). Why each: behind a large backlog the planner's price for a claim passes `jit_above_cost`,
 * and the server compiles every claim with LLVM first (about 14 ms against 0.3 ms per claim at a million queued
 * jobs); and with the default `random_page_cost` (4, priced for a spinning disk) the planner reads whole tables
 * where the adapter's statements find their rows by key in a hot cache (a settlement of 256 jobs among 10,000 took
 * 92 ms with three scans of `jobs`, 15 ms by key).
 *
 * @since 0.9.0
 * @category constants
 */
export const sessionOptions: string = internal.sessionOptions

/**
 * What a pool passed in should change, from its sessions' `jit` and `random_page_cost`: the warning the driver logs
 * once when it starts, or `undefined` when both are as the adapter's own pools set them (`sessionOptions`), or
 * better (a lower `random_page_cost`).
 *
 * @since 0.9.0
 * @category constructors
 */
export const poolSettingsProblem = (settings: {
  readonly jit: string
  readonly randomPageCost: number
}): string | undefined => {
  const found = [
    ...(settings.jit === "on" ? ["jit = on"] : []),
    ...(settings.randomPageCost > 1.1 ? [`random_page_cost = ${settings.randomPageCost}`] : [])
  ]
  if (found.length === 0) return undefined
  return (
    `the pool passed to the Postgres adapter runs with ${found.join(" and ")}: claims and settlements may take ` +
    `several times as long as they need (see PgDriver.sessionOptions). Give the pool the adapter's session settings ` +
    `(new pg.Pool({ ..., options: "${internal.sessionOptions}" })), or let the adapter make its pool ` +
    "(connectionString, max)."
  )
}

/**
 * Asks a caller's pool once for its sessions' settings, and logs `poolSettingsProblem`'s warning when there is one.
 * Runs beside the layer's start, never before it: a server that cannot be reached, or a pool that is ended, makes it
 * say nothing.
 */
const checkCallersPool = (pool: NonNullable<PgDriverOptions["pool"]>) =>
  Effect.tryPromise(() =>
    pool.query<{ jit: string; random_page_cost: string }>(
      "SELECT current_setting('jit') AS jit, current_setting('random_page_cost') AS random_page_cost"
    )
  ).pipe(
    Effect.flatMap((result) => {
      const row = result.rows[0]
      const problem =
        row === undefined
          ? undefined
          : poolSettingsProblem({ jit: row.jit, randomPageCost: Number(row.random_page_cost) })
      return problem === undefined ? Effect.void : Effect.logWarning(problem)
    }),
    Effect.ignore
  )

/**
 * A node-postgres driver for the scope: the pool (when the driver created it) and every LISTEN connection end when
 * the scope closes. The pool the driver creates starts its sessions with `sessionOptions`; a pool passed in keeps its
 * own, and when they are not as good a warning (`poolSettingsProblem`) is logged once, beside the start.
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
