/**
 * The model-based property with the batch verbs, on the Redis adapter: batches opened, filled in chunks, cancelled
 * and replayed while the job verbs claim, settle, charge, cancel, replay and sweep their items, on the machine's
 * Redis server (a fresh key prefix, its keys deleted afterwards). The batch records must equal the model's after
 * every write: every job script writes an item's batch in the same script. Purges delete finished items too: the
 * batch keeps its record and counts, and the purged items leave its listing.
 */
import { StoreProperty } from "@slowcall/testing/StoreProperty"
import { Effect } from "effect"
import { RedisStore } from "../src/RedisStore.js"
import { storeLayer, uniquePrefix } from "./support.js"

const purge = Effect.map(RedisStore, (store) => store.purge)

StoreProperty({
  name: "redis server, with batches",
  layer: storeLayer(uniquePrefix("bprop")),
  batches: true,
  purge,
  numRuns: 1000
})
