/**
 * The Store and Query on Redis, a single server or a Redis Cluster. Every state change of a batch is one Lua script
 * per queue (`src/lua/`, each with a header: keys, arguments, reply, why it is atomic), loaded once and run by SHA;
 * every key of a queue shares the `{queue}` hash tag, so each script touches one slot. The scripts are atomic
 * versions of `@slowcall/core/Protocol`, checked against it by the model-based property. Store time is the
 * server's `TIME` unless a test passes `now`.
 *
 * Reads are native: the write scripts keep secondary indexes (sorted sets by state, tenant, run-after, lease end,
 * deadline, last touch and failure time; sums per dead-letter group and per error class), and the Query's scripts
 * read those, never every key.
 *
 * Retention: a job that ends succeeded or abandoned keeps its record, attempts and charges (the dashboard and the
 * spend figures read them), while its input and result expire `dataRetentionMs` later (default 7 days; null keeps
 * them). Dead letters keep everything until they are replayed or purged.
 *
 * Batches (`BatchStore`) live in the slot of their items' queue: every item and callback of a batch is of the queue
 * named when it is opened (`BatchSpec.queue`), so each job script that writes an item writes its batch in the same
 * script (counts, cost, finished once, callbacks once), and a claim refuses the items of a cancelled or spent batch.
 *
 * The Limiter (`makeLimiter`) lives beside them: one script per verb over keys that all share the `{%limits}` hash
 * tag, so any call is one script in one slot (see `lua/includes/limits.lua`), time from the server's `TIME`.
 *
 * Layers, one per seam:
 * - `RedisConnection.layer` / `layerFromClient`: the shared connection.
 * - `layerFromConnection`: `RedisStore`, `Store`, `Query`, `BatchStore` and the `Limiter` over the connection in context; warns at
 *   start when a server keeps nothing on disk or may evict keys.
 * - `RedisTransport.layerFromConnection`: `RedisTransport` and `Transport` over the same connection.
 * - `layer`: the whole adapter at once (connection, Store, Query, Limiter, Transport).
 *
 * @since 0.1.0
 */
import { BatchStore } from "@slowcall/core/Batch"
import { JobNotFound, type StoreError } from "@slowcall/core/Errors"
import { isTerminal, type Job, type JobId } from "@slowcall/core/Job"
import { Limiter } from "@slowcall/core/Limiter"
import { Query } from "@slowcall/core/Query"
import { Store } from "@slowcall/core/Store"
import type { Transport } from "@slowcall/core/Transport"
import { Config, type ConfigError, Context, Effect, Layer, Option, Stream } from "effect"
import { makeBatchStore } from "./internal/batches.js"
import * as internalContext from "./internal/context.js"
import { cue } from "./internal/events.js"
import { makeLimiter as internalMakeLimiter } from "./internal/limiter.js"
import { makeQuery } from "./internal/query.js"
import * as Server from "./internal/server.js"
import { makeStore } from "./internal/store.js"
import * as RedisConnection from "./RedisConnection.js"
import * as RedisTransport from "./RedisTransport.js"

type StoreService = Store["Type"]
type QueryService = Query["Type"]

/**
 * What one Redis server keeps: persistence (`appendonly`, `appendfsync`, the RDB `save` rule) and
 * `maxmemory-policy`, each null when the server would not say.
 *
 * @since 0.1.0
 * @category models
 */
export type ServerSettings = Server.NodeSettings

/**
 * The settings of every server (every master of a Cluster) and the warnings they call for: a server that keeps
 * nothing on disk, or that may evict keys, is no Store for jobs that cost money. `durability` says, per server with
 * an append-only file, what a crash of the machine still loses (`appendfsync everysec`: up to a second of
 * acknowledged writes; `always`: nothing).
 *
 * @since 0.1.0
 * @category models
 */
export type ServerCheck = Server.ServerCheck

/**
 * The Redis Store: every protocol Store verb and every Query read on one object, plus what only this adapter
 * offers. The generic verbs keep the whole `Store` and `Query` contracts.
 *
 * @since 0.1.0
 * @category services
 */
