/**
 * Store conformance, batch records (`Batch.BatchStore`, for a backend that declares `batches`): a chunk lands whole
 * or not at all, the same key and fingerprint is the same batch and another fingerprint a reused key, the counts and
 * cost follow every item write, the callbacks are enqueued once by the write that ends the last item, the batch
 * budget stops claims and refuses the reservation of a call it cannot cover (also when two items reserve at once),
 * and cancel and replay act on the batch's items only.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import * as Batch from "@slowcall/core/Batch"
import type { JobId } from "@slowcall/core/Job"
import type { SubmitItem } from "@slowcall/core/Protocol"
import { Effect, Option } from "effect"
import { type Area, expectTag, type Fixture, outcome } from "./fixture.js"

/** The backend's batch verbs: the suite registers this area only for a backend that declares them. */
const batchStore = Effect.flatMap(Effect.serviceOption(Batch.BatchStore), (found) =>
  Option.isSome(found) ? Effect.succeed(found.value) : Effect.die(new Error("the layer provides no BatchStore"))
)

/** A batch of `size` with both callbacks on the test's queue, opened at the clock's time. */
const open = (fixture: Fixture, size: number, extra: Partial<Batch.BatchSpec> = {}) =>
  Effect.gen(function* () {
    const batches = yield* batchStore
    const callback = (type: string) =>
      Effect.map(fixture.item({ type }), ({ requestKey: _key, tenant: _tenant, ...rest }): Batch.Callback => rest)
    const spec: Batch.BatchSpec = {
      id: (yield* fixture.factory.jobId) as string as Batch.BatchId,
      queue: fixture.queue,
      requestKey: `${fixture.queue}:batch`,
      tenant: fixture.tenant,
      fingerprint: `b1:${size}`,
      size,
      onComplete: yield* callback("done"),
      onSuccess: yield* callback("ok"),
      ...extra
    }
    const reply = yield* batches.open({ spec, now: yield* fixture.now })
    return { spec, batch: expectTag(reply.result, "Created").batch }
  })

/** `count` items of the test's queue. */
const items = (fixture: Fixture, count: number): Effect.Effect<Array<SubmitItem>> =>
  Effect.forEach(Array.from({ length: count }), () => fixture.item())

