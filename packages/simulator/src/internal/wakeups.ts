/**
 * A transport for a world whose workers claim straight from the Store, as they do on a transport built on the
 * Store's own tables (PgTransport): it carries no messages, only wake-ups. `publish` wakes every waiting
 * `awaitWork`; a wait also ends after `pollMs` (a job that became due without a publish, such as a retry's
 * `runAfter`, is found by the next look, as a notification-less poll would find it). `receive` never delivers; an
 * ack, extend or defer has nothing to act on. Time is the world's virtual clock (its timers, no sleeping fiber).
 *
 * @internal
 */
import type { Transport, TransportCapabilities } from "@slowcall/core/Transport"
import { Effect } from "effect"
import type { VirtualClock } from "../SimClock.js"

const capabilities: TransportCapabilities = {
  defer: true,
  maxReceiveCount: null,
  ackRemoves: false,
  visibilityFollowsLease: true,
  maxBatch: 1_000,
  maxDelayMs: null,
  priority: true,
  claimsFromStore: true
}

/** @internal */
export const make = (clock: VirtualClock, pollMs: number): Transport["Type"] => {
  const waiting = new Set<() => void>()
  const wakeAll = (): void => {
    const all = [...waiting]
    waiting.clear()
    for (const wake of all) wake()
  }
  const wait = (ms: number): Effect.Effect<void> =>
    clock.wakeOrAfter(Math.max(0, ms), (wake) => {
      waiting.add(wake)
      return () => waiting.delete(wake)
    })
  return {
    capabilities,
    publish: () => Effect.sync(wakeAll),
    receive: ({ waitMs }) => Effect.as(wait(waitMs), []),
    extend: () => Effect.void,
    defer: () => Effect.void,
    ack: () => Effect.void,
    awaitWork: ({ waitMs }) => wait(Math.min(waitMs, pollMs))
  }
}
