/**
 * Store conformance, sweep: one pass with store time (`Protocol.sweepVerdict` and `Protocol.sweepTransition`).
 * Expired leases are requeued (returned as job records, due now), failed with `lease_expired` when no attempt is
 * left, or abandoned on a cancel request or a passed deadline; queued jobs past their deadline are abandoned; queued,
 * due jobs untouched for longer than `republishAfterMs` are returned as `stale` once per interval, without a write to their
 * record. `limit` bounds the jobs one pass writes, expired leases first.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import type { Job } from "@slowcall/core/Job"
import { Effect } from "effect"
import { type Area, outcome } from "./fixture.js"

const ids = (jobs: ReadonlyArray<Job>) => jobs.map((job) => job.id)

/** Registers the sweep tests. @internal */
export const sweepTests = ({ it, fixture }: Area): void => {
  describe("sweep", () => {
    it.effect("expired leases are requeued, failed when no attempt is left, abandoned on cancel or deadline", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit, claimed, cancel, get, attempts } = yield* fixture
        const t0 = yield* now
        const requeue = yield* submit({ maxAttempts: 3 })
        const exhausted = yield* submit({ maxAttempts: 1 })
        const cancelled = yield* submit()
        const late = yield* submit({ deadlineAt: t0 + 1_500 })
        const live = yield* submit()
        const queuedLate = yield* submit({ deadlineAt: t0 + 1_500, delayMs: 60_000 })
        for (const job of [requeue, exhausted, cancelled, late]) yield* claimed(job.id, "worker-a", 1_000)
        yield* claimed(live.id, "worker-a", 60_000)
        yield* cancel(cancelled.id)
        yield* advance(2_000)
        const at = yield* now

        const result = yield* store.sweep({ queue, now: at })

        expect(result.now).toBe(at)
        const requeued = yield* get(requeue.id)
        expect(result.requeued).toEqual([requeued])
        expect(requeued).toMatchObject({
          state: "queued",
          runAfter: at,
          leaseOwner: null,
          leaseUntil: null,
          leaseToken: 1
        })
        expect(result.expiredFailed).toEqual([exhausted.id])
        expect([...result.abandoned].sort()).toEqual([cancelled.id, late.id, queuedLate.id].sort())
        expect(yield* attempts(requeue.id)).toMatchObject([
          { outcome: "expired", errorClass: "lease_expired", endedAt: at }
        ])
        expect(yield* get(exhausted.id)).toMatchObject({ state: "failed", errorClass: "lease_expired" })
        expect((yield* attempts(exhausted.id)).map((a) => a.outcome)).toEqual(["expired"])
        expect(yield* get(cancelled.id)).toMatchObject({ state: "abandoned", abandonReason: "cancelled" })
        expect(yield* get(late.id)).toMatchObject({ state: "abandoned", abandonReason: "deadline" })
        expect(yield* get(queuedLate.id)).toMatchObject({ state: "abandoned", abandonReason: "deadline" })
        expect(yield* get(live.id)).toMatchObject({ state: "running", leaseToken: 1 })
        const second = yield* store.sweep({ queue, now: at })
        expect(second).toMatchObject({ requeued: [], expiredFailed: [], abandoned: [] })
        const next = yield* claimed(requeue.id, "worker-b")
        expect(next).toMatchObject({ leaseToken: 2, attempts: 2 })
      })
    )

    it.effect("a lease is expired only after its last millisecond", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit, claimed } = yield* fixture
        const job = yield* submit()
        const running = yield* claimed(job.id, "worker-a", 1_000)
        yield* advance(1_000)

        const edge = yield* store.sweep({ queue, now: yield* now })
        yield* advance(1)
        const after = yield* store.sweep({ queue, now: yield* now })

        expect(edge.requeued).toEqual([])
        expect(running.leaseUntil).toBe((yield* now) - 1)
        expect(ids(after.requeued)).toEqual([job.id])
      })
    )

    it.effect(
      "stale lists queued, due jobs untouched for longer than republishAfterMs, and leaves their record alone",
      () =>
        Effect.gen(function* () {
          const { store, queue, now, advance, submit, get } = yield* fixture
          const old = yield* submit()
          const notDue = yield* submit({ delayMs: 600_000 })
          yield* advance(20_000)
          const fresh = yield* submit()
          yield* advance(15_000)
          const at = yield* now

          const result = yield* store.sweep({ queue, republishAfterMs: 30_000, now: at })

          expect(result.stale).toEqual([old])
          expect(yield* get(old.id)).toEqual(old)
          // `old` was just handed out; with a shorter interval only `fresh` is due for a republish.
          const wide = yield* store.sweep({ queue, republishAfterMs: 10_000, now: at })
          expect(ids(wide.stale)).toEqual([fresh.id])
          expect(yield* get(fresh.id)).toEqual(fresh)
          expect(yield* get(notDue.id)).toEqual(notDue)
          const otherQueue = yield* store.sweep({ queue: `${queue}-other`, republishAfterMs: 0, now: at })
          expect(otherQueue.stale).toEqual([])
        })
    )

    it.effect("a waiting job is returned as stale once per republishAfterMs, least recently touched first", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit, claimed, settled, get } = yield* fixture
        const a = yield* submit()
        yield* advance(1_000)
        const b = yield* submit()
        const sweep = (limit?: number) =>
          Effect.flatMap(now, (at) => store.sweep({ queue, republishAfterMs: 30_000, limit, now: at }))
        const stale = (result: { readonly stale: ReadonlyArray<Job> }) => ids(result.stale)
        yield* advance(30_001)

        // t+31.001 s: both waited more than 30 s; the limit lets one out, the one untouched longest.
        expect(stale(yield* sweep(1))).toEqual([a.id])
        yield* advance(500)
        expect(stale(yield* sweep())).toEqual([b.id])
        expect(stale(yield* sweep())).toEqual([])
        // The mark is no write to the record: updatedAt and every field stay as they were.
        expect(yield* get(a.id)).toEqual(a)
        expect(yield* get(b.id)).toEqual(b)

        // Each comes back once more than one interval has passed since it was handed out.
        yield* advance(29_500)
        expect(stale(yield* sweep())).toEqual([])
        yield* advance(1)
        expect(stale(yield* sweep())).toEqual([a.id])
        yield* advance(500)
        expect(stale(yield* sweep())).toEqual([b.id])
        // Both due again: the earlier mark goes first.
        yield* advance(40_000)
        expect(stale(yield* sweep())).toEqual([a.id, b.id])
        // A write to the record restarts the wait from that write.
        yield* advance(10_000)
        const running = yield* claimed(a.id)
        yield* settled(a.id, running.leaseToken, outcome.release)
        yield* advance(20_001)
        expect(stale(yield* sweep())).toEqual([b.id])
        // More than one interval after the release (its updatedAt is a microsecond after the claim's, strictly
        // monotonic under a frozen clock), not at it.
        yield* advance(9_999)
        expect(stale(yield* sweep())).toEqual([])
        yield* advance(1)
        expect(stale(yield* sweep())).toEqual([a.id])
      })
    )

    it.effect("limit bounds the jobs one pass writes, all kinds together, expired leases first", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit, claimed, get } = yield* fixture
        const t0 = yield* now
        const waiting = yield* submit()
        const overdue1 = yield* submit({ deadlineAt: t0 + 40_000 })
        const overdue2 = yield* submit({ deadlineAt: t0 + 40_000 })
        const expired1 = yield* submit()
        const expired2 = yield* submit()
        yield* claimed(expired1.id, "worker-a", 1_000)
        yield* claimed(expired2.id, "worker-a", 1_000)
        yield* advance(45_000)
        const at = yield* now
        const sweep = (limit: number) => store.sweep({ queue, republishAfterMs: 30_000, limit, now: at })

        expect(yield* sweep(0)).toEqual({ now: at, requeued: [], expiredFailed: [], abandoned: [], stale: [] })
        const first = yield* sweep(3)
        expect(ids(first.requeued)).toEqual([expired1.id, expired2.id])
        expect(first).toMatchObject({ expiredFailed: [], abandoned: [overdue1.id], stale: [] })
        expect((yield* get(overdue2.id)).state).toBe("queued")

        // The rest on the next pass; the requeued jobs were just written, so they are not stale.
        const second = yield* sweep(3)
        expect(second).toMatchObject({ requeued: [], expiredFailed: [], abandoned: [overdue2.id] })
        expect(ids(second.stale)).toEqual([waiting.id])
        expect((yield* get(overdue2.id)).abandonReason).toBe("deadline")
      })
    )

    it.effect("a job requeued by a pass is not also returned as stale by it", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit, claimed } = yield* fixture
        const job = yield* submit()
        yield* claimed(job.id, "worker-a", 1_000)
        yield* advance(1_001)

        const result = yield* store.sweep({ queue, republishAfterMs: 0, now: yield* now })

        expect(ids(result.requeued)).toEqual([job.id])
        expect(result.stale).toEqual([])
        // Written at this instant, so not stale at it; stale one millisecond on.
        const same = yield* store.sweep({ queue, republishAfterMs: 0, now: yield* now })
        expect(same.stale).toEqual([])
        yield* advance(1)
        const next = yield* store.sweep({ queue, republishAfterMs: 0, now: yield* now })
        expect(ids(next.stale)).toEqual([job.id])
      })
    )

    it.effect("a job republished at an instant is not stale again at that instant, even with republishAfterMs 0", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit } = yield* fixture
        const older = yield* submit()
        yield* advance(1_000)
        const newer = yield* submit()
        yield* advance(1_000)
        const sweep = (limit: number) =>
          Effect.flatMap(now, (at) => store.sweep({ queue, republishAfterMs: 0, limit, now: at }))

        // Two passes at one store instant (a Postgres sweep locking a row a concurrent one has just marked re-checks
        // it against this rule): the second takes the job the first left, and never the one it marked.
        expect(ids((yield* sweep(1)).stale)).toEqual([older.id])
        expect(ids((yield* sweep(2)).stale)).toEqual([newer.id])
        expect((yield* sweep(2)).stale).toEqual([])
        yield* advance(1)
        expect(ids((yield* sweep(2)).stale)).toEqual([older.id, newer.id])
      })
    )
  })
}
