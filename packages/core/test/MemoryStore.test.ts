/**
 * What only the memory Store and Query do: store time from the Clock they were made with, `peek`, fresh maps per
 * build, and atomic writes among fibers. The protocol itself is checked by the conformance suites and the
 * model-based property.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Protocol from "../src/Protocol.js"
import { Query } from "../src/Query.js"
import * as StoreModule from "../src/Store.js"
import { Store } from "../src/Store.js"
import { claimOne, offsetClock, submitItem, submitOne } from "./fixtures.js"

const LEASE = 10_000
const HOUR = 3_600_000

describe("Store.makeMemory: store time", () => {
  it.effect("reads store time from the clock it was made with, never the caller's", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_000_000)
      const { store } = yield* StoreModule.makeMemory
      const ahead = yield* offsetClock(HOUR)
      const item = yield* submitItem()

      const submitted = yield* Effect.withClock(store.submit({ items: [item] }), ahead)
      const claim = yield* Effect.withClock(
        store.claim({ items: [{ jobId: item.id, owner: "w", leaseMs: LEASE }] }),
        ahead
      )
      // The caller's clock is an hour ahead: it believes the lease ended long ago; the store says it is live.
      const rival = yield* Effect.withClock(
        store.claim({ items: [{ jobId: item.id, owner: "x", leaseMs: LEASE }] }),
        ahead
      )

      expect(submitted.now).toBe(1_000_000)
      expect(submitted.results[0]).toMatchObject({ _tag: "Created", job: { createdAt: 1_000_000 } })
      expect(claim).toMatchObject({
        now: 1_000_000,
        results: [{ _tag: "Claimed", job: { leaseUntil: 1_000_000 + LEASE } }]
      })
      expect(rival.results[0]).toMatchObject({ _tag: "Busy", until: 1_000_000 + LEASE })
      expect(yield* Effect.withClock(store.now, ahead)).toBe(1_000_000)
    })
  )

  it.effect("Query.stats judges what is due by store time, not the caller's clock", () =>
    Effect.gen(function* () {
      const { query, store } = yield* StoreModule.makeMemory
      yield* submitOne(store, { delayMs: 1_000 })
      const ahead = yield* offsetClock(HOUR)

      const early = yield* Effect.withClock(query.stats({ failedSince: 0 }), ahead)
      yield* TestClock.adjust(1_000)
      const due = yield* query.stats({ failedSince: 0 })

      expect(early.oldestQueuedAt).toEqual({})
      expect(early.byState.queued).toBe(1)
      expect(due.oldestQueuedAt).toEqual({ "0": 1_000 })
    })
  )

  it.effect("without an explicit now, moving the TestClock expires leases; the reply carries that time", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store)
      yield* claimOne(store, job.id, "a", LEASE)

      yield* TestClock.adjust(LEASE)
      const atEnd = yield* store.claim({ items: [{ jobId: job.id, owner: "b", leaseMs: LEASE }] })
      yield* TestClock.adjust(1)
      const after = yield* store.claim({ items: [{ jobId: job.id, owner: "b", leaseMs: LEASE }] })

      expect(atEnd).toMatchObject({ now: LEASE, results: [{ _tag: "Busy", until: LEASE }] })
      expect(after).toMatchObject({
        now: LEASE + 1,
        results: [{ _tag: "Claimed", takeover: true, job: { leaseToken: 2, leaseUntil: 2 * LEASE + 1 } }]
      })
      expect((yield* store.sweep({})).requeued).toEqual([])
    })
  )

  it.effect("an explicit now is the store time of that write and of its reply only", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(5_000)
      const { store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store, {}, 100)

      const claim = yield* store.claim({ items: [{ jobId: job.id, owner: "a", leaseMs: LEASE }], now: 200 })
      const sweep = yield* store.sweep({ now: 200 + LEASE + 1 })

      expect(job).toMatchObject({ createdAt: 100, runAfter: 100 })
      expect(claim).toMatchObject({ now: 200, results: [{ _tag: "Claimed", job: { leaseUntil: 200 + LEASE } }] })
      expect(sweep.now).toBe(200 + LEASE + 1)
      expect(sweep.requeued.map((j) => j.id)).toEqual([job.id])
      expect(yield* store.now).toBe(5_000)
    })
  )
})

describe("Store.makeMemory: peek", () => {
  it.effect("reads the record each verb left, synchronously, and changes nothing", () =>
    Effect.gen(function* () {
      const { peek, query, store } = yield* StoreModule.makeMemory
      const item = yield* submitItem()
      expect(peek(item.id)).toBeUndefined()

      const job = yield* submitOne(store)
      expect(peek(job.id)).toEqual(job)
      expect((yield* claimOne(store, job.id, "a", LEASE))._tag).toBe("Claimed")
      const held = peek(job.id)
      expect(held).toMatchObject({ state: "running", leaseOwner: "a", leaseToken: 1 })
      expect(peek(job.id)).toBe(held)
      expect(yield* query.get({ jobId: job.id })).toEqual(held)
      const settled = yield* store.settle({
        items: [{ jobId: job.id, token: 1, outcome: { _tag: "Complete", result: { ok: true } } }]
      })
      expect(settled.results[0]).toEqual({ _tag: "Settled", job: peek(job.id) })
      expect(peek(job.id)).toMatchObject({ state: "succeeded", result: { ok: true } })
    })
  )
})

describe("Store.makeMemory and layerMemory: builds", () => {
  it.effect("each build is a fresh, independent store", () =>
    Effect.gen(function* () {
      const first = yield* StoreModule.makeMemory
      const second = yield* StoreModule.makeMemory
      const job = yield* submitOne(first.store)

      expect((yield* first.query.get({ jobId: job.id })).id).toBe(job.id)
      expect(yield* Effect.flip(second.query.get({ jobId: job.id }))).toMatchObject({ _tag: "JobNotFound" })
      expect(second.peek(job.id)).toBeUndefined()
    })
  )

  it.effect("layerMemory provides a Store and a Query over the same maps, fresh per build", () =>
    Effect.gen(function* () {
      const built = Effect.all([Store, Query]).pipe(Effect.provide(StoreModule.layerMemory))
      const [store, query] = yield* built
      const [, otherQuery] = yield* built
      const job = yield* submitOne(store)

      expect(yield* query.get({ jobId: job.id })).toEqual(job)
      expect(yield* otherQuery.list({})).toEqual([])
    })
  )
})

describe("Store.makeMemory: bookkeeping", () => {
  it.effect("the failure time counted by stats is kept apart from updatedAt: a late charge moves only updatedAt", () =>
    Effect.gen(function* () {
      const { query, store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store, { maxAttempts: 1 })
      yield* claimOne(store, job.id, "a", LEASE)
      yield* TestClock.adjust(1_000)
      yield* store.settle({
        items: [{ jobId: job.id, token: 1, outcome: { _tag: "Fail", errorClass: "timeout", error: "slow" } }]
      })
      yield* TestClock.adjust(5_000)

      yield* store.charge({ items: [{ jobId: job.id, callId: "late", token: 1, amountCents: 2, settled: true }] })

      expect((yield* query.get({ jobId: job.id })).updatedAt).toBe(6_000)
      expect((yield* query.stats({ failedSince: 1_000 })).failedInWindow).toBe(1)
      expect((yield* query.stats({ failedSince: 1_001 })).failedInWindow).toBe(0)
    })
  )

  it.effect("the sweep's republish mark is not part of the job record", () =>
    Effect.gen(function* () {
      const { peek, store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store)
      yield* TestClock.adjust(Protocol.defaults.republishAfterMs + 1)

      const first = yield* store.sweep({})
      const second = yield* store.sweep({})

      expect(first.stale).toEqual([job])
      expect(second.stale).toEqual([])
      expect(peek(job.id)).toEqual(job)
    })
  )
})

describe("Store.makeMemory: atomic among fibers", () => {
  it.effect("writes stay atomic when a thousand fibers claim and charge at once", () =>
    Effect.gen(function* () {
      const { query, store } = yield* StoreModule.makeMemory
      const jobs = []
      for (let i = 0; i < 20; i++) jobs.push(yield* submitOne(store, { input: { i } }))

      const replies = yield* Effect.all(
        jobs.flatMap((job) =>
          Array.from({ length: 50 }, (_, w) =>
            Effect.zipRight(
              store.charge({
                items: [{ jobId: job.id, callId: `c${w % 5}`, token: 0, amountCents: 1, settled: true }]
              }),
              store.claim({ items: [{ jobId: job.id, owner: `w${w}`, leaseMs: LEASE }] })
            )
          )
        ),
        { concurrency: "unbounded" }
      )

      expect(replies.filter((reply) => reply.results[0]?._tag === "Claimed")).toHaveLength(jobs.length)
      for (const job of jobs) {
        expect(yield* query.get({ jobId: job.id })).toMatchObject({ leaseToken: 1, attempts: 1, costCents: 5 })
        expect(yield* query.charges({ jobId: job.id })).toHaveLength(5)
      }
    })
  )

  it.effect("a batch is applied item after item: a later item sees an earlier one's write", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store)

      const reply = yield* store.claim({
        items: [
          { jobId: job.id, owner: "a", leaseMs: LEASE },
          { jobId: job.id, owner: "b", leaseMs: LEASE }
        ]
      })

      expect(reply.results.map((r) => r._tag)).toEqual(["Claimed", "Busy"])
    })
  )
})

describe("Store.makeMemoryWith: interleaving windows", () => {
  it.effect("a write with a window is checked and applied at its end, against the record as it is then", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_000_000)
      const windows: Array<string> = []
      const { store } = yield* StoreModule.makeMemoryWith({
        interleave: (verb) => {
          windows.push(verb)
          return verb === "heartbeat" ? Effect.sleep(1_000) : undefined
        }
      })
      const job = yield* submitOne(store)
      const claimed = yield* claimOne(store, job.id, "w", LEASE)
      expect(claimed._tag).toBe("Claimed")

      // The heartbeat waits in its window; the holder's Complete lands meanwhile.
      const beat = yield* Effect.fork(store.heartbeat({ items: [{ jobId: job.id, token: 1, leaseMs: LEASE }] }))
      yield* Effect.yieldNow()
      const settled = yield* store.settle({
        items: [{ jobId: job.id, token: 1, outcome: { _tag: "Complete", result: { ok: true } } }]
      })
      yield* TestClock.adjust(1_000)
      const reply = yield* beat.await

      expect(settled.results[0]?._tag).toBe("Settled")
      // Checked at its end, the renewal finds the job succeeded: rejected, and the record is untouched.
      expect(reply._tag === "Success" && reply.value.results[0]?._tag).toBe("LeaseLost")
      expect(reply._tag === "Success" && reply.value.now).toBe(1_001_000)
      expect(windows).toEqual(["submit", "claim", "heartbeat", "settle"])
    })
  )

  it.effect("without windows the replies are those of makeMemory", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_000_000)
      const plain = yield* StoreModule.makeMemory
      const opened = yield* StoreModule.makeMemoryWith({ interleave: () => undefined })
      const replies = yield* Effect.forEach([plain.store, opened.store], (store) =>
        Effect.gen(function* () {
          const job = yield* submitOne(store, { requestKey: "k" })
          const claimed = yield* claimOne(store, job.id, "w", LEASE)
          const done = yield* store.settle({
            items: [
              { jobId: job.id, token: 1, outcome: { _tag: "Retry", delayMs: 10, errorClass: "timeout", error: "t" } }
            ]
          })
          return [claimed._tag, done.results[0]?._tag, done.now]
        })
      )
      expect(replies[0]).toEqual(replies[1])
      expect(replies[0]).toEqual(["Claimed", "Settled", 1_000_000])
    })
  )
})
