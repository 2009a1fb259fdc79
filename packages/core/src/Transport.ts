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
import { Context, Effect, Layer } from "effect"
import type { TransportError } from "./Errors.js"
import * as internalMemoryTransport from "./internal/memoryTransport.js"
import type { Job, JobId } from "./Job.js"

/**
 * What a publish carries: the job id plus routing hints, so a worker can skip a type or version it does not
 * handle without claiming (deploy skew: the job is never lost, another worker takes it). `tenant`, `traceId` and
 * `attempts` are hints for transports that route or deduplicate by them (an SQS FIFO queue groups by tenant and
 * deduplicates by job id and attempt); they are copied from the job when the message is made and never decide
 * anything: the claim in the Store does.
 *
 * @since 0.1.0
 * @category models
 */
export interface Message {
  readonly jobId: JobId
  readonly type: string
  readonly version: number
  readonly priority?: number | undefined
  /** @since 0.3.0 */
  readonly tenant?: string | null | undefined
  /** @since 0.3.0 */
  readonly traceId?: string | null | undefined
  /** The job's claims so far when the message was made. @since 0.3.0 */
  readonly attempts?: number | undefined
}

/**
 * The message that wakes a worker for `job`: its id, routing hints and the hints a transport may route or
 * deduplicate by, all copied from the record.
 *
 * @since 0.3.0
 * @category constructors
 */
export const messageOf = (
  job: Pick<Job, "id" | "type" | "version" | "priority" | "tenant" | "traceId" | "attempts">
): Message => ({
  jobId: job.id,
  type: job.type,
  version: job.version,
  priority: job.priority,
  tenant: job.tenant,
  traceId: job.traceId,
  attempts: job.attempts
})

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
 * One message to publish, visible after `delayMs` (default 0).
 *
 * @since 0.3.0
 * @category models
 */
export interface PublishItem {
  readonly message: Message
  readonly delayMs?: number | undefined
}

/**
 * Keep a delivery hidden for `visibilityMs` from now (the heartbeat's transport half).
 *
 * @since 0.3.0
 * @category models
 */
export interface ExtendItem {
  readonly delivery: Delivery
  readonly visibilityMs: number
}

/**
 * Hide a delivery until `delayMs` from now without acking it.
 *
 * @since 0.3.0
 * @category models
 */
export interface DeferItem {
  readonly delivery: Delivery
  readonly delayMs: number
}

/**
 * Remove a delivery's message. Only after the job's outcome is durable in the Store.
 *
 * @since 0.3.0
 * @category models
 */
export interface AckItem {
  readonly delivery: Delivery
}

/**
 * The Transport service. Every verb but `receive` and `awaitWork` takes a batch (a one-message call is a batch of
 * one): each item applies on its own, an item with a superseded receipt changes nothing, and a `TransportError`
 * fails the whole call, after which any subset of the items may have applied (as with any lost reply). Each verb is
 * safe to repeat. A batch larger than `capabilities.maxBatch` is cut into several calls by the transport itself.
 *
 * @since 0.1.0
 * @category services
 */
export class Transport extends Context.Tag("@slowcall/core/Transport")<
  Transport,
  {
    /** Publish messages to `queue`, each visible after its `delayMs`. */
    readonly publish: (options: {
      readonly queue: string
      readonly items: ReadonlyArray<PublishItem>
    }) => Effect.Effect<void, TransportError>
    /** Up to `max` deliveries, waiting at most `waitMs` for the first one. Each is hidden for `visibilityMs`. */
    readonly receive: (options: {
      readonly queue: string
      readonly max: number
      readonly visibilityMs: number
      readonly waitMs: number
    }) => Effect.Effect<ReadonlyArray<Delivery>, TransportError>
    /** Keep deliveries hidden (the heartbeat's transport half: one call for every held delivery of a worker). */
    readonly extend: (options: { readonly items: ReadonlyArray<ExtendItem> }) => Effect.Effect<void, TransportError>
    /** Hide deliveries for a while without acking them. */
    readonly defer: (options: { readonly items: ReadonlyArray<DeferItem> }) => Effect.Effect<void, TransportError>
    /** Remove messages. Only after each job's outcome is durable in the Store. */
    readonly ack: (options: { readonly items: ReadonlyArray<AckItem> }) => Effect.Effect<void, TransportError>
    /**
     * Wait until new work may be due in `queue` (a wake-up of the transport's own, such as a notification or a
     * publish) or until `waitMs` passed, whichever comes first; never fails. Only what a worker needs when it claims
     * from the Store itself (`capabilities.claimsFromStore`); a transport without wake-ups just waits.
     */
    readonly awaitWork: (options: { readonly queue: string; readonly waitMs: number }) => Effect.Effect<void>
    /** What this transport can do; constant for its lifetime. */
    readonly capabilities: TransportCapabilities
  }
