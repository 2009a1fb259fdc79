/**
 * The model-based property of the Limiter on the Redis adapter: 1000 random sequences on the machine's Redis server
 * (a fresh key prefix, its keys deleted afterwards), replies and resource states equal to the reference model after
 * every step. One layer serves every sequence (each names its own resources).
 */
import { LimiterProperty } from "@slowcall/testing/LimiterProperty"
import { storeLayer, uniquePrefix } from "./support.js"

LimiterProperty({ name: "redis server", layer: storeLayer(uniquePrefix("lprop")), numRuns: 1000 })
