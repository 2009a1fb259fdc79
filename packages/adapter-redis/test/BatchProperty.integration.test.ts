/**
 * The model-based property with the batch verbs, on the Redis adapter: batches opened, filled in chunks, cancelled
 * and replayed while the job verbs claim, settle, charge, cancel, replay and sweep their items, on the machine's
 * Redis server (a fresh key prefix, its keys deleted afterwards). The batch records must equal the model's after
 * every write: every job script writes an item's batch in the same script.
 */
import { StoreProperty } from "@slowcall/testing/StoreProperty"
import { storeLayer, uniquePrefix } from "./support.js"

StoreProperty({
  name: "redis server, with batches",
  layer: storeLayer(uniquePrefix("bprop")),
  batches: true,
  numRuns: 1000
})
