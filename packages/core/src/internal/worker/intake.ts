/**
 * A worker's intake: the one loop that claims work into the local queue, a batch at a time, whenever the worker has
 * room (free slots plus `prefetch`). Two shapes, chosen once by the transport's capabilities:
 * - the Store selects (`claimsFromStore`): one `Store.claimNext` call claims up to the room's worth of due jobs this
 *   worker can run; when it finds fewer than it asked for, the loop sleeps in `Transport.awaitWork` until a wake-up
 *   or the receive wait.
 * - the transport delivers: one `receive` for up to the room's worth of deliveries, then one `Store.claim` call
 *   for all of them, each item acting on its verdict: hold the job (claimed, or held already under this very call's
 *   owner tag after a lost reply), defer the delivery (busy elsewhere, not due yet, no handler here, a repeat within
 *   the batch), or ack it (settled, no such job).
 * Either way a claimed job is held from the claim on: its lease runs from the send of the call that was granted it
 * (never from the reply, which may arrive late), the keeper renews it, and it waits in the local queue for a slot.
 *
 * @internal
 */
import type { Effect } from "effect"
import type { Env } from "./env.js"
import { fromStore } from "./fromStore.js"
import { fromTransport } from "./fromTransport.js"

/**
 * The intake loop of a worker, in the shape its transport calls for.
 *
 * @internal
 */
export const intake = <R>(env: Env<R>): Effect.Effect<never, never, R> =>
  env.transport.capabilities.claimsFromStore ? fromStore(env) : fromTransport(env)
