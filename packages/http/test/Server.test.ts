/**
 * What the contract suite cannot arrange on a real backend: a Store that fails or runs on another clock, and the
 * Transport the server publishes to. The backend is the memory Store and Query, wrapped.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { StoreError } from "@slowcall/core/Errors"
import type { JobId } from "@slowcall/core/Job"
import * as Limiter from "@slowcall/core/Limiter"
import { Query } from "@slowcall/core/Query"
import * as StoreModule from "@slowcall/core/Store"
import { Store } from "@slowcall/core/Store"
import * as TransportModule from "@slowcall/core/Transport"
import { Transport } from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Layer, Option } from "effect"
import { claim, failJob, post, readEvents, settle } from "./contract.js"
import { type Running, start } from "./harness.js"

const down = (operation: string) => new StoreError({ reason: "Connection", operation, detail: "injected: store down" })

/** The memory backend with switches: fail submits, fail the next `getFailures` reads, shift store time. */
const backend = () => {
  const { store, query } = Effect.runSync(StoreModule.makeMemory)
  const faults = { submit: false, getFailures: 0, offsetMs: 0 }
  const shifted = (now: number | undefined) => (faults.offsetMs === 0 ? now : (now ?? Date.now()) + faults.offsetMs)
  const faultyStore: Store["Type"] = {
    ...store,
    submit: (options) =>
      faults.submit ? Effect.fail(down("submit")) : store.submit({ ...options, now: shifted(options.now) }),
    now: Effect.map(store.now, (now) => now + faults.offsetMs)
  }
  const faultyQuery: Query["Type"] = {
    ...query,
    get: (options) =>
      Effect.suspend(() => {
        if (faults.getFailures === 0) return query.get(options)
        faults.getFailures--
        return Effect.fail(down("get"))
      })
  }
  const layer = Layer.mergeAll(
    Layer.succeed(Store, faultyStore),
    Layer.succeed(Query, faultyQuery),
    TransportModule.layerMemory(),
    Limiter.layerMemory,
    ScheduleStore.layerMemory
  )
  return { layer, faults, query }
}

const receive = Effect.flatMap(Transport, (transport) =>
  transport.receive({ queue: "default", max: 10, visibilityMs: 60_000, waitMs: 0 })
)

describe("the server over Client", () => {
  let server: Running | undefined
  afterEach(async () => {
    await server?.close()
    server = undefined
  })

  it("a Store that cannot answer gives 503 store_unavailable with Retry-After, and nothing is written", async () => {
    const { layer, faults, query } = backend()
    server = await start(layer)
    faults.submit = true

    const response = await post(server.url, "/v1/jobs", { type: "test.work", input: { n: 1 } })

    expect(response.status).toBe(503)
    expect(response.headers.get("retry-after")).toBe("1")
    expect(await response.json()).toEqual({ error: "store_unavailable" })
    expect(await Effect.runPromise(query.list({ limit: null }))).toEqual([])
    expect(await server.run(receive)).toEqual([])
  })

  it("401 names the scheme, and 413 names the limit; neither writes", async () => {
    const { layer, query } = backend()
    server = await start(layer, {
      maxBodyBytes: 1_000,
      authenticate: (header) => Effect.succeed(header === "Bearer ok" ? Option.some("acme") : Option.none())
    })

    const unauthorized = await post(server.url, "/v1/jobs", { type: "test.work" })
    const tooLarge = await post(
      server.url,
      "/v1/jobs",
      { type: "test.work", input: "x".repeat(2_000) },
      { authorization: "Bearer ok" }
    )

    expect(unauthorized.status).toBe(401)
    expect(unauthorized.headers.get("www-authenticate")).toBe("Bearer")
    expect(tooLarge.status).toBe(413)
    expect(await tooLarge.json()).toEqual({ error: "payload_too_large", limitBytes: 1_000 })
    expect(await Effect.runPromise(query.list({ limit: null }))).toEqual([])
  })

  it("publishes what it submits (with its delay) and what it replays, as Client does", async () => {
    const { layer } = backend()
    server = await start(layer)

    const now = await post(server.url, "/v1/jobs", { type: "test.work", input: 1 })
    const later = await post(server.url, "/v1/jobs", { type: "test.work", input: 2, delayMs: 60_000 })
    const created = (await now.json()) as { id: JobId }
    expect(later.status).toBe(202)
    expect((await server.run(receive)).map((delivery) => delivery.jobId)).toEqual([created.id])

    await server.run(failJob(created.id))
    const replay = await post(server.url, "/v1/dead-letters/replay", { ids: [created.id] })
    expect(await replay.json()).toEqual({ matched: 1, replayed: 1, skipped: 0, estimatedCents: 2, capped: false })
    expect((await server.run(receive)).map((delivery) => delivery.jobId)).toEqual([created.id])
  })

  it("turns an absolute runAfter into a delay on the store's clock, not the server's", async () => {
    const { layer, faults, query } = backend()
    server = await start(layer)
    faults.offsetMs = 3_600_000

    const runAfter = new Date(Date.now() + faults.offsetMs + 10_000).toISOString()
    const response = await post(server.url, "/v1/jobs", { type: "test.work", runAfter })
    const { id } = (await response.json()) as { id: JobId }
    const job = await Effect.runPromise(query.get({ jobId: id }))

    expect(response.status).toBe(202)
    expect(job.runAfter - job.createdAt).toBeGreaterThan(9_000)
    expect(job.runAfter - job.createdAt).toBeLessThanOrEqual(10_000)
  })

  it("an event stream rides out a transient store error and still ends at the terminal state", async () => {
    const { layer, faults } = backend()
    server = await start(layer)
    const created = (await (await post(server.url, "/v1/jobs", { type: "test.work" })).json()) as { id: string }
    const response = await fetch(`${server.url}/v1/jobs/${created.id}/events`)
    let step = 0

    const { events, ended } = await readEvents(response, 10, async () => {
      step++
      if (step === 1) {
        faults.getFailures = 3
        await server!.run(claim(created.id))
      }
      if (step === 2) {
        const job = await server!.run(Effect.flatMap(Query, (q) => q.get({ jobId: created.id as JobId })))
        await server!.run(settle(job, { _tag: "Complete", result: null }))
      }
    })

    expect(ended).toBe(true)
    expect(faults.getFailures).toBe(0)
    expect(events.map((event) => event.data.state)).toEqual(["queued", "running", "succeeded"])
  })
})
