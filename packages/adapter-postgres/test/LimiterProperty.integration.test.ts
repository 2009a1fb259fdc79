/**
 * The model-based property of the Limiter on the Postgres adapter, 1000 random sequences on each of the real server
 * (a fresh schema per run, dropped after) and PGlite in memory. One layer serves every sequence (each names its own
 * resources), so a sequence costs only its statements.
 *
 * The server's sessions here run with `synchronous_commit = off` (a setting of this file's connections only): each
 * Limiter call is a transaction, and waiting for the WAL flush of a thousand sequences' commits would test the disk,
 * not the rules. What a commit makes visible to other sessions is the same either way.
 */
import { LimiterProperty } from "@slowcall/testing/LimiterProperty"
import { Effect, Layer } from "effect"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import { DATABASE_URL, dropSchema, holdServer, pgliteStoreLayer, uniqueSchema } from "./support.js"

holdServer()

const asyncCommit = `${DATABASE_URL}${DATABASE_URL.includes("?") ? "&" : "?"}options=-c%20synchronous_commit%3Doff`

const schema = uniqueSchema("lprop")

/** The adapter's Store layer on the server with asynchronous commits, its schema dropped when the layer closes. */
const serverLayer = Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropSchema(schema)))).pipe(
  Layer.provideMerge(
    PgStore.layerFromDriver({ schema }).pipe(Layer.provideMerge(PgDriver.layer({ connectionString: asyncCommit })))
  )
)

LimiterProperty({
  name: "postgres server",
  layer: serverLayer,
  numRuns: 1000
})

LimiterProperty({ name: "pglite in memory", layer: pgliteStoreLayer(), numRuns: 1000 })
