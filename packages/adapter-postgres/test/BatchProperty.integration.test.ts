/**
 * The model-based property with the batch verbs, on the Postgres adapter: batches opened, filled in chunks,
 * cancelled and replayed while the job verbs claim, settle, charge, cancel, replay and sweep their items, on the real
 * server (a fresh schema, dropped after) and on PGlite in memory. The batch records must equal the model's after
 * every write: the trigger of migration 0011 keeps each batch in the same statement as its items. Purges delete
 * finished items too: the batch keeps its record and counts, and the purged items leave its listing.
 */
import { StoreProperty } from "@slowcall/testing/StoreProperty"
import { Effect } from "effect"
import { PgStore } from "../src/PgStore.js"
import { holdServer, pgliteStoreLayer, serverStoreLayer, uniqueSchema } from "./support.js"

holdServer()

const purge = Effect.map(PgStore, (store) => store.purge)

StoreProperty({
  name: "pglite in memory, with batches",
  layer: pgliteStoreLayer(),
  batches: true,
  purge,
  numRuns: 500
})

StoreProperty({
  name: "postgres server, with batches",
  layer: serverStoreLayer(uniqueSchema("bprop")),
  batches: true,
  purge,
  numRuns: 500
})
