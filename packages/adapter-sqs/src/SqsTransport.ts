/**
 * The Transport on Amazon SQS. SQS only wakes workers; the job record stays in a Store (Postgres or Redis), and the
 * claim there decides who may call the model. What it keeps:
 * - **Visibility is the lease.** A receive hides each message for the worker's lease; the worker's heartbeat tick
 *   extends every message it holds with `ChangeMessageVisibilityBatch` (one call per ten messages). A worker that
 *   dies stops extending, the message returns after the lease, and the next worker's claim takes the job over.
 * - **Batches.** Publish is `SendMessageBatch`, ack `DeleteMessageBatch`, extend and defer
 *   `ChangeMessageVisibilityBatch`, each cut into calls of ten; receive long-polls up to ten messages at once.
 * - **Ack after persist.** The worker acks only after the Store holds the outcome; an ack, extend or defer with a
 *   receipt SQS no longer honours changes nothing.
 * - **Any delay.** SQS hides a message for at most 15 minutes at publish and 12 hours from a receive. A longer delay
 *   rides in the body (`notBefore`): a message received before it is due is hidden again (or, past the 12 hours,
 *   replaced by a fresh copy and deleted), never delivered early, so `maxDelayMs` is null.
 * - **Standard and FIFO.** A FIFO queue (its URL ends in `.fifo`) gets a message group per job (default) or per
 *   tenant, and a deduplication id from the job id and attempt, so a publish repeated within five minutes is sent once.
 * - **Attributes.** Each message carries `slowcall.jobId`, `slowcall.type`, `slowcall.version` and
 *   `slowcall.traceId` as message attributes beside its JSON body.
 * - **Foreign messages.** A message that is not ours, or does not parse, is hidden for `asideMs` (default the SQS
 *   maximum of 12 hours, so a redrive policy moves it to the dead-letter queue in time), logged once per receive,
 *   never delivered and never deleted: it is someone else's.
 * - **Redrive safety.** At start (or on first use of a queue named by `queueUrl`) the transport reads the queue's
 *   `RedrivePolicy` and `VisibilityTimeout` and fails with `RedriveUnsafe` (or warns, `redrive.onUnsafe: "warn"`)
 *   when SQS could dead-letter a healthy job before the Store gave up on it (`SqsRedrive.verdict`). A message that
 *   reaches the dead-letter queue never orphans its job: the Store still holds it, and the sweeper republishes it.
 *
 * @since 0.1.0
 */
import {
  type BatchResultErrorEntry,
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  SQSClient,
  type SQSClientConfig,
  type Message as SqsMessage
} from "@aws-sdk/client-sqs"
import { TransportError } from "@slowcall/core/Errors"
import type { JobId } from "@slowcall/core/Job"
import { type Delivery, type Message, Transport, type TransportCapabilities } from "@slowcall/core/Transport"
import { Clock, Context, Duration, Effect, Layer } from "effect"
import * as Codec from "./internal/codec.js"
import { toTransportError } from "./internal/errors.js"
import * as SqsRedrive from "./SqsRedrive.js"

/** SQS's limits: entries per batch call, publish delay, visibility, long-poll wait. */
const MAX_ENTRIES = 10
const MAX_DELAY_SECONDS = 900
const MAX_VISIBILITY_SECONDS = 43_200
const MAX_WAIT_SECONDS = 20
/** A hide that would end this close to SQS's 12 hours from the receive is done by a fresh copy instead. */
const VISIBILITY_HEADROOM_MS = 60_000
/** Calls of one verb in flight at once (each carries up to ten messages). */
const CALL_CONCURRENCY = 8

/**
 * One SQS queue as the transport knows it: the slowcall queue it carries, its URL, whether it is FIFO, and the
 * settings read from it at start (`maxReceiveCount` null: no redrive policy).
 *
 * @since 0.1.0
 * @category models
 */
