/**
 * The model-based property of the Store on the Postgres adapter, 1000 random sequences on each of the real server
 * (a fresh schema per run, dropped after) and PGlite in memory, `PgStore.purge` among the verbs and Cycle commands
 * among them too (the store offers `cycle`, which the property detects), then 100 of the purge-focused mix on each. One layer serves every sequence (each has its own queue, tenants and job ids), so a
 * sequence costs only its statements.
 */
import { StoreProperty } from "@slowcall/testing/StoreProperty"
import { Effect } from "effect"
import { PgStore } from "../src/PgStore.js"
import {
  entriesHoldAfter,
  holdServer,
  keptServerStoreLayer,
  pgliteStoreLayer,
  serverStoreLayer,
  uniqueSchema
} from "./support.js"

holdServer()

const purge = Effect.map(PgStore, (store) => store.purge)

const schema = uniqueSchema("prop")
StoreProperty({ name: "postgres server", layer: keptServerStoreLayer(schema), purge, numRuns: 1000 })
entriesHoldAfter(schema)

StoreProperty({ name: "pglite in memory", layer: pgliteStoreLayer(), purge, numRuns: 1000 })

// The purge-focused mix: sequences that finish jobs of several ages and purge them, where order and limit matter.
StoreProperty({
  name: "postgres server, purges",
  layer: serverStoreLayer(uniqueSchema("pprop")),
  purge,
  focus: "purge",
  numRuns: 100
})

StoreProperty({ name: "pglite in memory, purges", layer: pgliteStoreLayer(), purge, focus: "purge", numRuns: 100 })
