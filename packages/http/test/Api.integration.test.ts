/**
 * The HTTP contract against the Postgres adapter: embedded PGlite and the machine's Postgres server
 * (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test), each in a schema of its own.
 */

import { afterAll } from "@effect/vitest"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import { DATABASE_URL as databaseUrl, dropSchema, uniqueSchema } from "../../adapter-postgres/test/support.js"
import { contractSuite } from "./contract.js"
import { withPgSchedules } from "./harness.js"

const schema = uniqueSchema("http_contract")

contractSuite({
  name: "PGlite",
  backend: () => withPgSchedules(PgStore.layerPglite({ schema: "slowcall" }), "slowcall")
})

contractSuite({
  name: "the Postgres server",
  backend: () =>
    withPgSchedules(PgStore.layer({ connectionString: databaseUrl, schema, queryTimeoutMs: 10_000 }), schema)
})

afterAll(() => dropSchema(schema))
