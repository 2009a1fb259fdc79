/**
 * The shared conformance suites on the Redis adapter, on the machine's Redis server (a fresh key prefix per suite,
 * its keys deleted afterwards).
 *
 * TransportConformance runs RedisTransport with `timeSource: "clock"`, so the suite's TestClock drives visibility,
 * delays and long polls through the scripts' `now`. Its `prepare` submits the queued job each message names: a
 * RedisTransport message is a queued job record.
 */
import type { Message } from "@slowcall/core/Transport"
import { makeJobFactory } from "@slowcall/testing/JobFactory"
import { StoreConformance } from "@slowcall/testing/StoreConformance"
import { TransportConformance } from "@slowcall/testing/TransportConformance"
import { Clock, Effect, Layer } from "effect"
import * as RedisStore from "../src/RedisStore.js"
import * as RedisTransport from "../src/RedisTransport.js"
import { storeLayer, uniquePrefix } from "./support.js"

StoreConformance({
  name: "redis server",
  layer: storeLayer(uniquePrefix("conf")),
  capabilities: { concurrent: true, sharedState: true, batches: true, cycle: true }
})

const factory = makeJobFactory()

/** The job a message names, queued and due at the suite's clock, with the message's routing fields. */
const prepare = ({ message, queue }: { readonly queue: string; readonly message: Message }) =>
  Effect.gen(function* () {
    const store = yield* RedisStore.RedisStore
    const now = yield* Clock.currentTimeMillis
    const item = yield* factory.submitItem({ queue, type: message.type, version: message.version })
    yield* store.submit({ items: [{ ...item, id: message.jobId, priority: message.priority ?? 0 }], now })
  })

TransportConformance({
  name: "redis server",
  layer: RedisTransport.layerFromConnection({ timeSource: "clock" }).pipe(
    Layer.provideMerge(storeLayer(uniquePrefix("tconf")))
  ),
  prepare
})
