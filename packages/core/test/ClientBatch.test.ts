/**
 * The Client's batch operations over the memory Store and Transport: a batch submitted in chunks and published, its
 * idempotency (the same items again, other items), a call cut off between chunks and resumed with its key, the
 * counts and the one callback when the last item ends, cancel, replay, the watch stream, bad input and a Store
 * without batch verbs.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Fiber, Stream, TestClock } from "effect"
import * as Batch from "../src/Batch.js"
import * as Client from "../src/Client.js"
import { StoreError } from "../src/Errors.js"
import type { Job } from "../src/Job.js"
import { Query } from "../src/Query.js"
import * as StoreModule from "../src/Store.js"
import { Store } from "../src/Store.js"
import * as TransportModule from "../src/Transport.js"
import { Transport } from "../src/Transport.js"

const setup = (options: { readonly batches?: (service: Batch.BatchStore["Type"]) => Batch.BatchStore["Type"] } = {}) =>
  Effect.gen(function* () {
    const memory = yield* StoreModule.makeMemory
    const transport = yield* TransportModule.makeMemory()
    const client = yield* Client.make.pipe(
      Effect.provideService(Store, memory.store),
      Effect.provideService(Query, memory.query),
      Effect.provideService(Batch.BatchStore, options.batches ? options.batches(memory.batches) : memory.batches),
      Effect.provideService(Transport, transport)
    )
    return { ...memory, transport, client }
  })

const documents = (n: number) => Array.from({ length: n }, (_, i) => ({ queue: "q", type: "embed", input: { doc: i } }))

/** Claims and settles one job with `outcome`. */
const run = (store: Store["Type"], job: Job, outcome: Parameters<Store["Type"]["settle"]>[0]["items"][0]["outcome"]) =>
  Effect.gen(function* () {
    const claimed = (yield* store.claim({ items: [{ jobId: job.id, owner: "w", leaseMs: 10_000 }] })).results[0]!
    if (claimed._tag !== "Claimed") return yield* Effect.die(`expected a claim, got ${claimed._tag}`)
    return (yield* store.settle({ items: [{ jobId: job.id, token: claimed.job.leaseToken, outcome }] })).results[0]!
  })

const ok = { _tag: "Complete", result: null } as const
const fail = { _tag: "Fail", errorClass: "auth", error: "bad key" } as const

