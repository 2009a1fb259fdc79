/**
 * The Store and Query on Postgres: a real server through node-postgres, or PGlite embedded in the process. Every
 * batch of a protocol verb is one conditional SQL statement over arrays of its items (see
 * `internal/statements.ts`), cut into consecutive statements only where the batch names one job (or one request
 * key) twice, so the row is the lock and the statement is the transaction; store time is the server's `now()`
 * unless a test passes `now`. `cycle` runs the settle, heartbeat, charge and claimNext statements in one
 * transaction, at its one `now()`.
 *
 * Layers, one per seam, composable with any other adapter's:
 * - `PgDriver.layer` / `layerPglite` / `layerConfig`: the shared connection (`PgDriver`).
 * - `layerFromDriver`: `PgStore`, `Store`, `Query` and the `Limiter` over the `PgDriver` in context (migrates on
 *   start). The Limiter keeps one row per resource in `limits` (migration 0008), each call one transaction that locks
 *   the rows it names in sorted order and applies `@slowcall/core/Limits` to them (`makeLimiter`).
 * - `PgTransport.layerFromDriver`: `PgTransport` and `Transport` over the same `PgDriver`.
 * - `layerOutboxRelay`: the outbox relay to the `Transport` in context, as a scoped background loop.
 * - `layer` / `layerPglite` / `layerConfig`: the convenience of the whole adapter at once, driver, Store, Query,
 *   Limiter and PgTransport, for an application that runs everything on Postgres.
 *
 * @since 0.1.0
 */
import type { PGlite } from "@electric-sql/pglite"
import { BatchStore } from "@slowcall/core/Batch"
import type { StoreError, TransportError } from "@slowcall/core/Errors"
import type { JobId } from "@slowcall/core/Job"
import { Limiter } from "@slowcall/core/Limiter"
import type { SubmitItem } from "@slowcall/core/Protocol"
import { Query } from "@slowcall/core/Query"
import { type Reply, Store, type SubmitOutcome } from "@slowcall/core/Store"
import { type Message, Transport } from "@slowcall/core/Transport"
import { Config, type ConfigError, Context, Effect, Layer, Option, Runtime, type Scope } from "effect"
import { makeBatchStore } from "./internal/batches.js"
import { type Driver, fromSqlClient, type PgDriverOptions, type SqlClient } from "./internal/driver.js"
import { toStoreError } from "./internal/errors.js"
import { makeLimiter as internalMakeLimiter } from "./internal/limiter.js"
import { makeQuery } from "./internal/query.js"
import type { Row } from "./internal/rows.js"
import { makeStatements, quoteSchema, type Statements } from "./internal/statements.js"
import { makeProtocolStore } from "./internal/store.js"
import * as PgDriver from "./PgDriver.js"
import { type MigrateResult, migrate } from "./PgMigrator.js"
import * as PgTransport from "./PgTransport.js"

export type { SqlClient } from "./internal/driver.js"

/**
 * What the relay publishes for one committed job, and how long the transport should hold it back (a job whose
 * `runAfter` lies in the future).
 *
 * @since 0.1.0
 * @category models
 */
export interface OutboxEntry {
  readonly queue: string
  readonly message: Message
  readonly delayMs: number
}

/**
 * A submit batch for `submitInTransaction`: the same items and store-time override as `Store.submit`.
 *
 * @since 0.2.0
 * @category models
 */
export interface SubmitBatch {
  readonly items: ReadonlyArray<SubmitItem>
  readonly now?: number | undefined
}

type StoreService = Store["Type"]
type QueryService = Query["Type"]

/**
 * The Postgres Store: every protocol Store verb and every Query read on one object (their names do not overlap),
 * plus what only a SQL backend can offer. Its generic verbs keep the whole `Store` and `Query` contracts; the extras
 * never weaken them.
 *
 * @since 0.1.0
 * @category services
 */
