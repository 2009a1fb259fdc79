/**
 * The Transport conformance suite: the at-least-once contract every transport keeps (visibility, redelivery, stale
 * receipts, defer, extend, ack, delay, priority, and the receive limit when there is one). Time moves only through
 * `TestClock.adjust`, so visibility timeouts and long polls are exercised without real sleeps.
 *
 * What a transport can do is read from the transport itself (`Transport.capabilities`): a test whose behaviour
 * depends on a capability checks the branch the transport declares, so every test asserts something on every
 * transport. A store-backed transport (one message = one queued job row) can only carry ids of jobs that exist: its
 * run passes `prepare`, which makes the job exist before the suite publishes a message naming it.
 *
 * @since 0.1.0
 */

import { expect, layer } from "@effect/vitest"
import type { JobId } from "@slowcall/core/Job"
import { type Delivery, type Message, Transport } from "@slowcall/core/Transport"
import { Duration, Effect, Fiber, type Layer, TestClock } from "effect"
import * as Live from "./internal/transportConformance/live.js"
import { makeJobFactory } from "./JobFactory.js"

/**
 * How an adapter runs the Transport suite: a display name and a layer built once for the whole suite (every test
 * uses its own queue); the transport's capabilities come from the transport. The one fact about the run itself is
 * `prepare`: when given, it runs before every publish of a new message, with the layer's services in scope. A
 * store-backed transport uses it to make the message's job exist (a queued job with that id, queue, type, version
 * and priority, due at the `Clock`'s time), so that a message the suite publishes can be delivered at all.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransportConformanceOptions<R = never> {
  /** Shown in the describe block; never used to change behaviour. */
  readonly name: string
  readonly layer: Layer.Layer<Transport | R, unknown>
  readonly prepare?:
    | ((options: { readonly queue: string; readonly message: Message }) => Effect.Effect<void, unknown, R>)
    | undefined
  /**
   * Whose clock moves the transport's time: `"test"` (default; `TestClock.adjust`, no real sleeps) or `"live"` (the
   * transport's own clock: real waits of a few seconds each, bounded). A fact about the backend, like `prepare`.
   */
  readonly clock?: "test" | "live" | undefined
}

const VISIBILITY = 10_000

/**
 * Registers the Transport conformance suite (vitest `describe`/`it` blocks) for one transport. Tests whose behaviour
 * depends on a capability check what `Transport.capabilities` declares. Each test uses its own queue.
 *
 * @since 0.1.0
 * @category testing
 */
