/**
 * Store conformance, reads and replay: `Query` (get, list, attempts, charges, deadLetters, stats, countQueued) reads exactly what
 * the writes left, hides other tenants' jobs, and orders and limits as documented; `Store.now` is store time;
 * `Store.replay` moves a dead letter back to queued through one conditional write (`Protocol.replayable`,
 * `Protocol.replayTransition`) and never touches a job in any other state; the derived `Query.replay` picks its
 * targets by filter or by id and goes through that same write.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import type { ErrorClass } from "@slowcall/core/ErrorClass"
import { attemptsLeft, type JobId } from "@slowcall/core/Job"
import * as Query from "@slowcall/core/Query"
import { Effect } from "effect"
import { type Area, outcome } from "./fixture.js"

/** The Query reads and Store.now. */
const readTests = ({ it, fixture }: Area): void => {
  it.effect("get hides unknown jobs and other tenants' jobs", () =>
    Effect.gen(function* () {
      const { query, tenant, factory, submit } = yield* fixture
      const job = yield* submit()

      expect(yield* query.get({ jobId: job.id, tenant })).toEqual(job)
      expect(yield* Effect.flip(query.get({ jobId: job.id, tenant: `${tenant}-other` }))).toMatchObject({
        _tag: "JobNotFound"
      })
      const unknown = yield* factory.jobId
      expect(yield* Effect.flip(query.get({ jobId: unknown }))).toMatchObject({ _tag: "JobNotFound", jobId: unknown })
      expect(yield* query.attempts({ jobId: unknown })).toEqual([])
      expect(yield* query.charges({ jobId: unknown })).toEqual([])
    })
  )

  it.effect("list: every filter applies, newest first unless oldest is asked, at most limit", () =>
    Effect.gen(function* () {
      const { query, queue, tenant, advance, submit, claimed, settled } = yield* fixture
      const a = yield* submit({ type: "alpha" })
      yield* advance(10)
      const b = yield* submit({ type: "beta" })
      yield* advance(10)
      const c = yield* submit({ type: "alpha", tenant: `${tenant}-other` })
      yield* advance(10)
      const running = yield* claimed(b.id)
      const failed = yield* claimed(a.id)
      yield* settled(a.id, failed.leaseToken, outcome.fail("auth", "401"))
      const list = (options: Omit<Query.ListOptions, "queue">) =>
        Effect.map(query.list({ queue, ...options }), (jobs) => jobs.map((j) => j.id))

      expect(yield* list({})).toEqual([c.id, b.id, a.id])
      expect(yield* list({ limit: 2 })).toEqual([c.id, b.id])
      expect(yield* list({ order: "oldest" })).toEqual([a.id, b.id, c.id])
      expect(yield* list({ order: "oldest", limit: 1 })).toEqual([a.id])
      expect(yield* list({ limit: null })).toEqual([c.id, b.id, a.id])
      expect(yield* list({ tenant })).toEqual([b.id, a.id])
      expect(yield* list({ type: "alpha" })).toEqual([c.id, a.id])
      expect(yield* list({ state: "running" })).toEqual([running.id])
      expect(yield* list({ errorClass: "auth" })).toEqual([a.id])
      expect(yield* list({ state: "succeeded" })).toEqual([])
    })
  )

  it.effect("list: jobs created in the same millisecond keep their insertion order", () =>
    Effect.gen(function* () {
      const { query, queue, submit } = yield* fixture
      const first = yield* submit()
      const second = yield* submit()
      const third = yield* submit()

      const newest = yield* query.list({ queue })
      const oldest = yield* query.list({ queue, order: "oldest" })

      expect(newest.map((j) => j.id)).toEqual([third.id, second.id, first.id])
      expect(oldest.map((j) => j.id)).toEqual([first.id, second.id, third.id])
    })
  )

  it.effect("list pages with after (ties in one millisecond too) and keeps a request key's jobs", () =>
    Effect.gen(function* () {
      const { query, queue, advance, submit, factory } = yield* fixture
      const a = yield* submit({ requestKey: "page-key" })
      yield* advance(5)
      const b = yield* submit()
      const c = yield* submit({ type: "other" })
      const d = yield* submit()
      const ids = (jobs: ReadonlyArray<{ readonly id: JobId }>) => jobs.map((j) => j.id)

      // Newest first, two per page: every job exactly once, in order.
      const first = yield* query.list({ queue, limit: 2 })
      const second = yield* query.list({ queue, limit: 2, after: first.at(-1)!.id })
      const third = yield* query.list({ queue, limit: 2, after: second.at(-1)!.id })
      expect([ids(first), ids(second), ids(third)]).toEqual([[d.id, c.id], [b.id, a.id], []])
      expect(ids(yield* query.list({ queue, order: "oldest", after: b.id }))).toEqual([c.id, d.id])
      // The cursor job need not match the filters; the page does.
      expect(ids(yield* query.list({ queue, type: "conformance.echo", after: c.id }))).toEqual([b.id, a.id])
      expect(ids(yield* query.list({ queue, after: yield* factory.jobId }))).toEqual([])
      expect(ids(yield* query.list({ queue, requestKey: "page-key" }))).toEqual([a.id])
      expect(ids(yield* query.list({ queue, requestKey: "no-such-key" }))).toEqual([])
    })
  )

  it.effect("deadLetters: failed jobs most recently updated first, grouped by (errorClass, inputHash)", () =>
    Effect.gen(function* () {
      const { query, queue, advance, submit, claimed, charged, settled } = yield* fixture
      const failWith = (input: { readonly k: string }, errorClass: ErrorClass, cents: number) =>
        Effect.gen(function* () {
          const job = yield* submit({ input, type: errorClass === "auth" ? "a" : "b" })
          const running = yield* claimed(job.id)
          yield* charged({
            jobId: job.id,
            callId: `c-${job.id}`,
            token: running.leaseToken,
            amountCents: cents,
            settled: true
          })
          yield* settled(job.id, running.leaseToken, outcome.fail(errorClass, errorClass))
          yield* advance(10)
          return job
        })
      const j1 = yield* failWith({ k: "x" }, "invalid_request", 1)
      const j2 = yield* failWith({ k: "x" }, "invalid_request", 2)
      const j3 = yield* failWith({ k: "y" }, "auth", 5)
      const j4 = yield* failWith({ k: "x" }, "invalid_request", 4)
      const done = yield* submit()
      const running = yield* claimed(done.id)
      yield* settled(done.id, running.leaseToken, outcome.complete(null))

      const all = yield* query.deadLetters({ queue })

      expect(all.jobs.map((j) => j.id)).toEqual([j4.id, j3.id, j2.id, j1.id])
      expect(all.groups).toEqual([
        { errorClass: "invalid_request", inputHash: j1.inputHash, count: 3, costCents: 7 },
        { errorClass: "auth", inputHash: j3.inputHash, count: 1, costCents: 5 }
      ])
      const limited = yield* query.deadLetters({ queue, limit: 1 })
      expect(limited.jobs.map((j) => j.id)).toEqual([j4.id])
      expect(limited.groups).toEqual(all.groups)
      const auth = yield* query.deadLetters({ queue, errorClass: "auth" })
      expect(auth.jobs.map((j) => j.id)).toEqual([j3.id])
      expect(auth.groups).toEqual([{ errorClass: "auth", inputHash: j3.inputHash, count: 1, costCents: 5 }])
      expect((yield* query.deadLetters({ queue, type: "b" })).jobs).toHaveLength(3)
    })
  )

  it.effect("deadLetters: equal counts go by larger cost, then by input hash", () =>
    Effect.gen(function* () {
      const { query, queue, submit, claimed, charged, settled } = yield* fixture
      const failWith = (input: string, cents: number) =>
        Effect.gen(function* () {
          const job = yield* submit({ input })
          const running = yield* claimed(job.id)
          yield* charged({ jobId: job.id, callId: "c", token: running.leaseToken, amountCents: cents, settled: true })
          return yield* settled(job.id, running.leaseToken, outcome.fail("timeout", "t"))
        })
      const cheapA = yield* failWith("a", 1)
      const cheapB = yield* failWith("b", 1)
      const dear = yield* failWith("c", 3)

      const { groups } = yield* query.deadLetters({ queue })

      const [first, second] = [cheapA.inputHash, cheapB.inputHash].sort()
      expect(groups.map((g) => g.inputHash)).toEqual([dear.inputHash, first, second])
    })
  )

  it.effect("stats: counts by state, oldest due queued job per priority, cost by error class, failures in window", () =>
    Effect.gen(function* () {
      const { query, queue, now, advance, submit, claimed, charged, settled } = yield* fixture
      const t0 = yield* now
      yield* submit({ priority: 0 })
      yield* advance(10)
      yield* submit({ priority: 0 })
      yield* submit({ priority: 5 })
      const running = yield* submit()
      yield* claimed(running.id)
      const failing = yield* submit({ maxAttempts: 1 })
      const f = yield* claimed(failing.id)
      yield* charged({ jobId: failing.id, callId: "c", token: f.leaseToken, amountCents: 7, settled: true })
      yield* advance(1_000)
      const t2 = yield* now
      yield* settled(failing.id, f.leaseToken, outcome.fail("auth", "401"))

      const stats = yield* query.stats({ queue, failedSince: t2 })
      const later = yield* query.stats({ queue, failedSince: t2 + 1 })

      expect(stats.byState).toEqual({ queued: 3, running: 1, succeeded: 0, failed: 1, abandoned: 0 })
      expect(stats.oldestQueuedAt).toEqual({ "0": t0, "5": t0 + 10 })
      expect(stats.costCentsByErrorClass).toEqual({ auth: 7 })
      expect(stats.failedInWindow).toBe(1)
      expect(later.failedInWindow).toBe(0)
    })
  )

  it.effect("stats: spend per (queue, tenant, type, state) of the ledger rows in the window, and jobs waiting", () =>
    Effect.gen(function* () {
      const { query, queue, tenant, now, advance, submit, claimed, charged, settled } = yield* fixture
      const spendOn = (jobId: JobId, token: number, callId: string, amountCents: number, settledCharge = true) =>
        charged({ jobId, callId, token, amountCents, settled: settledCharge })
      const done = yield* submit({ type: "conformance.a" })
      const d = yield* claimed(done.id)
      yield* spendOn(done.id, d.leaseToken, "old", 4)
      yield* advance(1_000)
      const since = yield* now
      yield* spendOn(done.id, d.leaseToken, "new", 2.5)
      yield* settled(done.id, d.leaseToken, outcome.complete(null))
      const dead = yield* submit({ type: "conformance.a", maxAttempts: 1 })
      const x = yield* claimed(dead.id)
      yield* spendOn(dead.id, x.leaseToken, "x", 3, false)
      yield* settled(dead.id, x.leaseToken, outcome.fail("auth", "401"))
      const other = yield* submit({ type: "conformance.b", tenant: `${tenant}-other` })
      const o = yield* claimed(other.id)
      yield* spendOn(other.id, o.leaseToken, "o", 1)
      // Waiting: two due jobs of one (type, version), one of another version, one not due yet.
      yield* submit({ type: "conformance.w", version: 1 })
      yield* advance(10)
      yield* submit({ type: "conformance.w", version: 1 })
      yield* submit({ type: "conformance.w", version: 2 })
      yield* submit({ type: "conformance.w", version: 3, delayMs: 60_000 })
      const at = yield* now

      const sorted = <A>(groups: ReadonlyArray<A>) =>
        [...groups].sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1))
      const windowed = yield* query.stats({ queue, failedSince: since, spendSince: since, now: at })
      const allTime = yield* query.stats({ queue, tenant, failedSince: since, now: at })

      expect(sorted(windowed.spend)).toEqual(
        sorted([
          { queue, tenant, type: "conformance.a", state: "succeeded", costCents: 2.5, jobs: 1 },
          { queue, tenant, type: "conformance.a", state: "failed", costCents: 3, jobs: 1 },
          { queue, tenant: `${tenant}-other`, type: "conformance.b", state: "running", costCents: 1, jobs: 1 }
        ])
      )
      expect(sorted(allTime.spend)).toEqual(
        sorted([
          { queue, tenant, type: "conformance.a", state: "succeeded", costCents: 6.5, jobs: 1 },
          { queue, tenant, type: "conformance.a", state: "failed", costCents: 3, jobs: 1 }
        ])
      )
      expect(sorted(windowed.waiting)).toEqual(
        sorted([
          { type: "conformance.w", version: 1, count: 2, oldestDueAt: at - 10 },
          { type: "conformance.w", version: 2, count: 1, oldestDueAt: at }
        ])
      )
    })
  )

  it.effect("countQueued counts the queued jobs of a queue (and tenant), due or not, up to upTo", () =>
    Effect.gen(function* () {
      const { query, queue, tenant, submit, claimed } = yield* fixture
      yield* submit()
      yield* submit({ delayMs: 60_000 })
      yield* submit({ tenant: `${tenant}-other` })
      const running = yield* submit()
      yield* claimed(running.id)

      expect(yield* query.countQueued({ queue, upTo: 100 })).toBe(3)
      expect(yield* query.countQueued({ queue, tenant, upTo: 100 })).toBe(2)
      expect(yield* query.countQueued({ queue, upTo: 2 })).toBe(2)
      expect(yield* query.countQueued({ queue, upTo: 0 })).toBe(0)
      expect(yield* query.countQueued({ queue: `${queue}-none`, upTo: 100 })).toBe(0)
    })
  )

  it.effect("now reads store time as finite, non-decreasing epoch milliseconds", () =>
    Effect.gen(function* () {
      const { store } = yield* fixture

      const a = yield* store.now
      const b = yield* store.now

      expect(Number.isFinite(a)).toBe(true)
      expect(b).toBeGreaterThanOrEqual(a)
    })
  )
}

