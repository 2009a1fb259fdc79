/**
 * Test support: the machine's Postgres (a fresh schema per layer, dropped when it closes) and Redis (db 2, a fresh
 * key prefix, its keys deleted when it closes), PGlite in memory, and the memory stores; each layer gives a
 * ScheduleStore next to the job Store, Query and a Transport, as a worker process has them.
 */
import { randomBytes } from "node:crypto"
import * as PgDriver from "@slowcall/adapter-postgres/PgDriver"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as RedisConnection from "@slowcall/adapter-redis/RedisConnection"
import * as RedisStore from "@slowcall/adapter-redis/RedisStore"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import { Effect, Layer } from "effect"
import { Redis } from "ioredis"
import pg from "pg"
import * as PgScheduleStore from "../src/PgScheduleStore.js"
import * as RedisScheduleStore from "../src/RedisScheduleStore.js"
import * as ScheduleStore from "../src/ScheduleStore.js"

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379/2"

export const uniqueName = (prefix: string): string => `${prefix}_${randomBytes(5).toString("hex")}`

export const dropSchema = async (schema: string): Promise<void> => {
  const client = new pg.Client({ connectionString: DATABASE_URL })
  client.on("error", () => {})
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
}

export const dropPrefix = async (prefix: string): Promise<void> => {
  const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })
  client.on("error", () => {})
  await client.connect()
  try {
    let cursor = "0"
    do {
      const [next, keys] = await client.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000)
      cursor = next
      if (keys.length > 0) await client.unlink(...keys)
    } while (cursor !== "0")
  } finally {
    client.disconnect()
  }
}

const finalizer = (f: () => Promise<void>) => Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(f)))

/** Memory everything. */
export const memoryLayer = () => Layer.mergeAll(ScheduleStore.layerMemory, Store.layerMemory, Transport.layerMemory())

/** PGlite in memory, migrated (job tables and schedules), with its own transport. */
export const pgliteLayer = () =>
  PgScheduleStore.layer().pipe(
    Layer.provideMerge(PgStore.layerFromDriver()),
    Layer.provideMerge(PgDriver.layerPglite()),
    Layer.provideMerge(Transport.layerMemory())
  )

/** The machine's Postgres in a fresh schema, with the Postgres transport. */
export const serverLayer = (schema: string) =>
  finalizer(() => dropSchema(schema)).pipe(
    Layer.provideMerge(
      PgScheduleStore.layer({ schema }).pipe(
        Layer.provideMerge(PgStore.layer({ connectionString: DATABASE_URL, schema }))
      )
    )
  )

/** The machine's Redis under a fresh prefix (the transport in memory: schedules need only the Store). */
export const redisLayer = (prefix: string) =>
  finalizer(() => dropPrefix(prefix)).pipe(
    Layer.provideMerge(
      RedisScheduleStore.layer.pipe(
        Layer.provideMerge(RedisStore.layerFromConnection({ checkServer: false })),
        Layer.provideMerge(RedisConnection.layer({ url: REDIS_URL, prefix })),
        Layer.provideMerge(Transport.layerMemory())
      )
    )
  )