export interface QueueInfo {
  readonly queue: string
  readonly url: string
  readonly fifo: boolean
  readonly maxReceiveCount: number | null
  readonly deadLetterTargetArn: string | null
  readonly visibilityTimeoutMs: number
  readonly retentionMs: number
}

/**
 * Options of `make`.
 * - `queues`: slowcall queue name to SQS queue URL; each is read and checked at start.
 * - `queueUrl`: a resolver for names not in `queues` (read and checked on first use; a failed check fails that
 *   call with a `TransportError`).
 * - `fifoGroup`: a FIFO queue's message group: one per job (default: no job waits for another) or one per tenant
 *   (a tenant's jobs are received in publish order, one at a time).
 * - `redrive`: what the Store allows a job (`maxAttempts`, default 3; `leaseMs`, default the queue's
 *   VisibilityTimeout; `receiveMargin`, default 2) and what to do when the queue is unsafe (`onUnsafe`, default
 *   `"fail"`).
 * - `asideMs`: how long a foreign or malformed message is hidden (default 12 hours, the SQS maximum).
 *
 * @since 0.1.0
 * @category models
 */
export interface SqsTransportOptions {
  readonly queues?: Readonly<Record<string, string>> | undefined
  readonly queueUrl?: ((queue: string) => string | undefined) | undefined
  readonly fifoGroup?: "job" | "tenant" | undefined
  readonly redrive?:
    | {
        readonly onUnsafe?: "fail" | "warn" | undefined
        readonly maxAttempts?: number | undefined
        readonly leaseMs?: number | undefined
        readonly receiveMargin?: number | undefined
      }
    | undefined
  readonly asideMs?: number | undefined
}

/**
 * The SqsTransport service: the generic Transport plus `queueInfo`, the settings of the SQS queue that carries a
 * slowcall queue (read once, then cached).
 *
 * @since 0.1.0
 * @category models
 */
export type SqsTransportService = Transport["Type"] & {
  readonly queueInfo: (queue: string) => Effect.Effect<QueueInfo, TransportError>
}

/**
 * The SqsTransport tag (same instance as the generic `Transport` its layers provide).
 *
 * @since 0.1.0
 * @category services
 */
export class SqsTransport extends Context.Tag("@slowcall/adapter-sqs/SqsTransport")<
  SqsTransport,
  SqsTransportService
>() {}

/**
 * What an SqsTransport declares, given the smallest `maxReceiveCount` of the queues it read at start (null: none
 * has a redrive policy): visibility is its own (the worker extends it), an ack deletes, batches of ten, any delay,
 * no priorities (SQS has none).
 *
 * @since 0.1.0
 * @category models
 */
export const capabilitiesFor = (maxReceiveCount: number | null): TransportCapabilities => ({
  defer: true,
  maxReceiveCount,
  ackRemoves: true,
  visibilityFollowsLease: false,
  maxBatch: MAX_ENTRIES,
  maxDelayMs: null,
  priority: false,
  claimsFromStore: false
})

const seconds = (ms: number, max: number): number => Math.min(max, Math.max(0, Math.ceil(ms / 1000)))

const chunksOf = <A>(items: ReadonlyArray<A>): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += MAX_ENTRIES) out.push(items.slice(i, i + MAX_ENTRIES))
  return out
}

const groupBy = <A>(items: ReadonlyArray<A>, key: (item: A) => string): Map<string, Array<A>> => {
  const groups = new Map<string, Array<A>>()
  for (const item of items) {
    const k = key(item)
    const group = groups.get(k)
    if (group === undefined) groups.set(k, [item])
    else group.push(item)
  }
  return groups
}

/**
 * A batch's per-entry failures: a sender fault names this entry only (a receipt SQS no longer honours, a message no
 * longer in flight) and changes nothing, as the contract says for a superseded receipt; a server fault fails the call.
 */
const serverFaults = (operation: string, failed: ReadonlyArray<BatchResultErrorEntry> | undefined) => {
  const faults = (failed ?? []).filter((entry) => entry.SenderFault !== true)
  return faults.length === 0
    ? Effect.void
    : Effect.fail(
        new TransportError({
          reason: "Connection",
          operation,
          detail: `${faults.length} entries failed: ${faults[0]!.Code}: ${faults[0]!.Message ?? ""}`
        })
      )
}

