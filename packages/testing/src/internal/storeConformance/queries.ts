/**
 * Store conformance, reads and replay: `Query` (get, list, count, attempts, charges, deadLetters, stats,
 * countQueued) reads exactly what the writes left, hides other tenants' jobs, and orders and limits as documented;
 * `Store.now` is store time; `Store.replay` moves a dead letter back to queued through one conditional write
 * (`Protocol.replayable`, `Protocol.replayTransition`) and never touches a job in any other state; the derived
 * `Query.replay` picks its targets by filter or by id and goes through that same write.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import * as DeadLetters from "@slowcall/core/DeadLetters"
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
      const a = yield* submit({ type: "alpha", input: "shared" })
      yield* advance(10)
      const b = yield* submit({ type: "beta", input: "shared" })
      yield* advance(10)
      const c = yield* submit({ type: "alpha", tenant: `${tenant}-other`, input: "shared" })
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
      expect(yield* list({ inputHash: a.inputHash, type: "alpha" })).toEqual([c.id, a.id])
      expect(yield* list({ inputHash: "0".repeat(64) })).toEqual([])
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
      const b = yield* submit({ input: "page" })
      const c = yield* submit({ type: "other", input: "page" })
      const d = yield* submit({ input: "page" })
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
      // An input's jobs page like any listing.
      const other = yield* submit({ input: "another input" })
      expect(ids(yield* query.list({ queue, inputHash: b.inputHash, limit: 2, after: d.id }))).toEqual([c.id, b.id])
      expect(ids(yield* query.list({ queue, inputHash: other.inputHash, order: "oldest", after: a.id }))).toEqual([
        other.id
      ])
    })
  )

  it.effect("deadLetters: failed jobs most recently updated first, grouped by (errorClass, inputHash)", () =>
    Effect.gen(function* () {
      const { store, query, queue, now, advance, submit, claimed, charged, settled } = yield* fixture
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
          // The store time of the failure (the record's updatedAt may sit a microsecond past it).
          const failedAt = yield* now
          yield* settled(job.id, running.leaseToken, outcome.fail(errorClass, errorClass))
          yield* advance(10)
          return { ...job, failedAt }
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
      const invalid = {
        errorClass: "invalid_request",
        inputHash: j1.inputHash,
        count: 3,
        costCents: 7,
        lastFailedAt: j4.failedAt,
        jobIds: [j4.id, j2.id, j1.id]
      }
      const auth = {
        errorClass: "auth",
        inputHash: j3.inputHash,
        count: 1,
        costCents: 5,
        lastFailedAt: j3.failedAt,
        jobIds: [j3.id]
      }
      expect(all.groups).toEqual([invalid, auth])
      const limited = yield* query.deadLetters({ queue, limit: 1 })
      expect(limited.jobs.map((j) => j.id)).toEqual([j4.id])
      expect(limited.groups).toEqual(all.groups)
      const onlyAuth = yield* query.deadLetters({ queue, errorClass: "auth" })
      expect(onlyAuth.jobs.map((j) => j.id)).toEqual([j3.id])
      expect(onlyAuth.groups).toEqual([auth])
      expect((yield* query.deadLetters({ queue, type: "b" })).jobs).toHaveLength(3)
      // A replayed job leaves its group: the latest failure and the ids are the remaining jobs'.
      yield* Query.replay(store, query, { jobIds: [j4.id] })
      expect((yield* query.deadLetters({ queue, errorClass: "invalid_request" })).groups).toEqual([
        { ...invalid, count: 2, costCents: 3, lastFailedAt: j2.failedAt, jobIds: [j2.id, j1.id] }
      ])
    })
  )

  it.effect("deadLetters: a group's ids are its 50 most recently failed, later insertion first on equal times", () =>
    Effect.gen(function* () {
      const { store, query, queue, tenant, now, advance, item, submitOne } = yield* fixture
      // 52 jobs of one input; the first two fail last, together, at one time.
      const items = []
      for (let i = 0; i < 52; i++)
        items.push(yield* item({ input: "same", maxAttempts: 1, type: i % 2 === 0 ? "even" : "odd" }))
      for (const submitItem of items) yield* submitOne(submitItem)
      const ids = items.map((i) => i.id)
      const fail = (jobIds: ReadonlyArray<JobId>, at: number) =>
        Effect.gen(function* () {
          yield* store.claim({ items: jobIds.map((jobId) => ({ jobId, owner: "w", leaseMs: 60_000 })), now: at })
          yield* store.settle({
            items: jobIds.map((jobId) => ({ jobId, token: 1, outcome: outcome.fail("timeout", "t") })),
            now: at
          })
        })
      const start = yield* now
      for (const [i, jobId] of ids.slice(2).entries()) yield* fail([jobId], start + i)
      yield* advance(1_000)
      const last = yield* now
      yield* fail(ids.slice(0, 2), last)

      const [group] = (yield* query.deadLetters({ queue })).groups
      const [even] = (yield* query.deadLetters({ queue, tenant, type: "even" })).groups

      expect(group).toMatchObject({ errorClass: "timeout", count: 52, lastFailedAt: last })
      expect(group!.jobIds).toEqual([ids[1], ids[0], ...ids.slice(2).reverse()].slice(0, 50))
      expect(even).toMatchObject({ count: 26, lastFailedAt: last })
      expect(even!.jobIds).toEqual([ids[0], ...ids.filter((_, i) => i % 2 === 0 && i > 0).reverse()])
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

  it.effect("deadLetters feed the view: singletons collapse into their error class, sorted by cost, paged", () =>
    Effect.gen(function* () {
      const { query, queue, now, advance, submit, claimed, charged, settled } = yield* fixture
      const failWith = (input: string, errorClass: ErrorClass, cents: number) =>
        Effect.gen(function* () {
          const job = yield* submit({ input, maxAttempts: 1 })
          const running = yield* claimed(job.id)
          yield* charged({ jobId: job.id, callId: "c", token: running.leaseToken, amountCents: cents, settled: true })
          const failedAt = yield* now
          yield* settled(job.id, running.leaseToken, outcome.fail(errorClass, errorClass))
          yield* advance(5)
          return { ...job, failedAt }
        })
      const a1 = yield* failWith("a", "timeout", 1)
      const a2 = yield* failWith("a", "timeout", 1)
      const lone1 = yield* failWith("b", "timeout", 4)
      const lone2 = yield* failWith("c", "timeout", 3)
      const authLone = yield* failWith("d", "auth", 20)

      const { groups } = yield* query.deadLetters({ queue })
      const first = DeadLetters.page(groups, { limit: 2 })
      const second = DeadLetters.page(groups, { limit: 2, cursor: DeadLetters.decodeCursor(first.next!) })

      expect(first.groups).toEqual([
        {
          errorClass: "auth",
          inputHash: null,
          count: 1,
          costCents: 20,
          lastFailedAt: authLone.failedAt,
          jobIds: [authLone.id],
          collapsed: true
        },
        {
          errorClass: "timeout",
          inputHash: null,
          count: 2,
          costCents: 7,
          lastFailedAt: lone2.failedAt,
          jobIds: [lone2.id, lone1.id],
          collapsed: true
        }
      ])
      expect(first).toMatchObject({ totalGroups: 3, totalJobs: 5, totalCostCents: 29 })
      expect(second.groups).toEqual([
        {
          errorClass: "timeout",
          inputHash: a1.inputHash,
          count: 2,
          costCents: 2,
          lastFailedAt: a2.failedAt,
          jobIds: [a2.id, a1.id],
          collapsed: false
        }
      ])
      expect(second.next).toBeNull()
      expect(DeadLetters.page(groups, { sort: "count" }).groups.map((g) => [g.errorClass, g.inputHash])).toEqual([
        ["timeout", null],
        ["timeout", a1.inputHash],
        ["auth", null]
      ])
    })
  )

  it.effect("estimates: the protocol's fallback estimate of each job, in order, 0 for no job", () =>
    Effect.gen(function* () {
      const { query, factory, submit, claimed, charged, settled } = yield* fixture
      const job = yield* submit({ maxAttempts: 3 })
      const first = yield* claimed(job.id)
      yield* charged({ jobId: job.id, callId: "a", token: first.leaseToken, amountCents: 2, settled: true })
      yield* charged({ jobId: job.id, callId: "b", token: first.leaseToken, amountCents: 1.5, settled: false })
      yield* settled(job.id, first.leaseToken, outcome.retry(0, "timeout", "t"))
      const second = yield* claimed(job.id)
      yield* charged({ jobId: job.id, callId: "c", token: second.leaseToken, amountCents: 3, settled: true })
      const fresh = yield* submit()
      const unknown = yield* factory.jobId

      const estimates = yield* query.estimates({ jobIds: [job.id, fresh.id, unknown, job.id] })

      expect(estimates).toEqual([3.5, 0, 0, 3.5])
      expect(yield* query.estimates({ jobIds: [] })).toEqual([])
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

  it.effect("stats: cost by error class is what the attempts that ended with each class cost, kept after success", () =>
    Effect.gen(function* () {
      const { query, queue, tenant, advance, submit, claimed, charged, settled } = yield* fixture
      const spendOn = (jobId: JobId, token: number, callId: string, amountCents: number, settledCharge = true) =>
        charged({ jobId, callId, token, amountCents, settled: settledCharge })
      // Retried after a billed timeout, then succeeded: the timeout's spend stays under `timeout`.
      const recovered = yield* submit()
      const r1 = yield* claimed(recovered.id)
      yield* spendOn(recovered.id, r1.leaseToken, "r1", 5)
      yield* settled(recovered.id, r1.leaseToken, outcome.retry(0, "timeout", "timed out"))
      const r2 = yield* claimed(recovered.id)
      yield* spendOn(recovered.id, r2.leaseToken, "r2", 3)
      yield* settled(recovered.id, r2.leaseToken, outcome.complete(null))
      // Rate limited, then failed for good with `auth`; the first attempt's reservation settles late (a charge is
      // accepted from a stale token: the money was spent) and moves that attempt's class.
      const dead = yield* submit({ maxAttempts: 2 })
      const d1 = yield* claimed(dead.id)
      yield* spendOn(dead.id, d1.leaseToken, "d1", 2, false)
      yield* settled(dead.id, d1.leaseToken, outcome.retry(0, "rate_limited", "429"))
      const d2 = yield* claimed(dead.id)
      yield* spendOn(dead.id, d2.leaseToken, "d2", 4)
      yield* settled(dead.id, d2.leaseToken, outcome.fail("auth", "401"))
      yield* spendOn(dead.id, d1.leaseToken, "d1", 2.5)
      // A lease that ran out mid-call and was taken over: its reservation is the cost of `lease_expired`.
      const lost = yield* submit()
      const l1 = yield* claimed(lost.id, "w", 1_000)
      yield* spendOn(lost.id, l1.leaseToken, "l1", 1, false)
      yield* advance(1_001)
      yield* claimed(lost.id)
      // Still running, nothing ended: no class yet. Another tenant's failure is left out of a tenant's stats.
      const running = yield* submit()
      const s1 = yield* claimed(running.id)
      yield* spendOn(running.id, s1.leaseToken, "s1", 7)
      const other = yield* submit({ tenant: `${tenant}-other`, maxAttempts: 1 })
      const o1 = yield* claimed(other.id)
      yield* spendOn(other.id, o1.leaseToken, "o1", 8)
      yield* settled(other.id, o1.leaseToken, outcome.fail("auth", "401"))

      const mine = yield* query.stats({ queue, tenant, failedSince: 0 })
      const all = yield* query.stats({ queue, failedSince: 0 })

      expect(mine.costCentsByErrorClass).toEqual({ timeout: 5, rate_limited: 2.5, auth: 4, lease_expired: 1 })
      expect(all.costCentsByErrorClass).toEqual({ timeout: 5, rate_limited: 2.5, auth: 12, lease_expired: 1 })
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

  it.effect("count counts what list selects with the same filters, up to upTo", () =>
    Effect.gen(function* () {
      const { query, queue, tenant, submit, claimed, settled } = yield* fixture
      const a = yield* submit({ type: "alpha", requestKey: "k-a", input: { shared: true } })
      yield* submit({ type: "beta", input: { shared: true } })
      yield* submit({ type: "alpha", tenant: `${tenant}-other` })
      const b = yield* submit({ type: "beta", maxAttempts: 1 })
      const failing = yield* claimed(b.id)
      yield* settled(b.id, failing.leaseToken, outcome.fail("auth", "401"))
      yield* claimed(a.id)
      const count = (options: Omit<Query.CountOptions, "queue" | "upTo">, upTo = 100) =>
        query.count({ queue, ...options, upTo })
      const listed = (options: Omit<Query.ListOptions, "queue">) =>
        Effect.map(query.list({ queue, ...options, limit: null }), (jobs) => jobs.length)

      for (const filter of [
        {},
        { tenant },
        { state: "queued" as const },
        { state: "queued" as const, tenant },
        { type: "alpha" },
        { type: "alpha", tenant },
        { errorClass: "auth" as const },
        { requestKey: "k-a" },
        { requestKey: "k-a", state: "running" as const },
        { requestKey: "k-a", state: "queued" as const },
        { type: "gamma" },
        { inputHash: a.inputHash },
        { inputHash: a.inputHash, type: "beta" }
      ]) {
        expect(yield* count(filter), JSON.stringify(filter)).toBe(yield* listed(filter))
      }
      expect(yield* count({})).toBe(4)
      expect(yield* count({ tenant })).toBe(3)
      expect(yield* count({ type: "alpha" })).toBe(2)
      expect(yield* count({ inputHash: a.inputHash })).toBe(2)
      expect(yield* count({}, 2)).toBe(2)
      expect(yield* count({ type: "beta" }, 1)).toBe(1)
      expect(yield* count({}, 0)).toBe(0)
      expect(yield* query.count({ queue: `${queue}-none`, upTo: 100 })).toBe(0)
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
      const wrongInput = yield* replay([auth.id], { inputHash: "0".repeat(64) })
      expect(wrongInput).toEqual([{ _tag: "Skipped", jobId: auth.id, state: "failed" }])
      const [byInput] = yield* replay([auth.id], { inputHash: auth.inputHash })
      expect(byInput?._tag).toBe("Replayed")
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

      expect(result).toEqual({
        matched: 2,
        replayed: [ids[0]!, ids[1]!],
        skipped: [],
        estimatedCents: 0,
        capped: false
      })
      expect([yield* get(ids[0]!), yield* get(ids[1]!)].map((j) => [j.state, j.runAfter])).toEqual([
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
      expect(filtered).toMatchObject({ matched: 0, replayed: [], skipped: [failed[1]!], capped: false })
      expect((yield* query.get({ jobId: failed[1]! })).state).toBe("failed")
    })
  )
  it.effect("Query.replay: a dry run changes nothing; the real call replays what it said, capped at the limit", () =>
    Effect.gen(function* () {
      const { store, query, queue, now, advance, submit, claimed, charged, settled, get } = yield* fixture
      const failWith = (input: string, cents: number) =>
        Effect.gen(function* () {
          const job = yield* submit({ input, maxAttempts: 1 })
          const running = yield* claimed(job.id)
          yield* charged({ jobId: job.id, callId: "c", token: running.leaseToken, amountCents: cents, settled: true })
          yield* settled(job.id, running.leaseToken, outcome.fail("timeout", "t"))
          yield* advance(10)
          return job
        })
      const x1 = yield* failWith("x", 2)
      const y = yield* failWith("y", 50)
      const x2 = yield* failWith("x", 3)
      const x3 = yield* failWith("x", 4)
      const at = yield* now
      const before = yield* query.list({ queue, limit: null })

      const dry = yield* Query.replay(store, query, { queue, inputHash: x1.inputHash, dryRun: true, now: at })
      expect(dry).toEqual({ matched: 3, replayed: [], skipped: [], estimatedCents: 9, capped: false })
      expect(yield* query.list({ queue, limit: null })).toEqual(before)

      const capped = yield* Query.replay(store, query, { queue, inputHash: x1.inputHash, limit: 2, now: at })
      expect(capped).toEqual({ matched: 2, replayed: [x1.id, x2.id], skipped: [], estimatedCents: 5, capped: true })
      expect((yield* get(x3.id)).state).toBe("failed")
      expect((yield* get(y.id)).state).toBe("failed")
      const byIds = yield* Query.replay(store, query, { queue, jobIds: [x3.id, y.id, x1.id], dryRun: true, now: at })
      expect(byIds).toEqual({ matched: 2, replayed: [], skipped: [x1.id], estimatedCents: 54, capped: false })
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
