/**
 * Which Store, Query and Transport a queue runs on, picked from a URL: `postgres://` or `postgresql://` (a
 * Postgres server), `pglite:memory` or `pglite:/path` (embedded Postgres in this process, in memory or on disk),
 * `redis://` or `rediss://` (a Redis server), `memory:` (in this process, nothing kept). With `sqs`, the SQS
 * Transport carries the messages and the store keeps the truth (on Postgres the outbox relay publishes every
 * committed job). Each is the adapter's own layer; migrations run as the adapter runs them when `migrate` is not
 * false.
 *
 * The adapters are optional peer dependencies, imported when the layer is built: `@slowcall/adapter-postgres` for
 * `postgres://` and `pglite:`, `@slowcall/adapter-redis` for `redis://`, `@slowcall/adapter-sqs` for `sqs`. One
 * that is not installed fails the layer with `AdapterNotInstalled` naming the package; `memory:` needs none.
 *
 * @since 0.1.0
 */
import { mkdirSync } from "node:fs"
import * as Limiter from "@slowcall/core/Limiter"
import type * as Query from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import { Effect, Layer } from "effect"
import { ConfigError } from "./Errors.js"
import * as Adapters from "./internal/adapters.js"

/**
 * Where the data lives and how messages travel. `schema` is the Postgres schema or the Redis key prefix (default
 * `slowcall`); `migrate` (default true) brings a Postgres schema up to date at open. `sqs.client` is the SDK's
 * client configuration (region, credentials, `endpoint` for an emulator).
 *
 * @since 0.1.0
 * @category models
 */
export interface BackendOptions {
  readonly url: string
  readonly queue: string
  readonly schema?: string | undefined
  readonly migrate?: boolean | undefined
  readonly sqs?: { readonly queueUrl: string; readonly client?: Record<string, unknown> | undefined } | undefined
}

/**
 * The kind of store a URL names, or `ConfigError` for anything else.
 *
 * @since 0.1.0
 * @category models
 */
export type Kind =
  | { readonly _tag: "Postgres"; readonly url: string }
  | { readonly _tag: "Pglite"; readonly dataDir: string | undefined }
  | { readonly _tag: "Redis"; readonly url: string }
  | { readonly _tag: "Memory" }

/**
 * Parse a queue URL. Throws `ConfigError` naming the schemes it knows when the URL names none of them.
 *
 * @since 0.1.0
 * @category constructors
 */
export const parse = (url: string): Kind => {
  if (/^postgres(ql)?:\/\//i.test(url)) return { _tag: "Postgres", url }
  if (/^rediss?:\/\//i.test(url)) return { _tag: "Redis", url }
  if (/^memory:/i.test(url)) return { _tag: "Memory" }
  const pglite = /^pglite:(.*)$/i.exec(url)
  if (pglite !== null) {
    const rest = (pglite[1] ?? "").replace(/^\/\/(?=\/)/, "")
    if (rest === "" || rest === "memory" || rest === "//memory") return { _tag: "Pglite", dataDir: undefined }
    return { _tag: "Pglite", dataDir: rest }
  }
  throw new ConfigError(
    `unknown queue URL ${JSON.stringify(url.replace(/\/\/[^@/]*@/, "//***@"))}: use postgres://, postgresql://, pglite:memory, pglite:/path, redis://, rediss:// or memory:`
  )
}

/** What every backend provides: the Store, its Query, a Transport and the fleet Limiter that keeps provider limits. */
type Seams = Layer.Layer<Store.Store | Query.Query | Transport.Transport | Limiter.Limiter, unknown>
type PgAdapter = typeof import("@slowcall/adapter-postgres")
type RedisAdapter = typeof import("@slowcall/adapter-redis")

/** `redis://`, `pglite:`, ...: what needed the adapter, for the error that names a missing one. */
const schemeOf = (url: string): string => /^[a-z][a-z0-9+.-]*:(\/\/)?/i.exec(url)?.[0] ?? url

/**
 * The Store, Query and Transport the options name. Throws `ConfigError` for an unknown URL or for SQS beside the
 * memory store (whose jobs no other process could see). The layer imports the adapters it needs when it is built and
 * fails with `AdapterNotInstalled` when one of them is not installed.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: BackendOptions): Seams => {
  const kind = parse(options.url)
  if (kind._tag === "Memory") {
    if (options.sqs !== undefined) throw new ConfigError("sqs needs a store other processes can read: not memory:")
    return Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory)
  }
  const use = `${schemeOf(options.url)} URLs`
  return Layer.unwrapEffect(
    kind._tag === "Redis"
      ? Effect.zipWith(Adapters.load(Adapters.redis, use), sqsTransport(options), (redis, sqs) =>
          onRedis(redis, kind.url, options, sqs)
        )
      : Effect.zipWith(Adapters.load(Adapters.postgres, use), sqsTransport(options), (pg, sqs) =>
          onPostgres(pg, kind, options, sqs)
        )
  )
}

/** The SQS Transport when `sqs` is set (its adapter imported first), else none. */
const sqsTransport = (options: BackendOptions) => {
  const sqs = options.sqs
  if (sqs === undefined) return Effect.succeed(undefined)
  return Effect.map(Adapters.load(Adapters.sqs, "the sqs option"), ({ SqsTransport }) =>
    SqsTransport.layer({
      queues: { [options.queue]: sqs.queueUrl },
      ...(sqs.client === undefined ? {} : { client: sqs.client })
    })
  )
}

type SqsLayer = Effect.Effect.Success<ReturnType<typeof sqsTransport>>

/** The Redis Store and its Transport on one connection, or the Store beside SQS. */
const onRedis = (redis: RedisAdapter, url: string, options: BackendOptions, sqs: SqsLayer): Seams =>
  sqs === undefined
    ? redis.RedisStore.layer({ url, prefix: options.schema })
    : Layer.merge(redis.RedisStore.layerFromConnection(), sqs).pipe(
        Layer.provideMerge(redis.RedisConnection.layer({ url, prefix: options.schema }))
      )

/**
 * The Postgres Store (migrated first, so an unreachable server fails the open) and its Transport on one driver: a
 * pool on the server, or embedded PGlite (its directory made first). Beside SQS, the outbox relay publishes every
 * committed job.
 */
const onPostgres = (
  pg: PgAdapter,
  kind: Extract<Kind, { readonly _tag: "Postgres" | "Pglite" }>,
  options: BackendOptions,
  sqs: SqsLayer
): Seams => {
  const driver =
    kind._tag === "Postgres"
      ? pg.PgDriver.layer({ connectionString: kind.url })
      : Layer.suspend(() => {
          if (kind.dataDir !== undefined) mkdirSync(kind.dataDir, { recursive: true })
          return pg.PgDriver.layerPglite({ dataDir: kind.dataDir })
        })
  const store = pg.PgStore.layerFromDriver({ schema: options.schema, migrate: options.migrate })
  if (sqs === undefined) {
    return pg.PgTransport.layerFromDriver({ schema: options.schema }).pipe(
      Layer.provideMerge(store),
      Layer.provideMerge(driver)
    )
  }
  const seams = Layer.merge(store, sqs)
  return Layer.merge(seams, pg.PgStore.layerOutboxRelay().pipe(Layer.provide(seams))).pipe(Layer.provideMerge(driver))
}
