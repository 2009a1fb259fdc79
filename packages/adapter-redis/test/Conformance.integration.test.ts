/**
 * The shared Store conformance suite on the Redis adapter, on the machine's Redis server (a fresh key prefix, its
 * keys deleted afterwards).
 */
import { StoreConformance } from "@slowcall/testing/StoreConformance"
import { storeLayer, uniquePrefix } from "./support.js"

StoreConformance({
  name: "redis server",
  layer: storeLayer(uniquePrefix("conf")),
  capabilities: { concurrent: true, sharedState: true }
})