/** Store.replay and the derived Query.replay. */
const replayTests = ({ it, fixture }: Area): void => {
  it.effect("replay: failed -> queued with a fresh run; history and spend stay; others are skipped", () =>
    Effect.gen(function* () {
      const { now, submit, claimed, charged, settled, replay, get, attempts, charges } = yield* fixture
      const job = yield* submit({ maxAttempts: 1 })
      const running = yield* claimed(job.id)
      const at = yield* now
      yield* charged({ jobId: job.id, callId: "c", token: running.leaseToken, amountCents: 3, settled: true })
      yield* settled(job.id, running.leaseToken, outcome.fail("server_error", "500"))
      const succeeded = yield* submit()
      const s = yield* claimed(succeeded.id)
      const successBefore = yield* settled(succeeded.id, s.leaseToken, outcome.complete("ok"))

      const results = yield* replay([job.id, succeeded.id])

      const replayed = yield* get(job.id)
      expect(results).toEqual([
        { _tag: "Replayed", job: replayed },
        { _tag: "Skipped", jobId: succeeded.id, state: "succeeded" }
      ])
      expect(yield* get(succeeded.id)).toEqual(successBefore)
      expect(replayed).toMatchObject({
        state: "queued",
        runAfter: at,
        attempts: 1,
        attemptsBase: 1,
        costCents: 3,
        leaseToken: 1,
        leaseOwner: null,
        abandonReason: null
      })
      expect(attemptsLeft(replayed)).toBe(1)
      expect(yield* replay([job.id])).toEqual([{ _tag: "Skipped", jobId: job.id, state: "queued" }])
      const rerun = yield* claimed(job.id)
      expect(rerun).toMatchObject({ attempts: 2, leaseToken: 2 })
      expect(yield* attempts(job.id)).toHaveLength(2)
      expect(yield* charges(job.id)).toHaveLength(1)
    })
  )

  it.effect("replay: an unknown id is skipped with no state", () =>
    Effect.gen(function* () {
      const { factory, replay } = yield* fixture
      const unknown = yield* factory.jobId

      const results = yield* replay([unknown])

      expect(results).toEqual([{ _tag: "Skipped", jobId: unknown, state: null }])
    })
  )

  it.effect("replay: a cancel requested before the failure does not settle the replayed run", () =>
    Effect.gen(function* () {
      const { submit, claimed, cancel, settled, replay, get } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      yield* cancel(job.id)
      const failed = yield* settled(job.id, running.leaseToken, outcome.fail("auth", "401"))
      expect(failed.cancelRequestedAt).not.toBeNull()

      yield* replay([job.id])

      expect(yield* get(job.id)).toMatchObject({ state: "queued", cancelRequestedAt: null })
      const rerun = yield* claimed(job.id, "worker-b")
      expect(rerun).toMatchObject({ state: "running", attempts: 2, leaseOwner: "worker-b" })
    })
  )

  it.effect("replay: the filter applies to the named ids too", () =>
    Effect.gen(function* () {
      const { submit, claimed, settled, replay, tenant } = yield* fixture
      const failWith = (errorClass: ErrorClass, type: string) =>
        Effect.gen(function* () {
          const job = yield* submit({ maxAttempts: 1, type })
          const running = yield* claimed(job.id)
          return yield* settled(job.id, running.leaseToken, outcome.fail(errorClass, errorClass))
        })
      const timeout = yield* failWith("timeout", "x")
      const auth = yield* failWith("auth", "x")
      const otherType = yield* failWith("timeout", "y")

      const results = yield* replay([timeout.id, auth.id, otherType.id], { errorClass: "timeout", type: "x", tenant })

      expect(results.map((r) => r._tag)).toEqual(["Replayed", "Skipped", "Skipped"])
      expect(results[1]).toEqual({ _tag: "Skipped", jobId: auth.id, state: "failed" })
      const wrongTenant = yield* replay([auth.id], { tenant: `${tenant}-other` })
      expect(wrongTenant).toEqual([{ _tag: "Skipped", jobId: auth.id, state: "failed" }])
    })
  )

  it.effect("Query.replay by filter moves only matching failed jobs, oldest first, never succeeded ones", () =>
    Effect.gen(function* () {
      const { store, query, queue, now, advance, submit, claimed, settled, get } = yield* fixture
      const ids: Array<JobId> = []
      for (const errorClass of ["timeout", "timeout", "auth"] as const) {
        const job = yield* submit({ maxAttempts: 1 })
        const running = yield* claimed(job.id)
        yield* settled(job.id, running.leaseToken, outcome.fail(errorClass, errorClass))
        ids.push(job.id)
        yield* advance(10)
      }
      const ok = yield* submit()
      const r = yield* claimed(ok.id)
      yield* settled(ok.id, r.leaseToken, outcome.complete(1))
      const at = yield* now

      const result = yield* Query.replay(store, query, { queue, errorClass: "timeout", now: at })

      expect(result.replayed).toEqual([ids[0]!, ids[1]!])
      expect(result.skipped).toEqual([])
      expect(result.jobs).toEqual([yield* get(ids[0]!), yield* get(ids[1]!)])
      expect(result.jobs.map((j) => [j.state, j.runAfter])).toEqual([
        ["queued", at],
        ["queued", at]
      ])
      expect((yield* get(ids[2]!)).state).toBe("failed")
      expect((yield* get(ok.id)).state).toBe("succeeded")
      const rest = yield* Query.replay(store, query, { queue, now: at })
      expect(rest.replayed).toEqual([ids[2]!])
      expect((yield* query.list({ queue, state: "queued" })).length).toBe(3)
    })
  )

  it.effect("Query.replay by ids keeps their order, applies the filter and the limit, and skips the rest", () =>
    Effect.gen(function* () {
      const { store, query, queue, now, submit, claimed, settled } = yield* fixture
      const failed: Array<JobId> = []
      for (let i = 0; i < 3; i++) {
        const job = yield* submit({ maxAttempts: 1 })
        const running = yield* claimed(job.id)
        yield* settled(job.id, running.leaseToken, outcome.fail("timeout", "t"))
        failed.push(job.id)
      }
      const ok = yield* submit()
      const r = yield* claimed(ok.id)
      yield* settled(ok.id, r.leaseToken, outcome.complete(1))
      const at = yield* now

      const result = yield* Query.replay(store, query, {
        queue,
        jobIds: [failed[2]!, ok.id, failed[0]!, failed[1]!],
        limit: 3,
        now: at
      })
      const filtered = yield* Query.replay(store, query, {
        queue: `${queue}-other`,
        jobIds: [failed[1]!],
        now: at
      })

      expect(result).toMatchObject({ replayed: [failed[2]!, failed[0]!], skipped: [ok.id] })
      expect(filtered).toMatchObject({ replayed: [], skipped: [failed[1]!], jobs: [] })
      expect((yield* query.get({ jobId: failed[1]! })).state).toBe("failed")
    })
  )
}

/** Registers the read and replay tests. @internal */
export const queryTests = (area: Area): void => {
  describe("queries and replay", () => {
    readTests(area)
    replayTests(area)
  })
}
