/**
 * Which Store, Query and Transport a command runs on: Redis when a Redis URL is given, a Postgres server when a
 * database URL is given, embedded PGlite under a data directory otherwise, or the in-memory store for throwaway runs.
 * With an SQS queue URL the Transport is SQS instead of the Store's own (the Store stays the truth; on Postgres the
 * outbox relay publishes every committed job, transactional enqueues included).
 *
 * Each adapter is imported when its layer is built, not with this module: a server on Redis never loads PGlite or
 * node-postgres, one on PGlite never loads ioredis or the AWS SDK.
 *
 * @since 0.1.0
 */
import { mkdirSync } from "node:fs"
import type { StoreError } from "@slowcall/core/Errors"
import type { JobId } from "@slowcall/core/Job"
import * as Limiter from "@slowcall/core/Limiter"
import type * as Query from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Context, Effect, Layer } from "effect"

/**
 * The store's purge of finished jobs (`PgStore.purge` or `RedisStore.purge`: a queue's finished jobs created before
 * `createdBefore`, store time, oldest first, at most `limit`; returns their ids), or undefined on the in-memory
 * store, which keeps nothing past the process anyway. What `serve --retention` runs.
 *
 * @since 0.7.0
 * @category services
 */
export class Purge extends Context.Tag("@slowcall/cli/Backend/Purge")<
  Purge,
  {
    readonly purge:
      | ((options: {
          readonly queue: string
          readonly createdBefore: number
          readonly limit: number
        }) => Effect.Effect<ReadonlyArray<JobId>, StoreError>)
      | undefined
  }
>() {}

/** `Purge` from the adapter's own tag in context. */
const purgeFrom = <I, S extends { readonly purge: NonNullable<Purge["Type"]["purge"]> }>(tag: Context.Tag<I, S>) =>
  Layer.effect(
    Purge,
    Effect.map(tag, (store) => ({ purge: store.purge }))
  )

/** A layer made from a module imported when the layer is built. */
const lazily = <M, A, E, R>(load: () => Promise<M>, make: (module: M) => Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  Layer.unwrapEffect(Effect.map(Effect.promise(load), make))

/**
 * Where the data lives. `memory` wins over everything, then `redisUrl`, then `databaseUrl`, then `dataDir`.
 *
 * @since 0.1.0
 * @category models
 */
export interface BackendOptions {
  readonly databaseUrl?: string | undefined
  readonly redisUrl?: string | undefined
  readonly dataDir: string
  readonly memory?: boolean | undefined
  readonly schema?: string | undefined
  /**
   * The SQS queue that carries `queue`'s messages (the SDK's region and credentials, `endpoint` for an emulator):
   * the Transport is SQS, the Store the one the other options name. Not with `memory`.
   */
  readonly sqs?:
    | { readonly queueUrl: string; readonly queue: string; readonly endpoint?: string | undefined }
    | undefined
}

/**
 * A human description of the backend, for startup messages.
 *
 * @since 0.1.0
 * @category combinators
 */
export const describe = (options: BackendOptions): string =>
  options.sqs !== undefined && !options.memory
    ? `${describeStore(options)}, messages on SQS ${options.sqs.queueUrl}`
    : describeStore(options)

const describeStore = (options: BackendOptions): string =>
  options.memory
    ? "in-memory store (nothing is kept)"
    : options.redisUrl
      ? `Redis at ${redactUrl(options.redisUrl)}`
      : options.databaseUrl
        ? `Postgres at ${redactUrl(options.databaseUrl)}`
        : `embedded PGlite in ${options.dataDir}`

const redactUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password) parsed.password = "***"
    return parsed.toString()
  } catch {
    return "the configured database"
  }
}

