import { StoreConformance } from "@slowcall/testing/StoreConformance"
import * as PgStore from "../src/PgStore.js"
import { holdServer, serverLayer, uniqueSchema } from "./support.js"

holdServer()

StoreConformance({
  name: "postgres server",
  layer: serverLayer(uniqueSchema("conf")),
  capabilities: { concurrent: true, sharedState: true }
})

StoreConformance({
  name: "pglite in memory",
  layer: PgStore.layerPglite(),
  capabilities: { concurrent: true, sharedState: false }
})
