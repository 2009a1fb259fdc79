/**
 * The shared conformance suites on the Postgres adapter, on the real server and on PGlite in memory.
 *
 * TransportConformance runs PgTransport with `timeSource: "clock"`, so the suite's TestClock drives visibility,
 * delays and long polls through the statements' `now` (the same SQL as store time, read from another clock). Its
 * `prepare` submits the queued job each message names: a PgTransport message is a job row.
 */
import type { StoreError } from "@slowcall/core/Errors"
import { type Message, Transport } from "@slowcall/core/Transport"
import { makeJobFactory } from "@slowcall/testing/JobFactory"
import { StoreConformance } from "@slowcall/testing/StoreConformance"
import { TransportConformance } from "@slowcall/testing/TransportConformance"
import { Clock, Context, Effect, Layer, type Scope } from "effect"
import type { Driver } from "../src/internal/driver.js"
import { migrate } from "../src/PgMigrator.js"
import * as PgStore from "../src/PgStore.js"
import * as PgTransport from "../src/PgTransport.js"
import { DATABASE_URL, dropSchema, holdServer, serverLayer, uniqueSchema } from "./support.js"

holdServer()

StoreConformance({
  name: "postgres server",
  layer: serverLayer(uniqueSchema("conf")),
  capabilities: { concurrent: true, sharedState: true }
})

StoreConformance({
  name: "pglite in memory",
  layer: PgStore.layerPglite(),
  capabilities: { concurrent: true, sharedState: false }
})

/** PgStore (for `prepare`) and a PgTransport on the Clock, over one migrated driver. */
const transportLayer = (
  acquire: Effect.Effect<Driver, StoreError, Scope.Scope>,
  schema: string
): Layer.Layer<Transport | PgStore.PgStore, StoreError> =>
  Layer.scopedContext(
    Effect.gen(function* () {
      const driver = yield* acquire
      yield* migrate(driver, { schema })
      const transport = yield* PgTransport.make(driver, { schema, timeSource: "clock" })
      return Context.make(Transport, transport).pipe(Context.add(PgStore.PgStore, PgStore.make(driver, { schema })))
    })
  )

const factory = makeJobFactory()

/** The job a message names, queued and due at the suite's clock, with the message's routing fields. */
const prepare = ({ message, queue }: { readonly queue: string; readonly message: Message }) =>
  Effect.gen(function* () {
    const store = yield* PgStore.PgStore
    const now = yield* Clock.currentTimeMillis
    const submit = yield* factory.submitOptions({ queue, type: message.type, version: message.version })
    yield* store.submit({ ...submit, id: message.jobId, priority: message.priority ?? 0, now })
  })

const transportCapabilities = { ...PgTransport.capabilities, ackRemoves: false }

const serverSchema = uniqueSchema("tconf")

TransportConformance({
  name: "postgres server",
  // The schema is dropped once the layer (and its pool) is closed.
  layer: Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropSchema(serverSchema)))).pipe(
    Layer.provideMerge(transportLayer(PgStore.acquirePgDriver({ connectionString: DATABASE_URL }), serverSchema))
  ),
  capabilities: transportCapabilities,
  prepare
})

TransportConformance({
  name: "pglite in memory",
  layer: transportLayer(PgStore.acquirePgliteDriver({}), "slowcall"),
  capabilities: transportCapabilities,
  prepare
})