export const batchRecordTests = (area: Area): void => {
  const { it, fixture } = area
  if (area.capabilities.batches !== true) {
    area.notRun("batch records", "the backend declares no batch verbs")
    return
  }
  describe("batch records", () => {
    it.effect(
      "a chunk lands whole; a chunk with an existing job id lands nothing; a repeated chunk only its new part",
      () =>
        Effect.gen(function* () {
          const f = yield* fixture
          const batches = yield* batchStore
          const { batch } = yield* open(f, 3)
          const taken = yield* f.submit()
          const [a, b, c] = yield* items(f, 3)

          const refused = yield* Effect.either(
            batches.add({ batchId: batch.id, offset: 0, items: [a!, { ...b!, id: taken.id }], now: yield* f.now })
          )
          expect(refused._tag === "Left" && refused.left._tag === "StoreError" && refused.left.reason).toBe(
            "Constraint"
          )
          expect((yield* batches.get({ batchId: batch.id }))?.added).toBe(0)
          expect(yield* batches.jobs({ batchId: batch.id })).toEqual([])

          const first = expectTag(
            (yield* batches.add({ batchId: batch.id, offset: 0, items: [a!, b!] })).result,
            "Added"
          )
          expect(first.jobs.map((job) => job.id)).toEqual([a!.id, b!.id])
          const again = yield* batches.add({ batchId: batch.id, offset: 1, items: [b!, c!] })
          const second = expectTag(again.result, "Added")
          expect(second.jobs.map((job) => job.id)).toEqual([c!.id])
          expect([second.batch.added, second.batch.counts.queued]).toEqual([3, 3])
          const gap = yield* batches.add({ batchId: batch.id, offset: 4, items: [c!] })
          expectTag(gap.result, "Misplaced")
        })
    )

    it.effect("the same key and fingerprint is the same batch; another fingerprint is a reused key", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const batches = yield* batchStore
        const { batch, spec } = yield* open(f, 2)
        const other = (yield* f.factory.jobId) as string as Batch.BatchId

        const same = yield* batches.open({ spec: { ...spec, id: other } })
        const reused = yield* batches.open({ spec: { ...spec, id: other, fingerprint: "b1:other" } })

        expect(expectTag(same.result, "Existing").batch.id).toBe(batch.id)
        expect(expectTag(reused.result, "KeyReused").existingBatchId).toBe(batch.id)
        expect(yield* batches.get({ batchId: other })).toBeUndefined()
      })
    )

    it.effect("counts and cost follow the items; the write that ends the last item enqueues the callbacks once", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const batches = yield* batchStore
        const { batch, spec } = yield* open(f, 2)
        const [a, b] = yield* items(f, 2)
        yield* batches.add({ batchId: batch.id, offset: 0, items: [a!, b!], now: yield* f.now })

        const ra = yield* f.claimed(a!.id)
        yield* f.charged({ jobId: a!.id, callId: "c1", token: ra.leaseToken, amountCents: 2.5, settled: true })
        const rb = yield* f.claimed(b!.id)
        const mid = (yield* batches.get({ batchId: batch.id }))!
        expect([mid.counts.running, mid.costCents, mid.finishedAt]).toEqual([2, 2.5, null])
        yield* f.settled(a!.id, ra.leaseToken, outcome.complete(null))
        yield* f.advance(5)
        const last = yield* f.settled(b!.id, rb.leaseToken, outcome.complete(null))

        const done = (yield* batches.get({ batchId: batch.id, tenant: f.tenant }))!
        expect(done.counts).toEqual({ queued: 0, running: 0, succeeded: 2, failed: 0, abandoned: 0 })
        expect(done.finishedAt).toBe(last.updatedAt)
        expect([done.onCompleteJobId, done.onSuccessJobId]).toEqual([spec.onComplete!.id, spec.onSuccess!.id])
        const callbacks = yield* f.query.list({ queue: f.queue, state: "queued", order: "oldest" })
        expect(callbacks.map((job) => [job.id, job.requestKey, job.createdAt])).toEqual([
          [spec.onComplete!.id, Batch.callbackKey(batch.id, "onComplete"), last.updatedAt],
          [spec.onSuccess!.id, Batch.callbackKey(batch.id, "onSuccess"), last.updatedAt]
        ])
        expect(yield* batches.get({ batchId: batch.id, tenant: "someone else" })).toBeUndefined()
      })
    )

    it.effect("no item is claimed once the batch has spent its budget", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const batches = yield* batchStore
        const { batch } = yield* open(f, 2, { budgetCents: 3 })
        const [a, b] = yield* items(f, 2)
        yield* batches.add({ batchId: batch.id, offset: 0, items: [a!, b!], now: yield* f.now })
        const ra = yield* f.claimed(a!.id)
        yield* f.charged({ jobId: a!.id, callId: "c1", token: ra.leaseToken, amountCents: 3, settled: true })

        const refused = expectTag(yield* f.claim(b!.id, { estimateCents: 0 }), "Settled")
        expect([refused.job.state, refused.job.abandonReason]).toEqual(["abandoned", "budget"])
      })
    )

    it.effect("two items of one batch reserving at once: the second is refused once the budget is taken", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const batches = yield* batchStore
        const { batch } = yield* open(f, 2, { budgetCents: 5 })
        const [a, b] = yield* items(f, 2)
        yield* batches.add({ batchId: batch.id, offset: 0, items: [a!, b!], now: yield* f.now })
        const ra = yield* f.claimed(a!.id)
        const rb = yield* f.claimed(b!.id, "worker-b")
        const reserve = (jobId: JobId, token: number) =>
          Effect.flatMap(f.now, (now) =>
            f.store.charge({ items: [{ jobId, callId: "c1", token, amountCents: 3, settled: false }], now })
          )

        // Two workers, two calls to the store at the same moment: whichever lands first takes 3 of the 5.
        const [ca, cb] = yield* Effect.all([reserve(a!.id, ra.leaseToken), reserve(b!.id, rb.leaseToken)], {
          concurrency: "unbounded"
        })
        const results = [ca.results[0]!, cb.results[0]!]
        expect(results.map((r) => r._tag).sort()).toEqual(["BatchBudgetExceeded", "Charged"])
        const won = results.findIndex((r) => r._tag === "Charged")
        const [winner, loser] = won === 0 ? [a!, b!] : [b!, a!]
        expect(results[1 - won]).toEqual({
          _tag: "BatchBudgetExceeded",
          jobId: loser.id,
          batchId: batch.id,
          costCents: 0,
          batchCostCents: 3,
          budgetCents: 5
        })
        expect(yield* f.charges(loser.id)).toEqual([])
        expect((yield* batches.get({ batchId: batch.id }))?.costCents).toBe(3)

        // The winner's repeat is the reservation already written; its settlement past the budget is the money spent.
        const token = won === 0 ? ra.leaseToken : rb.leaseToken
        expect(yield* f.charged({ jobId: winner.id, callId: "c1", token, amountCents: 3, settled: false })).toBe(3)
        expect(yield* f.charged({ jobId: winner.id, callId: "c1", token, amountCents: 6, settled: true })).toBe(6)
        expectTag(
          yield* f.charge({ jobId: winner.id, callId: "c2", token, amountCents: 0, settled: false }),
          "BatchBudgetExceeded"
        )

        // In one call, items apply in order: the first reservation takes the room the second would need.
        const { batch: second } = yield* open(f, 2, { budgetCents: 5, requestKey: `${f.queue}:second` })
        const [c, d] = yield* items(f, 2)
        yield* batches.add({ batchId: second.id, offset: 0, items: [c!, d!], now: yield* f.now })
        const both = yield* f.store.charge({
          items: [
            { jobId: c!.id, callId: "c1", token: 0, amountCents: 2, settled: false },
            { jobId: d!.id, callId: "c1", token: 0, amountCents: 3, settled: false },
            { jobId: d!.id, callId: "c2", token: 0, amountCents: 1, settled: false },
            { jobId: c!.id, callId: "c1", token: 0, amountCents: 1, settled: true },
            { jobId: d!.id, callId: "c3", token: 0, amountCents: 1, settled: false }
          ],
          now: yield* f.now
        })
        expect(both.results.map((r) => [r._tag, r._tag === "NotFound" ? null : r.costCents])).toEqual([
          ["Charged", 2],
          ["Charged", 3],
          ["BatchBudgetExceeded", 3],
          ["Charged", 1],
          ["Charged", 4]
        ])
        expect((yield* batches.get({ batchId: second.id }))?.costCents).toBe(5)
      })
    )

    it.effect(
      "cancel abandons queued items, asks running ones to stop and seals the batch; replay requeues its failed items",
      () =>
        Effect.gen(function* () {
          const f = yield* fixture
          const batches = yield* batchStore
          const { batch } = yield* open(f, 4, { onComplete: null, onSuccess: null })
          const [a, b, c] = yield* items(f, 3)
          yield* batches.add({ batchId: batch.id, offset: 0, items: [a!, b!, c!], now: yield* f.now })
          const ra = yield* f.claimed(a!.id)
          yield* f.settled(a!.id, ra.leaseToken, outcome.fail("auth", "bad key"))
          yield* f.claimed(b!.id)

          const cancelled = expectTag(
            (yield* batches.cancel({ batchId: batch.id, now: yield* f.now })).result,
            "Cancelled"
          )
          expect(cancelled.batch.size).toBe(3)
          expect(cancelled.batch.counts).toEqual({ queued: 0, running: 1, succeeded: 0, failed: 1, abandoned: 1 })
          expect(cancelled.jobs.map((job) => [job.id, job.state, job.cancelRequestedAt !== null])).toEqual([
            [b!.id, "running", true],
            [c!.id, "abandoned", false]
          ])
          const replayed = expectTag(
            (yield* batches.replay({ batchId: batch.id, now: yield* f.now })).result,
            "Replayed"
          )
          expect(replayed.jobs.map((job) => [job.id, job.state])).toEqual([[a!.id, "queued"]])
          expect(expectTag(yield* f.claim(a!.id), "Settled").job.abandonReason).toBe("cancelled")
          expect((yield* batches.jobs({ batchId: batch.id, state: "abandoned" })).map((job) => job.id)).toEqual([
            a!.id,
            c!.id
          ])
        })
    )
  })
}
