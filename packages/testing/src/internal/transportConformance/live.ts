/**
 * The Transport conformance suite in live-clock mode: the same contract as the test-clock suite, for a transport
 * whose time cannot be driven by a `TestClock` (a managed queue such as SQS keeps its own clock, in whole seconds).
 * Every wait is a real one, bounded: "hidden for T" is checked as "not delivered before T has passed since the call
 * that hid it was sent, and delivered within T plus a generous slack", so load slows the run but cannot make a
 * correct transport fail. Times are whole seconds and short, so the run stays within tens of seconds.
 *
 * @internal
 */
import { expect, layer } from "@effect/vitest"
import type { JobId } from "@slowcall/core/Job"
import { type Delivery, type Message, Transport } from "@slowcall/core/Transport"
import { Clock, Effect, Fiber, type Layer } from "effect"
import { makeJobFactory } from "../../JobFactory.js"

/** How long past a deadline a delivery may still be on its way (a loaded machine, a long poll's round trip). */
const SLACK_MS = 8_000
/** Clock granularity between the test's reading and the transport's. */
const EPSILON_MS = 50
const LONG = 60_000

/** @internal */
export interface LiveOptions<R> {
  readonly name: string
  readonly layer: Layer.Layer<Transport | R, unknown>
  readonly prepare: (options: { readonly queue: string; readonly message: Message }) => Effect.Effect<void, unknown, R>
}

const ids = (deliveries: ReadonlyArray<Delivery>): Array<JobId> => deliveries.map((d) => d.jobId)

