/**
 * The shared conformance suites on the Postgres adapter, on the real server (a fresh schema per run, dropped after)
 * and on PGlite in memory.
 *
 * TransportConformance runs PgTransport with `timeSource: "clock"`, so the suite's TestClock drives visibility,
 * delays and long polls through the statements' `now` (the same SQL as store time, read from another clock). Its
 * `prepare` submits the queued job each message names: a PgTransport message is a job row.
 */
import type { StoreError } from "@slowcall/core/Errors"
import type { Message } from "@slowcall/core/Transport"
import { makeJobFactory } from "@slowcall/testing/JobFactory"
import { StoreConformance } from "@slowcall/testing/StoreConformance"
import { TransportConformance } from "@slowcall/testing/TransportConformance"
import { Clock, Effect, Layer } from "effect"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import * as PgTransport from "../src/PgTransport.js"
import { DATABASE_URL, dropSchema, holdServer, pgliteStoreLayer, serverStoreLayer, uniqueSchema } from "./support.js"

holdServer()

StoreConformance({
  name: "postgres server",
  layer: serverStoreLayer(uniqueSchema("conf")),
  capabilities: { concurrent: true, sharedState: true, batches: true, cycle: true }
})

StoreConformance({
  name: "pglite in memory",
  layer: pgliteStoreLayer(),
  capabilities: { concurrent: true, sharedState: false, batches: true, cycle: true }
})

/** PgStore (migrating the schema, and for `prepare`) and then PgTransport on the Clock, over one driver. */
const transportLayer = <E>(driver: Layer.Layer<PgDriver.PgDriver, E>, schema: string) =>
  PgTransport.layerFromDriver({ schema, timeSource: "clock" }).pipe(
    Layer.provideMerge(PgStore.layerFromDriver({ schema })),
    Layer.provideMerge(driver)
  )

const factory = makeJobFactory()

/** The job a message names, queued and due at the suite's clock, with the message's routing fields. */
const prepare = ({ message, queue }: { readonly queue: string; readonly message: Message }) =>
  Effect.gen(function* () {
    const store = yield* PgStore.PgStore
    const now = yield* Clock.currentTimeMillis
    const item = yield* factory.submitItem({ queue, type: message.type, version: message.version })
    yield* store.submit({ items: [{ ...item, id: message.jobId, priority: message.priority ?? 0 }], now })
  })

const serverSchema = uniqueSchema("tconf")

TransportConformance({
  name: "postgres server",
  // The schema is dropped once the layer (and its pool) is closed.
  layer: Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropSchema(serverSchema)))).pipe(
    Layer.provideMerge(transportLayer(PgDriver.layer({ connectionString: DATABASE_URL }), serverSchema))
  ),
  prepare
})

TransportConformance({
  name: "pglite in memory",
  layer: transportLayer<StoreError | PgDriver.DataDirLocked>(PgDriver.layerPglite(), "slowcall"),
  prepare
})
