/**
 * Batches on the Redis adapter, on the machine's Redis server: a batch submitted by the core Client runs under the
 * core Worker to its callback; its keys share its queue's hash tag; a batch whose items or callbacks span queues is
 * refused with nothing written; a purged item leaves the listing. The rules themselves are checked by the
 * conformance suite and the model-based properties (`Conformance`, `BatchProperty`, `ConcurrentProperty`).
 */
import { expect, it } from "@effect/vitest"
import * as Batch from "@slowcall/core/Batch"
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import type { SubmitItem } from "@slowcall/core/Protocol"
import { Query } from "@slowcall/core/Query"
import * as Worker from "@slowcall/core/Worker"
import { Context, Effect, Layer, Schema } from "effect"
import { Redis } from "ioredis"
import { describe } from "vitest"
import * as Keys from "../src/internal/keys.js"
import * as RedisConnection from "../src/RedisConnection.js"
import * as RedisStore from "../src/RedisStore.js"
import { dropPrefix, REDIS_URL, uniquePrefix } from "./support.js"

/** The whole adapter under a fresh prefix, its keys dropped when the layer closes. */
const adapter = (prefix: string) =>
  Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropPrefix(REDIS_URL, prefix)))).pipe(
    Layer.provideMerge(RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false, pollMs: 100 }))
  )

const echo = Handler.make({
  type: "demo.echo",
  version: 1,
  input: Schema.Struct({ text: Schema.String }),
  result: Schema.Struct({ echoed: Schema.String }),
  attempt: { timeoutMs: 5_000 },
  run: (input) => Effect.succeed({ echoed: input.text })
})

const done = Handler.make({
  type: "demo.done",
  version: 1,
  input: Schema.Struct({ batchId: Schema.String, input: Schema.Unknown }),
  result: Schema.Struct({ batchId: Schema.String }),
  attempt: { timeoutMs: 5_000 },
  run: (input) => Effect.succeed({ batchId: input.batchId })
})

const item = (queue: string) =>
  Effect.map(
    makeJobId,
    (id): SubmitItem => ({ id, queue, type: "demo.echo", version: 1, inputHash: `h-${id}`, input: {}, maxAttempts: 1 })
  )

