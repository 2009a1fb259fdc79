/**
 * The Transport conformance suite: the at-least-once contract every transport keeps (visibility, redelivery, stale
 * receipts, defer, extend, ack, delay, and the receive limit when there is one). Time moves only through
 * `TestClock.adjust`, so visibility timeouts and long polls are exercised without real sleeps.
 *
 * A store-backed transport (one message = one queued job row) can only carry ids of jobs that exist: its run passes
 * `prepare`, which makes the job exist before the suite publishes a message naming it.
 *
 * @since 0.1.0
 */

import { expect, layer } from "@effect/vitest"
import type { JobId } from "@slowcall/core/Models"
import { type Delivery, type Message, Transport, type TransportCapabilities } from "@slowcall/core/Transport"
import { Duration, Effect, Fiber, type Layer, TestClock } from "effect"
import { makeJobFactory } from "./JobFactory.js"

/**
 * What a transport declares for the suite: its `TransportCapabilities`, plus what a store-backed transport does
 * differently. `ackRemoves` (default true): an ack removes the message for good. A transport whose message is the
 * job row itself declares false: its ack writes nothing, the row stays deliverable while the job is queued and
 * leaves the queue only when the Store claims or settles the job.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransportConformanceCapabilities extends TransportCapabilities {
  readonly ackRemoves?: boolean | undefined
}

/**
 * How an adapter runs the Transport suite: a display name, a layer built once for the whole suite (every test uses
 * its own queue), and what the transport declares about itself. `prepare`, when given, runs before every publish of
 * a new message, with the layer's services in scope: a store-backed transport uses it to make the message's job
 * exist (a queued job with that id, queue, type, version and priority, due at the `Clock`'s time), so that a
 * message the suite publishes can be delivered at all.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransportConformanceOptions<R = never> {
  /** Shown in the describe block; never used to change behaviour. */
  readonly name: string
  readonly layer: Layer.Layer<Transport | R, unknown>
  readonly capabilities: TransportConformanceCapabilities
  readonly prepare?:
    | ((options: { readonly queue: string; readonly message: Message }) => Effect.Effect<void, unknown, R>)
    | undefined
}

const VISIBILITY = 10_000

/**
 * Registers the Transport conformance suite (vitest `describe`/`it` blocks) for one transport. Tests that need a
 * capability the transport does not declare are not registered; one line names them and why. Each test uses its
 * own queue.
 *
 * @since 0.1.0
 * @category testing
 */
