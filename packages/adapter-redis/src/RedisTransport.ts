import type { JobId } from "@slowcall/core/Job"
import { type Delivery, Transport, type TransportCapabilities } from "@slowcall/core/Transport"
import { Clock, Context, Effect, Layer } from "effect"
import { nowArg, type Raw } from "./internal/codec.js"
import { type Context as AdapterContext, contextOf } from "./internal/context.js"
import { toTransportError } from "./internal/errors.js"
import { type Cue, cue } from "./internal/events.js"
import { run, type ScriptName } from "./internal/scripts.js"
import { RedisConnection, type RedisConnectionService } from "./RedisConnection.js"

type TransportService = Transport["Type"]

/**
 * What RedisTransport declares (see the module header).
 *
 * @since 0.1.0
 * @category models
 */
export const capabilities: TransportCapabilities = {
  defer: true,
  maxReceiveCount: null,
  ackRemoves: false,
  visibilityFollowsLease: true,
  maxBatch: 1000,
  maxDelayMs: null,
  priority: true,
  claimsFromStore: true
}

/**
 * The RedisTransport service: the generic Transport (its batch verbs, `awaitWork` and `capabilities`).
 *
 * @since 0.1.0
 * @category models
 */
export type RedisTransportService = TransportService

/**
 * The RedisTransport tag (same instance as the generic `Transport` its layers provide).
 *
 * @since 0.1.0
 * @category services
 */
export class RedisTransport extends Context.Tag("@slowcall/adapter-redis/RedisTransport")<
  RedisTransport,
  RedisTransportService
>() {}

