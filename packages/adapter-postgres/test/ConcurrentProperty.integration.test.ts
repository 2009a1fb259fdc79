/**
 * The concurrent model-based property of the Store on the Postgres adapter: batches of commands sent at once,
 * checked for linearizability against the reference model.
 *
 * - The real server, through a pool of 16 connections, so every command of a batch runs on a connection of its own
 *   and the server interleaves them (row locks, waits, re-checks on the newest row version). A fresh schema, dropped
 *   after. The pool's sessions commit without waiting for the WAL flush (`synchronous_commit=off`, a per-session
 *   setting that changes how long a commit takes, not what concurrent transactions see), which halves the run.
 * - PGlite in memory: one embedded connection, so statements run one at a time, which the check must accept too.
 *
 * Both include the batch scenarios: the last two items of a batch settled at once must enqueue its callbacks once.
 */

import { StoreConcurrentProperty } from "@slowcall/testing/StoreConcurrentProperty"
import { Layer } from "effect"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import { DATABASE_URL, entriesHoldAfter, holdServer, pgliteStoreLayer, uniqueSchema } from "./support.js"

holdServer()

const schema = uniqueSchema("cprop")
const url = new URL(DATABASE_URL)
url.searchParams.set("options", "-c synchronous_commit=off")

StoreConcurrentProperty({
  name: "postgres server",
  layer: PgStore.layerFromDriver({ schema }).pipe(
    Layer.provideMerge(PgDriver.layer({ connectionString: url.toString(), max: 16 }))
  ),
  batches: true
})
entriesHoldAfter(schema)

StoreConcurrentProperty({ name: "pglite in memory", layer: pgliteStoreLayer(), batches: true })
