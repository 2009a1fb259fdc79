/**
 * Which Store, Query and Transport a queue runs on, picked from a URL: `postgres://` or `postgresql://` (a
 * Postgres server), `pglite:memory` or `pglite:/path` (embedded Postgres in this process, in memory or on disk),
 * `redis://` or `rediss://` (a Redis server), `memory:` (in this process, nothing kept). With `sqs`, the SQS
 * Transport carries the messages and the store keeps the truth (on Postgres the outbox relay publishes every
 * committed job). Each is the adapter's own layer; migrations run as the adapter runs them when `migrate` is not
 * false.
 *
 * @since 0.1.0
 */
import { mkdirSync } from "node:fs"
import * as PgDriver from "@slowcall/adapter-postgres/PgDriver"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as PgTransport from "@slowcall/adapter-postgres/PgTransport"
import * as RedisConnection from "@slowcall/adapter-redis/RedisConnection"
import * as RedisStore from "@slowcall/adapter-redis/RedisStore"
import * as SqsTransport from "@slowcall/adapter-sqs/SqsTransport"
import type * as Query from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import { Layer } from "effect"
import { ConfigError } from "./Errors.js"

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

/**
 * The Store, Query and Transport the options name. Throws `ConfigError` for an unknown URL or for SQS beside the
 * memory store (whose jobs no other process could see).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: BackendOptions
): Layer.Layer<Store.Store | Query.Query | Transport.Transport, unknown> => {
  const kind = parse(options.url)
  const schema = options.schema
  const sqs = options.sqs
  if (sqs !== undefined) {
    if (kind._tag === "Memory") throw new ConfigError("sqs needs a store other processes can read: not memory:")
    return withSqs(kind, options, sqs)
  }
  switch (kind._tag) {
    case "Memory":
      return Layer.merge(Store.layerMemory, Transport.layerMemory())
    case "Redis":
      return RedisStore.layer({ url: kind.url, prefix: schema })
    case "Postgres":
    case "Pglite":
      return onPostgres(driverOf(kind), options)
  }
}

/** The driver a Postgres URL names: a pool on the server, or embedded PGlite (its directory made first). */
const driverOf = (kind: Extract<Kind, { readonly _tag: "Postgres" | "Pglite" }>) =>
  kind._tag === "Postgres"
    ? PgDriver.layer({ connectionString: kind.url })
    : Layer.suspend(() => {
        if (kind.dataDir !== undefined) mkdirSync(kind.dataDir, { recursive: true })
        return PgDriver.layerPglite({ dataDir: kind.dataDir })
      })

/** The adapter's Store (migrated first, so an unreachable server fails the open) and its Transport on one driver. */
const onPostgres = <E>(
  driver: Layer.Layer<PgDriver.PgDriver, E>,
  options: BackendOptions
): Layer.Layer<Store.Store | Query.Query | Transport.Transport, unknown> =>
  PgTransport.layerFromDriver({ schema: options.schema }).pipe(
    Layer.provideMerge(PgStore.layerFromDriver({ schema: options.schema, migrate: options.migrate })),
    Layer.provideMerge(driver)
  )

const withSqs = (
  kind: Exclude<Kind, { readonly _tag: "Memory" }>,
  options: BackendOptions,
  sqs: NonNullable<BackendOptions["sqs"]>
): Layer.Layer<Store.Store | Query.Query | Transport.Transport, unknown> => {
  const transport = SqsTransport.layer({
    queues: { [options.queue]: sqs.queueUrl },
    ...(sqs.client === undefined ? {} : { client: sqs.client })
  })
  if (kind._tag === "Redis") {
    return Layer.merge(RedisStore.layerFromConnection(), transport).pipe(
      Layer.provideMerge(RedisConnection.layer({ url: kind.url, prefix: options.schema }))
    )
  }
  const driver = driverOf(kind)
  const seams = Layer.merge(PgStore.layerFromDriver({ schema: options.schema, migrate: options.migrate }), transport)
  return Layer.merge(seams, PgStore.layerOutboxRelay().pipe(Layer.provide(seams))).pipe(Layer.provideMerge(driver))
}
