/** The model-based property on the memory ScheduleStore and on PGlite (both in process). */
import { describe } from "vitest"
import * as ScheduleStore from "../src/ScheduleStore.js"
import { ScheduleStoreProperty } from "./property.js"
import { pgliteLayer } from "./support.js"

describe("ScheduleStore property", () => {
  ScheduleStoreProperty({ name: "memory", layer: ScheduleStore.layerMemory, numRuns: 300 })
  ScheduleStoreProperty({ name: "PGlite", layer: pgliteLayer(), numRuns: 50 })
})