describe("batches on Redis", () => {
  it.live("a batch runs under the Worker to its onComplete callback, enqueued once, in its queue's slot", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const prefix = uniquePrefix("batch")
        const context = yield* Layer.build(
          Layer.mergeAll(Client.layer, Worker.layer({ queue: "fan", concurrency: 4, handlers: [echo, done] })).pipe(
            Layer.provideMerge(adapter(prefix))
          )
        )
        const client = Context.get(context, Client.Client)
        const query = Context.get(context, Query)
        const submitted = yield* client.submitBatch({
          items: ["a", "b", "c"].map((text) => ({ queue: "fan", type: "demo.echo", input: { text } })),
          onComplete: { queue: "fan", type: "demo.done", input: "all" },
          chunkSize: 2
        })
        expect([submitted.created, submitted.landed, submitted.batch.size]).toEqual([true, 3, 3])

        const finished = yield* client
          .getBatch(submitted.batch.id)
          .pipe(
            Effect.delay("50 millis"),
            Effect.repeat({ until: (batch) => batch.finishedAt !== null }),
            Effect.timeout("20 seconds")
          )
        expect(finished.counts).toEqual({ queued: 0, running: 0, succeeded: 3, failed: 0, abandoned: 0 })
        const callbackId = finished.onCompleteJobId!
        const callback = yield* query
          .get({ jobId: callbackId })
          .pipe(
            Effect.delay("50 millis"),
            Effect.repeat({ until: (job) => job.state === "succeeded" }),
            Effect.timeout("20 seconds")
          )
        expect([callback.requestKey, callback.result]).toEqual([
          Batch.callbackKey(submitted.batch.id, "onComplete"),
          { batchId: submitted.batch.id }
        ])

        // The record and the item list carry the queue's hash tag, beside the items' records.
        const keys = Keys.make(prefix)
        const redis = new Redis(REDIS_URL)
        yield* Effect.addFinalizer(() => Effect.sync(() => redis.disconnect()))
        const base = keys.queueBase("fan")
        const exists = yield* Effect.promise(() =>
          Promise.all([
            redis.exists(`${base}${Keys.suffix.batch}${submitted.batch.id}`),
            redis.lrange(`${base}${Keys.suffix.batchItems}${submitted.batch.id}`, 0, -1)
          ])
        )
        expect(exists[0]).toBe(1)
        expect(exists[1]).toHaveLength(3)
      })
    )
  )

  it.live("a batch whose callback or items are of another queue is refused, nothing written", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter(uniquePrefix("batch")))
        const batches = Context.get(context, Batch.BatchStore)
        const query = Context.get(context, Query)
        const newId = Effect.map(makeJobId, (id) => id as string as Batch.BatchId)
        const callback = (queue: string) =>
          Effect.map(
            makeJobId,
            (id): Batch.Callback => ({
              id,
              queue,
              type: "demo.done",
              version: 1,
              inputHash: "h",
              input: null,
              maxAttempts: 1
            })
          )
        const spec = (id: Batch.BatchId): Batch.BatchSpec => ({ id, queue: "home", fingerprint: "b1:2", size: 2 })

        const unnamed = yield* Effect.flip(batches.open({ spec: { ...spec(yield* newId), queue: null } }))
        const elsewhere = yield* Effect.flip(
          batches.open({ spec: { ...spec(yield* newId), onComplete: yield* callback("away") } })
        )
        expect([unnamed.reason, elsewhere.reason]).toEqual(["Constraint", "Constraint"])

        const id = yield* newId
        yield* batches.open({ spec: spec(id) })
        const home = yield* item("home")
        const away = yield* item("away")
        const refused = yield* Effect.flip(batches.add({ batchId: id, offset: 0, items: [home, away] }))
        expect(refused.reason).toBe("Constraint")
        expect((yield* batches.get({ batchId: id }))?.added).toBe(0)
        const found = yield* Effect.all(
          [home.id, away.id].map((jobId: JobId) => Effect.either(query.get({ jobId }))),
          { concurrency: 2 }
        )
        expect(found.map((e) => e._tag)).toEqual(["Left", "Left"])
      })
    )
  )

  it.live("a repeated open and add write again the routes a stopped call left unwritten", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const prefix = uniquePrefix("batch")
        const first = yield* Layer.build(adapter(prefix))
        const batches = Context.get(first, Batch.BatchStore)
        const id = (yield* makeJobId) as string as Batch.BatchId
        const spec: Batch.BatchSpec = { id, queue: "home", requestKey: "k", fingerprint: "b1:2", size: 2 }
        const [a, b] = [yield* item("home"), yield* item("home")]
        yield* batches.open({ spec })
        yield* batches.add({ batchId: id, offset: 0, items: [a!, b!] })
        // As if the call had stopped after its scripts, before its routes (the order on a Cluster).
        const keys = Keys.make(prefix)
        const redis = new Redis(REDIS_URL)
        yield* Effect.addFinalizer(() => Effect.sync(() => redis.disconnect()))
        yield* Effect.promise(() => Promise.all([id, a!.id, b!.id].map((key) => redis.hdel(keys.route(key), key))))

        // Another process (its own route cache) repeats the call.
        const second = yield* Layer.build(
          RedisStore.layerFromConnection({ checkServer: false }).pipe(
            Layer.provideMerge(RedisConnection.layer({ url: REDIS_URL, prefix }))
          )
        )
        const again = Context.get(second, Batch.BatchStore)
        const query = Context.get(second, Query)
        const reopened = yield* again.open({ spec: { ...spec, id: (yield* makeJobId) as string as Batch.BatchId } })
        expect(reopened.result._tag).toBe("Existing")
        const added = yield* again.add({ batchId: id, offset: 0, items: [a!, b!] })
        expect(added.result._tag === "Added" && added.result.jobs).toEqual([])
        expect((yield* again.get({ batchId: id }))?.added).toBe(2)
        const found = yield* Effect.all([a!.id, b!.id].map((jobId: JobId) => query.get({ jobId })))
        expect(found.map((job) => job.id)).toEqual([a!.id, b!.id])
      })
    )
  )

  it.live("a purged item leaves the batch's listing, nothing follows it, and the batch keeps its counts", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter(uniquePrefix("batch")))
        const batches = Context.get(context, Batch.BatchStore)
        const store = Context.get(context, RedisStore.RedisStore)
        const id = (yield* makeJobId) as string as Batch.BatchId
        const [a, b] = [yield* item("home"), yield* item("home")]
        yield* batches.open({ spec: { id, queue: "home", fingerprint: "b1:2", size: 2 } })
        yield* batches.add({ batchId: id, offset: 0, items: [a!, b!] })
        const claimed = yield* store.claim({ items: [{ jobId: a!.id, owner: "w", leaseMs: 10_000 }] })
        const token = claimed.results[0]?._tag === "Claimed" ? claimed.results[0].job.leaseToken : -1
        const settled = yield* store.settle({
          items: [{ jobId: a!.id, token, outcome: { _tag: "Complete", result: null } }]
        })

        const purged = yield* store.purge({ queue: "home", createdBefore: settled.now + 1 })

        expect(purged).toEqual([a!.id])
        expect((yield* batches.jobs({ batchId: id })).map((job) => job.id)).toEqual([b!.id])
        expect(yield* batches.jobs({ batchId: id, after: a!.id })).toEqual([])
        expect((yield* batches.get({ batchId: id }))?.counts).toEqual({
          queued: 1,
          running: 0,
          succeeded: 1,
          failed: 0,
          abandoned: 0
        })
      })
    )
  )
})
