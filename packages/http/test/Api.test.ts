import * as Limiter from "@slowcall/core/Limiter"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Layer } from "effect"
import { contractSuite } from "./contract.js"

// The in-memory backend: every status of the contract, with no database.
contractSuite({
  name: "the memory store",
  backend: () =>
    Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)
})