export interface RedisStoreService extends StoreService, QueryService {
  /** The key prefix. */
  readonly prefix: string
  /** Reads the servers' persistence and eviction settings (what `slowcall migrate` reports). */
  readonly checkServer: Effect.Effect<ServerCheck, StoreError>
  /** The queue of a job, or undefined when there is no such job. */
  readonly queueOf: (jobId: JobId) => Effect.Effect<string | undefined, StoreError>
  /**
   * Deletes finished jobs of `queue` created before `createdBefore` (store time, epoch ms), oldest first, at most
   * `limit` (default 1000): record, input and result, attempts, charges, routes and index entries, as if they had
   * never been; their request keys are free again. Queued and running jobs are never touched; a batch keeps its own
   * record and counts. `states` (default all three finished ones) narrows it, e.g. to keep dead letters. Picks as
   * the reference model does (`purgeTargets` of @slowcall/testing's StoreModel, which the model-based property
   * checks it against): oldest `createdAt` first across the states asked for, insertion order breaking ties.
   * Returns the ids in that order. The same contract as `PgStore.purge`.
   */
  readonly purge: (options: {
    readonly queue: string
    readonly createdBefore: number
    readonly states?: ReadonlyArray<"succeeded" | "abandoned" | "failed"> | undefined
    readonly limit?: number | undefined
  }) => Effect.Effect<ReadonlyArray<JobId>, StoreError>
  /**
   * The job now, then every change (by `updatedAt`), ending after the first terminal state it emits: the record is
   * read again whenever a write event names the job (pub/sub), and at least every `intervalMs` (default 1 s) in
   * case an event was missed. The record is the truth; an event is only the cue to read it.
   */
  readonly watch: (
    jobId: JobId,
    options?: { readonly intervalMs?: number | undefined; readonly tenant?: string | undefined }
  ) => Stream.Stream<Job, JobNotFound | StoreError>
}

/**
 * The Redis Store tag. Its layers provide it together with the generic `Store` and `Query` (same instance).
 *
 * @since 0.1.0
 * @category services
 */
export class RedisStore extends Context.Tag("@slowcall/adapter-redis/RedisStore")<RedisStore, RedisStoreService>() {}

/**
 * Options of the Store. `dataRetentionMs` (default 7 days, null: forever) is how long a succeeded or abandoned
 * job's input and result outlive it, measured on the Redis server's clock from the write that finished the job.
 * `checkServer` (default true) reads the servers' settings when the layer starts and logs a warning for each
 * setting that can lose jobs.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreOptions {
  readonly dataRetentionMs?: number | null | undefined
  readonly checkServer?: boolean | undefined
}

/**
 * The default retention of finished jobs' input and result: 7 days.
 *
 * @since 0.1.0
 * @category models
 */
export const DEFAULT_DATA_RETENTION_MS: number = internalContext.DEFAULT_DATA_RETENTION_MS

/**
 * A RedisStore over a connection.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  connection: RedisConnection.RedisConnectionService,
  options: StoreOptions = {}
): RedisStoreService => {
  const ctx = internalContext.contextOf(connection, options.dataRetentionMs)
  const query = makeQuery(ctx)
  const watch: RedisStoreService["watch"] = (jobId, watchOptions = {}) =>
    Stream.unwrapScoped(
      Effect.gen(function* () {
        const routes = yield* ctx.routes.resolve("watch", [jobId])
        const queue = routes.get(jobId)
        if (queue === undefined) return yield* new JobNotFound({ jobId })
        let signal = cue()
        const unlisten = yield* ctx.events.listen(queue, (event) => {
          if (!event.jobIds.includes(jobId)) return
          const fired = signal
          signal = cue()
          fired.fire()
        })
        yield* Effect.addFinalizer(() => Effect.sync(unlisten))
        const read = query.get({ jobId, tenant: watchOptions.tenant })
        const first = yield* read
        let last: Job = first
        const interval = watchOptions.intervalMs ?? 1_000
        const next: Effect.Effect<Job, Option.Option<JobNotFound | StoreError>> = Effect.gen(function* () {
          if (isTerminal(last.state)) return yield* Effect.fail(Option.none())
          while (true) {
            const waiting = signal.promise
            const job = yield* Effect.mapError(read, Option.some)
            if (job.updatedAt !== last.updatedAt) {
              last = job
              return job
            }
            yield* Effect.promise(() => waiting).pipe(Effect.timeout(interval), Effect.ignore)
          }
        })
        return Stream.concat(Stream.succeed(first), Stream.repeatEffectOption(next))
      })
    )
  const purge: RedisStoreService["purge"] = (purgeOptions) =>
    Effect.gen(function* () {
      const states = purgeOptions.states ?? ["succeeded", "abandoned", "failed"]
      const raw = yield* internalContext.script(
        ctx,
        "purge",
        "purge",
        purgeOptions.queue,
        [String(purgeOptions.createdBefore), String(purgeOptions.limit ?? 1_000), ...states],
        true
      )
      const ids = raw as ReadonlyArray<JobId>
      yield* ctx.routes.release(ids.map((id) => ({ id, queue: purgeOptions.queue })))
      return ids
    })
  return {
    ...makeStore(ctx),
    ...query,
    purge,
    prefix: connection.prefix,
    checkServer: Server.check(connection.client),
    queueOf: (jobId) => Effect.map(ctx.routes.resolve("queueOf", [jobId]), (routes) => routes.get(jobId)),
    watch
  }
}

/**
 * The Limiter on Redis over a connection: one script per verb (`lua/limitApply.lua`, ...), every key under the
 * `{%limits}` hash tag so a call over any resources runs in one slot, store time from the server's `TIME`. The
 * scripts are a line-for-line version of the rules of `@slowcall/core/Limits`.
 *
 * @since 0.4.0
 * @category constructors
 */
