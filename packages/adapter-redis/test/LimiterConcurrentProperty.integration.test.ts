/**
 * The concurrent model-based property of the Limiter on the Redis adapter: batches of Limiter calls sent at once
 * from eight clients, each its own connection to the machine's Redis under one fresh key prefix (its keys deleted
 * afterwards), checked for linearizability against the reference model.
 */
import { LimiterConcurrentProperty } from "@slowcall/testing/LimiterConcurrentProperty"
import { Layer } from "effect"
import * as RedisConnection from "../src/RedisConnection.js"
import * as RedisStore from "../src/RedisStore.js"
import { REDIS_URL, storeLayer, uniquePrefix } from "./support.js"

const prefix = uniquePrefix("lcprop")

LimiterConcurrentProperty({
  name: "redis server",
  layer: storeLayer(prefix),
  clientLayer: RedisStore.layerFromConnection({ checkServer: false }).pipe(
    Layer.provideMerge(RedisConnection.layer({ url: REDIS_URL, prefix }))
  )
})
