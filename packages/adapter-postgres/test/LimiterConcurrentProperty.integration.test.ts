/**
 * The concurrent model-based property of the Limiter on the Postgres adapter: batches of Limiter calls sent at once,
 * checked for linearizability against the reference model.
 *
 * - The real server, through a pool of 16 connections, so every call of a batch is a transaction on a connection of
 *   its own and the server interleaves them (each waits for the row locks of the resources it names). A fresh
 *   schema, dropped after; the pool's sessions commit without waiting for the WAL flush (`synchronous_commit=off`,
 *   a per-session setting that changes how long a commit takes, not what concurrent transactions see).
 * - PGlite in memory: one embedded connection, so transactions run one at a time, which the check must accept too.
 */
import { LimiterConcurrentProperty } from "@slowcall/testing/LimiterConcurrentProperty"
import { Effect, Layer } from "effect"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import { DATABASE_URL, dropSchema, holdServer, pgliteStoreLayer, uniqueSchema } from "./support.js"

holdServer()

const schema = uniqueSchema("lcprop")
const url = new URL(DATABASE_URL)
url.searchParams.set("options", "-c synchronous_commit=off")

LimiterConcurrentProperty({
  name: "postgres server",
  layer: Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropSchema(schema)))).pipe(
    Layer.provideMerge(
      PgStore.layerFromDriver({ schema }).pipe(
        Layer.provideMerge(PgDriver.layer({ connectionString: url.toString(), max: 16 }))
      )
    )
  )
})

LimiterConcurrentProperty({ name: "pglite in memory", layer: pgliteStoreLayer() })
