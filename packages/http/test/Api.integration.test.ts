/**
 * The HTTP contract against the Postgres adapter: embedded PGlite and the machine's Postgres server
 * (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test), each in a schema of its own.
 */

import { afterAll } from "@effect/vitest"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import pg from "pg"
import { contractSuite } from "./contract.js"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const schema = `http_contract_${process.pid}_${Date.now().toString(36)}`

contractSuite({
  name: "PGlite",
  backend: () => PgStore.layerPglite({ schema: "slowcall" })
})

contractSuite({
  name: "the Postgres server",
  backend: () => PgStore.layer({ connectionString: databaseUrl, schema, queryTimeoutMs: 10_000 })
})

afterAll(async () => {
  const client = new pg.Client({ connectionString: databaseUrl })
  client.on("error", () => {})
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
})
