import * as Limiter from "@slowcall/core/Limiter"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Layer } from "effect"
import { scheduleSuite } from "./schedules.js"

// The memory backend: the schedule endpoints over the in-memory ScheduleStore.
scheduleSuite({
  name: "the memory store",
  backend: () =>
    Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)
})
