import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Random, TestClock } from "effect"
import { makeJobId } from "../src/Ids.js"
import type { JobId } from "../src/Models.js"
import * as Transport from "../src/Transport.js"

const message = (priority?: number) =>
  Effect.map(
    makeJobId,
    (jobId): Transport.Message => ({
      jobId,
      type: "echo",
      version: 1,
      ...(priority === undefined ? {} : { priority })
    })
  )

const ids = (deliveries: ReadonlyArray<Transport.Delivery>): Array<JobId> => deliveries.map((d) => d.jobId)

describe("Transport.layerMemory", () => {
  it.effect("delivers by priority (highest first), then visible time, then publish order", () =>
    Effect.gen(function* () {
      const transport = yield* Transport.makeMemory()
      const low1 = yield* message(0)
      const low2 = yield* message()
      const high = yield* message(9)
      const delayedHigh = yield* message(5)
      const early = yield* message(0)
      yield* transport.publish({ queue: "q", message: low1, delayMs: 100 })
      yield* transport.publish({ queue: "q", message: low2, delayMs: 100 })
      yield* transport.publish({ queue: "q", message: high, delayMs: 100 })
      yield* transport.publish({ queue: "q", message: delayedHigh, delayMs: 200 })
      yield* transport.publish({ queue: "q", message: early, delayMs: 50 })
      yield* TestClock.adjust(200)
      const deliveries = yield* transport.receive({ queue: "q", max: 10, visibilityMs: 1_000, waitMs: 0 })
      expect(ids(deliveries)).toEqual([high.jobId, delayedHigh.jobId, early.jobId, low1.jobId, low2.jobId])
    })
  )

  it.effect("moves a message to the dead-letter list after maxReceiveCount receives", () =>
    Effect.gen(function* () {
      const transport = yield* Transport.makeMemory({ maxReceiveCount: 2 })
      const m = yield* message()
      yield* transport.publish({ queue: "q", message: m })
      for (let i = 1; i <= 2; i++) {
        const [delivery] = yield* transport.receive({ queue: "q", max: 1, visibilityMs: 100, waitMs: 0 })
        expect(delivery!.receiveCount).toBe(i)
        expect(yield* transport.deadLettered("q")).toEqual([])
        yield* TestClock.adjust(100)
      }
      expect(yield* transport.size("q")).toBe(1)
      expect(yield* transport.receive({ queue: "q", max: 1, visibilityMs: 100, waitMs: 0 })).toEqual([])
      expect(yield* transport.deadLettered("q")).toEqual([{ message: m, receiveCount: 2 }])
      expect(yield* transport.size("q")).toBe(0)
    })
  )

  it.effect("the layer provides Transport and MemoryTransport backed by the same queues", () =>
    Effect.gen(function* () {
      const transport = yield* Transport.Transport
      const memory = yield* Transport.MemoryTransport
      yield* transport.publish({ queue: "q", message: yield* message() })
      expect(yield* memory.size("q")).toBe(1)
      const [delivery] = yield* memory.receive({ queue: "q", max: 1, visibilityMs: 100, waitMs: 0 })
      yield* transport.ack({ delivery: delivery! })
      expect(yield* memory.size("q")).toBe(0)
    }).pipe(Effect.provide(Transport.layerMemory()))
  )

  it.effect("a receipt is only good on its own queue", () =>
    Effect.gen(function* () {
      const transport = yield* Transport.makeMemory()
      yield* transport.publish({ queue: "a", message: yield* message() })
      yield* transport.publish({ queue: "b", message: yield* message() })
      const [fromA] = yield* transport.receive({ queue: "a", max: 1, visibilityMs: 100, waitMs: 0 })
      yield* transport.ack({ delivery: { ...fromA!, queue: "b" } })
      expect(yield* transport.size("a")).toBe(1)
      expect(yield* transport.size("b")).toBe(1)
    })
  )

  it.effect("a waiting receive wakes when a deferred message is made visible again", () =>
    Effect.gen(function* () {
      const transport = yield* Transport.makeMemory()
      const m = yield* message()
      yield* transport.publish({ queue: "q", message: m })
      const [delivery] = yield* transport.receive({ queue: "q", max: 1, visibilityMs: 60_000, waitMs: 0 })
      const fiber = yield* Effect.fork(transport.receive({ queue: "q", max: 1, visibilityMs: 1_000, waitMs: 30_000 }))
      yield* TestClock.adjust(10)
      yield* transport.defer({ delivery: delivery!, delayMs: 0 })
      const woken = yield* Fiber.join(fiber)
      expect(woken).toMatchObject([{ jobId: m.jobId, receiveCount: 2 }])
    })
  )

  it.effect("receipts and delivery order are deterministic under a seeded Random and the TestClock", () =>
    Effect.gen(function* () {
      const run = Effect.gen(function* () {
        const transport = yield* Transport.makeMemory()
        for (let i = 0; i < 5; i++) yield* transport.publish({ queue: "q", message: yield* message(i % 2) })
        return yield* transport.receive({ queue: "q", max: 5, visibilityMs: 100, waitMs: 0 })
      })
      const a = yield* Effect.withRandom(run, Random.make("seed"))
      const b = yield* Effect.withRandom(run, Random.make("seed"))
      expect(a).toEqual(b)
      expect(new Set(a.map((d) => d.receipt)).size).toBe(5)
    })
  )
})