/** Reads a queue's settings (`GetQueueAttributes`). */
const readQueue = (client: SQSClient, queue: string, url: string): Effect.Effect<QueueInfo, TransportError> =>
  Effect.tryPromise({
    try: (signal) =>
      client.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ["RedrivePolicy", "VisibilityTimeout", "FifoQueue", "MessageRetentionPeriod"]
        }),
        { abortSignal: signal }
      ),
    catch: (error) => toTransportError("start (GetQueueAttributes)", error)
  }).pipe(
    Effect.map((reply): QueueInfo => {
      const attributes = reply.Attributes ?? {}
      let maxReceiveCount: number | null = null
      let deadLetterTargetArn: string | null = null
      if (attributes.RedrivePolicy !== undefined && attributes.RedrivePolicy !== "") {
        try {
          const policy = JSON.parse(attributes.RedrivePolicy) as Record<string, unknown>
          const count = Number(policy.maxReceiveCount)
          maxReceiveCount = Number.isFinite(count) && count >= 1 ? count : null
          deadLetterTargetArn = typeof policy.deadLetterTargetArn === "string" ? policy.deadLetterTargetArn : null
        } catch {
          maxReceiveCount = null
        }
      }
      return {
        queue,
        url,
        fifo: attributes.FifoQueue === "true" || url.endsWith(".fifo"),
        maxReceiveCount,
        deadLetterTargetArn,
        visibilityTimeoutMs: Number(attributes.VisibilityTimeout ?? 30) * 1000,
        retentionMs: Number(attributes.MessageRetentionPeriod ?? 345_600) * 1000
      }
    })
  )

/** The redrive check of one queue: the queue when safe (or when unsafe is only warned about), else the error. */
const checkRedrive = (
  info: QueueInfo,
  options: SqsTransportOptions
): Effect.Effect<QueueInfo, SqsRedrive.RedriveUnsafe> => {
  const maxAttempts = options.redrive?.maxAttempts ?? 3
  const leaseMs = options.redrive?.leaseMs ?? info.visibilityTimeoutMs
  const verdict = SqsRedrive.verdict({
    maxReceiveCount: info.maxReceiveCount,
    visibilityTimeoutMs: info.visibilityTimeoutMs,
    maxAttempts,
    leaseMs,
    receiveMargin: options.redrive?.receiveMargin ?? 2
  })
  if (verdict._tag === "Safe" || info.maxReceiveCount === null) return Effect.succeed(info)
  const error = new SqsRedrive.RedriveUnsafe({
    queue: info.queue,
    queueUrl: info.url,
    reason: verdict.reason,
    maxReceiveCount: info.maxReceiveCount,
    neededReceiveCount: verdict.neededReceiveCount,
    visibilityTimeoutMs: info.visibilityTimeoutMs,
    maxAttempts,
    leaseMs
  })
  return options.redrive?.onUnsafe === "warn"
    ? Effect.as(Effect.logWarning(`${error.message} (starting anyway: redrive.onUnsafe is "warn")`), info)
    : Effect.fail(error)
}

