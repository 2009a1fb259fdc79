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