describe("Client.submitBatch", () => {
  it.effect("lands every item in chunks, publishes them, and keeps the counts on the batch", () =>
    Effect.gen(function* () {
      const { client, transport } = yield* setup()
      const result = yield* client.submitBatch({ items: documents(5), requestKey: "import-1", chunkSize: 2 })

      expect(result.created).toBe(true)
      expect(result.landed).toBe(5)
      expect([result.batch.size, result.batch.added]).toEqual([5, 5])
      expect(result.batch.counts).toEqual({ queued: 5, running: 0, succeeded: 0, failed: 0, abandoned: 0 })
      const jobs = yield* client.batchJobs(result.batch.id)
      expect(jobs.map((job) => job.input)).toEqual([0, 1, 2, 3, 4].map((doc) => ({ doc })))
      const page = yield* client.batchJobs(result.batch.id, { after: jobs[1]!.id, limit: 2 })
      expect(page.map((job) => job.id)).toEqual([jobs[2]!.id, jobs[3]!.id])
      const delivered = yield* transport.receive({ queue: "q", max: 100, visibilityMs: 1_000, waitMs: 0 })
      expect(delivered.map((d) => d.jobId).sort()).toEqual(jobs.map((job) => job.id).sort())
    })
  )

  it.effect("returns the same batch for the same key and items, and refuses the key for other items", () =>
    Effect.gen(function* () {
      const { client } = yield* setup()
      const first = yield* client.submitBatch({ items: documents(3), requestKey: "import-1" })
      const again = yield* client.submitBatch({ items: documents(3), requestKey: "import-1" })
      const other = yield* Effect.either(client.submitBatch({ items: documents(4), requestKey: "import-1" }))

      expect([again.created, again.landed, again.batch.id]).toEqual([false, 0, first.batch.id])
      expect(Either.isLeft(other) && other.left._tag).toBe("IdempotencyKeyReused")
      expect((yield* client.batchJobs(first.batch.id, { limit: 100 })).length).toBe(3)
    })
  )

  it.effect("leaves a call cut off between chunks unfinished, and lands the rest when repeated with its key", () =>
    Effect.gen(function* () {
      let adds = 0
      const { batches, client } = yield* setup({
        batches: (service) => ({
          ...service,
          add: (options) =>
            ++adds === 2
              ? Effect.fail(new StoreError({ reason: "Connection", operation: "batchAdd", detail: "cut off" }))
              : service.add(options)
        })
      })
      const cut = yield* Effect.either(client.submitBatch({ items: documents(5), requestKey: "k", chunkSize: 2 }))
      expect(Either.isLeft(cut)).toBe(true)
      const resumed = yield* client.submitBatch({ items: documents(5), requestKey: "k", chunkSize: 2 })

      expect([resumed.created, resumed.landed, resumed.batch.added]).toEqual([false, 3, 5])
      const items = yield* batches.jobs({ batchId: resumed.batch.id })
      expect(items.map((job) => job.input)).toEqual([0, 1, 2, 3, 4].map((doc) => ({ doc })))
    })
  )

  it.effect("refuses bad items and options before writing anything", () =>
    Effect.gen(function* () {
      const { client, query } = yield* setup()
      const bad = yield* Effect.either(
        client.submitBatch({ items: [...documents(1), { queue: "q", type: "t", input: Number.NaN }] })
      )
      const empty = yield* Effect.either(client.submitBatch({ items: [] }))
      const keyed = yield* Effect.either(
        client.submitBatch({ items: [{ queue: "q", type: "t", requestKey: "own" } as Client.SubmitOptions] })
      )
      const callback = yield* Effect.either(
        client.submitBatch({ items: documents(1), onComplete: { queue: "q", type: "", input: 1 } })
      )

      expect(Either.isLeft(bad) && bad.left._tag === "InvalidInput" && bad.left.path).toBe("items[1].$")
      expect(Either.isLeft(empty) && empty.left._tag === "InvalidInput" && empty.left.path).toBe("items")
      expect(Either.isLeft(keyed) && keyed.left._tag === "InvalidInput" && keyed.left.path).toBe("items[0].requestKey")
      expect(Either.isLeft(callback) && callback.left._tag === "InvalidInput" && callback.left.path).toBe(
        "onComplete.type"
      )
      expect(yield* query.list({})).toEqual([])
    })
  )

  it.effect("fails with a StoreError on a Store without batch verbs", () =>
    Effect.gen(function* () {
      const memory = yield* StoreModule.makeMemory
      const client = yield* Client.make.pipe(
        Effect.provideService(Store, memory.store),
        Effect.provideService(Query, memory.query),
        Effect.provideService(Transport, yield* TransportModule.makeMemory())
      )
      const result = yield* Effect.either(client.submitBatch({ items: documents(1) }))
      expect(Either.isLeft(result) && result.left._tag === "StoreError" && result.left.reason).toBe("Constraint")
    })
  )
})

