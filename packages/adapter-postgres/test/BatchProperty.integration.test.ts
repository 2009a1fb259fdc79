/**
 * The model-based property with the batch verbs, on the Postgres adapter: batches opened, filled in chunks,
 * cancelled and replayed while the job verbs claim, settle, charge, cancel, replay and sweep their items, on the real
 * server (a fresh schema, dropped after) and on PGlite in memory. The batch records must equal the model's after
 * every write: the trigger of migration 0011 keeps each batch in the same statement as its items.
 */
import { StoreProperty } from "@slowcall/testing/StoreProperty"
import { holdServer, pgliteStoreLayer, serverStoreLayer, uniqueSchema } from "./support.js"

holdServer()

StoreProperty({
  name: "pglite in memory, with batches",
  layer: pgliteStoreLayer(),
  batches: true,
  numRuns: 500
})

StoreProperty({
  name: "postgres server, with batches",
  layer: serverStoreLayer(uniqueSchema("bprop")),
  batches: true,
  numRuns: 500
})
