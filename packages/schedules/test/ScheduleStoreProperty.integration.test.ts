/** The model-based property on the machine's Postgres (a fresh schema) and Redis (a fresh key prefix). */
import { describe } from "vitest"
import { ScheduleStoreProperty } from "./property.js"
import { redisLayer, serverLayer, uniqueName } from "./support.js"

describe("ScheduleStore property", () => {
  ScheduleStoreProperty({ name: "Postgres server", layer: serverLayer(uniqueName("schedprop")), numRuns: 100 })
  ScheduleStoreProperty({ name: "Redis server", layer: redisLayer(`sctest:${uniqueName("schedprop")}`), numRuns: 100 })
})
