import { BatchStore } from "@slowcall/core/Batch"
import * as Limiter from "@slowcall/core/Limiter"
import * as Query from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import { KeepAliveTakeover } from "@slowcall/testing/KeepAliveTakeover"
import { LimiterConformance } from "@slowcall/testing/LimiterConformance"
import { StoreConformance } from "@slowcall/testing/StoreConformance"
import { TransportConformance } from "@slowcall/testing/TransportConformance"
import { Context, Effect, Layer } from "effect"

StoreConformance({
  name: "memory",
  layer: Store.layerMemory,
  capabilities: { concurrent: true, sharedState: false, batches: true, cycle: true }
})

// One store behind every build of the layer, made outside the tests: like a database, it shares its jobs between
// layer instances and keeps its own (live) clock, so the suite must drive it through `now` alone.
const shared = Effect.runSync(Store.makeMemory)

StoreConformance({
  name: "memory, one instance shared by every build, on the live clock",
  layer: Layer.succeedContext(
    Context.make(Store.Store, shared.store).pipe(
      Context.add(Query.Query, shared.query),
      Context.add(BatchStore, shared.batches)
    )
  ),
  capabilities: { concurrent: true, sharedState: true, batches: true, cycle: true }
})

TransportConformance({
  name: "memory",
  layer: Transport.layerMemory()
})

TransportConformance({
  name: "memory with maxReceiveCount 3",
  layer: Transport.layerMemory({ maxReceiveCount: 3 })
})

// The memory transport as a store-selected intake (as on Postgres and Redis): the worker claims with `claimNext` and
// looks again every 50 ms, since nothing publishes a message when a lease ends.
KeepAliveTakeover({
  name: "memory, the transport as a store-selected intake",
  layer: Layer.merge(
    Store.layerMemory,
    Layer.map(Transport.layerMemory(), (context) => {
      const transport = Context.get(context, Transport.Transport)
      return Context.make(Transport.Transport, {
        ...transport,
        capabilities: { ...transport.capabilities, claimsFromStore: true },
        awaitWork: ({ waitMs }) => Effect.sleep(Math.min(waitMs, 50))
      })
    })
  )
})

LimiterConformance({
  name: "memory",
  layer: Limiter.layerMemory,
  capabilities: { concurrent: true, sharedState: false }
})

// One Limiter behind every build of the layer, on the live clock: the suite must drive it through `now` alone.
const sharedLimiter = Effect.runSync(Limiter.makeMemory)

LimiterConformance({
  name: "memory, one instance shared by every build, on the live clock",
  layer: Layer.succeed(Limiter.Limiter, sharedLimiter),
  capabilities: { concurrent: true, sharedState: true }
})
