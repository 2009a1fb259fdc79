/**
 * The Postgres Store paired with the SQS Transport (fauxqs, started here), composed as layers: SQS only wakes
 * workers, the job record and every decision stay in Postgres.
 * - A visibility shorter than the call makes SQS deliver each message again while its job runs (and the outbox
 *   relay publishes every job a second time); there is still exactly one model call per job.
 * - A worker killed (SIGKILL) in the middle of a call leaves its job to another worker, which takes it over once the
 *   lease has run out and finishes it.
 * - Messages moved to the SQS dead-letter queue lose no job: the sweeper republishes the queued jobs and a worker
 *   finishes them.
 */
import { spawn } from "node:child_process"
import { createRequire } from "node:module"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { GetQueueAttributesCommand } from "@aws-sdk/client-sqs"
import { expect, layer } from "@effect/vitest"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import type { JobId } from "@slowcall/core/Job"
import { Query } from "@slowcall/core/Query"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Layer, Schema } from "effect"
import * as SqsTransport from "../src/SqsTransport.js"
import { clientConfig, layerSqs, SqsServer } from "./fauxqs.js"
import { awaitTerminal, DATABASE_URL, observed, pgStoreLayer, uniqueName } from "./support.js"

const schema = uniqueName("sqs_pg")

/** A handler whose call takes `callMs` and is counted per job. */
const counted = (type: string, callMs: number, calls: Map<string, number>) =>
  Handler.make({
    type,
    version: 1,
    input: Schema.Struct({ text: Schema.String }),
    result: Schema.Struct({ loud: Schema.String }),
    attempt: { timeoutMs: 5_000 },
    run: (input, ctx) =>
      ctx.call({
        estimateCents: 1,
        run: Effect.sync(() => calls.set(ctx.jobId, (calls.get(ctx.jobId) ?? 0) + 1)).pipe(
          Effect.zipRight(Effect.sleep(callMs)),
          Effect.as({ loud: input.text.toUpperCase() })
        ),
        cost: () => 1
      })
  })

/** The SQS Transport on a queue made for the test (standard, or with a dead-letter queue). */
const sqsLayer = (queue: string, options: { readonly maxReceiveCount?: number } = {}) =>
  Layer.unwrapEffect(
    Effect.map(SqsServer, (sqs) => {
      const url =
        options.maxReceiveCount === undefined
          ? sqs.createQueue(queue)
          : sqs.createWithDlq(queue, options.maxReceiveCount).url
      return SqsTransport.layer({
        client: clientConfig(sqs.endpoint),
        queues: { [queue]: url },
        redrive: { onUnsafe: "warn" }
      })
    })
  )

const messagesIn = (url: string) =>
  Effect.flatMap(SqsServer, (sqs) =>
    Effect.promise(() =>
      sqs.client.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        })
      )
    ).pipe(
      Effect.map(
        (reply) =>
          Number(reply.Attributes?.ApproximateNumberOfMessages ?? 0) +
          Number(reply.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
      )
    )
  )

