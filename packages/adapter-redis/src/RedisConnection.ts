/**
 * The shared connection of the Redis adapter: one ioredis client (a single server, or a Redis Cluster) and the key
 * prefix every key of the adapter starts with, read by the Store, Query and Transport layers. Built for a scope:
 * the adapter closes what it opened and leaves a caller's own client open.
 *
 * Defaults chosen for a job store: every command has a timeout (`commandTimeoutMs`, default 5 s), so a black-holed
 * network fails a call instead of hanging it; a command whose connection drops is never sent again behind the
 * caller's back (`autoResendUnfulfilledCommands: false`), since only the caller can tell whether repeating it is
 * safe: commands in flight when a connection closes fail at once as ambiguous writes, and commands issued while
 * it is down fail as soon as a reconnection attempt does (`maxRetriesPerRequest: 0`); a command that times out
 * drops its connection, so no later reply is matched to the wrong command; commands of one tick travel in one
 * write (auto-pipelining; on a Cluster, scripts are left out of it: the client would group them by their sha).
 *
 * @since 0.1.0
 */
import type { StoreError } from "@slowcall/core/Errors"
import { Context, Effect, Layer, type Scope } from "effect"
import { Cluster, type ClusterNode, type ClusterOptions, Redis, type RedisOptions } from "ioredis"
import { release } from "./internal/context.js"
import { toStoreError } from "./internal/errors.js"
import { checkPrefix } from "./internal/keys.js"

/**
 * The connection: the client and the prefix of every key (default `slowcall`).
 *
 * @since 0.1.0
 * @category models
 */
export interface RedisConnectionService {
  readonly client: Redis | Cluster
  readonly prefix: string
  /** Whether `client` is a Cluster client. */
  readonly cluster: boolean
}

/**
 * The connection tag.
 *
 * @since 0.1.0
 * @category services
 */
export class RedisConnection extends Context.Tag("@slowcall/adapter-redis/RedisConnection")<
  RedisConnection,
  RedisConnectionService
>() {}

/**
 * Where to connect: a `url` (`redis://host:port/db`, default `redis://127.0.0.1:6379`), or the seed `nodes` of a
 * Redis Cluster, or a `client` the caller made (and keeps the responsibility to close). `commandTimeoutMs` bounds
 * every command of a client the adapter makes (default 5000).
 *
 * @since 0.1.0
 * @category models
 */
export interface ConnectionOptions {
  readonly url?: string | undefined
  readonly nodes?: ReadonlyArray<ClusterNode> | undefined
  readonly client?: Redis | Cluster | undefined
  readonly prefix?: string | undefined
  readonly commandTimeoutMs?: number | undefined
  /** Extra ioredis options for a client the adapter makes (the adapter's own defaults win where they overlap). */
  readonly redisOptions?: RedisOptions | undefined
  /** Extra ioredis Cluster options (with `nodes`). */
  readonly clusterOptions?: ClusterOptions | undefined
}

const defaults = (commandTimeoutMs: number): RedisOptions => ({
  commandTimeout: commandTimeoutMs,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  enableAutoPipelining: true,
  lazyConnect: true
})

/**
 * Makes the client the options name (not yet connected).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeClient = (options: ConnectionOptions): Redis | Cluster => {
  const commandTimeoutMs = options.commandTimeoutMs ?? 5_000
  if (options.nodes !== undefined) {
    return new Cluster([...options.nodes], {
      ...options.clusterOptions,
      enableAutoPipelining: true,
      // Auto-pipelining groups a command by the slot of its first argument, which for EVALSHA and EVAL is the
      // script, not a key: scripts sent in one tick whose keys live on different nodes would share one pipeline,
      // and the client refuses the whole of it ("All keys in the pipeline should belong to the same slots
      // allocation group"), failing every command in it. Scripts therefore go out on their own.
      autoPipeliningIgnoredCommands: [
        ...(options.clusterOptions?.autoPipeliningIgnoredCommands ?? []),
        "evalsha",
        "eval"
      ],
      lazyConnect: true,
      shardedSubscribers: true,
      redisOptions: { ...options.clusterOptions?.redisOptions, ...options.redisOptions, ...defaults(commandTimeoutMs) }
    })
  }
  return new Redis(options.url ?? "redis://127.0.0.1:6379", {
    ...options.redisOptions,
    ...defaults(commandTimeoutMs)
  })
}

/**
 * Acquires the connection for the scope: the caller's client as it is, or a new one, connected (the first command
 * succeeds) and closed with the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const acquire = (
  options: ConnectionOptions = {}
): Effect.Effect<RedisConnectionService, StoreError, Scope.Scope> =>
  Effect.gen(function* () {
    const prefix = checkPrefix(options.prefix ?? "slowcall")
    if (options.client !== undefined) {
      const service = { client: options.client, prefix, cluster: options.client instanceof Cluster }
      yield* Effect.addFinalizer(() => release(service))
      return service
    }
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => makeClient(options)),
      (made) => Effect.promise(() => made.quit().catch(() => made.disconnect()))
    )
    // An unhandled "error" event would crash the process; failures surface on the commands instead.
    client.on("error", () => {})
    yield* Effect.tryPromise({
      try: async () => {
        await client.connect()
        await client.ping()
      },
      catch: (error) => toStoreError("connect", error, false)
    })
    const service = { client, prefix, cluster: client instanceof Cluster }
    // Runs before the client's own release (finalizers run in reverse order).
    yield* Effect.addFinalizer(() => release(service))
    return service
  })

/**
 * The connection as a layer (see `acquire`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: ConnectionOptions = {}): Layer.Layer<RedisConnection, StoreError> =>
  Layer.scoped(RedisConnection, acquire(options))

/**
 * A caller's client as the connection (it stays open when the layer closes).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromClient = (
  client: Redis | Cluster,
  options: { readonly prefix?: string | undefined } = {}
): Layer.Layer<RedisConnection, StoreError> => layer({ client, prefix: options.prefix })