export const makeLimiter = (connection: RedisConnection.RedisConnectionService): Limiter["Type"] =>
  internalMakeLimiter(internalContext.contextOf(connection, undefined))

/**
 * `RedisStore`, `Store` and `Query` (one instance), the `BatchStore` over the same records and the `Limiter`
 * (`makeLimiter`) over the `RedisConnection` in context. Logs a warning at start for every server setting that can lose jobs (see `StoreOptions.checkServer`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromConnection = (
  options: StoreOptions = {}
): Layer.Layer<RedisStore | Store | Query | BatchStore | Limiter, never, RedisConnection.RedisConnection> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const connection = yield* RedisConnection.RedisConnection
      const store = make(connection, options)
      if (options.checkServer !== false) {
        yield* store.checkServer.pipe(
          Effect.flatMap((result) => Effect.forEach(result.warnings, (warning) => Effect.logWarning(warning))),
          Effect.catchAll((error) => Effect.logWarning("could not read the Redis server's settings", error))
        )
      }
      return Context.make(RedisStore, store).pipe(
        Context.add(Store, store),
        Context.add(Query, store),
        Context.add(BatchStore, makeBatchStore(internalContext.contextOf(connection, options.dataRetentionMs))),
        Context.add(Limiter, makeLimiter(connection))
      )
    })
  )

/**
 * Options of the convenience layers: the connection's, the Store's and the Transport's.
 *
 * @since 0.1.0
 * @category models
 */
export interface LayerOptions
  extends RedisConnection.ConnectionOptions,
    StoreOptions,
    RedisTransport.TransportOptions {}

/** Everything the convenience layers provide. */
type Everything =
  | RedisConnection.RedisConnection
  | RedisStore
  | Store
  | Query
  | BatchStore
  | Limiter
  | RedisTransport.RedisTransport
  | Transport

/**
 * The whole adapter on one connection: `RedisConnection`, `RedisStore`/`Store`/`Query`, the `Limiter` and
 * `RedisTransport`/`Transport`. Give a `url` (default `redis://127.0.0.1:6379`), Cluster `nodes`, or a `client` of
 * your own.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: LayerOptions = {}): Layer.Layer<Everything, StoreError> =>
  Layer.mergeAll(layerFromConnection(options), RedisTransport.layerFromConnection(options)).pipe(
    Layer.provideMerge(RedisConnection.layer(options))
  )

/**
 * `layer` configured from `REDIS_URL` (and `SLOWCALL_REDIS_PREFIX`, default `slowcall`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options: Omit<LayerOptions, "url" | "prefix" | "nodes" | "client"> = {}
): Layer.Layer<Everything, StoreError | ConfigError.ConfigError> =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const url = yield* Config.string("REDIS_URL")
      const prefix = yield* Config.withDefault(Config.string("SLOWCALL_REDIS_PREFIX"), "slowcall")
      return layer({ ...options, url, prefix })
    })
  )
