/**
 * SqsTransport on fauxqs (started here) beyond the conformance suite: the redrive check at start, foreign and
 * malformed messages set aside (one log line each, no crash, the worker goes on), message attributes, FIFO queues
 * (deduplication by job id and attempt, a group per tenant, delays in the body), a defer past SQS's 12 hours done by
 * a fresh copy, and the Redis Store paired with the SQS Transport.
 */
import { randomBytes } from "node:crypto"
import { ReceiveMessageCommand, SendMessageCommand } from "@aws-sdk/client-sqs"
import { expect, layer } from "@effect/vitest"
import * as RedisConnection from "@slowcall/adapter-redis/RedisConnection"
import * as RedisStore from "@slowcall/adapter-redis/RedisStore"
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import * as Ids from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import * as Store from "@slowcall/core/Store"
import type { Message } from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Layer, Logger, Schema } from "effect"
import { Redis } from "ioredis"
import * as SqsRedrive from "../src/SqsRedrive.js"
import * as SqsTransport from "../src/SqsTransport.js"
import { clientConfig, layerSqs, SqsServer } from "./fauxqs.js"
import { awaitTerminal, uniqueName } from "./support.js"

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379/2"

const echo = (type: string, calls: Map<string, number>) =>
  Handler.make({
    type,
    version: 1,
    input: Schema.Struct({ text: Schema.String }),
    result: Schema.Struct({ loud: Schema.String }),
    attempt: { timeoutMs: 5_000 },
    run: (input, ctx) =>
      Effect.sync(() => {
        calls.set(ctx.jobId, (calls.get(ctx.jobId) ?? 0) + 1)
        return { loud: input.text.toUpperCase() }
      })
  })

const messageFor = (jobId: JobId, extra: Partial<Message> = {}): Message => ({
  jobId,
  type: "t.echo",
  version: 1,
  ...extra
})

/** Log lines written while `effect` runs, as "LEVEL message". */
const capturingLogs = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      lines.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
    })
    const result = yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    return { result, lines }
  })

