import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import { inputHash } from "../src/Canonical.js"
import { makeJobId } from "../src/Ids.js"
import * as Store from "../src/Store.js"

const LEASE = 10_000

/** A clock an hour ahead of the one in scope: a worker with a badly skewed clock. */
const skewedClock = Effect.map(Effect.clock, (base): Clock.Clock => {
  const skew = 3_600_000
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => base.unsafeCurrentTimeMillis() + skew,
    currentTimeMillis: Effect.sync(() => base.unsafeCurrentTimeMillis() + skew),
    unsafeCurrentTimeNanos: () => base.unsafeCurrentTimeNanos() + BigInt(skew) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => base.unsafeCurrentTimeNanos() + BigInt(skew) * 1_000_000n),
    sleep: (duration) => base.sleep(duration)
  }
})

const submitOptions = (queue: string, extra: Partial<Store.SubmitOptions> = {}) =>
  Effect.gen(function* () {
    const input = { queue }
    return {
      id: yield* makeJobId,
      queue,
      type: "echo",
      version: 1,
      input,
      inputHash: yield* Effect.orDie(inputHash(input)),
      maxAttempts: 3,
      ...extra
    } satisfies Store.SubmitOptions
  })

describe("Store.layerMemory", () => {
  it.effect("reads store time from the clock it was made with, never the caller's", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_000_000)
      const store = yield* Store.makeMemory
      const skewed = yield* skewedClock
      const options = yield* submitOptions("q")
      const { job } = yield* Effect.withClock(store.submit(options), skewed)
      expect(job.createdAt).toBe(1_000_000)
      const claim = yield* Effect.withClock(store.claim({ jobId: job.id, owner: "w", leaseMs: LEASE }), skewed)
      expect(claim).toMatchObject({ _tag: "Claimed", job: { leaseUntil: 1_000_000 + LEASE } })
      expect(yield* Effect.withClock(store.now, skewed)).toBe(1_000_000)
      // The skewed worker thinks the lease ended an hour ago; the store says it is live.
      const rival = yield* Effect.withClock(store.claim({ jobId: job.id, owner: "x", leaseMs: LEASE }), skewed)
      expect(rival._tag).toBe("Busy")
    })
  )

  it.effect("without an explicit now, moving the TestClock expires leases", () =>
    Effect.gen(function* () {
      const store = yield* Store.makeMemory
      const { job } = yield* store.submit(yield* submitOptions("q"))
      yield* store.claim({ jobId: job.id, owner: "a", leaseMs: LEASE })
      yield* TestClock.adjust(LEASE)
      expect((yield* store.claim({ jobId: job.id, owner: "b", leaseMs: LEASE }))._tag).toBe("Busy")
      yield* TestClock.adjust(1)
      const takeover = yield* store.claim({ jobId: job.id, owner: "b", leaseMs: LEASE })
      expect(takeover).toMatchObject({ _tag: "Claimed", takeover: true, job: { leaseToken: 2 } })
      const swept = yield* store.sweep({})
      expect(swept.requeued).toEqual([])
    })
  )

  it.effect("makeMemoryInspectable: peek reads the record each verb left, synchronously, and changes nothing", () =>
    Effect.gen(function* () {
      const { store, peek } = yield* Store.makeMemoryInspectable
      const options = yield* submitOptions("q")
      expect(peek(options.id)).toBeUndefined()
      const { job } = yield* store.submit(options)
      expect(peek(job.id)).toEqual(job)
      const claim = yield* store.claim({ jobId: job.id, owner: "a", leaseMs: LEASE })
      expect(claim._tag).toBe("Claimed")
      const held = peek(job.id)
      expect(held).toMatchObject({ state: "running", leaseOwner: "a", leaseToken: 1 })
      expect(peek(job.id)).toBe(held)
      expect(yield* store.get({ jobId: job.id })).toEqual(held)
      const done = yield* store.complete({ jobId: job.id, token: 1, result: { ok: true } })
      expect(peek(job.id)).toEqual(done)
    })
  )

  it.effect("each build is a fresh, independent store", () =>
    Effect.gen(function* () {
      const options = yield* submitOptions("q")
      const first = yield* Effect.provide(Store.Store, Store.layerMemory)
      const second = yield* Effect.provide(Store.Store, Store.layerMemory)
      yield* first.submit(options)
      expect((yield* first.get({ jobId: options.id })).id).toBe(options.id)
      expect(yield* Effect.flip(second.get({ jobId: options.id }))).toMatchObject({ _tag: "JobNotFound" })
    })
  )

  it.effect("a second submit of the same id without a request key fails with a Constraint StoreError", () =>
    Effect.gen(function* () {
      const store = yield* Store.makeMemory
      const options = yield* submitOptions("q")
      yield* store.submit(options)
      const error = yield* Effect.flip(store.submit(options))
      expect(error).toMatchObject({ _tag: "StoreError", reason: "Constraint", operation: "submit" })
      expect(yield* store.list({ queue: "q" })).toHaveLength(1)
    })
  )

  it.effect("a charge on a failed job moves updatedAt but not the failure time counted by stats", () =>
    Effect.gen(function* () {
      const store = yield* Store.makeMemory
      const { job } = yield* store.submit(yield* submitOptions("q", { maxAttempts: 1 }))
      const claim = yield* store.claim({ jobId: job.id, owner: "a", leaseMs: LEASE })
      if (claim._tag !== "Claimed") throw new Error("not claimed")
      yield* TestClock.adjust(1_000)
      const failedAt = yield* Clock.currentTimeMillis
      const failed = yield* store.fail({ jobId: job.id, token: 1, errorClass: "timeout", error: "slow" })
      expect(failed.updatedAt).toBe(failedAt)
      yield* TestClock.adjust(5_000)
      yield* store.charge({ jobId: job.id, callId: "late", token: 1, amountCents: 2, settled: true })
      const after = yield* store.get({ jobId: job.id })
      expect(after.updatedAt).toBe(failedAt + 5_000)
      expect((yield* store.stats({ failedSince: failedAt })).failedInWindow).toBe(1)
      expect((yield* store.stats({ failedSince: failedAt + 1 })).failedInWindow).toBe(0)
    })
  )

  it.effect("sweep and replay honour their limits", () =>
    Effect.gen(function* () {
      const store = yield* Store.makeMemory
      const ids = []
      for (let i = 0; i < 5; i++) {
        const { job } = yield* store.submit(yield* submitOptions("q", { maxAttempts: 1, input: { i } }))
        yield* store.claim({ jobId: job.id, owner: "a", leaseMs: 1_000 })
        ids.push(job.id)
      }
      yield* TestClock.adjust(1_001)
      const first = yield* store.sweep({ limit: 2 })
      expect(first.expiredFailed).toEqual(ids.slice(0, 2))
      const rest = yield* store.sweep({})
      expect(rest.expiredFailed).toEqual(ids.slice(2))
      const replayed = yield* store.replay({ queue: "q", limit: 3 })
      expect(replayed.replayed).toEqual(ids.slice(0, 3))
      expect((yield* store.list({ queue: "q", state: "failed" })).map((j) => j.id).sort()).toEqual(ids.slice(3).sort())
    })
  )

  it.effect("verbs stay atomic when thousands of fibers claim and charge at once", () =>
    Effect.gen(function* () {
      const store = yield* Store.makeMemory
      const jobs = []
      for (let i = 0; i < 20; i++) {
        jobs.push((yield* store.submit(yield* submitOptions("q", { input: { i } }))).job)
      }
      const results = yield* Effect.all(
        jobs.flatMap((job) =>
          Array.from({ length: 50 }, (_, w) =>
            Effect.zipRight(
              store.charge({ jobId: job.id, callId: `c${w % 5}`, token: 0, amountCents: 1, settled: true }),
              store.claim({ jobId: job.id, owner: `w${w}`, leaseMs: LEASE })
            )
          )
        ),
        { concurrency: "unbounded" }
      )
      expect(results.filter((r) => r._tag === "Claimed")).toHaveLength(jobs.length)
      for (const job of jobs) {
        expect(yield* store.get({ jobId: job.id })).toMatchObject({ leaseToken: 1, attempts: 1, costCents: 5 })
      }
    })
  )
})
