/**
 * The model-based property of the Store on the Redis adapter: 1000 random sequences on the machine's Redis server
 * (a fresh key prefix, its keys deleted afterwards), replies and records equal to the reference model after every
 * step, `RedisStore.purge` among the verbs, then 300 of the purge-focused mix. One layer serves every sequence (each
 * has its own queue, tenants and job ids).
 */
import { StoreProperty } from "@slowcall/testing/StoreProperty"
import { Effect } from "effect"
import { RedisStore } from "../src/RedisStore.js"
import { storeLayer, uniquePrefix } from "./support.js"

const purge = Effect.map(RedisStore, (store) => store.purge)

StoreProperty({ name: "redis server", layer: storeLayer(uniquePrefix("prop")), purge, numRuns: 1000 })

// The purge-focused mix: sequences that finish jobs of several ages and purge them, where order and limit matter.
StoreProperty({
  name: "redis server, purges",
  layer: storeLayer(uniquePrefix("pprop")),
  purge,
  focus: "purge",
  numRuns: 300
})