/** @internal */
export const register = <R>(options: LiveOptions<R>): void => {
  const factory = makeJobFactory()
  const { prepare } = options

  const fixture = Effect.gen(function* () {
    const transport = yield* Transport
    const queue = factory.uniqueName("tq")
    const message = (priority?: number): Effect.Effect<Message> =>
      Effect.map(factory.submitItem({ queue }), (submit) => ({
        jobId: submit.id,
        type: "conformance.echo",
        version: 1,
        ...(priority === undefined ? {} : { priority })
      }))
    const send = (m: Message, delayMs?: number) =>
      Effect.zipRight(prepare({ queue, message: m }), transport.publish({ queue, items: [{ message: m, delayMs }] }))
    const publish = (delayMs?: number) =>
      Effect.gen(function* () {
        const m = yield* message()
        yield* send(m, delayMs)
        return m
      })
    /** One receive that waits up to `waitMs` (0: look once). */
    const receive = (max = 10, visibilityMs = LONG, waitMs = 0) =>
      transport.receive({ queue, max, visibilityMs, waitMs })
    /** Receives (each hiding for `visibilityMs`) until `count` deliveries came or `withinMs` passed. */
    const collect = (count: number, withinMs: number, visibilityMs = LONG) =>
      Effect.gen(function* () {
        const deadline = (yield* Clock.currentTimeMillis) + withinMs
        const got: Array<Delivery> = []
        while (got.length < count) {
          const left = deadline - (yield* Clock.currentTimeMillis)
          if (left <= 0) break
          got.push(...(yield* receive(count - got.length, visibilityMs, Math.min(left, 5_000))))
        }
        return got
      })
    /**
     * Waits for the next delivery: none may come before `notBeforeMs` from `since` (local ms, read before the call
     * that hid the message was sent); one must come within `notBeforeMs + SLACK_MS`.
     */
    const expectBack = (since: number, notBeforeMs: number, visibilityMs = LONG) =>
      Effect.gen(function* () {
        const [delivery] = yield* collect(1, notBeforeMs + SLACK_MS, visibilityMs)
        const at = yield* Clock.currentTimeMillis
        expect(delivery, `delivered within ${notBeforeMs + SLACK_MS} ms`).toBeDefined()
        expect(at - since).toBeGreaterThanOrEqual(notBeforeMs - EPSILON_MS)
        return delivery!
      })
    const now = Clock.currentTimeMillis
    return {
      transport,
      capabilities: transport.capabilities,
      queue,
      message,
      send,
      publish,
      receive,
      collect,
      expectBack,
      now
    }
  })

  layer(options.layer, { excludeTestServices: true, timeout: 120_000 })(
    `TransportConformance (live clock): ${options.name}`,
    (it) => {
      it.effect("publish then receive delivers the message with its routing hints", () =>
        Effect.gen(function* () {
          const { queue, message, send, collect } = yield* fixture
          const m = yield* message(3)
          yield* send(m)
          const deliveries = yield* collect(1, SLACK_MS)
          expect(deliveries).toHaveLength(1)
          expect(deliveries[0]).toMatchObject({ ...m, queue, receiveCount: 1 })
          expect(typeof deliveries[0]!.receipt).toBe("string")
        })
      )

      it.effect("queues are isolated", () =>
        Effect.gen(function* () {
          const { transport, queue, publish } = yield* fixture
          yield* publish()
          const other = yield* transport.receive({
            queue: `${queue}-other`,
            max: 10,
            visibilityMs: LONG,
            waitMs: 1_000
          })
          expect(other).toEqual([])
        })
      )

      it.effect("receive returns at most max deliveries, each message once", () =>
        Effect.gen(function* () {
          const { publish, receive, collect } = yield* fixture
          const published = [yield* publish(), yield* publish(), yield* publish(), yield* publish(), yield* publish()]
          const got: Array<Delivery> = []
          for (let i = 0; i < 20 && got.length < published.length; i++) {
            const batch = yield* receive(3, LONG, 1_000)
            expect(batch.length).toBeLessThanOrEqual(3)
            got.push(...batch)
          }
          expect(ids(got).sort()).toEqual(published.map((m) => m.jobId).sort())
          expect(yield* collect(1, 1_000)).toEqual([])
        })
      )

      it.effect("an empty receive waits up to waitMs and then returns nothing", () =>
        Effect.gen(function* () {
          const { receive, now } = yield* fixture
          const before = yield* now
          const deliveries = yield* receive(1, LONG, 2_000)
          const after = yield* now
          expect(deliveries).toEqual([])
          expect(after - before).toBeGreaterThanOrEqual(2_000 - EPSILON_MS)
          expect(after - before).toBeLessThan(2_000 + SLACK_MS)
        })
      )

      it.effect("a publish wakes a waiting receive", () =>
        Effect.gen(function* () {
          const { transport, queue, message, send, now } = yield* fixture
          const before = yield* now
          const fiber = yield* Effect.fork(transport.receive({ queue, max: 1, visibilityMs: LONG, waitMs: 15_000 }))
          yield* Effect.sleep(500)
          const m = yield* message()
          yield* send(m)
          const deliveries = yield* Fiber.join(fiber)
          expect(ids(deliveries)).toEqual([m.jobId])
          // Woken by the publish, not by the end of its wait.
          expect((yield* now) - before).toBeLessThan(15_000 - EPSILON_MS)
        })
      )

      it.effect("a received message is hidden for visibilityMs, then delivered again with a new receipt", () =>
        Effect.gen(function* () {
          const { publish, receive, expectBack, now } = yield* fixture
          const sentAt = yield* now
          const m = yield* publish()
          const [first] = yield* receive(1, 2_000, 5_000)
          expect(first!.jobId).toBe(m.jobId)
          expect(yield* receive()).toEqual([])
          const second = yield* expectBack(sentAt, 2_000)
          expect(second).toMatchObject({ jobId: m.jobId, receiveCount: 2 })
          expect(second.receipt).not.toBe(first!.receipt)
        })
      )

      it.effect("ack: removes the message for good, or with ackRemoves false loses nothing", () =>
        Effect.gen(function* () {
          const { transport, capabilities, publish, collect } = yield* fixture
          const m = yield* publish()
          const [delivery] = yield* collect(1, SLACK_MS, 1_000)

          yield* transport.ack({ items: [{ delivery: delivery! }] })

          const after = yield* collect(1, 3_000, 1_000)
          if (capabilities.ackRemoves) {
            expect(after).toEqual([])
          } else {
            expect(after).toMatchObject([{ jobId: m.jobId, receiveCount: 2 }])
          }
        })
      )

      it.effect("ack and extend with a superseded receipt change nothing", () =>
        Effect.gen(function* () {
          const { transport, publish, collect, expectBack, now } = yield* fixture
          const m = yield* publish()
          const [stale] = yield* collect(1, SLACK_MS, 1_000)
          const [current] = yield* collect(1, 1_000 + SLACK_MS, 2_000)
          const sentAt = (yield* now) - EPSILON_MS
          expect(current!.jobId).toBe(m.jobId)
          yield* transport.ack({ items: [{ delivery: stale! }] })
          yield* transport.extend({ items: [{ delivery: stale!, visibilityMs: LONG }] })
          // The current delivery's visibility (2 s) still rules, not the stale 60 s: the message returns a third time.
          const third = yield* expectBack(sentAt, 0)
          expect(third).toMatchObject({ jobId: m.jobId, receiveCount: 3 })
        })
      )

      it.effect("extend keeps a delivery hidden for visibilityMs from now", () =>
        Effect.gen(function* () {
          const { transport, publish, collect, receive, expectBack, now } = yield* fixture
          yield* publish()
          const [delivery] = yield* collect(1, SLACK_MS, 1_000)
          const extendedAt = yield* now
          yield* transport.extend({ items: [{ delivery: delivery!, visibilityMs: 3_000 }] })
          yield* Effect.sleep(1_500)
          expect(yield* receive()).toEqual([])
          yield* expectBack(extendedAt, 3_000)
        })
      )

      it.effect("publish with delayMs is invisible until the delay has passed", () =>
        Effect.gen(function* () {
          const { publish, receive, expectBack, now } = yield* fixture
          const sentAt = yield* now
          const m = yield* publish(2_000)
          expect(yield* receive()).toEqual([])
          const delivery = yield* expectBack(sentAt, 2_000)
          expect(delivery.jobId).toBe(m.jobId)
        })
      )

      it.effect("a waiting receive returns a delayed message once it becomes visible", () =>
        Effect.gen(function* () {
          const { transport, queue, publish } = yield* fixture
          const m = yield* publish(1_000)
          const deliveries = yield* transport.receive({ queue, max: 1, visibilityMs: LONG, waitMs: 1_000 + SLACK_MS })
          expect(ids(deliveries)).toEqual([m.jobId])
        })
      )

      it.effect(
        "defer: hides a delivery until delayMs from now without acking it, or without defer loses nothing",
        () =>
          Effect.gen(function* () {
            const { transport, capabilities, publish, collect, receive, expectBack, now } = yield* fixture
            const m = yield* publish()
            const [delivery] = yield* collect(1, SLACK_MS, 5_000)
            const deferredAt = yield* now

            yield* transport.defer({ items: [{ delivery: delivery!, delayMs: 2_000 }] })

            if (capabilities.defer) {
              expect(yield* receive()).toEqual([])
              const again = yield* expectBack(deferredAt, 2_000)
              expect(again).toMatchObject({ jobId: m.jobId, receiveCount: 2 })
              yield* transport.defer({ items: [{ delivery: again, delayMs: 0 }] })
              expect(ids(yield* collect(1, SLACK_MS))).toEqual([m.jobId])
            } else {
              expect(yield* collect(1, 5_000 + SLACK_MS)).toMatchObject([{ jobId: m.jobId, receiveCount: 2 }])
            }
          })
      )

      it.effect("defer with a superseded receipt changes nothing", () =>
        Effect.gen(function* () {
          const { transport, publish, collect, receive, expectBack, now } = yield* fixture
          yield* publish()
          const [stale] = yield* collect(1, SLACK_MS, 1_000)
          yield* collect(1, 1_000 + SLACK_MS, 3_000)
          const sentAt = (yield* now) - EPSILON_MS

          yield* transport.defer({ items: [{ delivery: stale!, delayMs: 0 }] })

          expect(yield* receive()).toEqual([])
          yield* expectBack(sentAt, 0)
        })
      )

      it.effect(
        "receive limit: after maxReceiveCount receives a message is no longer delivered (none: it always is)",
        () =>
          Effect.gen(function* () {
            const { capabilities, publish, collect } = yield* fixture
            const m = yield* publish()
            const limit = capabilities.maxReceiveCount
            const rounds = limit ?? 3
            const counts: Array<number> = []

            for (let i = 0; i < rounds; i++) {
              const deliveries = yield* collect(1, 1_000 + SLACK_MS, 1_000)
              expect(ids(deliveries)).toEqual([m.jobId])
              counts.push(deliveries[0]!.receiveCount)
            }

            expect(counts).toEqual(Array.from({ length: rounds }, (_, i) => i + 1))
            if (limit !== null) {
              expect(yield* collect(1, 3_000, 1_000)).toEqual([])
            } else {
              expect(yield* collect(1, 1_000 + SLACK_MS, 1_000)).toMatchObject([
                { jobId: m.jobId, receiveCount: rounds + 1 }
              ])
            }
          })
      )

      it.effect("priority: with capabilities.priority higher priorities come first; either way nothing is lost", () =>
        Effect.gen(function* () {
          const { capabilities, message, send, receive, collect } = yield* fixture
          const low = yield* message(0)
          const high = yield* message(5)
          yield* send(low)
          yield* send(high)

          if (capabilities.priority) {
            const first = yield* receive(1, LONG, 2_000)
            const second = yield* receive(1, LONG, 2_000)
            expect(ids([...first, ...second])).toEqual([high.jobId, low.jobId])
          } else {
            expect(ids(yield* collect(2, SLACK_MS)).sort()).toEqual([high.jobId, low.jobId].sort())
          }
        })
      )

      it.effect(
        "batches: every item of a publish, defer and ack call acts on its own; a superseded receipt is skipped",
        () =>
          Effect.gen(function* () {
            const { transport, capabilities, queue, message, collect, receive } = yield* fixture
            const ms = [yield* message(), yield* message(), yield* message()]
            for (const m of ms) yield* prepare({ queue, message: m })
            yield* transport.publish({ queue, items: ms.map((m) => ({ message: m })) })
            const first = yield* collect(3, SLACK_MS, 1_000)
            expect(ids(first).sort()).toEqual(ms.map((m) => m.jobId).sort())
            const byId = new Map(first.map((d) => [d.jobId, d]))
            // One message's first receipt is superseded by this second delivery (hidden for 4 s).
            const [third] = yield* collect(1, 1_000 + SLACK_MS, 4_000)

            yield* transport.defer({
              items: first.filter((d) => d.jobId !== third!.jobId).map((delivery) => ({ delivery, delayMs: 0 }))
            })
            yield* transport.ack({ items: [{ delivery: byId.get(third!.jobId)! }] })

            // The stale ack changed nothing: the third stays hidden under its live receipt; the others are visible.
            const left = ms.map((m) => m.jobId).filter((id) => id !== third!.jobId)
            const visible = yield* collect(2, SLACK_MS)
            expect(ids(visible).sort()).toEqual(left.sort())
            expect(yield* receive()).toEqual([])
            yield* transport.ack({ items: [...visible, third!].map((delivery) => ({ delivery })) })
            // Past the third's 4 s visibility: acked for good, or (ackRemoves false) back with their queued jobs.
            yield* Effect.sleep(4_500)
            const after = yield* collect(3, capabilities.ackRemoves ? 1_000 : SLACK_MS, 1_000)
            expect(ids(after).sort()).toEqual(capabilities.ackRemoves ? [] : ms.map((m) => m.jobId).sort())
          })
      )

      it.effect("publish of an empty batch, and ack, defer and extend of none, do nothing", () =>
        Effect.gen(function* () {
          const { transport, queue, receive } = yield* fixture

          yield* transport.publish({ queue, items: [] })
          yield* transport.ack({ items: [] })
          yield* transport.defer({ items: [] })
          yield* transport.extend({ items: [] })

          expect(yield* receive(10, LONG, 1_000)).toEqual([])
        })
      )

      it.effect("awaitWork returns by waitMs at the latest, and never fails", () =>
        Effect.gen(function* () {
          const { transport, queue, now } = yield* fixture
          const before = yield* now

          const exit = yield* Effect.exit(transport.awaitWork({ queue, waitMs: 1_000 }))

          expect(exit._tag).toBe("Success")
          expect((yield* now) - before).toBeLessThan(1_000 + SLACK_MS)
        })
      )

      it.effect("capabilities are well formed and constant", () =>
        Effect.gen(function* () {
          const { transport, capabilities } = yield* fixture

          const again = transport.capabilities

          expect(again).toEqual(capabilities)
          expect(Number.isInteger(capabilities.maxBatch) && capabilities.maxBatch >= 1).toBe(true)
          expect(capabilities.maxDelayMs === null || capabilities.maxDelayMs > 0).toBe(true)
          expect(
            capabilities.maxReceiveCount === null ||
              (Number.isInteger(capabilities.maxReceiveCount) && capabilities.maxReceiveCount >= 1)
          ).toBe(true)
        })
      )
    }
  )
}
