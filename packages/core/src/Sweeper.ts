/**
 * The Sweeper: the loop that makes a lost message or a dead worker harmless. Every `intervalMs` it asks the Store
 * to sweep (expired leases back to queued or failed, overdue jobs abandoned) and publishes every requeued and stale
 * queued job to the Transport. Publishing is at least once: a duplicate message costs one claim, never a call. A
 * job left waiting is republished at most once per `republishAfterMs` (the Store marks what it hands out), so a
 * backlog does not grow by one duplicate per job on every pass.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Layer, Metric, type Scope } from "effect"
import type { StoreError } from "./Errors.js"
import { catchFailure, inOrder } from "./internal/steps.js"
import type { Job } from "./Job.js"
import * as Metrics from "./Metrics.js"
import { Store, type SweepResult } from "./Store.js"
import { messageOf, type PublishItem, Transport } from "./Transport.js"

/**
 * Sweeper configuration. Defaults: every 5 s, stale after 30 s, the Store's default limit (1000 jobs) per sweep, all
 * queues.
 *
 * @since 0.1.0
 * @category models
 */
export interface SweeperOptions {
  readonly queue?: string | undefined
  readonly intervalMs?: number | undefined
  /** Queued, due jobs neither written nor republished for longer than this are republished. */
  readonly republishAfterMs?: number | undefined
  /** The most jobs one sweep writes and publishes, all kinds together (see `Store.sweep`). */
  readonly limit?: number | undefined
}

/** The publish items of `jobs`, by queue, in the order the jobs came. */
const byQueue = (jobs: ReadonlyArray<Job>): Map<string, Array<PublishItem>> => {
  const queues = new Map<string, Array<PublishItem>>()
  for (const job of jobs) {
    let items = queues.get(job.queue)
    if (items === undefined) {
      items = []
      queues.set(job.queue, items)
    }
    items.push({ message: messageOf(job) })
  }
  return queues
}

/**
 * One sweep: the Store's sweep, then a publish for each requeued job and, when the transport's ack removes messages
 * (`capabilities.ackRemoves`), for each stale one (a transport whose message is the job record itself cannot have
 * lost the message of a queued job: republishing it would only add a wake-up). Publishes go out in batches, one
 * call per queue and batch. A failed publish is logged; the job stays queued and a sweep returns it as stale again
 * once more than `republishAfterMs` has passed.
 *
 * @since 0.1.0
 * @category combinators
 */
export const runOnce = (options: SweeperOptions = {}): Effect.Effect<SweepResult, StoreError, Store | Transport> =>
  Effect.flatMap(Store, (store) => Effect.flatMap(Transport, (transport) => sweepWith(store, transport, options)))

/** One sweep over services already in hand: what `runOnce` and every pass of `make` run. */
const sweepWith = (
  store: Store["Type"],
  transport: Transport["Type"],
  options: SweeperOptions
): Effect.Effect<SweepResult, StoreError> =>
  Effect.flatMap(
    store.sweep({ queue: options.queue, republishAfterMs: options.republishAfterMs, limit: options.limit }),
    (result) => {
      const arrivals =
        result.expiredFailed.length > 0
          ? Metric.incrementBy(Metrics.deadLetterArrivals, result.expiredFailed.length)
          : Effect.void
      // One publish call for every job of the pass that needs a message (cut to the transport's batch size).
      const toPublish = transport.capabilities.ackRemoves ? [...result.requeued, ...result.stale] : result.requeued
      if (toPublish.length === 0) return Effect.as(arrivals, result)
      const batch = Math.max(1, transport.capabilities.maxBatch)
      const calls: Array<Effect.Effect<void>> = []
      for (let i = 0; i < toPublish.length; i += batch) {
        for (const [queue, items] of byQueue(toPublish.slice(i, i + batch))) {
          calls.push(
            catchFailure(transport.publish({ queue, items }), (error) =>
              Effect.logWarning("republish failed; the next sweep retries", error).pipe(
                Effect.annotateLogs({ jobs: items.length, queue })
              )
            )
          )
        }
      }
      return Effect.as(Effect.zipRight(arrivals, inOrder(calls)), result)
    }
  )

/**
 * Run `runOnce` every `intervalMs` in the current scope until it closes. A failed sweep is logged; the loop goes on.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: SweeperOptions = {}): Effect.Effect<void, never, Store | Transport | Scope.Scope> =>
  Effect.flatMap(Store, (store) =>
    Effect.flatMap(Transport, (transport) => {
      // The services are read once; each pass is the sweep, then a sleep of the interval (measured from the end of
      // the pass, as `Schedule.spaced` would), without a schedule's per-pass bookkeeping.
      const pass = catchFailure(sweepWith(store, transport, options), (error) =>
        Effect.logWarning("sweep failed", error)
      )
      const interval = Duration.millis(options.intervalMs ?? 5_000)
      const loop: Effect.Effect<never> = Effect.flatMap(pass, () => Effect.flatMap(Effect.sleep(interval), () => loop))
      return Effect.asVoid(Effect.forkScoped(loop))
    })
  )

/**
 * A layer that runs the sweeper for the lifetime of its scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: SweeperOptions = {}): Layer.Layer<never, never, Store | Transport> =>
  Layer.scopedDiscard(make(options))
