/**
 * The Transport conformance suite on SQS (fauxqs, started by this file), in live-clock mode: SQS keeps its own time
 * in whole seconds, so no TestClock can move its visibility. Each test uses its own SQS queue.
 */
import { TransportConformance } from "@slowcall/testing/TransportConformance"
import { Layer } from "effect"
import { layerSqs, layerTransport } from "./fauxqs.js"

TransportConformance({
  name: "SqsTransport (standard queue)",
  layer: layerTransport().pipe(Layer.provide(layerSqs)),
  clock: "live"
})