/**
 * The protocol Store, its Query, a Transport, the Limiter, the ScheduleStore and the store's `Purge` over the same data
 * for the options; migrations run when it is built. On Postgres (a server or PGlite) this is the adapter's whole-adapter layer: Store, Query and the
 * table-backed transport on one connection; on Redis the same on one client (the `schema` is the key prefix), with
 * a warning at start when the server keeps nothing on disk or may evict keys.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: BackendOptions
): Layer.Layer<
  Store.Store | Query.Query | Transport.Transport | Limiter.Limiter | ScheduleStore.ScheduleStore | Purge,
  unknown
> => {
  if (options.memory)
    return Layer.mergeAll(
      Store.layerMemory,
      Transport.layerMemory(),
      Limiter.layerMemory,
      ScheduleStore.layerMemory,
      Layer.succeed(Purge, { purge: undefined })
    )
  if (options.sqs !== undefined) return withSqs(options, options.sqs)
  const { redisUrl, databaseUrl } = options
  if (redisUrl) {
    return lazily(
      () =>
        Promise.all([import("@slowcall/adapter-redis/RedisStore"), import("@slowcall/schedules/RedisScheduleStore")]),
      ([RedisStore, RedisScheduleStore]) =>
        Layer.merge(RedisScheduleStore.layer, purgeFrom(RedisStore.RedisStore)).pipe(
          Layer.provideMerge(RedisStore.layer({ url: redisUrl, prefix: options.schema }))
        )
    )
  }
  return lazily(
    () => Promise.all([import("@slowcall/adapter-postgres/PgStore"), import("@slowcall/schedules/PgScheduleStore")]),
    ([PgStore, PgScheduleStore]) =>
      Layer.merge(PgScheduleStore.layer({ schema: options.schema }), purgeFrom(PgStore.PgStore)).pipe(
        Layer.provideMerge(
          databaseUrl
            ? PgStore.layer({ connectionString: databaseUrl, schema: options.schema })
            : Layer.suspend(() => {
                mkdirSync(options.dataDir, { recursive: true })
                return PgStore.layerPglite({ dataDir: options.dataDir, schema: options.schema })
              })
        )
      )
  )
}

/**
 * The Store the options name with the SQS Transport beside it: on Redis the Store and Query on one connection; on
 * Postgres (server or PGlite) the Store and Query on one driver plus the outbox relay to SQS. The transport reads the
 * queue's redrive settings at start and refuses an unsafe one.
 */
const withSqs = (
  options: BackendOptions,
  sqs: NonNullable<BackendOptions["sqs"]>
): Layer.Layer<
  Store.Store | Query.Query | Transport.Transport | Limiter.Limiter | ScheduleStore.ScheduleStore | Purge,
  unknown
> =>
  lazily(
    () => import("@slowcall/adapter-sqs/SqsTransport"),
    (
      SqsTransport
    ): Layer.Layer<
      Store.Store | Query.Query | Transport.Transport | Limiter.Limiter | ScheduleStore.ScheduleStore | Purge,
      unknown
    > => {
      const transport = SqsTransport.layer({
        queues: { [sqs.queue]: sqs.queueUrl },
        ...(sqs.endpoint === undefined ? {} : { client: { endpoint: sqs.endpoint } })
      })
      const { redisUrl, databaseUrl } = options
      if (redisUrl) {
        return lazily(
          () =>
            Promise.all([
              import("@slowcall/adapter-redis/RedisStore"),
              import("@slowcall/adapter-redis/RedisConnection"),
              import("@slowcall/schedules/RedisScheduleStore")
            ]),
          ([RedisStore, RedisConnection, RedisScheduleStore]) =>
            Layer.mergeAll(RedisScheduleStore.layer, transport, purgeFrom(RedisStore.RedisStore)).pipe(
              Layer.provideMerge(RedisStore.layerFromConnection()),
              Layer.provideMerge(RedisConnection.layer({ url: redisUrl, prefix: options.schema }))
            )
        )
      }
      return lazily(
        () =>
          Promise.all([
            import("@slowcall/adapter-postgres/PgStore"),
            import("@slowcall/adapter-postgres/PgDriver"),
            import("@slowcall/schedules/PgScheduleStore")
          ]),
        ([PgStore, PgDriver, PgScheduleStore]) => {
          const driver = databaseUrl
            ? PgDriver.layer({ connectionString: databaseUrl })
            : Layer.suspend(() => {
                mkdirSync(options.dataDir, { recursive: true })
                return PgDriver.layerPglite({ dataDir: options.dataDir })
              })
          const seams = Layer.mergeAll(
            PgStore.layerFromDriver({ schema: options.schema }),
            PgScheduleStore.layer({ schema: options.schema }),
            transport
          )
          return Layer.mergeAll(
            seams,
            PgStore.layerOutboxRelay().pipe(Layer.provide(seams)),
            purgeFrom(PgStore.PgStore).pipe(Layer.provide(seams))
          ).pipe(Layer.provideMerge(driver))
        }
      )
    }
  )
