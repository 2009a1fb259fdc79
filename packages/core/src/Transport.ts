/**
 * The Transport: infrastructure that wakes workers. It carries job ids, never job state; the Store stays the
 * truth. Every transport is treated as at-least-once: a message may be delivered twice, to two workers at once,
 * after an ack, or late. The claim in the Store makes all of that harmless, and the sweeper makes a lost message
 * harmless.
 *
 * Contract (checked by `@slowcall/testing`'s TransportConformance):
 * - A received message is invisible for `visibilityMs`, then delivered again unless acked.
 * - `extend` and `defer` move that moment (`defer` is how a worker says "not before T": a live lease elsewhere,
 *   a retry's `runAfter`). An ack or extend with a superseded receipt is a no-op (the message returns).
 * - `receiveCount` counts deliveries of the message; `maxReceiveCount`, when the transport has one, moves the
 *   message to its dead-letter queue (the job itself stays in the Store and the sweeper republishes it).
 *
 * @since 0.1.0
 */
import { Context, type Effect } from "effect"
import type { TransportError } from "./Errors.js"
import type { JobId } from "./Models.js"

/**
 * What a publish carries: the job id plus routing hints, so a worker can skip a type or version it does not
 * handle without claiming (deploy skew: the job is never lost, another worker takes it).
 *
 * @since 0.1.0
 * @category models
 */
export interface Message {
  readonly jobId: JobId
  readonly type: string
  readonly version: number
  readonly priority?: number | undefined
}

/**
 * One delivery of a message. `receipt` identifies this delivery only.
 *
 * @since 0.1.0
 * @category models
 */
export interface Delivery extends Message {
  readonly queue: string
  readonly receipt: string
  readonly receiveCount: number
}

/**
 * @since 0.1.0
 * @category services
 */
export class Transport extends Context.Tag("@slowcall/core/Transport")<
  Transport,
  {
    /** Publish a message, visible after `delayMs` (default 0). */
    readonly publish: (options: {
      readonly queue: string
      readonly message: Message
      readonly delayMs?: number | undefined
    }) => Effect.Effect<void, TransportError>
    /** Up to `max` deliveries, waiting at most `waitMs` for the first one. Each is hidden for `visibilityMs`. */
    readonly receive: (options: {
      readonly queue: string
      readonly max: number
      readonly visibilityMs: number
      readonly waitMs: number
    }) => Effect.Effect<ReadonlyArray<Delivery>, TransportError>
    /** Keep a delivery hidden for `visibilityMs` from now (the heartbeat's transport half). */
    readonly extend: (options: {
      readonly delivery: Delivery
      readonly visibilityMs: number
    }) => Effect.Effect<void, TransportError>
    /** Hide a delivery until `delayMs` from now without acking it. */
    readonly defer: (options: {
      readonly delivery: Delivery
      readonly delayMs: number
    }) => Effect.Effect<void, TransportError>
    /** Remove the message. Only after the job's outcome is durable in the Store. */
    readonly ack: (options: { readonly delivery: Delivery }) => Effect.Effect<void, TransportError>
  }
>() {}

/**
 * What a transport declares about itself, for the conformance suite and the worker.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransportCapabilities {
  /** Deliveries can be hidden for a chosen time (`defer`). */
  readonly defer: boolean
  /** Messages are moved aside after this many receives. */
  readonly maxReceiveCount: number | null
}
