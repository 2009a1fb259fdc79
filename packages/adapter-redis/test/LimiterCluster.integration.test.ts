/**
 * The Limiter on a real Redis Cluster: three `redis-server --cluster-enabled yes` masters this file starts on free
 * ports in its own folder (and stops afterwards), driven through an ioredis `Cluster` client. Every key of the
 * Limiter shares the `{%limits}` hash tag, so each call is one script on the node that serves that slot; the
 * conformance suite and the model-based properties (sequential, and concurrent from eight Cluster clients) run
 * unchanged.
 */
import { LimiterConcurrentProperty } from "@slowcall/testing/LimiterConcurrentProperty"
import { LimiterConformance } from "@slowcall/testing/LimiterConformance"
import { LimiterProperty } from "@slowcall/testing/LimiterProperty"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll } from "vitest"
import * as RedisConnection from "../src/RedisConnection.js"
import * as RedisStore from "../src/RedisStore.js"
import { type LocalCluster, startCluster } from "./servers.js"

let cluster: LocalCluster | undefined

beforeAll(async () => {
  cluster = await startCluster()
}, 60_000)

afterAll(() => {
  cluster?.stop()
})

/** The adapter's Store layer (with its Limiter) on the Cluster, under its own prefix. */
const clusterLayer = (prefix: string) =>
  RedisStore.layerFromConnection({ checkServer: false }).pipe(
    Layer.provideMerge(Layer.unwrapEffect(Effect.sync(() => RedisConnection.layer({ nodes: cluster!.nodes, prefix }))))
  )

LimiterConformance({
  name: "redis cluster",
  layer: clusterLayer("lconf"),
  capabilities: { concurrent: true, sharedState: true }
})

LimiterProperty({ name: "redis cluster", layer: clusterLayer("lprop"), numRuns: 1000 })

// Eight clients, each a Cluster client of its own (connections to every node), under the property's one prefix.
LimiterConcurrentProperty({ name: "redis cluster", layer: clusterLayer("lcprop"), clientLayer: clusterLayer("lcprop") })