/**
 * Options of `make`: `pollMs` (default 500) bounds how long a waiting receive goes without looking; `timeSource`
 * (default `"server"`) says whose clock hides and reveals deliveries.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransportOptions {
  readonly pollMs?: number | undefined
  readonly timeSource?: "server" | "clock" | undefined
}

const parseReceipt = (receipt: string): { readonly jobId: string; readonly count: number } | undefined => {
  const at = receipt.lastIndexOf(":")
  const count = Number(receipt.slice(at + 1))
  return at > 0 && Number.isInteger(count) ? { jobId: receipt.slice(0, at), count } : undefined
}

/**
 * A RedisTransport over a connection. Its queue subscriptions end with the connection.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (connection: RedisConnectionService, options: TransportOptions = {}): RedisTransportService => {
  const ctx: AdapterContext = contextOf(connection, undefined)
  const pollMs = options.pollMs ?? 500
  const scriptNow: Effect.Effect<number | undefined> =
    options.timeSource === "clock" ? Clock.currentTimeMillis : Effect.succeed(undefined)
  const wakes = new Map<string, Cue>()

  /** The queue's wake-up, subscribing on first use (the subscription lives as long as the connection). */
  const wakeOf = (queue: string): Effect.Effect<Cue> =>
    Effect.suspend(() => {
      const known = wakes.get(queue)
      if (known !== undefined) return Effect.as(ctx.events.resubscribe(queue), known)
      wakes.set(queue, cue())
      const listening = ctx.events.listen(queue, (event) => {
        if (!event.queued) return
        const current = wakes.get(queue)!
        wakes.set(queue, cue())
        current.fire()
      })
      return Effect.map(listening, () => wakes.get(queue)!)
    })

  const runScript = (operation: string, name: ScriptName, queue: string, args: ReadonlyArray<string>) =>
    Effect.tryPromise({
      try: () => run(ctx.client, name, [ctx.keys.meta(queue)], args),
      catch: (error) => toTransportError(operation, error)
    })

  const hide = (
    operation: string,
    mode: "publish" | "hide",
    items: ReadonlyArray<{
      readonly queue: string
      readonly jobId: string
      readonly count: string
      readonly ms: number
    }>
  ) =>
    Effect.gen(function* () {
      if (items.length === 0) return
      const now = nowArg(yield* scriptNow)
      const byQueue = new Map<string, Array<string>>()
      for (const item of items) {
        const args = byQueue.get(item.queue) ?? []
        args.push(item.jobId, item.count, String(Math.max(0, item.ms)))
        byQueue.set(item.queue, args)
      }
      yield* Effect.forEach(byQueue, ([queue, args]) => runScript(operation, "hide", queue, [now, mode, ...args]), {
        concurrency: "unbounded",
        discard: true
      })
    })

  const hideDeliveries = (
    operation: string,
    items: ReadonlyArray<{ readonly delivery: Delivery; readonly ms: number }>
  ) =>
    hide(
      operation,
      "hide",
      items.flatMap(({ delivery, ms }) => {
        const parsed = parseReceipt(delivery.receipt)
        return parsed === undefined
          ? []
          : [{ queue: delivery.queue, jobId: parsed.jobId, count: String(parsed.count), ms }]
      })
    )

  const receiveOnce = (queue: string, max: number, visibilityMs: number) =>
    Effect.flatMap(scriptNow, (now) =>
      runScript("receive", "receive", queue, [nowArg(now), String(max), String(visibilityMs)]).pipe(
        Effect.map((raw) =>
          (raw as ReadonlyArray<Raw>).slice(1).map((entry): Delivery => {
            const [id, type, version, priority, count] = entry as ReadonlyArray<string>
            ctx.routes.learn(id!, queue)
            return {
              jobId: id as JobId,
              type: type!,
              version: Number(version),
              priority: Number(priority),
              queue,
              receipt: `${id}:${count}`,
              receiveCount: Number(count)
            }
          })
        )
      )
    )

  const publish: RedisTransportService["publish"] = ({ items, queue }) =>
    hide(
      "publish",
      "publish",
      items.flatMap((item) =>
        item.delayMs !== undefined && item.delayMs > 0
          ? [{ queue, jobId: item.message.jobId, count: "", ms: item.delayMs }]
          : []
      )
    )

  const receive: RedisTransportService["receive"] = ({ max, queue, visibilityMs, waitMs }) =>
    Effect.gen(function* () {
      const deadline = (yield* Clock.currentTimeMillis) + waitMs
      while (true) {
        const waiter = waitMs > 0 ? yield* wakeOf(queue) : undefined
        const askedAt = yield* Clock.currentTimeMillis
        const batch = yield* receiveOnce(queue, Math.min(capabilities.maxBatch, Math.max(1, max)), visibilityMs)
        if (batch.length > 0 || askedAt >= deadline || waiter === undefined) return batch
        // The next look is due `pollMs` after this one began (or at the deadline), however long the script took.
        const wait = Math.min(askedAt + pollMs, deadline) - (yield* Clock.currentTimeMillis)
        if (wait > 0) yield* Effect.promise(() => waiter.promise).pipe(Effect.timeout(wait), Effect.ignore)
      }
    })

  // A wake-up for the queue ends the wait early; otherwise it ends after `pollMs` (or `waitMs`), so a lost wake-up
  // only delays work.
  const awaitWork: RedisTransportService["awaitWork"] = ({ queue, waitMs }) =>
    Effect.flatMap(wakeOf(queue), (waiter) => {
      const ms = Math.min(waitMs, pollMs)
      return ms <= 0 ? Effect.void : Effect.promise(() => waiter.promise).pipe(Effect.timeout(ms), Effect.ignore)
    })

  return {
    publish,
    receive,
    extend: ({ items }) =>
      hideDeliveries(
        "extend",
        items.map((item) => ({ delivery: item.delivery, ms: item.visibilityMs }))
      ),
    defer: ({ items }) =>
      hideDeliveries(
        "defer",
        items.map((item) => ({ delivery: item.delivery, ms: item.delayMs }))
      ),
    ack: () => Effect.void,
    awaitWork,
    capabilities
  }
}

/**
 * RedisTransport and the generic `Transport` (same instance) over the `RedisConnection` in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromConnection = (
  options: TransportOptions = {}
): Layer.Layer<RedisTransport | Transport, never, RedisConnection> =>
  Layer.effectContext(
    Effect.map(RedisConnection, (connection) => {
      const transport = make(connection, options)
      return Context.make(RedisTransport, transport).pipe(Context.add(Transport, transport))
    })
  )
