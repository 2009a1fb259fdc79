import { describe, expect, it } from "@effect/vitest"
import * as Limiter from "@slowcall/core/Limiter"
import { Query } from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Context, Effect, Layer } from "effect"
import { batchSuite } from "./batches.js"
import { start } from "./harness.js"

// The memory backend: the batch endpoints over the in-memory BatchStore.
batchSuite({
  name: "the memory store",
  backend: () =>
    Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)
})

describe("batches over HTTP on a store without batch verbs", () => {
  // The memory Store and Query alone, without the BatchStore beside them.
  const withoutBatches = Layer.effectContext(
    Effect.map(Store.makeMemory, ({ store, query }) => Context.make(Store.Store, store).pipe(Context.add(Query, query)))
  )

  it("answers every batch route 404 batches_unsupported, never a 5xx, and writes nothing", async () => {
    const server = await start(
      Layer.mergeAll(withoutBatches, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)
    )
    try {
      const id = "0190a5b8-7c3d-7e4f-8a1b-2c3d4e5f6a7b"
      for (const [method, path, body] of [
        ["POST", "/v1/batches", { items: [{ type: "test.work" }] }],
        ["GET", `/v1/batches/${id}`, undefined],
        ["GET", `/v1/batches/${id}/jobs`, undefined],
        ["GET", `/v1/batches/${id}/events`, undefined],
        ["POST", `/v1/batches/${id}/cancel`, undefined],
        ["POST", `/v1/batches/${id}/replay`, undefined]
      ] as const) {
        const answer = await fetch(server.url + path, {
          method,
          headers: { "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        })
        expect(answer.status, `${method} ${path}`).toBe(404)
        expect(await answer.json()).toEqual({ error: "batches_unsupported" })
      }
      const jobs = (await (await fetch(`${server.url}/v1/jobs`)).json()) as any
      expect(jobs.total).toBe(0)
    } finally {
      await server.close()
    }
  })
})