layer(Layer.merge(layerSqs, pgStoreLayer(schema)), { excludeTestServices: true, timeout: 120_000 })(
  "PgStore + SqsTransport",
  (it) => {
    it.effect("a visibility shorter than the call delivers twice; each job still gets exactly one model call", () =>
      Effect.gen(function* () {
        const queue = uniqueName("dup")
        const calls = new Map<string, number>()
        const handler = counted("dup.echo", 2_500, calls)
        const seen = observed({ visibilityMs: 1_000 })
        const seams = seen.layer.pipe(Layer.provideMerge(sqsLayer(queue)))
        // Two workers on the queue, and the outbox relay publishing every job a second time beside the Client.
        const app = Layer.mergeAll(
          Worker.layer({ queue, handlers: [handler], concurrency: 2, receiveWaitMs: 1_000, busyMarginMs: 100 }),
          Worker.layer({ queue, handlers: [handler], concurrency: 2, receiveWaitMs: 1_000, busyMarginMs: 100 }),
          PgStore.layerOutboxRelay({ intervalMs: 200 })
        ).pipe(Layer.provideMerge(Client.layer), Layer.provideMerge(seams))

        const ids = yield* Effect.gen(function* () {
          const client = yield* Client.Client
          const ids: Array<JobId> = []
          for (let i = 0; i < 4; i++) {
            ids.push((yield* client.submit({ queue, type: "dup.echo", input: { text: `job ${i}` } })).job.id)
          }
          const jobs = yield* awaitTerminal(ids)
          expect(jobs.map((job) => job.state)).toEqual(["succeeded", "succeeded", "succeeded", "succeeded"])
          return ids
        }).pipe(Effect.provide(app))

        // Exactly one model call per job, although SQS delivered messages again while the calls ran.
        expect(ids.map((id) => calls.get(id))).toEqual([1, 1, 1, 1])
        const redelivered = ids.filter((id) => (seen.deliveries.get(id) ?? 0) >= 2)
        expect(redelivered.length).toBeGreaterThan(0)
        const query = yield* Query
        for (const id of ids) {
          const job = yield* query.get({ jobId: id })
          expect(job).toMatchObject({ state: "succeeded", attempts: 1, costCents: 1 })
        }
      })
    )

    it.effect("a worker killed mid-call leaves its job to another worker, which finishes it after the lease", () =>
      Effect.gen(function* () {
        const sqs = yield* SqsServer
        const queue = uniqueName("kill")
        const url = sqs.createQueue(queue)
        const calls = new Map<string, number>()
        const transport = SqsTransport.layer({ client: clientConfig(sqs.endpoint), queues: { [queue]: url } })
        const seams = transport

        // The first worker runs in its own process, so it can be killed with SIGKILL in the middle of its call.
        const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href
        const child = spawn(process.execPath, ["--import", tsx, join(import.meta.dirname, "fixtures", "worker.ts")], {
          env: {
            ...process.env,
            AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
            SQS_ENDPOINT: sqs.endpoint,
            SQS_QUEUE_URL: url,
            QUEUE: queue,
            DATABASE_URL,
            PG_SCHEMA: schema
          },
          stdio: ["ignore", "pipe", "pipe"]
        })
        let output = ""
        child.stdout.on("data", (chunk) => {
          output += chunk
        })
        child.stderr.on("data", (chunk) => {
          output += chunk
        })
        const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()))
        yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))

        const jobId = yield* Effect.gen(function* () {
          const client = yield* Client.Client
          return (yield* client.submit({ queue, type: "kill.echo", input: { text: "survive" } })).job.id
        }).pipe(Effect.provide(Client.layer.pipe(Layer.provideMerge(seams))))
        for (let i = 0; i < 300 && !output.includes(`CALL ${jobId}`); i++) yield* Effect.sleep(100)
        expect(output, output).toContain(`CALL ${jobId}`)
        child.kill("SIGKILL")
        yield* Effect.promise(() => exited)
        const query = yield* Query
        expect(yield* query.get({ jobId })).toMatchObject({ state: "running", attempts: 1 })

        // A second worker receives the message once its visibility (the dead worker's lease) ends, and takes over.
        const jobs = yield* awaitTerminal([jobId]).pipe(
          Effect.provide(
            Worker.layer({ queue, handlers: [counted("kill.echo", 100, calls)], receiveWaitMs: 1_000 }).pipe(
              Layer.provideMerge(seams)
            )
          )
        )
        expect(jobs[0]).toMatchObject({ state: "succeeded", attempts: 2, result: { loud: "SURVIVE" } })
        expect(calls.get(jobId)).toBe(1)
      }).pipe(Effect.scoped)
    )

    it.effect("messages redriven to the SQS dead-letter queue lose no job: the sweeper republishes them", () =>
      Effect.gen(function* () {
        const sqs = yield* SqsServer
        const queue = uniqueName("dlq")
        const { dlqUrl, url } = sqs.createWithDlq(queue, 2)
        const transport = SqsTransport.layer({
          client: clientConfig(sqs.endpoint),
          queues: { [queue]: url },
          redrive: { onUnsafe: "warn" }
        })
        const calls = new Map<string, number>()

        const ids = yield* Effect.gen(function* () {
          const client = yield* Client.Client
          const sqsTransport = yield* SqsTransport.SqsTransport
          expect(sqsTransport.capabilities.maxReceiveCount).toBe(2)
          const ids: Array<JobId> = []
          for (let i = 0; i < 3; i++) {
            ids.push((yield* client.submit({ queue, type: "dlq.echo", input: { text: `lost ${i}` } })).job.id)
          }
          // Consumers that receive and never settle (crashed before their claim): SQS counts two receives per message.
          for (let round = 0; round < 2; round++) {
            let got = 0
            for (let i = 0; i < 20 && got < ids.length; i++) {
              got += (yield* sqsTransport.receive({ queue, max: 10, visibilityMs: 1_000, waitMs: 2_000 })).length
            }
            expect(got).toBe(ids.length)
          }
          // The next receive moves them to the dead-letter queue; the main queue is empty.
          yield* Effect.sleep(1_200)
          expect(yield* sqsTransport.receive({ queue, max: 10, visibilityMs: 1_000, waitMs: 1_000 })).toEqual([])
          expect(yield* messagesIn(dlqUrl)).toBe(ids.length)
          expect(yield* messagesIn(url)).toBe(0)
          return ids
        }).pipe(Effect.provide(Client.layer.pipe(Layer.provideMerge(transport))))

        // The jobs are still queued in the Store; the sweeper finds them stale and republishes them.
        const query = yield* Query
        for (const id of ids) expect((yield* query.get({ jobId: id })).state).toBe("queued")
        const jobs = yield* awaitTerminal(ids).pipe(
          Effect.provide(
            Layer.merge(
              Worker.layer({ queue, handlers: [counted("dlq.echo", 50, calls)], receiveWaitMs: 1_000 }),
              Sweeper.layer({ queue, intervalMs: 500, republishAfterMs: 1_000 })
            ).pipe(Layer.provideMerge(transport))
          )
        )
        expect(jobs.map((job) => job.state)).toEqual(["succeeded", "succeeded", "succeeded"])
        expect(ids.map((id) => calls.get(id))).toEqual([1, 1, 1])
      })
    )
  }
)
