/**
 * The write events of each queue: every write script publishes one message on the queue's sharded channel
 * (`SPUBLISH <prefix>:{<queue>}:ev`, in the queue's slot): `q` when a job it wrote is queued (work may be due),
 * else `w`, then the ids it wrote. One subscriber connection per connection service (made on first use, a duplicate
 * of the client) listens with `SSUBSCRIBE`; ioredis subscribes again after a reconnection. Messages are only hints:
 * a listener re-reads the records, and every waiter also polls, so a message lost while the subscriber was away
 * only delays what it would have woken.
 *
 * @internal
 */
import { Effect } from "effect"
import type { Keys } from "./keys.js"
import type { Client } from "./scripts.js"

/** One write message: whether something was queued, and the ids written. @internal */
export interface WriteEvent {
  readonly queued: boolean
  readonly jobIds: ReadonlyArray<string>
}

/** @internal */
export interface Events {
  /**
   * Listens to a queue's writes until the returned function is called. Resolves once the subscription is active
   * (or failed: the caller then relies on polling alone).
   */
  readonly listen: (queue: string, listener: (event: WriteEvent) => void) => Effect.Effect<() => void>
  /** Subscribes again to a queue whose subscription failed; nothing when it is active. */
  readonly resubscribe: (queue: string) => Effect.Effect<void>
  /** Closes the subscriber connection. */
  readonly close: Effect.Effect<void>
}

const parse = (message: string): WriteEvent => {
  const parts = message.split(" ")
  return { queued: parts[0] === "q", jobIds: parts.slice(1) }
}

/**
 * The event hub over `client`.
 *
 * @internal
 */
export const make = (client: Client, keys: Keys): Events => {
  let subscriber: Client | undefined
  const listeners = new Map<string, Set<(event: WriteEvent) => void>>()
  const subscribed = new Set<string>()
  const connection = (): Client => {
    if (subscriber !== undefined) return subscriber
    const made = client.duplicate() as Client
    made.on("error", () => {})
    made.on("smessage", (channel: string, message: string) => {
      const set = listeners.get(channel)
      if (set === undefined) return
      const event = parse(message)
      for (const listener of set) listener(event)
    })
    subscriber = made
    return made
  }
  return {
    listen: (queue, listener) =>
      Effect.promise(async () => {
        const channel = keys.events(queue)
        let set = listeners.get(channel)
        if (set === undefined) {
          set = new Set()
          listeners.set(channel, set)
        }
        set.add(listener)
        // A subscription that failed (the server was away) is tried again by the next listener of the channel.
        if (!subscribed.has(channel)) {
          subscribed.add(channel)
          await connection()
            .ssubscribe(channel)
            .catch(() => subscribed.delete(channel))
        }
        const mine = set
        return () => {
          mine.delete(listener)
        }
      }),
    resubscribe: (queue) => {
      const channel = keys.events(queue)
      if (subscribed.has(channel) || !listeners.has(channel)) return Effect.void
      subscribed.add(channel)
      return Effect.promise(() =>
        connection()
          .ssubscribe(channel)
          .then(
            () => undefined,
            () => {
              subscribed.delete(channel)
            }
          )
      )
    },
    close: Effect.promise(async () => {
      const made = subscriber
      subscriber = undefined
      listeners.clear()
      subscribed.clear()
      if (made !== undefined) await made.quit().catch(() => made.disconnect())
    })
  }
}

/** A one-shot signal: a promise and the function that resolves it. @internal */
export interface Cue {
  readonly promise: Promise<void>
  readonly fire: () => void
}

/** A fresh, unfired cue. @internal */
export const cue = (): Cue => {
  let fire = () => {}
  const promise = new Promise<void>((resolve) => {
    fire = resolve
  })
  return { promise, fire }
}
