import * as RedisConnection from "@slowcall/adapter-redis/RedisConnection"
import * as RedisStore from "@slowcall/adapter-redis/RedisStore"
import * as RedisTransport from "@slowcall/adapter-redis/RedisTransport"
import * as Client from "@slowcall/core/Client"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Worker from "@slowcall/core/Worker"
import { Layer } from "effect"
import type { summarize } from "./handlers.js"

// #region server
// One server: Store, Query and Transport on one ioredis client, every key under the prefix. The layer warns at
// start when the server keeps nothing on disk or may evict keys.
const Redis = RedisStore.layer({
  url: "redis://127.0.0.1:6379",
  prefix: "slowcall",
  commandTimeoutMs: 5_000,
  dataRetentionMs: 7 * 24 * 3_600_000
})
// #endregion server

// #region config
// The same from the environment: REDIS_URL, and SLOWCALL_REDIS_PREFIX (default "slowcall").
export const FromEnv = RedisStore.layerConfig()
// #endregion config

// #region cluster
// A Redis Cluster: the seed nodes; ioredis finds the rest. Every key of a queue shares its hash tag.
export const OnCluster = RedisStore.layer({
  nodes: [
    { host: "10.0.0.1", port: 6379 },
    { host: "10.0.0.2", port: 6379 },
    { host: "10.0.0.3", port: 6379 }
  ]
})
// #endregion cluster

// #region seams
// The seams one by one, over one shared connection.
export const Seams = Layer.merge(RedisStore.layerFromConnection(), RedisTransport.layerFromConnection()).pipe(
  Layer.provideMerge(RedisConnection.layer({ url: "redis://127.0.0.1:6379" }))
)
// #endregion seams

// #region app
export const makeApp = (handler: typeof summarize) =>
  Layer.mergeAll(
    Client.layer,
    Worker.layer({ queue: "docs", handlers: [handler], concurrency: 8 }),
    Sweeper.layer({ queue: "docs" })
  ).pipe(Layer.provideMerge(Redis))
// #endregion app