export const TransportConformance = <R = never>(options: TransportConformanceOptions<R>): void => {
  const factory = makeJobFactory()
  const prepare = options.prepare ?? (() => Effect.void)
  if (options.clock === "live") {
    Live.register({ name: options.name, layer: options.layer, prepare })
    return
  }

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
    /** Publish a message made by `message` (its job made to exist first, when the run asks for that). */
    const send = (m: Message, delayMs?: number) =>
      Effect.zipRight(prepare({ queue, message: m }), transport.publish({ queue, items: [{ message: m, delayMs }] }))
    const publish = (delayMs?: number) =>
      Effect.gen(function* () {
        const m = yield* message()
        yield* send(m, delayMs)
        return m
      })
    const receive = (max = 10, visibilityMs = VISIBILITY) => transport.receive({ queue, max, visibilityMs, waitMs: 0 })
    const advance = (ms: number) => TestClock.adjust(Duration.millis(ms))
    return { transport, capabilities: transport.capabilities, queue, message, send, publish, receive, advance }
  })

  const ids = (deliveries: ReadonlyArray<Delivery>): Array<JobId> => deliveries.map((d) => d.jobId)

  layer(options.layer)(`TransportConformance: ${options.name}`, (it) => {
    it.effect("publish then receive delivers the message with its routing hints", () =>
      Effect.gen(function* () {
        const { queue, message, send, receive } = yield* fixture
        const m = yield* message(3)
        yield* send(m)
        const deliveries = yield* receive()
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
          visibilityMs: VISIBILITY,
          waitMs: 0
        })
        expect(other).toEqual([])
      })
    )

    it.effect("receive returns at most max deliveries, each message once", () =>
      Effect.gen(function* () {
        const { publish, receive } = yield* fixture
        const published = [yield* publish(), yield* publish(), yield* publish(), yield* publish(), yield* publish()]
        const first = yield* receive(3)
        const second = yield* receive(3)
        expect(first).toHaveLength(3)
        expect(second).toHaveLength(2)
        expect([...ids(first), ...ids(second)].sort()).toEqual(published.map((m) => m.jobId).sort())
        expect(yield* receive(3)).toEqual([])
      })
    )

    it.effect("an empty receive waits up to waitMs and then returns nothing", () =>
      Effect.gen(function* () {
        const { transport, queue, advance } = yield* fixture
        const fiber = yield* Effect.fork(transport.receive({ queue, max: 1, visibilityMs: VISIBILITY, waitMs: 5_000 }))
        yield* advance(4_999)
        expect(fiber.unsafePoll()).toBeNull()
        yield* advance(1)
        expect(yield* Fiber.join(fiber)).toEqual([])
      })
    )

    it.effect("a publish wakes a waiting receive", () =>
      Effect.gen(function* () {
        const { transport, queue, message, send, advance } = yield* fixture
        const fiber = yield* Effect.fork(transport.receive({ queue, max: 1, visibilityMs: VISIBILITY, waitMs: 20_000 }))
        yield* advance(1_000)
        const m = yield* message()
        yield* send(m)
        const deliveries = yield* Fiber.join(fiber)
        expect(ids(deliveries)).toEqual([m.jobId])
      })
    )

    it.effect("a received message is hidden for visibilityMs, then delivered again with a new receipt", () =>
      Effect.gen(function* () {
        const { publish, receive, advance } = yield* fixture
        const m = yield* publish()
        const [first] = yield* receive(10, 5_000)
        expect(yield* receive()).toEqual([])
        yield* advance(4_999)
        expect(yield* receive()).toEqual([])
        yield* advance(1)
        const [second] = yield* receive()
        expect(second).toMatchObject({ jobId: m.jobId, receiveCount: 2 })
        expect(second!.receipt).not.toBe(first!.receipt)
      })
    )

    it.effect("ack: removes the message for good, or with ackRemoves false loses nothing", () =>
      Effect.gen(function* () {
        const { transport, capabilities, publish, receive, advance } = yield* fixture
        const m = yield* publish()
        const [delivery] = yield* receive(10, 1_000)

        yield* transport.ack({ items: [{ delivery: delivery! }] })

        expect(yield* receive()).toEqual([])
        yield* advance(1_000)
        if (capabilities.ackRemoves) {
          yield* advance(59_000)
          expect(yield* receive()).toEqual([])
        } else {
          // The message is the job row: it leaves with its job's state, so a job still waiting comes back.
          expect(yield* receive()).toMatchObject([{ jobId: m.jobId, receiveCount: 2 }])
        }
      })
    )

    it.effect("ack and extend with a superseded receipt change nothing", () =>
      Effect.gen(function* () {
        const { transport, publish, receive, advance } = yield* fixture
        const m = yield* publish()
        const [stale] = yield* receive(10, 1_000)
        yield* advance(1_000)
        const [current] = yield* receive(10, 1_000)
        expect(current!.jobId).toBe(m.jobId)
        yield* transport.ack({ items: [{ delivery: stale! }] })
        yield* transport.extend({ items: [{ delivery: stale!, visibilityMs: 60_000 }] })
        yield* advance(1_000)
        const [third] = yield* receive(10, 1_000)
        expect(third).toMatchObject({ jobId: m.jobId, receiveCount: 3 })
      })
    )

    it.effect("extend keeps a delivery hidden for visibilityMs from now", () =>
      Effect.gen(function* () {
        const { transport, publish, receive, advance } = yield* fixture
        yield* publish()
        const [delivery] = yield* receive(10, 1_000)
        yield* advance(800)
        yield* transport.extend({ items: [{ delivery: delivery!, visibilityMs: 5_000 }] })
        yield* advance(4_999)
        expect(yield* receive()).toEqual([])
        yield* advance(1)
        expect(yield* receive()).toHaveLength(1)
      })
    )

    it.effect("publish with delayMs is invisible until the delay has passed", () =>
      Effect.gen(function* () {
        const { publish, receive, advance } = yield* fixture
        const m = yield* publish(3_000)
        expect(yield* receive()).toEqual([])
        yield* advance(2_999)
        expect(yield* receive()).toEqual([])
        yield* advance(1)
        expect(ids(yield* receive())).toEqual([m.jobId])
      })
    )

    it.effect("a waiting receive returns a delayed message once it becomes visible", () =>
      Effect.gen(function* () {
        const { transport, queue, publish, advance } = yield* fixture
        const m = yield* publish(2_000)
        const fiber = yield* Effect.fork(transport.receive({ queue, max: 1, visibilityMs: VISIBILITY, waitMs: 10_000 }))
        yield* advance(2_000)
        expect(ids(yield* Fiber.join(fiber))).toEqual([m.jobId])
      })
    )

    it.effect("defer: hides a delivery until delayMs from now without acking it, or without defer loses nothing", () =>
      Effect.gen(function* () {
        const { transport, capabilities, publish, receive, advance } = yield* fixture
        const m = yield* publish()
        const [delivery] = yield* receive(10, 5_000)

        yield* transport.defer({ items: [{ delivery: delivery!, delayMs: 2_000 }] })

        if (capabilities.defer) {
          yield* advance(1_999)
          expect(yield* receive()).toEqual([])
          yield* advance(1)
          const [again] = yield* receive(10, 60_000)
          expect(again).toMatchObject({ jobId: m.jobId, receiveCount: 2 })
          yield* transport.defer({ items: [{ delivery: again!, delayMs: 0 }] })
          expect(ids(yield* receive())).toEqual([m.jobId])
        } else {
          // A transport that cannot hide for a chosen time still never drops the message.
          yield* advance(5_000)
          expect(yield* receive()).toMatchObject([{ jobId: m.jobId, receiveCount: 2 }])
        }
      })
    )

    it.effect("defer with a superseded receipt changes nothing", () =>
      Effect.gen(function* () {
        const { transport, publish, receive, advance } = yield* fixture
        yield* publish()
        const [stale] = yield* receive(10, 1_000)
        yield* advance(1_000)
        yield* receive(10, 1_000)

        yield* transport.defer({ items: [{ delivery: stale!, delayMs: 0 }] })

        expect(yield* receive()).toEqual([])
        yield* advance(1_000)
        expect(yield* receive()).toHaveLength(1)
      })
    )

    it.effect(
      "receive limit: after maxReceiveCount receives a message is no longer delivered (none: it always is)",
      () =>
        Effect.gen(function* () {
          const { capabilities, publish, receive, advance } = yield* fixture
          const m = yield* publish()
          const limit = capabilities.maxReceiveCount
          const rounds = limit ?? 6
          const counts: Array<number> = []

          for (let i = 0; i < rounds; i++) {
            const deliveries = yield* receive(10, 1_000)
            expect(ids(deliveries)).toEqual([m.jobId])
            counts.push(deliveries[0]!.receiveCount)
            yield* advance(1_000)
          }

          expect(counts).toEqual(Array.from({ length: rounds }, (_, i) => i + 1))
          if (limit !== null) {
            expect(yield* receive(10, 1_000)).toEqual([])
            yield* advance(60_000)
            expect(yield* receive(10, 1_000)).toEqual([])
          } else {
            expect(yield* receive(10, 1_000)).toMatchObject([{ jobId: m.jobId, receiveCount: rounds + 1 }])
          }
        })
    )

    it.effect("priority: with capabilities.priority higher priorities come first; either way nothing is lost", () =>
      Effect.gen(function* () {
        const { capabilities, message, send, receive } = yield* fixture
        const low = yield* message(0)
        const high = yield* message(5)
        yield* send(low)
        yield* send(high)

        const first = yield* receive(1)
        const second = yield* receive(1)

        if (capabilities.priority) {
          expect(ids([...first, ...second])).toEqual([high.jobId, low.jobId])
        } else {
          expect(ids([...first, ...second]).sort()).toEqual([high.jobId, low.jobId].sort())
        }
      })
    )

    it.effect(
      "batches: every item of a publish, defer and ack call acts on its own; a superseded receipt is skipped",
      () =>
        Effect.gen(function* () {
          const { transport, capabilities, queue, message, receive, advance } = yield* fixture
          const ms = [yield* message(), yield* message(), yield* message()]
          for (const m of ms) yield* prepare({ queue, message: m })
          yield* transport.publish({ queue, items: ms.map((m) => ({ message: m })) })
          const first = yield* receive(10, 1_000)
          expect(ids(first).sort()).toEqual(ms.map((m) => m.jobId).sort())
          const byId = new Map(first.map((d) => [d.jobId, d]))
          yield* advance(1_000)
          // The third message's first receipt is superseded by this second delivery.
          const [third] = yield* receive(1, 60_000)

          yield* transport.defer({
            items: [
              { delivery: byId.get(ms[0]!.jobId)!, delayMs: 0 },
              { delivery: byId.get(ms[1]!.jobId)!, delayMs: 0 },
              { delivery: byId.get(ms[2]!.jobId)!, delayMs: 0 }
            ].filter((item) => item.delivery.jobId !== third!.jobId)
          })
          yield* transport.ack({ items: [{ delivery: byId.get(third!.jobId)! }] })

          // The stale ack changed nothing: the third stays hidden under its live receipt; the others are visible.
          const now = yield* receive(10, 60_000)
          const left = ms.map((m) => m.jobId).filter((id) => id !== third!.jobId)
          expect(ids(now).sort()).toEqual(left.sort())
          yield* transport.ack({ items: [...now, third!].map((delivery) => ({ delivery })) })
          yield* advance(120_000)
          const after = yield* receive(10, 1_000)
          // Acked for good, or (ackRemoves false) back with their jobs, which are still queued here.
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

        expect(yield* receive()).toEqual([])
      })
    )

    it.effect("awaitWork returns by waitMs at the latest, and never fails", () =>
      Effect.gen(function* () {
        const { transport, queue, advance } = yield* fixture

        const waiting = yield* Effect.fork(transport.awaitWork({ queue, waitMs: 2_000 }))
        yield* advance(2_000)
        const exit = yield* Fiber.await(waiting)

        expect(exit._tag).toBe("Success")
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
  })
}