layer(layerSqs, { excludeTestServices: true, timeout: 120_000 })("SqsTransport on fauxqs", (it) => {
  it.effect("start: an unsafe redrive fails fast with RedriveUnsafe; warn mode starts; a safe queue starts", () =>
    Effect.gen(function* () {
      const sqs = yield* SqsServer
      const queue = uniqueName("redrive")
      const unsafe = sqs.createWithDlq(`${queue}-a`, 2).url
      const safe = sqs.createWithDlq(`${queue}-b`, 10).url

      const refused = yield* Effect.flip(SqsTransport.make(sqs.client, { queues: { a: unsafe } }))
      const warned = yield* capturingLogs(
        SqsTransport.make(sqs.client, { queues: { a: unsafe }, redrive: { onUnsafe: "warn" } })
      )
      const started = yield* SqsTransport.make(sqs.client, { queues: { b: safe } })

      expect(refused).toBeInstanceOf(SqsRedrive.RedriveUnsafe)
      expect(refused).toMatchObject({ _tag: "RedriveUnsafe", maxReceiveCount: 2, neededReceiveCount: 5 })
      expect(warned.result.capabilities.maxReceiveCount).toBe(2)
      expect(warned.lines.filter((line) => line.includes("could dead-letter a healthy job"))).toHaveLength(1)
      expect(started.capabilities).toEqual(SqsTransport.capabilitiesFor(10))
      expect(yield* started.queueInfo("b")).toMatchObject({ url: safe, fifo: false, maxReceiveCount: 10 })
    })
  )

  it.effect("an empty receive waits its whole waitMs, the part below SQS's one-second unit too", () =>
    Effect.gen(function* () {
      const sqs = yield* SqsServer
      const queue = uniqueName("tail")
      const transport = yield* SqsTransport.make(sqs.client, { queues: { q: sqs.createWithDlq(queue, 10).url } })
      // SQS waits whole seconds: one second of long poll, then the last 500 ms is the transport's to wait.
      const before = Date.now()
      const deliveries = yield* transport.receive({ queue: "q", max: 1, visibilityMs: 30_000, waitMs: 1_500 })
      const waited = Date.now() - before
      expect(deliveries).toEqual([])
      expect(waited).toBeGreaterThanOrEqual(1_450)
      expect(waited).toBeLessThan(3_000)
    })
  )

  it.effect("a queue that cannot be read, or has no URL, is a typed TransportError", () =>
    Effect.gen(function* () {
      const sqs = yield* SqsServer
      const missing = `${sqs.endpoint}/000000000000/${uniqueName("missing")}`

      const atStart = yield* Effect.flip(SqsTransport.make(sqs.client, { queues: { q: missing } }))
      const transport = yield* SqsTransport.make(sqs.client, {})
      const unnamed = yield* Effect.flip(
        transport.receive({ queue: "nowhere", max: 1, visibilityMs: 1_000, waitMs: 0 })
      )

      expect(atStart).toMatchObject({ _tag: "TransportError", reason: "Unknown" })
      expect(unnamed).toMatchObject({ _tag: "TransportError", reason: "Unknown", operation: "resolve" })
    })
  )

  it.effect("messages carry job id, type, version and trace id as attributes", () =>
    Effect.gen(function* () {
      const sqs = yield* SqsServer
      const queue = uniqueName("attrs")
      const url = sqs.createQueue(queue)
      const transport = yield* SqsTransport.make(sqs.client, { queues: { [queue]: url } })
      const jobId = yield* Ids.makeJobId

      yield* transport.publish({ queue, items: [{ message: messageFor(jobId, { traceId: "trace-1", tenant: "t1" }) }] })
      const raw = yield* Effect.promise(() =>
        sqs.client.send(
          new ReceiveMessageCommand({ QueueUrl: url, MessageAttributeNames: ["All"], WaitTimeSeconds: 2 })
        )
      )

      const attributes = raw.Messages?.[0]?.MessageAttributes ?? {}
      expect(attributes["slowcall.jobId"]?.StringValue).toBe(jobId)
      expect(attributes["slowcall.type"]?.StringValue).toBe("t.echo")
      expect(attributes["slowcall.version"]).toMatchObject({ DataType: "Number", StringValue: "1" })
      expect(attributes["slowcall.traceId"]?.StringValue).toBe("trace-1")
    })
  )

  it.effect("foreign and malformed messages are set aside with one log line each; a worker beside them goes on", () =>
    Effect.gen(function* () {
      const sqs = yield* SqsServer
      const queue = uniqueName("foreign")
      const url = sqs.createQueue(queue)
      const bodies = [
        "plain text, not ours",
        JSON.stringify({ order: 42 }),
        JSON.stringify({ slowcall: 1, jobId: "not-a-uuid", type: "t.echo", version: 1 })
      ]
      for (const body of bodies) {
        yield* Effect.promise(() => sqs.client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: body })))
      }
      const calls = new Map<string, number>()
      const seams = Layer.merge(
        Store.layerMemory,
        SqsTransport.layer({ client: clientConfig(sqs.endpoint), queues: { [queue]: url } })
      )
      const app = Worker.layer({ queue, handlers: [echo("t.echo", calls)], receiveWaitMs: 1_000 }).pipe(
        Layer.provideMerge(Client.layer),
        Layer.provideMerge(seams)
      )

      const { lines, result } = yield* capturingLogs(
        Effect.gen(function* () {
          const client = yield* Client.Client
          const { job } = yield* client.submit({ queue, type: "t.echo", input: { text: "ours" } })
          const [done] = yield* awaitTerminal([job.id], 30_000)
          yield* Effect.sleep(500)
          return done!
        }).pipe(Effect.provide(app))
      )

      expect(result).toMatchObject({ state: "succeeded", result: { loud: "OURS" } })
      expect(calls.get(result.id)).toBe(1)
      const asideLines = lines.filter((line) => line.includes("SQS message set aside"))
      expect(asideLines).toHaveLength(3)
      expect(asideLines.filter((line) => line.includes("not a slowcall message"))).toHaveLength(2)
      expect(asideLines.some((line) => line.includes("jobId"))).toBe(true)
      // Set aside, not deleted: they are someone else's, hidden for SQS's 12 hours.
      const inspected = sqs.server.inspectQueue(queue)!
      expect(inspected.messages.inflight).toHaveLength(3)
      for (const entry of inspected.messages.inflight) {
        expect(entry.visibilityDeadline - Date.now()).toBeGreaterThan(11 * 3_600_000)
      }
    })
  )

  it.effect("FIFO: a repeated publish of one attempt is sent once; a tenant's jobs are received one at a time", () =>
    Effect.gen(function* () {
      const sqs = yield* SqsServer
      const queue = uniqueName("fifo")
      const url = sqs.createQueue(`${queue}.fifo`, { FifoQueue: "true" })
      const transport = yield* SqsTransport.make(sqs.client, { queues: { [queue]: url }, fifoGroup: "tenant" })
      const [a, b, c] = [yield* Ids.makeJobId, yield* Ids.makeJobId, yield* Ids.makeJobId]

      // The Client and the outbox relay may both publish attempt 0 of job a: one message.
      yield* transport.publish({ queue, items: [{ message: messageFor(a, { tenant: "acme", attempts: 0 }) }] })
      yield* transport.publish({ queue, items: [{ message: messageFor(a, { tenant: "acme", attempts: 0 }) }] })
      yield* transport.publish({ queue, items: [{ message: messageFor(b, { tenant: "acme", attempts: 0 }) }] })
      yield* transport.publish({ queue, items: [{ message: messageFor(c, { tenant: "other", attempts: 0 }) }] })

      const first = yield* transport.receive({ queue, max: 10, visibilityMs: 30_000, waitMs: 2_000 })
      const ofAcme = first.filter((d) => d.tenant === "acme")
      expect(ofAcme.map((d) => d.jobId)).toEqual([a])
      expect(first.map((d) => d.jobId).sort()).toEqual([a, c].sort())
      yield* transport.ack({ items: first.map((delivery) => ({ delivery })) })
      const second = yield* transport.receive({ queue, max: 10, visibilityMs: 30_000, waitMs: 2_000 })
      expect(second.map((d) => d.jobId)).toEqual([b])
      yield* transport.ack({ items: second.map((delivery) => ({ delivery })) })
      expect(yield* transport.receive({ queue, max: 10, visibilityMs: 30_000, waitMs: 1_000 })).toEqual([])
      expect((yield* transport.queueInfo(queue)).fifo).toBe(true)
    })
  )

  it.effect("FIFO: a delay rides in the body; a message received early is hidden again, never delivered early", () =>
    Effect.gen(function* () {
      const sqs = yield* SqsServer
      const queue = uniqueName("fifodelay")
      const url = sqs.createQueue(`${queue}.fifo`, { FifoQueue: "true" })
      const transport = yield* SqsTransport.make(sqs.client, { queues: { [queue]: url } })
      const jobId = yield* Ids.makeJobId
      const before = Date.now()

      yield* transport.publish({ queue, items: [{ message: messageFor(jobId), delayMs: 2_000 }] })

      expect(yield* transport.receive({ queue, max: 10, visibilityMs: 30_000, waitMs: 0 })).toEqual([])
      let got: ReadonlyArray<{ jobId: string }> = []
      for (let i = 0; i < 10 && got.length === 0; i++) {
        got = yield* transport.receive({ queue, max: 10, visibilityMs: 30_000, waitMs: 1_000 })
      }
      expect(got.map((d) => d.jobId)).toEqual([jobId])
      expect(Date.now() - before).toBeGreaterThanOrEqual(2_000)
    })
  )

  it.effect("a defer past SQS's 12 hours from the receive is a fresh copy, due then, and the old message goes", () =>
    Effect.gen(function* () {
      const sqs = yield* SqsServer
      const queue = uniqueName("copy")
      const url = sqs.createQueue(queue)
      const transport = yield* SqsTransport.make(sqs.client, { queues: { [queue]: url } })
      const jobId = yield* Ids.makeJobId
      yield* transport.publish({ queue, items: [{ message: messageFor(jobId) }] })
      const [delivery] = yield* transport.receive({ queue, max: 1, visibilityMs: 30_000, waitMs: 2_000 })
      // The same delivery as if it had been received almost 12 hours ago: its visibility cannot reach 2 s from now.
      const handle = delivery!.receipt.slice(delivery!.receipt.indexOf(":") + 1)
      const old = { ...delivery!, receipt: `${Date.now() - 43_190_000}:${handle}` }

      yield* transport.defer({ items: [{ delivery: old, delayMs: 2_000 }] })

      expect(yield* transport.receive({ queue, max: 1, visibilityMs: 30_000, waitMs: 0 })).toEqual([])
      let again: ReadonlyArray<{ jobId: string; receiveCount: number }> = []
      for (let i = 0; i < 10 && again.length === 0; i++) {
        again = yield* transport.receive({ queue, max: 1, visibilityMs: 30_000, waitMs: 1_000 })
      }
      // A fresh message: its receive count starts again.
      expect(again).toMatchObject([{ jobId, receiveCount: 1 }])
      expect(sqs.server.inspectQueue(queue)!.messages.inflight).toHaveLength(1)
    })
  )

  it.effect("Redis Store + SQS Transport: a Client-submitted job runs to success with one model call", () =>
    Effect.gen(function* () {
      const sqs = yield* SqsServer
      const queue = uniqueName("redis")
      const url = sqs.createQueue(queue)
      const prefix = `sctest:sqs:${randomBytes(4).toString("hex")}`
      const calls = new Map<string, number>()
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
          let cursor = "0"
          do {
            const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000)
            if (keys.length > 0) await redis.unlink(...keys)
            cursor = next
          } while (cursor !== "0")
          await redis.quit()
        })
      )
      const seams = Layer.merge(
        RedisStore.layerFromConnection({ checkServer: false }),
        SqsTransport.layer({ client: clientConfig(sqs.endpoint), queues: { [queue]: url } })
      ).pipe(Layer.provideMerge(RedisConnection.layer({ url: REDIS_URL, prefix })))
      const app = Worker.layer({ queue, handlers: [echo("r.echo", calls)], receiveWaitMs: 1_000 }).pipe(
        Layer.provideMerge(Client.layer),
        Layer.provideMerge(seams)
      )

      const done = yield* Effect.gen(function* () {
        const client = yield* Client.Client
        const { job } = yield* client.submit({ queue, type: "r.echo", input: { text: "paired" } })
        const [done] = yield* awaitTerminal([job.id], 30_000)
        return done!
      }).pipe(Effect.provide(app))

      expect(done).toMatchObject({ state: "succeeded", attempts: 1, result: { loud: "PAIRED" } })
      expect(calls.get(done.id)).toBe(1)
      expect(sqs.server.inspectQueue(queue)!.messages.ready).toHaveLength(0)
    }).pipe(Effect.scoped)
  )
})
