import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import { Layer } from "effect"
import { contractSuite } from "./contract.js"

// The in-memory backend: every status of the contract, with no database.
contractSuite({
  name: "the memory store",
  backend: () => Layer.merge(Store.layerMemory, Transport.layerMemory())
})
