/**
 * Where the Promise examples keep their jobs: the machine's Postgres (`DATABASE_URL`, default the local test
 * database) under a schema of their own, or, with `EXAMPLE_BACKEND=redis`, the machine's Redis (`REDIS_URL`, default
 * redis://127.0.0.1:6379) under a key prefix of their own. Either is removed when the example ends, so runs never see
 * each other's jobs. `npm run examples` runs every Promise example on both.
 */
import { randomUUID } from "node:crypto"
import { Redis } from "ioredis"
import pg from "pg"

const backend = process.env.EXAMPLE_BACKEND === "redis" ? "redis" : "postgres"
const postgresUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

/** The store URL the examples open: the Postgres database, or the Redis server with `EXAMPLE_BACKEND=redis`. */
export const databaseUrl = backend === "redis" ? redisUrl : postgresUrl

/** A schema name (Postgres) or key prefix (Redis) no other run uses. */
export const uniqueSchema = (example: string): string =>
  `ex_${example}_${randomUUID().replaceAll("-", "").slice(0, 10)}`

/** Remove this run's own schema, or on Redis every key under its own prefix (and only those). */
export const dropSchema = async (schema: string): Promise<void> => {
  if (backend === "redis") {
    const redis = new Redis(redisUrl, { lazyConnect: true, commandTimeout: 5_000 })
    await redis.connect()
    try {
      let cursor = "0"
      do {
        const [next, keys] = await redis.scan(cursor, "MATCH", `${schema}:*`, "COUNT", 1000)
        cursor = next
        if (keys.length > 0) await redis.unlink(...keys)
      } while (cursor !== "0")
    } finally {
      redis.disconnect()
    }
    return
  }
  const client = new pg.Client({ connectionString: postgresUrl })
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
}