export interface PgStoreService extends StoreService, QueryService {
  /** The schema holding the tables. */
  readonly schema: string
  /**
   * `submit` inside the caller's open transaction (a node-postgres client or a PGlite transaction): the jobs
   * commit or roll back together with the caller's own writes. Same semantics as `submit`.
   */
  readonly submitInTransaction: (
    client: SqlClient,
    options: SubmitBatch
  ) => Effect.Effect<Reply<SubmitOutcome>, StoreError>
  /**
   * One outbox pass: committed queued jobs not yet handed to the external transport are published through
   * `publish`, then marked, inside one transaction that holds their rows with SKIP LOCKED. A crash after publish
   * and before commit publishes them again: at least once, never lost. Returns how many were published.
   */
  readonly relayOutbox: <E>(options: {
    readonly publish: (entry: OutboxEntry) => Effect.Effect<void, E>
    readonly limit?: number | undefined
  }) => Effect.Effect<number, StoreError | E>
  /**
   * Deletes finished jobs of `queue` created before `createdBefore` (store time, epoch ms), oldest first, at most
   * `limit` (default 1000) in one short statement: the row with its attempts and charges, as if it had
   * never been; its request key is free again, so a submit with that key makes a new job. `states` (default all
   * three finished ones) narrows it, e.g. to keep dead letters. Queued and running jobs are never touched, nor is
   * a row another transaction is writing (skipped, left for the next call). A batch keeps its own record and
   * counts. Returns the ids, oldest first; call again until fewer than `limit` come back. The same contract as
   * `RedisStore.purge`, and the same pick as the reference model's (`purgeTargets` of @slowcall/testing's
   * StoreModel, which the model-based property checks it against): oldest `createdAt` first across the states asked
   * for, insertion order breaking ties.
   */
  readonly purge: (options: {
    readonly queue: string
    readonly createdBefore: number
    readonly states?: ReadonlyArray<"succeeded" | "abandoned" | "failed"> | undefined
    readonly limit?: number | undefined
  }) => Effect.Effect<ReadonlyArray<JobId>, StoreError>
  /** Re-runs the migrations (a no-op on a current schema). */
  readonly migrate: Effect.Effect<MigrateResult, StoreError>
  /**
   * The batch verbs (`Batch.BatchStore`) over the same tables: the job verbs keep every batch in the same statement
   * as its items' transitions (migration 0011's trigger).
   */
  readonly batches: BatchStore["Type"]
}

/**
 * The Postgres Store tag. Layers of this module provide it together with the generic `Store` and `Query` (same
 * instance).
 *
 * @since 0.1.0
 * @category services
 */
export class PgStore extends Context.Tag("@slowcall/adapter-postgres/PgStore")<PgStore, PgStoreService>() {}

class RelayFailure {
  constructor(readonly error: unknown) {}
}

const relayOn =
  (driver: Driver, st: Statements): PgStoreService["relayOutbox"] =>
  <E>(relay: {
    readonly publish: (entry: OutboxEntry) => Effect.Effect<void, E>
    readonly limit?: number | undefined
  }) =>
    Effect.gen(function* () {
      const runtime = yield* Effect.runtime<never>()
      return yield* Effect.tryPromise({
        try: () =>
          driver.transaction(async (tx) => {
            const rows = await tx.query<Row>(st.outboxPick, [relay.limit ?? 100])
            for (const row of rows) {
              const entry: OutboxEntry = {
                queue: String(row.queue),
                delayMs: Math.max(0, Math.ceil(Number(row.delay_ms))),
                message: {
                  jobId: String(row.id) as JobId,
                  type: String(row.type),
                  version: Number(row.version),
                  priority: Number(row.priority),
                  tenant: row.tenant == null ? null : String(row.tenant),
                  traceId: row.trace_id == null ? null : String(row.trace_id),
                  attempts: Number(row.attempts)
                }
              }
              const outcome = await Runtime.runPromise(runtime)(Effect.either(relay.publish(entry)))
              if (outcome._tag === "Left") throw new RelayFailure(outcome.left)
            }
            if (rows.length > 0) await tx.query(st.outboxMark, [rows.map((row) => row.id)])
            return rows.length
          }),
        catch: (error): StoreError | E =>
          error instanceof RelayFailure ? (error.error as E) : toStoreError("relayOutbox", error)
      })
    })