/**
 * An SqsTransport over `client`. Reads and checks every queue of `options.queues` first (see the module header):
 * fails with `RedriveUnsafe` when a queue's redrive could dead-letter a healthy job, or with `TransportError` when a
 * queue cannot be read. The client stays the caller's.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  client: SQSClient,
  options: SqsTransportOptions = {}
): Effect.Effect<SqsTransportService, SqsRedrive.RedriveUnsafe | TransportError> =>
  Effect.gen(function* () {
    const known = new Map<string, QueueInfo>()
    const refused = new Map<string, TransportError>()
    for (const [queue, url] of Object.entries(options.queues ?? {})) {
      known.set(queue, yield* Effect.flatMap(readQueue(client, queue, url), (info) => checkRedrive(info, options)))
    }
    let smallest: number | null = null
    for (const info of known.values()) {
      if (info.maxReceiveCount !== null) smallest = Math.min(smallest ?? info.maxReceiveCount, info.maxReceiveCount)
    }
    const capabilities = capabilitiesFor(smallest)
    const fifoGroup = options.fifoGroup ?? "job"
    const asideSeconds = seconds(options.asideMs ?? MAX_VISIBILITY_SECONDS * 1000, MAX_VISIBILITY_SECONDS)

    const queueInfo = (queue: string): Effect.Effect<QueueInfo, TransportError> =>
      Effect.suspend(() => {
        const info = known.get(queue)
        if (info !== undefined) return Effect.succeed(info)
        const refusal = refused.get(queue)
        if (refusal !== undefined) return Effect.fail(refusal)
        const url = options.queues?.[queue] ?? options.queueUrl?.(queue)
        if (url === undefined) {
          return Effect.fail(
            new TransportError({ reason: "Unknown", operation: "resolve", detail: `no SQS queue URL for "${queue}"` })
          )
        }
        return readQueue(client, queue, url).pipe(
          Effect.flatMap((read) =>
            checkRedrive(read, options).pipe(
              Effect.catchTag("RedriveUnsafe", (error) => {
                const refusal = new TransportError({ reason: "Unknown", operation: "start", detail: error.message })
                refused.set(queue, refusal)
                return Effect.fail(refusal)
              })
            )
          ),
          Effect.tap((read) => Effect.sync(() => known.set(queue, read)))
        )
      })

    const call = <A>(operation: string, run: (signal: AbortSignal) => Promise<A>): Effect.Effect<A, TransportError> =>
      Effect.tryPromise({ try: run, catch: (error) => toTransportError(operation, error) })

    /** Sends entries (already cut to ten) to one queue. */
    const sendBatch = (operation: string, url: string, entries: ReadonlyArray<SendMessageBatchRequestEntry>) =>
      Effect.flatMap(
        call(operation, (signal) =>
          client.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [...entries] }), { abortSignal: signal })
        ),
        (reply) =>
          (reply.Failed ?? []).length === 0
            ? Effect.void
            : Effect.fail(
                new TransportError({
                  reason: reply.Failed!.some((entry) => entry.SenderFault !== true) ? "Connection" : "Unknown",
                  operation,
                  detail: `${reply.Failed!.length} of ${entries.length} messages refused: ${reply.Failed![0]!.Code}: ${reply.Failed![0]!.Message ?? ""}`
                })
              )
      )

    /** The send entry of `message` on `info`'s queue, hidden for `delayMs` from `now`. */
    const entryOf = (
      info: QueueInfo,
      id: string,
      message: Message,
      delayMs: number,
      now: number,
      copy: boolean
    ): SendMessageBatchRequestEntry => {
      const delay = Math.max(0, delayMs)
      // FIFO queues take no per-message delay: any delay rides in the body. A standard queue hides up to 15 minutes.
      const inBody = info.fifo ? delay > 0 : seconds(delay, Number.POSITIVE_INFINITY) > MAX_DELAY_SECONDS
      const notBefore = inBody ? now + delay : undefined
      const entry: SendMessageBatchRequestEntry = {
        Id: id,
        MessageBody: Codec.encodeBody(message, notBefore),
        MessageAttributes: Codec.attributesOf(message)
      }
      if (info.fifo) {
        return {
          ...entry,
          MessageGroupId: fifoGroup === "tenant" && message.tenant != null ? `t.${message.tenant}` : message.jobId,
          MessageDeduplicationId: Codec.deduplicationId(message, copy ? notBefore : undefined)
        }
      }
      return { ...entry, DelaySeconds: seconds(delay, MAX_DELAY_SECONDS) }
    }

    const changeVisibility = (
      operation: string,
      url: string,
      items: ReadonlyArray<{ readonly handle: string; readonly seconds: number }>
    ) =>
      Effect.forEach(
        chunksOf(items),
        (chunk) =>
          Effect.flatMap(
            call(operation, (signal) =>
              client.send(
                new ChangeMessageVisibilityBatchCommand({
                  QueueUrl: url,
                  Entries: chunk.map((item, i) => ({
                    Id: `v${i}`,
                    ReceiptHandle: item.handle,
                    VisibilityTimeout: item.seconds
                  }))
                }),
                { abortSignal: signal }
              )
            ),
            (reply) => serverFaults(operation, reply.Failed)
          ),
        { concurrency: CALL_CONCURRENCY, discard: true }
      )

    const deleteMessages = (operation: string, url: string, handles: ReadonlyArray<string>) =>
      Effect.forEach(
        chunksOf(handles),
        (chunk) =>
          Effect.flatMap(
            call(operation, (signal) =>
              client.send(
                new DeleteMessageBatchCommand({
                  QueueUrl: url,
                  Entries: chunk.map((handle, i) => ({ Id: `d${i}`, ReceiptHandle: handle }))
                }),
                { abortSignal: signal }
              )
            ),
            (reply) => serverFaults(operation, reply.Failed)
          ),
        { concurrency: CALL_CONCURRENCY, discard: true }
      )

    /**
     * Hide received messages until `until` (local ms): by their visibility while that ends within SQS's 12 hours of
     * the receive, else by a fresh copy due then (the old one deleted once the copy is sent, so the receive count
     * starts again).
     */
    const hideUntil = (
      operation: string,
      info: QueueInfo,
      items: ReadonlyArray<{
        readonly message: Message
        readonly receivedAt: number
        readonly handle: string
        readonly until: number
      }>
    ) =>
      Effect.gen(function* () {
        if (items.length === 0) return
        const now = yield* Clock.currentTimeMillis
        const byVisibility: Array<{ handle: string; seconds: number }> = []
        const byCopy: Array<(typeof items)[number]> = []
        for (const item of items) {
          const delay = Math.max(0, item.until - now)
          if (now - item.receivedAt + delay <= MAX_VISIBILITY_SECONDS * 1000 - VISIBILITY_HEADROOM_MS) {
            byVisibility.push({ handle: item.handle, seconds: seconds(delay, MAX_VISIBILITY_SECONDS) })
          } else {
            byCopy.push(item)
          }
        }
        if (byVisibility.length > 0) yield* changeVisibility(operation, info.url, byVisibility)
        for (const chunk of chunksOf(byCopy)) {
          yield* sendBatch(
            operation,
            info.url,
            chunk.map((item, i) => entryOf(info, `c${i}`, item.message, item.until - now, now, true))
          )
          yield* deleteMessages(
            operation,
            info.url,
            chunk.map((item) => item.handle)
          )
        }
      })

    const publish: SqsTransportService["publish"] = ({ items, queue }) =>
      items.length === 0
        ? Effect.void
        : Effect.gen(function* () {
            const info = yield* queueInfo(queue)
            const now = yield* Clock.currentTimeMillis
            yield* Effect.forEach(
              chunksOf(items),
              (chunk) =>
                sendBatch(
                  "publish (SendMessageBatch)",
                  info.url,
                  chunk.map((item, i) => entryOf(info, `m${i}`, item.message, item.delayMs ?? 0, now, false))
                ),
              { concurrency: CALL_CONCURRENCY, discard: true }
            )
          })

    /** One ReceiveMessage call, sorted: deliveries, messages received before they are due, and foreign ones. */
    const receiveOnce = (info: QueueInfo, max: number, visibilityMs: number, waitSeconds: number) =>
      Effect.gen(function* () {
        const sentAt = yield* Clock.currentTimeMillis
        const reply = yield* call("receive (ReceiveMessage)", (signal) =>
          client.send(
            new ReceiveMessageCommand({
              QueueUrl: info.url,
              MaxNumberOfMessages: Math.min(MAX_ENTRIES, Math.max(1, max)),
              VisibilityTimeout: seconds(visibilityMs, MAX_VISIBILITY_SECONDS),
              WaitTimeSeconds: waitSeconds,
              MessageAttributeNames: ["All"],
              MessageSystemAttributeNames: ["ApproximateReceiveCount"]
            }),
            { abortSignal: signal }
          )
        )
        const now = yield* Clock.currentTimeMillis
        const deliveries: Array<Delivery> = []
        const early: Array<{ message: Message; receivedAt: number; handle: string; until: number }> = []
        const aside: Array<{ message: SqsMessage; reason: string }> = []
        for (const message of reply.Messages ?? []) {
          const handle = message.ReceiptHandle
          if (handle === undefined) continue
          const parsed = Codec.parseBody(message.Body)
          if (parsed._tag !== "Ok") {
            aside.push({
              message,
              reason: parsed._tag === "Foreign" ? `not a slowcall message (${parsed.reason})` : parsed.reason
            })
            continue
          }
          const body = parsed.body
          if (body.notBefore !== undefined && body.notBefore > now) {
            early.push({ message: Codec.messageOfBody(body), receivedAt: sentAt, handle, until: body.notBefore })
            continue
          }
          deliveries.push({
            ...Codec.messageOfBody(body),
            jobId: body.jobId as JobId,
            queue: info.queue,
            receipt: Codec.encodeReceipt(sentAt, handle),
            receiveCount: Number(message.Attributes?.ApproximateReceiveCount ?? 1)
          })
        }
        // Neither kind may fail the receive: a message whose hide failed returns after this receive's visibility.
        if (aside.length > 0) {
          yield* Effect.forEach(
            aside,
            ({ message, reason }) =>
              Effect.logWarning(`SQS message set aside: ${reason}`).pipe(
                Effect.annotateLogs({
                  queue: info.queue,
                  messageId: message.MessageId ?? "",
                  receiveCount: message.Attributes?.ApproximateReceiveCount ?? ""
                })
              ),
            { discard: true }
          )
          yield* changeVisibility(
            "set aside (ChangeMessageVisibilityBatch)",
            info.url,
            aside.map(({ message }) => ({ handle: message.ReceiptHandle!, seconds: asideSeconds }))
          ).pipe(Effect.catchAll((error) => Effect.logWarning("setting a message aside failed", error)))
        }
        if (early.length > 0) {
          yield* hideUntil("re-hide (ChangeMessageVisibilityBatch)", info, early).pipe(
            Effect.catchAll((error) => Effect.logWarning("re-hiding a message not due yet failed", error))
          )
        }
        return deliveries
      })

    const receive: SqsTransportService["receive"] = ({ max, queue, visibilityMs, waitMs }) =>
      Effect.gen(function* () {
        const info = yield* queueInfo(queue)
        if (max <= 0) return []
        const deadline = (yield* Clock.currentTimeMillis) + Math.max(0, waitMs)
        while (true) {
          const remaining = deadline - (yield* Clock.currentTimeMillis)
          const waitSeconds = Math.min(MAX_WAIT_SECONDS, Math.max(0, Math.floor(remaining / 1000)))
          const deliveries = yield* receiveOnce(info, max, visibilityMs, waitSeconds)
          if (deliveries.length > 0) return deliveries
          const left = deadline - (yield* Clock.currentTimeMillis)
          if (left <= 0) return deliveries
          // Less than SQS's one-second unit of wait is left (a long poll that came back early, or only messages set
          // aside): wait it out here, then look once more, so an empty receive takes its whole waitMs.
          if (waitSeconds === 0) {
            yield* Effect.sleep(Duration.millis(left))
            return yield* receiveOnce(info, max, visibilityMs, 0)
          }
        }
      })

    /** The deliveries of `items` by queue, each with its parsed receipt (a receipt that is not ours is skipped). */
    const received = <I extends { readonly delivery: Delivery }>(
      items: ReadonlyArray<I>
    ): Array<{
      readonly queue: string
      readonly items: Array<{ readonly item: I; readonly receivedAt: number; readonly handle: string }>
    }> =>
      Array.from(
        groupBy(items, (item) => item.delivery.queue),
        ([queue, group]) => ({
          queue,
          items: group.flatMap((item) => {
            const receipt = Codec.decodeReceipt(item.delivery.receipt)
            return receipt === undefined ? [] : [{ item, ...receipt }]
          })
        })
      )

    const extend: SqsTransportService["extend"] = ({ items }) =>
      Effect.forEach(
        received(items),
        ({ items: group, queue }) =>
          Effect.gen(function* () {
            const info = yield* queueInfo(queue)
            const now = yield* Clock.currentTimeMillis
            // SQS refuses a visibility past 12 hours from the receive: extend up to there; the message then returns,
            // its claim finds the job busy, and the defer hides it again under a fresh copy.
            const entries = group.flatMap(({ handle, item, receivedAt }) => {
              const allowed = MAX_VISIBILITY_SECONDS * 1000 - VISIBILITY_HEADROOM_MS - (now - receivedAt)
              const ms = Math.min(item.visibilityMs, allowed)
              return ms <= 0 ? [] : [{ handle, seconds: seconds(ms, MAX_VISIBILITY_SECONDS) }]
            })
            yield* changeVisibility("extend (ChangeMessageVisibilityBatch)", info.url, entries)
          }),
        { discard: true }
      )

    const defer: SqsTransportService["defer"] = ({ items }) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        yield* Effect.forEach(
          received(items),
          ({ items: group, queue }) =>
            Effect.flatMap(queueInfo(queue), (info) =>
              hideUntil(
                "defer (ChangeMessageVisibilityBatch)",
                info,
                group.map(({ handle, item, receivedAt }) => ({
                  message: item.delivery,
                  receivedAt,
                  handle,
                  until: now + Math.max(0, item.delayMs)
                }))
              )
            ),
          { discard: true }
        )
      })

    const ack: SqsTransportService["ack"] = ({ items }) =>
      Effect.forEach(
        received(items),
        ({ items: group, queue }) =>
          Effect.flatMap(queueInfo(queue), (info) =>
            deleteMessages(
              "ack (DeleteMessageBatch)",
              info.url,
              group.map(({ handle }) => handle)
            )
          ),
        { discard: true }
      )

    const service = {
      publish,
      receive,
      extend,
      defer,
      ack,
      // SQS has no wake-up of its own that a Store-claiming worker could wait on: the wait is the wait.
      awaitWork: ({ waitMs }) => Effect.sleep(Duration.millis(Math.max(0, waitMs))),
      capabilities,
      queueInfo
    } satisfies SqsTransportService
    return service
  })

