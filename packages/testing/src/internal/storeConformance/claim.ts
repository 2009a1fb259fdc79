/**
 * Store conformance, claim: the conditional write that hands out leases (`Protocol.claimVerdict` and
 * `Protocol.claimTransition`). A due queued job or an expired lease is claimed with a new token and a new attempt
 * row; a live lease is `Busy` up to and including its last millisecond; a job not yet due is `NotDue`; a job the
 * claim finds cancelled, past its deadline or out of attempts is settled instead (`Settled`); an unknown id is
 * `NotFound`. `claimNext` picks itself, in `Protocol.claimNextOrder`: running jobs whose lease ended first (taken
 * over directly, with no sweep in between), then due queued jobs in priority, then run-after, then insertion order.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import type { Job } from "@slowcall/core/Job"
import { Effect } from "effect"
import { type Area, expectTag, LEASE, only, outcome } from "./fixture.js"

/** Claims that take, refuse or take over a lease. */
const leaseTests = ({ it, fixture }: Area): void => {
  it.effect("claim of a queued, due job takes the lease and opens an attempt", () =>
    Effect.gen(function* () {
      const { store, now, submit, get, attempts } = yield* fixture
      const job = yield* submit()
      const at = yield* now

      const reply = yield* store.claim({ items: [{ jobId: job.id, owner: "worker-a", leaseMs: LEASE }], now: at })

      expect(reply.now).toBe(at)
      const claimed = expectTag(only(reply), "Claimed")
      expect(claimed.takeover).toBe(false)
      expect(claimed.job).toMatchObject({
        state: "running",
        attempts: 1,
        leaseToken: 1,
        leaseOwner: "worker-a",
        leaseUntil: at + LEASE,
        cancelRequestedAt: null
      })
      expect(claimed.job.updatedAt).toBeGreaterThan(job.updatedAt)
      expect(yield* get(job.id)).toEqual(claimed.job)
      expect(yield* attempts(job.id)).toEqual([
        {
          jobId: job.id,
          token: 1,
          worker: "worker-a",
          startedAt: at,
          endedAt: null,
          outcome: "running",
          errorClass: null,
          evidence: null
        }
      ])
    })
  )

  it.effect("claim of an unknown job is NotFound", () =>
    Effect.gen(function* () {
      const { factory, claim } = yield* fixture
      const jobId = yield* factory.jobId

      const result = yield* claim(jobId)

      expect(result).toEqual({ _tag: "NotFound", jobId })
    })
  )

  it.effect("claim of a job whose delay has not passed is NotDue until then, changing nothing", () =>
    Effect.gen(function* () {
      const { now, advance, submit, claim, claimed, get } = yield* fixture
      const at = yield* now
      const job = yield* submit({ delayMs: 10_000 })

      const early = yield* claim(job.id, { at: at + 9_999 })

      expect(early).toEqual({ _tag: "NotDue", job, until: at + 10_000 })
      expect(yield* get(job.id)).toEqual(job)
      yield* advance(10_000)
      expect((yield* claimed(job.id)).leaseToken).toBe(1)
    })
  )

  it.effect("claim while a lease is live is Busy (even at its last millisecond); after it, a takeover", () =>
    Effect.gen(function* () {
      const { now, advance, submit, claim, claimed, get, attempts } = yield* fixture
      const job = yield* submit()
      const first = yield* claimed(job.id, "worker-a", 5_000)

      const busy = yield* claim(job.id, { owner: "worker-b" })
      yield* advance(5_000)
      const edge = yield* claim(job.id, { owner: "worker-b" })

      expect(busy).toEqual({ _tag: "Busy", job: first, until: first.leaseUntil })
      expect(edge).toEqual({ _tag: "Busy", job: first, until: first.leaseUntil })
      expect(yield* get(job.id)).toEqual(first)
      yield* advance(1)
      const at = yield* now
      const takeover = expectTag(yield* claim(job.id, { owner: "worker-b" }), "Claimed")
      expect(takeover.takeover).toBe(true)
      expect(takeover.job).toMatchObject({
        state: "running",
        attempts: 2,
        leaseToken: 2,
        leaseOwner: "worker-b",
        leaseUntil: at + LEASE
      })
      const rows = yield* attempts(job.id)
      expect(rows.map((a) => [a.token, a.worker, a.outcome, a.errorClass])).toEqual([
        [1, "worker-a", "expired", "lease_expired"],
        [2, "worker-b", "running", null]
      ])
      expect(rows[0]!.endedAt).toBe(at)
    })
  )

  it.effect("claim of a terminal job is Settled and changes nothing", () =>
    Effect.gen(function* () {
      const { submit, claimed, settled, claim, get } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      const failed = yield* settled(job.id, running.leaseToken, outcome.fail("invalid_request", "400"))

      const result = yield* claim(job.id, { owner: "worker-b" })

      expect(result).toEqual({ _tag: "Settled", job: failed })
      expect(yield* get(job.id)).toEqual(failed)
    })
  )

  it.effect("attempts and tokens strictly increase over claims, retries, releases, takeovers and replays", () =>
    Effect.gen(function* () {
      const { advance, submit, claimed, settled, replay, attempts } = yield* fixture
      const job = yield* submit({ maxAttempts: 10 })
      const seen: Array<Job> = []

      const a = yield* claimed(job.id)
      seen.push(a)
      yield* settled(job.id, a.leaseToken, outcome.retry(0, "timeout", "t"))
      const b = yield* claimed(job.id, "worker-b", 1_000)
      seen.push(b)
      yield* advance(1_001)
      const c = yield* claimed(job.id, "worker-c")
      seen.push(c)
      yield* settled(job.id, c.leaseToken, outcome.release)
      const d = yield* claimed(job.id, "worker-d")
      seen.push(d)
      yield* settled(job.id, d.leaseToken, outcome.fail("server_error", "500"))
      yield* replay([job.id])
      const e = yield* claimed(job.id, "worker-e")
      seen.push(e)

      for (let i = 1; i < seen.length; i++) {
        expect(seen[i]!.leaseToken).toBeGreaterThan(seen[i - 1]!.leaseToken)
        expect(seen[i]!.attempts).toBeGreaterThan(seen[i - 1]!.attempts)
        expect(seen[i]!.updatedAt).toBeGreaterThan(seen[i - 1]!.updatedAt)
      }
      const rows = yield* attempts(job.id)
      expect(rows.map((r) => r.token)).toEqual(seen.map((j) => j.leaseToken))
      expect(rows.map((r) => r.outcome)).toEqual(["retried", "expired", "released", "failed", "running"])
    })
  )
}