export const TransportConformance = <R = never>(options: TransportConformanceOptions<R>): void => {
  const factory = makeJobFactory()
  const { capabilities } = options
  const prepare = options.prepare ?? (() => Effect.void)
  const skipped: Array<string> = []

  const fixture = Effect.gen(function* () {
    const transport = yield* Transport
    const queue = factory.uniqueName("tq")
    const message = (priority?: number): Effect.Effect<Message> =>
      Effect.map(factory.submitOptions({ queue }), (submit) => ({
        jobId: submit.id,
        type: "conformance.echo",
        version: 1,
        ...(priority === undefined ? {} : { priority })
      }))
    /** Publish a message made by `message` (its job made to exist first, when the run asks for that). */
    const send = (m: Message, delayMs?: number) =>
      Effect.zipRight(prepare({ queue, message: m }), transport.publish({ queue, message: m, delayMs }))
    const publish = (delayMs?: number) =>
      Effect.gen(function* () {
        const m = yield* message()
        yield* send(m, delayMs)
        return m
      })
    const receive = (max = 10, visibilityMs = VISIBILITY) => transport.receive({ queue, max, visibilityMs, waitMs: 0 })
    const advance = (ms: number) => TestClock.adjust(Duration.millis(ms))
    return { transport, queue, message, send, publish, receive, advance }
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

    if (capabilities.ackRemoves !== false) {
      it.effect("ack removes the message for good", () =>
        Effect.gen(function* () {
          const { transport, publish, receive, advance } = yield* fixture
          yield* publish()
          const [delivery] = yield* receive(10, 1_000)
          yield* transport.ack({ delivery: delivery! })
          yield* advance(60_000)
          expect(yield* receive()).toEqual([])
        })
      )
    } else {
      skipped.push(
        "ack removes the message for good (capabilities.ackRemoves is false: the message leaves with its job)"
      )
      it.effect("an ack loses nothing: a message whose job is still waiting comes back after its visibility", () =>
        Effect.gen(function* () {
          const { transport, publish, receive, advance } = yield* fixture
          const m = yield* publish()
          const [delivery] = yield* receive(10, 1_000)
          yield* transport.ack({ delivery: delivery! })
          expect(yield* receive()).toEqual([])
          yield* advance(1_000)
          expect(yield* receive()).toMatchObject([{ jobId: m.jobId, receiveCount: 2 }])
        })
      )
    }

    it.effect("ack and extend with a superseded receipt change nothing", () =>
      Effect.gen(function* () {
        const { transport, publish, receive, advance } = yield* fixture
        const m = yield* publish()
        const [stale] = yield* receive(10, 1_000)
        yield* advance(1_000)
        const [current] = yield* receive(10, 1_000)
        expect(current!.jobId).toBe(m.jobId)
        yield* transport.ack({ delivery: stale! })
        yield* transport.extend({ delivery: stale!, visibilityMs: 60_000 })
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
        yield* transport.extend({ delivery: delivery!, visibilityMs: 5_000 })
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

    if (capabilities.defer) {
      it.effect("defer hides a delivery until delayMs from now, without acking it", () =>
        Effect.gen(function* () {
          const { transport, publish, receive, advance } = yield* fixture
          const m = yield* publish()
          const [delivery] = yield* receive(10, 60_000)
          yield* transport.defer({ delivery: delivery!, delayMs: 2_000 })
          yield* advance(1_999)
          expect(yield* receive()).toEqual([])
          yield* advance(1)
          const [again] = yield* receive(10, 60_000)
          expect(again).toMatchObject({ jobId: m.jobId, receiveCount: 2 })
          yield* transport.defer({ delivery: again!, delayMs: 0 })
          expect(ids(yield* receive())).toEqual([m.jobId])
        })
      )

      it.effect("defer with a superseded receipt changes nothing", () =>
        Effect.gen(function* () {
          const { transport, publish, receive, advance } = yield* fixture
          yield* publish()
          const [stale] = yield* receive(10, 1_000)
          yield* advance(1_000)
          yield* receive(10, 1_000)
          yield* transport.defer({ delivery: stale!, delayMs: 0 })
          expect(yield* receive()).toEqual([])
          yield* advance(1_000)
          expect(yield* receive()).toHaveLength(1)
        })
      )
    } else {
      skipped.push("defer (capabilities.defer is false)")
    }

    const maxReceiveCount = capabilities.maxReceiveCount
    if (maxReceiveCount !== null) {
      it.effect(`after ${maxReceiveCount} receives a message is no longer delivered`, () =>
        Effect.gen(function* () {
          const { publish, receive, advance } = yield* fixture
          const m = yield* publish()
          const counts: Array<number> = []
          for (let i = 0; i < maxReceiveCount; i++) {
            const deliveries = yield* receive(10, 1_000)
            expect(ids(deliveries)).toEqual([m.jobId])
            counts.push(deliveries[0]!.receiveCount)
            yield* advance(1_000)
          }
          expect(counts).toEqual(Array.from({ length: maxReceiveCount }, (_, i) => i + 1))
          expect(yield* receive(10, 1_000)).toEqual([])
          yield* advance(60_000)
          expect(yield* receive(10, 1_000)).toEqual([])
        })
      )
    } else {
      skipped.push("maxReceiveCount (the transport declares no receive limit)")
    }

    if (skipped.length > 0) {
      console.info(`[TransportConformance: ${options.name}] not run: ${skipped.join("; ")}`)
    }
  })
}