/**
 * A PgStore over a driver whose schema is already migrated.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (driver: Driver, options: { readonly schema?: string | undefined } = {}): PgStoreService => {
  const schema = options.schema ?? "slowcall"
  const st = makeStatements(schema)
  const store = makeProtocolStore(driver, st, driver.transaction)
  const query = makeQuery(driver, st)
  return {
    ...store,
    ...query,
    schema,
    submitInTransaction: (client, batch) => makeProtocolStore(fromSqlClient(client), st).submit(batch),
    relayOutbox: relayOn(driver, st),
    purge: (purge) =>
      Effect.tryPromise({
        try: () =>
          driver.query<{ readonly id: string }>(st.purge, [
            purge.queue,
            purge.createdBefore,
            purge.states ?? ["succeeded", "abandoned", "failed"],
            purge.limit ?? 1_000
          ]),
        catch: (error) => toStoreError("purge", error)
      }).pipe(Effect.map((rows) => rows.map((row) => row.id as JobId))),
    migrate: migrate(driver, { schema }),
    batches: makeBatchStore(driver, quoteSchema(schema), st)
  }
}

/**
 * The Limiter on Postgres over a driver whose schema is already migrated (`schema`, default `slowcall`): one row per
 * resource, each call one transaction that locks the rows it names in sorted order (no deadlocks between calls),
 * applies the rules of `@slowcall/core/Limits` to their states and writes them back. Store time is the server's
 * `now()`.
 *
 * @since 0.4.0
 * @category constructors
 */
export const makeLimiter = (driver: Driver, options: { readonly schema?: string | undefined } = {}): Limiter["Type"] =>
  internalMakeLimiter(driver, options.schema ?? "slowcall")

/**
 * Options of the Store layers. `schema` (default `slowcall`) names the schema that holds the tables; `migrate`
 * (default true) brings it up to date when the layer is built.
 *
 * @since 0.2.0
 * @category models
 */
export interface StoreLayerOptions {
  readonly schema?: string | undefined
  readonly migrate?: boolean | undefined
}

/**
 * Options of the convenience layers: the Store's, plus PgTransport's polling fallback `pollMs` (default 500 ms)
 * for when no notification arrives.
 *
 * @since 0.1.0
 * @category models
 */
export interface LayerOptions extends StoreLayerOptions {
  readonly pollMs?: number | undefined
}

/**
 * `PgStore`, `Store` and `Query` (one instance) and the `Limiter` (`makeLimiter`) over the `PgDriver` in context, no
 * transport: compose it with `PgTransport.layerFromDriver` on the same driver, or with any other package's
 * Transport.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerFromDriver = (
  options: StoreLayerOptions = {}
): Layer.Layer<PgStore | Store | Query | BatchStore | Limiter, StoreError, PgDriver.PgDriver> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const driver = yield* PgDriver.PgDriver
      if (options.migrate !== false) yield* migrate(driver, { schema: options.schema })
      const store = make(driver, { schema: options.schema })
      return Context.make(PgStore, store).pipe(
        Context.add(Store, store),
        Context.add(Query, store),
        Context.add(BatchStore, store.batches),
        Context.add(Limiter, makeLimiter(driver, { schema: options.schema }))
      )
    })
  )

/** Everything the convenience layers provide. */
type Everything =
  | PgDriver.PgDriver
  | PgStore
  | Store
  | Query
  | BatchStore
  | Limiter
  | PgTransport.PgTransport
  | Transport

/** Store, Query and PgTransport over one driver layer, the driver kept in the output. */
const everything = <E>(driver: Layer.Layer<PgDriver.PgDriver, E>, options: LayerOptions) =>
  Layer.mergeAll(
    layerFromDriver(options),
    PgTransport.layerFromDriver({ schema: options.schema, pollMs: options.pollMs })
  ).pipe(Layer.provideMerge(driver))