describe("Client batches: following, callbacks, cancel, replay", () => {
  it.effect("finishes when the last item ends, enqueueing each callback once with the batch id in its input", () =>
    Effect.gen(function* () {
      const { client, query, store } = yield* setup()
      const { batch } = yield* client.submitBatch({
        items: documents(3),
        tenant: "acme",
        onComplete: { queue: "q", type: "import.done", input: { notify: "ops" } },
        onSuccess: { queue: "q", type: "import.ok" }
      })
      const items = yield* client.batchJobs(batch.id)
      yield* run(store, items[0]!, ok)
      yield* Effect.gen(function* () {
        const charged = yield* store.claim({ items: [{ jobId: items[1]!.id, owner: "w", leaseMs: 10_000 }] })
        const job = charged.results[0]!
        if (job._tag !== "Claimed") return yield* Effect.die("expected a claim")
        yield* store.charge({
          items: [{ jobId: job.job.id, callId: "c1", token: job.job.leaseToken, amountCents: 4, settled: true }]
        })
        yield* store.settle({ items: [{ jobId: job.job.id, token: job.job.leaseToken, outcome: ok }] })
      })
      expect((yield* client.getBatch(batch.id)).finishedAt).toBeNull()
      yield* run(store, items[2]!, fail)

      const done = yield* client.getBatch(batch.id, { tenant: "acme" })
      expect(done.counts).toEqual({ queued: 0, running: 0, succeeded: 2, failed: 1, abandoned: 0 })
      expect(done.costCents).toBe(4)
      expect(done.finishedAt).not.toBeNull()
      const callbacks = yield* query.list({ type: "import.done" })
      expect(callbacks.map((job) => [job.requestKey, job.tenant, job.input])).toEqual([
        [Batch.callbackKey(batch.id, "onComplete"), "acme", { batchId: batch.id, input: { notify: "ops" } }]
      ])
      expect(yield* query.list({ type: "import.ok" })).toEqual([])
      expect(Either.isLeft(yield* Effect.either(client.getBatch(batch.id, { tenant: "other" })))).toBe(true)
      expect(yield* client.batchJobs(batch.id, { tenant: "other" })).toEqual([])
      expect((yield* client.batchJobs(batch.id, { tenant: "acme" })).length).toBe(3)

      // The replayed item succeeds: the batch finishes again, with onSuccess now and no second onComplete.
      const replayed = yield* client.replayBatch(batch.id)
      expect(replayed.replayed.map((job) => job.id)).toEqual([items[2]!.id])
      expect(replayed.batch.finishedAt).toBeNull()
      yield* run(store, replayed.replayed[0]!, ok)
      expect((yield* query.list({ type: "import.done" })).length).toBe(1)
      expect((yield* query.list({ type: "import.ok" })).length).toBe(1)
    })
  )

  it.effect("cancels queued items at once, asks running ones to stop, and claims nothing afterwards", () =>
    Effect.gen(function* () {
      const { client, store } = yield* setup()
      const { batch } = yield* client.submitBatch({ items: documents(3), onComplete: { queue: "q", type: "done" } })
      const items = yield* client.batchJobs(batch.id)
      yield* store.claim({ items: [{ jobId: items[0]!.id, owner: "w", leaseMs: 10_000 }] })

      const cancelled = yield* client.cancelBatch(batch.id)
      expect(cancelled.cancelRequestedAt).not.toBeNull()
      expect(cancelled.counts).toEqual({ queued: 0, running: 1, succeeded: 0, failed: 0, abandoned: 2 })
      const running = (yield* client.batchJobs(batch.id, { state: "running" }))[0]!
      expect(running.cancelRequestedAt).not.toBeNull()
      const next = yield* store.claimNext({ queue: "q", max: 10, owner: "w2", leaseMs: 1_000 })
      expect(next.results).toEqual([])
      // The running item's worker stops: the batch finishes and its callback is enqueued.
      yield* store.settle({
        items: [{ jobId: running.id, token: running.leaseToken, outcome: { _tag: "Abandon", reason: "cancelled" } }]
      })
      const finished = yield* client.getBatch(batch.id)
      expect(finished.finishedAt).not.toBeNull()
      expect(finished.onCompleteJobId).not.toBeNull()
    })
  )

  it.effect("abandons items for budget once the batch has spent it", () =>
    Effect.gen(function* () {
      const { client, store } = yield* setup()
      const { batch } = yield* client.submitBatch({ items: documents(3), budgetCents: 5 })
      const items = yield* client.batchJobs(batch.id)
      const first = (yield* store.claim({ items: [{ jobId: items[0]!.id, owner: "w", leaseMs: 1_000 }] })).results[0]!
      if (first._tag !== "Claimed") return yield* Effect.die("expected a claim")
      yield* store.charge({
        items: [{ jobId: first.job.id, callId: "c", token: first.job.leaseToken, amountCents: 5, settled: true }]
      })
      yield* store.settle({ items: [{ jobId: first.job.id, token: first.job.leaseToken, outcome: ok }] })

      const next = yield* store.claimNext({ queue: "q", max: 10, owner: "w", leaseMs: 1_000 })
      expect(next.results.map((r) => [r._tag, r.job.abandonReason])).toEqual([
        ["Settled", "budget"],
        ["Settled", "budget"]
      ])
      const after = yield* client.getBatch(batch.id)
      expect(after.counts).toEqual({ queued: 0, running: 0, succeeded: 1, failed: 0, abandoned: 2 })
      expect(after.finishedAt).not.toBeNull()
    })
  )

  it.effect("watches the batch's count changes until it finishes", () =>
    Effect.gen(function* () {
      const { client, store } = yield* setup()
      const { batch } = yield* client.submitBatch({ items: documents(2) })
      const items = yield* client.batchJobs(batch.id)
      const watching = yield* Effect.fork(Stream.runCollect(client.watchBatch(batch.id, { intervalMs: 100 })))
      yield* TestClock.adjust(100)
      yield* run(store, items[0]!, ok)
      yield* TestClock.adjust(100)
      yield* TestClock.adjust(100)
      yield* run(store, items[1]!, ok)
      yield* TestClock.adjust(100)

      const seen = Chunk.toReadonlyArray(yield* Fiber.join(watching))
      expect(seen.map((b) => b.counts.succeeded)).toEqual([0, 1, 2])
      expect(seen.at(-1)!.finishedAt).not.toBeNull()
    })
  )
})
