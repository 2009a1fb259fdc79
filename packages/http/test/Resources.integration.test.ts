/**
 * The resource endpoints against the Postgres adapter's Limiter: embedded PGlite and the machine's Postgres server
 * (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test), each in a schema of its own.
 */
import { afterAll } from "@effect/vitest"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import { DATABASE_URL as databaseUrl, dropSchema, uniqueSchema } from "../../adapter-postgres/test/support.js"
import { withPgSchedules } from "./harness.js"
import { resourceSuite } from "./resources.js"

const schema = uniqueSchema("http_resources")

resourceSuite({
  name: "PGlite",
  backend: () => withPgSchedules(PgStore.layerPglite({ schema: "slowcall" }), "slowcall")
})

resourceSuite({
  name: "the Postgres server",
  backend: () =>
    withPgSchedules(PgStore.layer({ connectionString: databaseUrl, schema, queryTimeoutMs: 10_000 }), schema)
})

afterAll(() => dropSchema(schema))