/**
 * SqsTransport and the generic `Transport` (same instance) over an `SQSClient` the caller owns.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromClient = (
  client: SQSClient,
  options: SqsTransportOptions = {}
): Layer.Layer<SqsTransport | Transport, SqsRedrive.RedriveUnsafe | TransportError> =>
  Layer.effectContext(
    Effect.map(make(client, options), (transport) =>
      Context.make(SqsTransport, transport).pipe(Context.add(Transport, transport))
    )
  )

/**
 * SqsTransport and the generic `Transport` over a fresh `SQSClient` made from `client` (region, endpoint,
 * credentials; the SDK's defaults otherwise), destroyed when the layer's scope closes. A request times out after
 * 30 s unless `client.requestHandler` says otherwise (a long poll waits at most 20 s).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: SqsTransportOptions & { readonly client?: SQSClientConfig | undefined }
): Layer.Layer<SqsTransport | Transport, SqsRedrive.RedriveUnsafe | TransportError> =>
  Layer.unwrapScoped(
    Effect.map(
      Effect.acquireRelease(
        Effect.sync(
          () =>
            new SQSClient({ requestHandler: { requestTimeout: 30_000, connectionTimeout: 5_000 }, ...options.client })
        ),
        (client) => Effect.sync(() => client.destroy())
      ),
      (client) => layerFromClient(client, options)
    )
  )
