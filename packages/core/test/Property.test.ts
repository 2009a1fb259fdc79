import * as Store from "@slowcall/core/Store"
import { StoreProperty } from "@slowcall/testing/StoreProperty"

// A fresh memory store per sequence: building one is cheap, and each sequence then reads only its own jobs. Memory is
// fast enough for sequences twice as long as a database's.
StoreProperty({
  name: "memory",
  layer: Store.layerMemory,
  freshPerRun: true,
  numRuns: 1000,
  maxCommands: 40,
  timeoutMs: 300_000
})

// The same, with the batch verbs among the commands: batches opened, filled in chunks, cancelled and replayed while
// the job commands claim, settle, charge, cancel, replay and sweep their items.
StoreProperty({
  name: "memory with batches",
  layer: Store.layerMemory,
  freshPerRun: true,
  batches: true,
  numRuns: 1000,
  maxCommands: 40,
  timeoutMs: 300_000
})
