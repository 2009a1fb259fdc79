/**
 * SimTransport: a proxy around a real Transport (the in-memory one, at-least-once with visibility timeouts,
 * receipts and redrive) that records deliveries, receipts, acks, extends and defers, and injects transport faults:
 * a message handed to a second consumer (F2), redelivery after an ack (F2), a visibility shorter than asked so the
 * message returns while the first consumer still works (F3), a lost visibility extension (F3), and a crash right
 * after a receive (F10). Acks with superseded receipts (F4) and redrive after `maxReceiveCount` (F16) come from the
 * transport itself. The proxy declares the capabilities of the transport it wraps: the worker and the sweeper see
 * the same transport they would see without it.
 *
 * @since 0.1.0
 */
import type { JobState } from "@slowcall/core/Job"
import type { Delivery, Transport } from "@slowcall/core/Transport"
import { Effect } from "effect"
import type { History } from "./History.js"
import { type Actor, type Faults, type Incarnation, passGate } from "./internal/world.js"
import type { VirtualClock } from "./SimClock.js"

/**
 * What a transport proxy needs from its world.
 *
 * @since 0.1.0
 * @category models
 */
export interface SimTransportEnv {
  readonly actor: Actor
  readonly history: History
  readonly faults: Faults
  readonly clock: VirtualClock
  readonly crash: (incarnation: Incarnation, restartAfterMs: number | null) => void
  /** The job's state and lease owner in the store right now (ground truth for the ack-discipline check). */
  readonly peek: (jobId: string) => { readonly state: JobState; readonly owner: string | null } | null
}

/**
 * Wrap `inner` for one actor. Invariant: every delivery the actor sees and every ack it sends is recorded with
 * the job's state at that moment; a crashed actor's calls never return.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (inner: Transport["Type"], env: SimTransportEnv): Transport["Type"] => {
  const { actor, clock, faults, history } = env
  const gated = passGate(actor)
  const record = (op: "publish" | "receive" | "ack" | "extend" | "defer", jobId: string, delivery?: Delivery): void => {
    const job = env.peek(jobId)
    history.push({
      k: "msg",
      t: clock.now,
      op,
      who: actor.id,
      jobId,
      receipt: delivery?.receipt ?? null,
      count: delivery?.receiveCount ?? null,
      state: job?.state ?? null,
      owner: job?.owner ?? null
    })
  }
  const republish = (delivery: Delivery) =>
    inner
      .publish({
        queue: delivery.queue,
        items: [
          {
            message: {
              jobId: delivery.jobId,
              type: delivery.type,
              version: delivery.version,
              priority: delivery.priority
            }
          }
        ]
      })
      .pipe(Effect.ignore)
  const roll = (kinds: ReadonlyArray<"F2" | "F3" | "F10">, point: string) =>
    actor.incarnation === null ? undefined : faults.roll(kinds, actor.id, point)
  const received = (deliveries: ReadonlyArray<Delivery>): Effect.Effect<ReadonlyArray<Delivery>> => {
    let republishes: Array<Delivery> | undefined
    for (const delivery of deliveries) {
      record("receive", delivery.jobId, delivery)
      const fault = roll(["F2", "F10"], "transport.received")
      if (fault === "F2") (republishes ??= []).push(delivery)
      if (fault === "F10" && actor.incarnation !== null) env.crash(actor.incarnation, null)
    }
    const done = (): Effect.Effect<ReadonlyArray<Delivery>> => gated(() => Effect.succeed(deliveries))
    return republishes === undefined ? done() : Effect.flatMap(Effect.forEach(republishes, republish), done)
  }

  /** A call of the actor: gated, with every fault roll and record made when it runs (not when it is built). */
  const call = <A, E>(body: () => Effect.Effect<A, E>): Effect.Effect<A, E> => Effect.suspend(() => gated(body))
  const leave = (): Effect.Effect<void> => gated(() => Effect.void)

  return {
    capabilities: inner.capabilities,
    publish: (options) =>
      call(() =>
        Effect.flatMap(inner.publish(options), () => {
          for (const item of options.items) record("publish", item.message.jobId)
          return leave()
        })
      ),
    receive: (options) =>
      call(() => {
        const shorten = roll(["F3"], "transport.receive") === "F3"
        return Effect.flatMap(
          inner.receive(
            shorten ? { ...options, visibilityMs: Math.max(1, Math.floor(options.visibilityMs / 4)) } : options
          ),
          (deliveries) => gated(() => received(deliveries))
        )
      }),
    // Each item of a batch rolls on its own: a lost extension drops that item only.
    extend: (options) =>
      call(() => {
        const items = options.items.filter(() => roll(["F3"], "transport.extend") !== "F3")
        for (const item of items) record("extend", item.delivery.jobId, item.delivery)
        return items.length === 0 ? Effect.void : Effect.flatMap(inner.extend({ items }), leave)
      }),
    defer: (options) =>
      call(() => {
        for (const item of options.items) record("defer", item.delivery.jobId, item.delivery)
        return Effect.flatMap(inner.defer(options), leave)
      }),
    ack: (options) =>
      call(() => {
        for (const item of options.items) record("ack", item.delivery.jobId, item.delivery)
        return Effect.flatMap(inner.ack(options), () => {
          const again = options.items.filter(() => roll(["F2"], "transport.acked") === "F2")
          return again.length === 0
            ? leave()
            : Effect.flatMap(
                Effect.forEach(again, (item) => republish(item.delivery)),
                leave
              )
        })
      }),
    awaitWork: (options) => call(() => Effect.flatMap(inner.awaitWork(options), leave))
  }
}
