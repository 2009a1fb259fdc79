/**
 * The concurrent model-based property on the memory store: as it is (each write one synchronous step, so a batch's
 * commands run one after another and the check must accept that), and with a window inside every write (the store
 * yields after receiving a write and before checking and applying it), where the commands of a batch interleave.
 */
import { BatchStore } from "@slowcall/core/Batch"
import { Query } from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import { StoreConcurrentProperty } from "@slowcall/testing/StoreConcurrentProperty"
import { Context, Effect, Layer } from "effect"

StoreConcurrentProperty({ name: "memory", layer: Store.layerMemory, freshPerRun: true, batches: true })

StoreConcurrentProperty({
  name: "memory with a window inside every write",
  layer: Layer.effectContext(
    Effect.map(Store.makeMemoryWith({ interleave: () => Effect.yieldNow() }), ({ batches, query, store }) =>
      Context.make(Store.Store, store).pipe(Context.add(Query, query), Context.add(BatchStore, batches))
    )
  ),
  freshPerRun: true,
  batches: true
})
