import { randomUUID } from "node:crypto"
import pg from "pg"
import { afterAll } from "vitest"
import { scenarios } from "./scenarios.js"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const pgSchema = `promise_${randomUUID().replaceAll("-", "").slice(0, 12)}`
const redisPrefix = `promise-test-${randomUUID().slice(0, 8)}`

afterAll(async () => {
  // This file's own schema only; nothing another test uses.
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`)
  await client.end()
})

scenarios("Postgres server", () => ({ url: databaseUrl, schema: pgSchema }))
scenarios("Redis server", () => ({ url: redisUrl, schema: redisPrefix }))
