import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Fiber, Stream, TestClock } from "effect"
import * as Client from "../src/Client.js"
import { TransportError } from "../src/Errors.js"
import * as StoreModule from "../src/Store.js"
import { Store } from "../src/Store.js"
import * as TransportModule from "../src/Transport.js"
import { Transport } from "../src/Transport.js"

const setup = (options: { readonly transport?: (t: Transport["Type"]) => Transport["Type"] } = {}) =>
  Effect.gen(function* () {
    const store = yield* StoreModule.makeMemory
    const memory = yield* TransportModule.makeMemory()
    const transport = options.transport ? options.transport(memory) : memory
    const client = yield* Client.make.pipe(
      Effect.provideService(Store, store),
      Effect.provideService(Transport, transport)
    )
    return { store, memory, client }
  })

const receiveAll = (transport: Transport["Type"]) =>
  transport.receive({ queue: "q", max: 10, visibilityMs: 1_000, waitMs: 0 })

describe("Client.submit", () => {
  it.effect("stores the job with its canonical input hash and publishes it once", () =>
    Effect.gen(function* () {
      const { client, memory, store } = yield* setup()
      const first = yield* client.submit({ queue: "q", type: "t", input: { b: 1, a: [true, null] }, requestKey: "k1" })
      const again = yield* client.submit({ queue: "q", type: "t", input: { a: [true, null], b: 1 }, requestKey: "k1" })

      expect(first.created).toBe(true)
      expect(again.created).toBe(false)
      expect(again.job.id).toBe(first.job.id)
      expect(first.job.inputHash).toMatch(/^[0-9a-f]{64}$/)
      expect(first.job.traceId).toBe(first.job.id.replace(/-/g, ""))
      expect((yield* store.list({})).length).toBe(1)
      const deliveries = yield* receiveAll(memory)
      expect(deliveries.map((d) => [d.jobId, d.type, d.version])).toEqual([[first.job.id, "t", 1]])
    })
  )

  it.effect("rejects non-JSON input with InvalidInput and writes nothing", () =>
    Effect.gen(function* () {
      const { client, memory, store } = yield* setup()
      const inputs = [
        { n: Number.NaN },
        { when: new Date(0) },
        { f: () => 1 },
        { big: 1n },
        [undefined],
        { s: "a\u0000b" }
      ]
      for (const input of inputs) {
        const result = yield* Effect.either(client.submit({ queue: "q", type: "t", input }))
        expect(Either.isLeft(result) && result.left._tag).toBe("InvalidInput")
      }
      expect(yield* store.list({})).toEqual([])
      expect(yield* memory.size("q")).toBe(0)
    })
  )

  it.effect("accepts the job when the publish fails; a delayed job is published with its delay", () =>
    Effect.gen(function* () {
      let publishes = 0
      const { client, store } = yield* setup({
        transport: (t) => ({
          ...t,
          publish: () =>
            Effect.suspend(() => {
              publishes++
              return Effect.fail(new TransportError({ reason: "Connection", operation: "publish", detail: "down" }))
            })
        })
      })
      const result = yield* client.submit({ queue: "q", type: "t", input: 1 })
      expect(result.created).toBe(true)
      expect(publishes).toBe(1)
      expect((yield* store.get({ jobId: result.job.id })).state).toBe("queued")

      const delayed = yield* setup()
      const later = yield* delayed.client.submit({ queue: "q", type: "t", input: 2, delayMs: 5_000 })
      expect(later.job.runAfter - later.job.createdAt).toBe(5_000)
      expect(yield* receiveAll(delayed.memory)).toEqual([])
      yield* TestClock.adjust(5_000)
      expect((yield* receiveAll(delayed.memory)).map((d) => d.jobId)).toEqual([later.job.id])
    })
  )
})

describe("Client.watch", () => {
  it.effect("emits the current job, each change, and ends after the terminal state", () =>
    Effect.gen(function* () {
      const { client, store } = yield* setup()
      const { job } = yield* client.submit({ queue: "q", type: "t", input: { x: 1 } })
      const watching = yield* Effect.fork(Stream.runCollect(client.watch(job.id, { intervalMs: 100 })))

      yield* TestClock.adjust(250)
      const claim = yield* store.claim({ jobId: job.id, owner: "w", leaseMs: 10_000 })
      expect(claim._tag).toBe("Claimed")
      yield* TestClock.adjust(250)
      yield* store.heartbeat({ jobId: job.id, token: 1, leaseMs: 10_000, progress: 0.5 })
      yield* TestClock.adjust(250)
      yield* store.complete({ jobId: job.id, token: 1, result: { ok: true } })
      yield* TestClock.adjust(250)

      const seen = Chunk.toReadonlyArray(yield* Fiber.join(watching))
      expect(seen.map((j) => [j.state, j.progress])).toEqual([
        ["queued", 0],
        ["running", 0],
        ["running", 0.5],
        ["succeeded", 1]
      ])
      for (let i = 1; i < seen.length; i++) expect(seen[i]!.updatedAt).toBeGreaterThan(seen[i - 1]!.updatedAt)
    })
  )

  it.effect("fails with JobNotFound for an unknown id", () =>
    Effect.gen(function* () {
      const { client } = yield* setup()
      const result = yield* Effect.either(
        Stream.runCollect(client.watch("01890a5d-ac96-774b-bcce-b302099a8057" as never, { intervalMs: 10 }))
      )
      expect(Either.isLeft(result) && result.left._tag).toBe("JobNotFound")
    })
  )
})

describe("Client.cancel, deadLetters and replay", () => {
  it.effect("cancel abandons a queued job; replay requeues dead letters and publishes them", () =>
    Effect.gen(function* () {
      const { client, memory, store } = yield* setup()
      const queued = yield* client.submit({ queue: "q", type: "t", input: 1 })
      const cancelled = yield* client.cancel(queued.job.id)
      expect([cancelled.state, cancelled.abandonReason]).toEqual(["abandoned", "cancelled"])
      const again = yield* Effect.either(client.cancel(queued.job.id))
      expect(Either.isLeft(again) && again.left._tag).toBe("AlreadyTerminal")

      const dead = yield* client.submit({ queue: "q", type: "t", input: 2 })
      yield* store.claim({ jobId: dead.job.id, owner: "w", leaseMs: 1_000 })
      yield* store.fail({ jobId: dead.job.id, token: 1, errorClass: "auth", error: "401" })
      const letters = yield* client.deadLetters({ queue: "q" })
      expect(letters.jobs.map((j) => j.id)).toEqual([dead.job.id])
      yield* receiveAll(memory).pipe(Effect.flatMap((ds) => Effect.forEach(ds, (delivery) => memory.ack({ delivery }))))

      const replayed = yield* client.replay({ jobIds: [dead.job.id, queued.job.id] })
      expect(replayed.replayed).toEqual([dead.job.id])
      expect(replayed.skipped).toEqual([queued.job.id])
      expect((yield* client.get(dead.job.id)).state).toBe("queued")
      expect((yield* receiveAll(memory)).map((d) => d.jobId)).toEqual([dead.job.id])
      expect((yield* client.list({ state: "queued" })).map((j) => j.id)).toEqual([dead.job.id])
    })
  )
})