>() {}

/**
 * What a transport declares about itself. The Worker and the Sweeper read it (`Transport.capabilities`) instead of
 * assuming: a transport whose visibility follows the Store lease is never asked to `extend`, batches are cut to
 * `maxBatch`, and delays beyond `maxDelayMs` are left to the sweeper.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransportCapabilities {
  /** Deliveries can be hidden for a chosen time (`defer`). */
  readonly defer: boolean
  /** Messages are moved aside after this many receives. */
  readonly maxReceiveCount: number | null
  /** An ack removes the message for good (false: the message leaves with its job's state, as on a store table). */
  readonly ackRemoves: boolean
  /**
   * A delivered job stays hidden while the Store holds its lease (the transport reads the job record), so `extend`
   * is unnecessary and the Worker never calls it.
   */
  readonly visibilityFollowsLease: boolean
  /** The most messages one publish, receive or ack call carries. */
  readonly maxBatch: number
  /** The longest delay a publish or defer can express, or null for no limit. */
  readonly maxDelayMs: number | null
  /** `receive` returns higher priorities first. */
  readonly priority: boolean
  /**
   * The transport's messages are the Store's own queued job records (a transport on the Store's tables): a worker
   * claims due jobs straight from the Store with `Store.claimNext`, in batches, and calls `awaitWork` to sleep until
   * more may be due, instead of receiving deliveries and claiming them by id.
   */
  readonly claimsFromStore: boolean
}

/**
 * A message the in-memory transport moved aside after `maxReceiveCount` deliveries, with how often it was
 * delivered.
 *
 * @since 0.1.0
 * @category models
 */
export type DeadLetteredMessage = internalMemoryTransport.DeadLetteredMessage

/**
 * The in-memory transport's extra view for tests: its dead-letter list and the number of messages a queue holds
 * (visible or in flight). Provided by `layerMemory` beside `Transport`, backed by the same queues.
 *
 * @since 0.1.0
 * @category services
 */
export class MemoryTransport extends Context.Tag("@slowcall/core/MemoryTransport")<
  MemoryTransport,
  internalMemoryTransport.MemoryTransportService
>() {}

/**
 * A fresh in-memory Transport with SQS-like at-least-once semantics: a received message is hidden for
 * `visibilityMs` under a fresh receipt and delivered again unless acked; `extend`, `defer` and `ack` with a
 * superseded receipt change nothing; delivery order is priority (highest first), then visible time, then publish
 * order. With `maxReceiveCount`, a message already delivered that many times is moved to the dead-letter list
 * instead of being delivered again. Time is the `Clock` in scope when it is made. For tests, examples and the
 * simulator; nothing is persisted.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: (options?: {
  readonly maxReceiveCount?: number | undefined
  /**
   * Schedules `task` after `ms` on the same Clock the transport is made with, returning a cancel function. When
   * given, a waiting receive is woken by it rather than by a sleeping fiber (cheaper, for a simulator that owns its
   * clock's timers); the results are the same.
   */
  readonly timer?: ((ms: number, task: () => void) => () => void) | undefined
}) => Effect.Effect<internalMemoryTransport.MemoryTransportService> = internalMemoryTransport.make

/**
 * A Layer providing one fresh in-memory transport as both `Transport` and `MemoryTransport` (see `makeMemory`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = (options?: {
  readonly maxReceiveCount?: number | undefined
}): Layer.Layer<Transport | MemoryTransport> =>
  Layer.effectContext(
    Effect.map(makeMemory(options), (service) =>
      Context.make(Transport, service).pipe(Context.add(MemoryTransport, service))
    )
  )
