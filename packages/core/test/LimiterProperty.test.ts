import * as Limiter from "@slowcall/core/Limiter"
import { LimiterProperty } from "@slowcall/testing/LimiterProperty"

// A fresh memory Limiter per sequence: building one is cheap. Memory is fast enough for sequences twice as long as
// a database's.
LimiterProperty({ name: "memory", layer: Limiter.layerMemory, freshPerRun: true, numRuns: 1000, maxCommands: 50 })