/**
 * The whole adapter on a real Postgres server: the node-postgres `PgDriver`, `PgStore`/`Store`/`Query`, the
 * `Limiter` and `PgTransport`/`Transport`, all on one pool. Give a `connectionString` (or an existing `pool`, which stays the
 * caller's to end); `queryTimeoutMs` (default 30 s) bounds every statement so a dead network fails instead of
 * hanging.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: LayerOptions & PgDriverOptions): Layer.Layer<Everything, StoreError> =>
  everything(PgDriver.layer(options), options)

/**
 * `layer` configured from `DATABASE_URL` (and `SLOWCALL_SCHEMA`, default `slowcall`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options: Omit<LayerOptions & PgDriverOptions, "connectionString" | "schema"> = {}
): Layer.Layer<Everything, StoreError | ConfigError.ConfigError> =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const connectionString = yield* Config.string("DATABASE_URL")
      const schema = yield* Config.option(Config.string("SLOWCALL_SCHEMA"))
      return layer({ ...options, connectionString, schema: Option.getOrElse(schema, () => "slowcall") })
    })
  )

/**
 * The whole adapter on embedded Postgres (PGlite) in this process: zero setup. With `dataDir` the database
 * persists on disk (a fresh directory takes a few seconds to initialise, reopening is fast); without it the
 * database lives in memory. Pass `db` to share a PGlite instance the application already uses (it stays the
 * caller's to close), e.g. to enqueue jobs inside its own transactions.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPglite = (
  options: LayerOptions & { readonly dataDir?: string | undefined; readonly db?: PGlite | undefined } = {}
): Layer.Layer<Everything, StoreError | PgDriver.DataDirLocked> => everything(PgDriver.layerPglite(options), options)

/**
 * Acquires a node-postgres driver for the scope (the same as `PgDriver.acquire`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const acquirePgDriver: (options: PgDriverOptions) => Effect.Effect<Driver, never, Scope.Scope> = PgDriver.acquire

/**
 * Acquires a PGlite driver for the scope (the same as `PgDriver.acquirePglite`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const acquirePgliteDriver: (
  options: PgDriver.PgliteDriverOptions
) => Effect.Effect<Driver, StoreError | PgDriver.DataDirLocked, Scope.Scope> = PgDriver.acquirePglite

/**
 * `submit` inside the caller's open transaction, for a schema given explicitly: usable without any layer, e.g.
 * in code that already holds a node-postgres client inside BEGIN. The jobs are visible to workers only once that
 * transaction commits, and disappear with it on rollback.
 *
 * @since 0.1.0
 * @category combinators
 */
export const submitInTransaction = (
  client: SqlClient,
  options: SubmitBatch & { readonly schema?: string | undefined }
): Effect.Effect<Reply<SubmitOutcome>, StoreError> =>
  makeProtocolStore(fromSqlClient(client), makeStatements(options.schema ?? "slowcall")).submit(options)

/**
 * Options of the outbox relay: one pass every `intervalMs` (default 1 s), at most `limit` jobs a pass (default 100).
 *
 * @since 0.2.0
 * @category models
 */
export interface OutboxRelayOptions {
  readonly intervalMs?: number | undefined
  readonly limit?: number | undefined
}

/**
 * The outbox relay as a loop to `transport`, until interrupted. Failures of a pass are logged and retried on the
 * next one (at least once); the sweeper's `stale` list remains the safety net for anything a transport lost after
 * accepting it.
 *
 * @since 0.1.0
 * @category combinators
 */
export const runOutboxRelay = (
  options: OutboxRelayOptions & { readonly transport: Transport["Type"] }
): Effect.Effect<never, never, PgStore> =>
  Effect.gen(function* () {
    const store = yield* PgStore
    const pass = store.relayOutbox({
      limit: options.limit,
      publish: (entry: OutboxEntry) =>
        options.transport.publish({ queue: entry.queue, items: [{ message: entry.message, delayMs: entry.delayMs }] })
    })
    return yield* pass.pipe(
      Effect.catchAll((error: StoreError | TransportError) => Effect.logWarning("outbox relay pass failed", error)),
      Effect.zipRight(Effect.sleep(options.intervalMs ?? 1000)),
      Effect.forever
    )
  })

/**
 * The outbox relay as a layer: `runOutboxRelay` to the `Transport` in context (an external one, such as SQS),
 * running in the background for the layer's lifetime and interrupted when its scope closes.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerOutboxRelay = (options: OutboxRelayOptions = {}): Layer.Layer<never, never, PgStore | Transport> =>
  Layer.scopedDiscard(
    Effect.flatMap(Transport, (transport) => Effect.forkScoped(runOutboxRelay({ ...options, transport })))
  )