/** Claims that settle a job instead, and claimNext. */
const settlingTests = ({ it, fixture }: Area): void => {
  it.effect("claim settles a job with no attempt left as failed (last error class; lease_expired on takeover)", () =>
    Effect.gen(function* () {
      const { advance, submit, claimed, settled, claim, attempts } = yield* fixture
      const retried = yield* submit({ maxAttempts: 1 })
      const a = yield* claimed(retried.id)
      yield* settled(retried.id, a.leaseToken, outcome.retry(0, "rate_limited", "429"))

      const settledRetry = yield* claim(retried.id, { owner: "worker-b" })

      expect(settledRetry).toMatchObject({
        _tag: "Settled",
        job: { state: "failed", errorClass: "rate_limited", attempts: 1, leaseToken: 1 }
      })

      const expired = yield* submit({ maxAttempts: 1 })
      yield* claimed(expired.id, "worker-a", 1_000)
      yield* advance(1_001)
      const takeover = yield* claim(expired.id, { owner: "worker-b" })
      expect(takeover).toMatchObject({
        _tag: "Settled",
        job: { state: "failed", errorClass: "lease_expired", attempts: 1, leaseOwner: null, leaseUntil: null }
      })
      expect((yield* attempts(expired.id)).map((r) => r.outcome)).toEqual(["expired"])
    })
  )

  it.effect("claim settles a job at or past its deadline as abandoned(deadline), with no attempt", () =>
    Effect.gen(function* () {
      const { now, advance, submit, claim, attempts } = yield* fixture
      const at = yield* now
      const job = yield* submit({ deadlineAt: at + 1_000 })
      yield* advance(1_000)

      const result = yield* claim(job.id)

      expect(result).toMatchObject({
        _tag: "Settled",
        job: { state: "abandoned", abandonReason: "deadline", attempts: 0, leaseToken: 0 }
      })
      expect(yield* attempts(job.id)).toEqual([])
    })
  )

  it.effect("claim of an expired lease with a cancel requested settles it as abandoned(cancelled)", () =>
    Effect.gen(function* () {
      const { advance, submit, claimed, cancel, claim, attempts } = yield* fixture
      const job = yield* submit()
      yield* claimed(job.id, "worker-a", 1_000)
      yield* cancel(job.id)
      yield* advance(1_001)

      const result = yield* claim(job.id, { owner: "worker-b" })

      expect(result).toMatchObject({ _tag: "Settled", job: { state: "abandoned", abandonReason: "cancelled" } })
      expect((yield* attempts(job.id)).map((r) => r.outcome)).toEqual(["expired"])
    })
  )

  it.effect("a cancel requested before a release settles the next claim as abandoned(cancelled)", () =>
    Effect.gen(function* () {
      const { submit, claimed, cancel, settled, claim } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      yield* cancel(job.id)
      const released = yield* settled(job.id, running.leaseToken, outcome.release)
      expect(released.cancelRequestedAt).not.toBeNull()

      const result = yield* claim(job.id, { owner: "worker-b" })

      expect(result).toMatchObject({ _tag: "Settled", job: { state: "abandoned", abandonReason: "cancelled" } })
    })
  )

  it.effect("claimNext takes due queued jobs by priority, then run-after, then insertion, at most max", () =>
    Effect.gen(function* () {
      const { store, queue, now, advance, submit, claimed, get } = yield* fixture
      const low = yield* submit({ priority: 0 })
      const delayedHigh = yield* submit({ priority: 5, delayMs: 500 })
      const high = yield* submit({ priority: 5 })
      const lowSecond = yield* submit({ priority: 0 })
      const notDue = yield* submit({ priority: 9, delayMs: 60_000 })
      const running = yield* submit({ priority: 9 })
      yield* claimed(running.id)
      yield* submit({ queue: `${queue}-other`, priority: 9 })
      yield* advance(1_000)
      const at = yield* now

      const first = yield* store.claimNext({ queue, max: 3, owner: "worker-n", leaseMs: LEASE, now: at })
      const second = yield* store.claimNext({ queue, max: 3, owner: "worker-n", leaseMs: LEASE, now: at })

      expect(first.now).toBe(at)
      // Both priority-5 jobs are due; `high` has the earlier run-after. Equal priority and run-after: insertion.
      expect(first.results.map((r) => [r._tag, r.job.id])).toEqual([
        ["Claimed", high.id],
        ["Claimed", delayedHigh.id],
        ["Claimed", low.id]
      ])
      for (const result of first.results) {
        expect(result.job).toMatchObject({ state: "running", leaseOwner: "worker-n", leaseUntil: at + LEASE })
      }
      expect(second.results.map((r) => r.job.id)).toEqual([lowSecond.id])
      const third = yield* store.claimNext({ queue, max: 3, owner: "worker-n", leaseMs: LEASE, now: at })
      expect(third.results).toEqual([])
      expect(yield* get(notDue.id)).toEqual(notDue)
      expect(yield* get(running.id)).toMatchObject({ leaseToken: 1, leaseOwner: "worker-a" })
    })
  )

  it.effect("claimNext with types picks only the listed (type, version) pairs and leaves the rest queued", () =>
    Effect.gen(function* () {
      const { store, queue, now, submit, get } = yield* fixture
      const v1 = yield* submit({ type: "kind.a", version: 1 })
      const v2 = yield* submit({ type: "kind.a", version: 2 })
      const other = yield* submit({ type: "kind.b", version: 1 })
      const at = yield* now

      const none = yield* store.claimNext({ queue, max: 5, owner: "w", leaseMs: LEASE, now: at, types: [] })
      const picked = yield* store.claimNext({
        queue,
        max: 5,
        owner: "w",
        leaseMs: LEASE,
        now: at,
        types: [
          { type: "kind.a", version: 2 },
          { type: "kind.b", version: 1 }
        ]
      })

      expect(none.results).toEqual([])
      expect(picked.results.map((r) => [r._tag, r.job.id])).toEqual([
        ["Claimed", v2.id],
        ["Claimed", other.id]
      ])
      expect(yield* get(v1.id)).toEqual(v1)
    })
  )

  it.effect("claimNext settles what it must settle and returns it as Settled", () =>
    Effect.gen(function* () {
      const { store, queue, now, advance, submit, get } = yield* fixture
      const at = yield* now
      const late = yield* submit({ deadlineAt: at + 500 })
      const fine = yield* submit()
      yield* advance(1_000)

      const reply = yield* store.claimNext({ queue, max: 10, owner: "worker-n", leaseMs: LEASE, now: yield* now })

      expect(reply.results.map((r) => [r._tag, r.job.id])).toEqual([
        ["Settled", late.id],
        ["Claimed", fine.id]
      ])
      expect(yield* get(late.id)).toMatchObject({ state: "abandoned", abandonReason: "deadline" })
    })
  )
}

