import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Random, TestClock } from "effect"
import { makeJobId } from "../src/Ids.js"
import type { JobId } from "../src/Job.js"
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
      yield* transport.publish({ queue: "q", items: [{ message: low1, delayMs: 100 }] })
      yield* transport.publish({ queue: "q", items: [{ message: low2, delayMs: 100 }] })
      yield* transport.publish({ queue: "q", items: [{ message: high, delayMs: 100 }] })
      yield* transport.publish({ queue: "q", items: [{ message: delayedHigh, delayMs: 200 }] })
      yield* transport.publish({ queue: "q", items: [{ message: early, delayMs: 50 }] })
      yield* TestClock.adjust(200)
      const deliveries = yield* transport.receive({ queue: "q", max: 10, visibilityMs: 1_000, waitMs: 0 })
      expect(ids(deliveries)).toEqual([high.jobId, delayedHigh.jobId, early.jobId, low1.jobId, low2.jobId])
    })
  )

  it.effect("moves a message to the dead-letter list after maxReceiveCount receives", () =>
    Effect.gen(function* () {
      const transport = yield* Transport.makeMemory({ maxReceiveCount: 2 })
      const m = yield* message()
      yield* transport.publish({ queue: "q", items: [{ message: m }] })
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
      yield* transport.publish({ queue: "q", items: [{ message: yield* message() }] })
      expect(yield* memory.size("q")).toBe(1)
      const [delivery] = yield* memory.receive({ queue: "q", max: 1, visibilityMs: 100, waitMs: 0 })
      yield* transport.ack({ items: [{ delivery: delivery! }] })
      expect(yield* memory.size("q")).toBe(0)
    }).pipe(Effect.provide(Transport.layerMemory()))
  )

  it.effect("declares what it can do: defer, priority, removing acks, its own visibility, no delay limit", () =>
    Effect.gen(function* () {
      const plain = yield* Transport.makeMemory()
      const bounded = yield* Transport.makeMemory({ maxReceiveCount: 4 })

      expect(plain.capabilities).toEqual({
        defer: true,
        maxReceiveCount: null,
        ackRemoves: true,
        visibilityFollowsLease: false,
        maxBatch: 1_000,
        maxDelayMs: null,
        priority: true,
        claimsFromStore: false
      })
      expect(bounded.capabilities.maxReceiveCount).toBe(4)
    })
  )

  it.effect("a receive returns at most the batch it asked for", () =>
    Effect.gen(function* () {
      const transport = yield* Transport.makeMemory()
      for (let i = 0; i < 5; i++) yield* transport.publish({ queue: "q", items: [{ message: yield* message() }] })

      const first = yield* transport.receive({ queue: "q", max: 3, visibilityMs: 1_000, waitMs: 0 })
      const rest = yield* transport.receive({ queue: "q", max: 3, visibilityMs: 1_000, waitMs: 0 })

      expect(first).toHaveLength(3)
      expect(rest).toHaveLength(2)
    })
  )

  it.effect("a receipt is only good on its own queue", () =>
    Effect.gen(function* () {
      const transport = yield* Transport.makeMemory()
      yield* transport.publish({ queue: "a", items: [{ message: yield* message() }] })
      yield* transport.publish({ queue: "b", items: [{ message: yield* message() }] })
      const [fromA] = yield* transport.receive({ queue: "a", max: 1, visibilityMs: 100, waitMs: 0 })
      yield* transport.ack({ items: [{ delivery: { ...fromA!, queue: "b" } }] })
      expect(yield* transport.size("a")).toBe(1)
      expect(yield* transport.size("b")).toBe(1)
    })
  )

  it.effect("a waiting receive wakes when a deferred message is made visible again", () =>
    Effect.gen(function* () {
      const transport = yield* Transport.makeMemory()
      const m = yield* message()
      yield* transport.publish({ queue: "q", items: [{ message: m }] })
      const [delivery] = yield* transport.receive({ queue: "q", max: 1, visibilityMs: 60_000, waitMs: 0 })
      const fiber = yield* Effect.fork(transport.receive({ queue: "q", max: 1, visibilityMs: 1_000, waitMs: 30_000 }))
      yield* TestClock.adjust(10)
      yield* transport.defer({ items: [{ delivery: delivery!, delayMs: 0 }] })
      const woken = yield* Fiber.join(fiber)
      expect(woken).toMatchObject([{ jobId: m.jobId, receiveCount: 2 }])
    })
  )

  it.effect("receipts and delivery order are deterministic under a seeded Random and the TestClock", () =>
    Effect.gen(function* () {
      const run = Effect.gen(function* () {
        const transport = yield* Transport.makeMemory()
        for (let i = 0; i < 5; i++)
          yield* transport.publish({ queue: "q", items: [{ message: yield* message(i % 2) }] })
        return yield* transport.receive({ queue: "q", max: 5, visibilityMs: 100, waitMs: 0 })
      })
      const a = yield* Effect.withRandom(run, Random.make("seed"))
      const b = yield* Effect.withRandom(run, Random.make("seed"))
      expect(a).toEqual(b)
      expect(new Set(a.map((d) => d.receipt)).size).toBe(5)
    })
  )

  describe("with a timer", () => {
    /** A timer the test fires by hand, in due order: what a simulator's clock does with its own timers. */
    const manualTimer = () => {
      const pending: Array<{ at: number; task: () => void; cancelled: boolean }> = []
      let now = 0
      const timer = (ms: number, task: () => void) => {
        const entry = { at: now + ms, task, cancelled: false }
        pending.push(entry)
        return () => {
          entry.cancelled = true
        }
      }
      /** Advance the TestClock to `to` and fire what is due. */
      const advanceTo = (to: number) =>
        Effect.gen(function* () {
          yield* TestClock.setTime(to)
          now = to
          for (const entry of pending.filter((e) => !e.cancelled && e.at <= to)) {
            entry.cancelled = true
            entry.task()
          }
          yield* Effect.yieldNow()
        })
      const live = () => pending.filter((e) => !e.cancelled).length
      return { timer, advanceTo, live }
    }

    it.effect("a waiting receive wakes on a publish and cancels its timer", () =>
      Effect.gen(function* () {
        const manual = manualTimer()
        const transport = yield* Transport.makeMemory({ timer: manual.timer })
        const fiber = yield* Effect.fork(transport.receive({ queue: "q", max: 1, visibilityMs: 1_000, waitMs: 30_000 }))
        yield* Effect.yieldNow()
        expect(manual.live()).toBe(1)
        const m = yield* message()
        yield* transport.publish({ queue: "q", items: [{ message: m }] })
        expect(yield* Fiber.join(fiber)).toMatchObject([{ jobId: m.jobId, receiveCount: 1 }])
        expect(manual.live()).toBe(0)
      })
    )

    it.effect("a waiting receive with nothing to take returns empty when its timer fires at the deadline", () =>
      Effect.gen(function* () {
        const manual = manualTimer()
        const transport = yield* Transport.makeMemory({ timer: manual.timer })
        const fiber = yield* Effect.fork(transport.receive({ queue: "q", max: 1, visibilityMs: 1_000, waitMs: 5_000 }))
        yield* Effect.yieldNow()
        yield* manual.advanceTo(4_999)
        expect(fiber.unsafePoll()).toBeNull()
        yield* manual.advanceTo(5_000)
        expect(yield* Fiber.join(fiber)).toEqual([])
        expect(manual.live()).toBe(0)
      })
    )

    it.effect("an endless wait arms no timer and still wakes on a publish", () =>
      Effect.gen(function* () {
        const manual = manualTimer()
        const transport = yield* Transport.makeMemory({ timer: manual.timer })
        const fiber = yield* Effect.fork(
          transport.receive({ queue: "q", max: 1, visibilityMs: 1_000, waitMs: Number.POSITIVE_INFINITY })
        )
        yield* Effect.yieldNow()
        expect(manual.live()).toBe(0)
        const m = yield* message()
        yield* transport.publish({ queue: "q", items: [{ message: m }] })
        expect(ids(yield* Fiber.join(fiber))).toEqual([m.jobId])
      })
    )

    it.effect("interrupting a waiting receive cancels its timer and a later publish is not lost", () =>
      Effect.gen(function* () {
        const manual = manualTimer()
        const transport = yield* Transport.makeMemory({ timer: manual.timer })
        const fiber = yield* Effect.fork(transport.receive({ queue: "q", max: 1, visibilityMs: 1_000, waitMs: 30_000 }))
        yield* Effect.yieldNow()
        yield* Fiber.interrupt(fiber)
        expect(manual.live()).toBe(0)
        const m = yield* message()
        yield* transport.publish({ queue: "q", items: [{ message: m }] })
        const taken = yield* transport.receive({ queue: "q", max: 1, visibilityMs: 1_000, waitMs: 0 })
        expect(ids(taken)).toEqual([m.jobId])
      })
    )
  })

  it.effect("messageOf copies the routing hints and the tenant, trace id and attempt hints from the job", () =>
    Effect.gen(function* () {
      const jobId = yield* makeJobId
      const job = { id: jobId, type: "t", version: 2, priority: 5, tenant: "acme", traceId: "trace", attempts: 3 }

      const message = Transport.messageOf(job)

      expect(message).toEqual({
        jobId,
        type: "t",
        version: 2,
        priority: 5,
        tenant: "acme",
        traceId: "trace",
        attempts: 3
      })
    })
  )
})