/** claimNext and leases that ended: a holder unheard from for its whole keep-alive is taken over by the next pick. */
const lapsedTests = ({ it, fixture }: Area): void => {
  it.effect("claimNext takes over a lease that ended, before queued jobs, with no sweep; the old token is fenced", () =>
    Effect.gen(function* () {
      const { store, queue, now, advance, submit, claimed, heartbeat, settle, get, attempts } = yield* fixture
      const lapsed = yield* submit({ priority: 0 })
      const live = yield* submit({ priority: 0 })
      const queued = yield* submit({ priority: 9 })
      yield* claimed(lapsed.id, "dead", 2_000)
      yield* claimed(live.id, "alive", LEASE)
      yield* advance(2_000)
      const edge = yield* store.claimNext({ queue, max: 1, owner: "worker-n", leaseMs: LEASE, now: yield* now })
      yield* advance(1)
      const at = yield* now

      const reply = yield* store.claimNext({ queue, max: 2, owner: "worker-n", leaseMs: LEASE, now: at })

      // At its last millisecond the lease still held: the queued job went first.
      expect(edge.results.map((r) => r.job.id)).toEqual([queued.id])
      expect(reply.results.map((r) => [r._tag, r.job.id, r._tag === "Claimed" && r.takeover])).toEqual([
        ["Claimed", lapsed.id, true]
      ])
      expect(reply.results[0]!.job).toMatchObject({
        state: "running",
        attempts: 2,
        leaseToken: 2,
        leaseOwner: "worker-n",
        leaseUntil: at + LEASE
      })
      const rows = yield* attempts(lapsed.id)
      expect(rows.map((a) => [a.token, a.worker, a.outcome, a.errorClass, a.endedAt])).toEqual([
        [1, "dead", "expired", "lease_expired", at],
        [2, "worker-n", "running", null, null]
      ])
      expect(yield* get(live.id)).toMatchObject({ leaseToken: 1, leaseOwner: "alive" })
      // The holder that went unheard can never write again.
      expect((yield* heartbeat({ jobId: lapsed.id, token: 1, leaseMs: LEASE }))._tag).toBe("LeaseLost")
      expect((yield* settle(lapsed.id, 1, { _tag: "Complete", result: "late" }))._tag).toBe("LeaseLost")
      expect(yield* get(lapsed.id)).toMatchObject({ state: "running", leaseToken: 2, result: null })
    })
  )

  it.effect("claimNext passes over a lapsed lease of a (type, version) it was not asked for", () =>
    Effect.gen(function* () {
      const { store, queue, now, advance, submit, claimed, get } = yield* fixture
      const other = yield* submit({ type: "kind.b", version: 1 })
      const mine = yield* submit({ type: "kind.a", version: 1 })
      const before = yield* claimed(other.id, "dead", 1_000)
      yield* claimed(mine.id, "dead", 1_000)
      yield* advance(1_001)

      const reply = yield* store.claimNext({
        queue,
        max: 5,
        owner: "w",
        leaseMs: LEASE,
        now: yield* now,
        types: [{ type: "kind.a", version: 1 }]
      })

      expect(reply.results.map((r) => [r._tag, r.job.id])).toEqual([["Claimed", mine.id]])
      expect(yield* get(other.id)).toEqual(before)
    })
  )
}

/** Registers the claim tests. @internal */
export const claimTests = (area: Area): void => {
  describe("claim", () => {
    leaseTests(area)
    settlingTests(area)
    lapsedTests(area)
  })
}
