/**
 * The Store conformance suite: one set of tests that every Store adapter runs, so all backends keep the same lease
 * protocol. Time is driven by `TestClock`: each test reads the test clock and passes it as `now` to every verb that
 * takes one, and moves time with `TestClock.adjust`, so lease expiry is exercised on every backend without real
 * sleeps.
 *
 * @since 0.1.0
 */

import { expect, layer } from "@effect/vitest"
import type { Job, JobId } from "@slowcall/core/Models"
import { attemptsLeft } from "@slowcall/core/Models"
import { type ClaimResult, Store } from "@slowcall/core/Store"
import { Clock, Context, Duration, Effect, Layer, TestClock } from "effect"
import { type JobFactory, type JobSpec, makeJobFactory } from "./JobFactory.js"

/**
 * What a Store declares about itself. Tests that need a capability the backend lacks are not registered, and the
 * suite prints one line naming them and the reason (never a silent or a visible skip).
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreCapabilities {
  /**
   * The backend accepts verbs from many callers at once (fibers or connections) and keeps each one atomic under
   * that load, so the heavy contention test (racing claims, stale fenced writes and duplicate charges over many
   * jobs) runs. A backend that can serve only one caller at a time declares false.
   */
  readonly concurrent: boolean
  /**
   * Two separate builds of the layer see the same jobs (a real database): cross-instance claims and fencing are
   * tested then.
   */
  readonly sharedState: boolean
}

/**
 * How an adapter runs the Store suite: a display name, a layer built once for the whole suite (every test isolates
 * itself by queue and tenant, so one instance serves them all), and the declared capabilities.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreConformanceOptions {
  /** Shown in the describe block; never used to change behaviour. */
  readonly name: string
  readonly layer: Layer.Layer<Store, unknown>
  readonly capabilities: StoreCapabilities
}

/** A fixed starting point so every backend stores realistic timestamps. */
const BASE_TIME = 1_767_225_600_000

const LEASE = 30_000

interface Fixture {
  readonly store: Store["Type"]
  readonly factory: JobFactory
  readonly queue: string
  readonly tenant: string
  readonly now: Effect.Effect<number>
  readonly advance: (ms: number) => Effect.Effect<void>
  readonly submit: (spec?: Partial<JobSpec>) => Effect.Effect<Job, unknown>
  readonly claimed: (jobId: JobId, owner?: string, leaseMs?: number) => Effect.Effect<Job, unknown>
}

const claimedJob = (result: ClaimResult): Job => {
  if (result._tag !== "Claimed") throw new Error(`expected Claimed, got ${result._tag} (state ${result.job.state})`)
  return result.job
}

const expectTag = <A extends { readonly _tag: string }>(value: A, tag: string): A => {
  expect(value._tag).toBe(tag)
  return value
}

/**
 * Registers the Store conformance suite (vitest `describe`/`it` blocks) for one backend. Covers every Store verb and
 * the protocol's invariants: one live lease per job, fencing of stale tokens, strictly increasing tokens, attempts
 * and `updatedAt`, charges counted once, budgets never overspent, idempotent submit, safe replay, sweep, dead-letter
 * grouping and stats. Each test isolates itself by a unique queue and tenant.
 *
 * @since 0.1.0
 * @category testing
 */
export const StoreConformance = (options: StoreConformanceOptions): void => {
  const factory = makeJobFactory()
  const { capabilities } = options

  const fixture: Effect.Effect<Fixture, never, Store> = Effect.gen(function* () {
    const store = yield* Store
    const current = yield* Clock.currentTimeMillis
    if (current < BASE_TIME) yield* TestClock.setTime(BASE_TIME)
    // Every test starts a second after the previous one ended.
    yield* TestClock.adjust(Duration.seconds(1))
    const queue = factory.uniqueName("q")
    const tenant = factory.uniqueName("t")
    const now = Clock.currentTimeMillis
    const fx: Fixture = {
      store,
      factory,
      queue,
      tenant,
      now,
      advance: (ms) => TestClock.adjust(Duration.millis(ms)),
      submit: (spec = {}) =>
        Effect.gen(function* () {
          const at = yield* now
          const submitOptions = yield* factory.submitOptions({ queue, tenant, now: at, ...spec })
          const result = yield* store.submit(submitOptions)
          return result.job
        }),
      claimed: (jobId, owner = "worker-a", leaseMs = LEASE) =>
        Effect.gen(function* () {
          const at = yield* now
          return claimedJob(yield* store.claim({ jobId, owner, leaseMs, now: at }))
        })
    }
    return fx
  })

  const skipped: Array<string> = []
  const reason = (what: string, why: string) => skipped.push(`${what} (${why})`)

  layer(options.layer)(`StoreConformance: ${options.name}`, (it) => {
    it.effect("submit inserts a queued job with the documented defaults", () =>
      Effect.gen(function* () {
        const { store, queue, tenant, now, submit } = yield* fixture
        const at = yield* now
        const job = yield* submit({ requestKey: null })
        expect(job).toMatchObject({
          queue,
          tenant,
          state: "queued",
          abandonReason: null,
          attempts: 0,
          attemptsBase: 0,
          leaseToken: 0,
          leaseOwner: null,
          leaseUntil: null,
          costCents: 0,
          progress: 0,
          result: null,
          errorClass: null,
          lastError: null,
          cancelRequestedAt: null,
          runAfter: at,
          priority: 0,
          deadlineAt: null,
          budgetCents: null,
          createdAt: at,
          updatedAt: at,
          maxAttempts: 3,
          type: "conformance.echo",
          version: 1
        })
        expect(yield* store.get({ jobId: job.id })).toEqual(job)
      })
    )

    it.effect("submit stores every given field", () =>
      Effect.gen(function* () {
        const { store, now, submit } = yield* fixture
        const at = yield* now
        const job = yield* submit({
          input: { prompt: "hello", n: [1, 2.5, null, true] },
          inputRef: "s3://bucket/key",
          priority: 7,
          runAfter: at + 5_000,
          deadlineAt: at + 60_000,
          budgetCents: 125.5,
          maxAttempts: 5,
          traceId: "trace-1",
          type: "summarise",
          version: 2
        })
        const read = yield* store.get({ jobId: job.id })
        expect(read).toMatchObject({
          input: { prompt: "hello", n: [1, 2.5, null, true] },
          inputRef: "s3://bucket/key",
          priority: 7,
          runAfter: at + 5_000,
          deadlineAt: at + 60_000,
          budgetCents: 125.5,
          maxAttempts: 5,
          traceId: "trace-1",
          type: "summarise",
          version: 2
        })
      })
    )

    it.effect("submit with a used request key returns the job for the same input and writes nothing", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit } = yield* fixture
        const first = yield* submit({ requestKey: "key-1", input: { a: 1, b: [1, 2] } })
        yield* advance(1_000)
        const again = yield* factory.submitOptions({
          queue,
          tenant: first.tenant,
          requestKey: "key-1",
          input: { b: [1, 2], a: 1 },
          now: yield* now
        })
        const result = yield* store.submit(again)
        expect(result.created).toBe(false)
        expect(result.job).toEqual(first)
        expect(yield* store.list({ queue })).toHaveLength(1)
        expect(yield* Effect.flip(store.get({ jobId: again.id }))).toMatchObject({ _tag: "JobNotFound" })
      })
    )

    it.effect("submit with a used request key and other input fails with IdempotencyKeyReused, writing nothing", () =>
      Effect.gen(function* () {
        const { store, queue, tenant, now, submit } = yield* fixture
        const first = yield* submit({ requestKey: "key-2", input: { a: 1 } })
        const other = yield* factory.submitOptions({
          queue,
          tenant,
          requestKey: "key-2",
          input: { a: 2 },
          now: yield* now
        })
        const error = yield* Effect.flip(store.submit(other))
        expect(error).toMatchObject({ _tag: "IdempotencyKeyReused", requestKey: "key-2", existingJobId: first.id })
        expect(yield* store.list({ queue })).toEqual([first])
        expect(yield* Effect.flip(store.get({ jobId: other.id }))).toMatchObject({ _tag: "JobNotFound" })
      })
    )

    it.effect("request keys are unique per (queue, tenant) only", () =>
      Effect.gen(function* () {
        const { store, queue, tenant, submit } = yield* fixture
        const first = yield* submit({ requestKey: "shared", input: { a: 1 } })
        const otherTenant = yield* submit({ requestKey: "shared", input: { a: 2 }, tenant: `${tenant}-other` })
        const otherQueue = yield* submit({ requestKey: "shared", input: { a: 3 }, queue: `${queue}-other` })
        const noTenant = yield* submit({ requestKey: "shared", input: { a: 4 }, tenant: null })
        const ids = new Set([first.id, otherTenant.id, otherQueue.id, noTenant.id])
        expect(ids.size).toBe(4)
        expect(yield* store.get({ jobId: noTenant.id })).toMatchObject({ tenant: null, requestKey: "shared" })
      })
    )

    it.effect("get hides unknown jobs and other tenants' jobs", () =>
      Effect.gen(function* () {
        const { store, tenant, submit, factory: f } = yield* fixture
        const job = yield* submit()
        expect((yield* store.get({ jobId: job.id, tenant })).id).toBe(job.id)
        expect(yield* Effect.flip(store.get({ jobId: job.id, tenant: `${tenant}-other` }))).toMatchObject({
          _tag: "JobNotFound"
        })
        const unknown = yield* f.submitOptions({ queue: "never-submitted" })
        expect(yield* Effect.flip(store.get({ jobId: unknown.id }))).toMatchObject({ _tag: "JobNotFound" })
      })
    )

    it.effect("claim of a queued, due job takes the lease and opens an attempt", () =>
      Effect.gen(function* () {
        const { store, now, submit } = yield* fixture
        const job = yield* submit()
        const at = yield* now
        const result = yield* store.claim({ jobId: job.id, owner: "worker-a", leaseMs: LEASE, now: at })
        expectTag(result, "Claimed")
        if (result._tag !== "Claimed") return
        expect(result.takeover).toBe(false)
        expect(result.job).toMatchObject({
          state: "running",
          attempts: 1,
          leaseToken: 1,
          leaseOwner: "worker-a",
          leaseUntil: at + LEASE,
          cancelRequestedAt: null
        })
        expect(yield* store.get({ jobId: job.id })).toEqual(result.job)
        const attempts = yield* store.attempts({ jobId: job.id })
        expect(attempts).toEqual([
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

    it.effect("claim of an unknown job fails with JobNotFound", () =>
      Effect.gen(function* () {
        const { store, now, factory: f } = yield* fixture
        const unknown = yield* f.submitOptions({ queue: "never-submitted" })
        const error = yield* Effect.flip(
          store.claim({ jobId: unknown.id, owner: "worker-a", leaseMs: LEASE, now: yield* now })
        )
        expect(error).toMatchObject({ _tag: "JobNotFound" })
      })
    )

    it.effect("claim of a job whose runAfter is in the future is NotDue until then", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed } = yield* fixture
        const at = yield* now
        const job = yield* submit({ runAfter: at + 10_000 })
        const early = yield* store.claim({ jobId: job.id, owner: "worker-a", leaseMs: LEASE, now: at })
        expect(early).toMatchObject({ _tag: "NotDue", until: at + 10_000 })
        expect(yield* store.get({ jobId: job.id })).toEqual(job)
        yield* advance(10_000)
        expect((yield* claimed(job.id)).leaseToken).toBe(1)
      })
    )

    it.effect("claim while a lease is live is Busy (even at its last millisecond); after it, a takeover", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed } = yield* fixture
        const job = yield* submit()
        const first = yield* claimed(job.id, "worker-a", 5_000)
        const busy = yield* store.claim({ jobId: job.id, owner: "worker-b", leaseMs: LEASE, now: yield* now })
        expect(busy).toMatchObject({ _tag: "Busy", until: first.leaseUntil })
        yield* advance(5_000)
        const edge = yield* store.claim({ jobId: job.id, owner: "worker-b", leaseMs: LEASE, now: yield* now })
        expect(edge._tag).toBe("Busy")
        expect(yield* store.get({ jobId: job.id })).toEqual(first)
        yield* advance(1)
        const at = yield* now
        const takeover = yield* store.claim({ jobId: job.id, owner: "worker-b", leaseMs: LEASE, now: at })
        expectTag(takeover, "Claimed")
        if (takeover._tag !== "Claimed") return
        expect(takeover.takeover).toBe(true)
        expect(takeover.job).toMatchObject({
          state: "running",
          attempts: 2,
          leaseToken: 2,
          leaseOwner: "worker-b",
          leaseUntil: at + LEASE
        })
        const attempts = yield* store.attempts({ jobId: job.id })
        expect(attempts.map((a) => [a.token, a.worker, a.outcome])).toEqual([
          [1, "worker-a", "expired"],
          [2, "worker-b", "running"]
        ])
        expect(attempts[0]!.endedAt).toBe(at)
      })
    )

    it.effect("many concurrent claims of one job: exactly one Claimed, the rest Busy", () =>
      Effect.gen(function* () {
        const { store, now, submit } = yield* fixture
        const job = yield* submit()
        const at = yield* now
        const results = yield* Effect.all(
          Array.from({ length: 16 }, (_, i) =>
            store.claim({ jobId: job.id, owner: `worker-${i}`, leaseMs: LEASE, now: at })
          ),
          { concurrency: "unbounded" }
        )
        const claimed = results.filter((r) => r._tag === "Claimed")
        expect(claimed).toHaveLength(1)
        expect(results.filter((r) => r._tag === "Busy")).toHaveLength(15)
        const after = yield* store.get({ jobId: job.id })
        expect(after).toMatchObject({ attempts: 1, leaseToken: 1, leaseOwner: claimed[0]!.job.leaseOwner })
        expect(yield* store.attempts({ jobId: job.id })).toHaveLength(1)
      })
    )

    it.effect("many concurrent takeovers of an expired lease: exactly one Claimed", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed } = yield* fixture
        const job = yield* submit({ maxAttempts: 5 })
        yield* claimed(job.id, "worker-a", 1_000)
        yield* advance(1_001)
        const at = yield* now
        const results = yield* Effect.all(
          Array.from({ length: 16 }, (_, i) =>
            store.claim({ jobId: job.id, owner: `worker-${i}`, leaseMs: LEASE, now: at })
          ),
          { concurrency: "unbounded" }
        )
        expect(results.filter((r) => r._tag === "Claimed")).toHaveLength(1)
        expect(yield* store.get({ jobId: job.id })).toMatchObject({ attempts: 2, leaseToken: 2 })
      })
    )

    it.effect("stale-token writes fail with LeaseLost and change nothing", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed } = yield* fixture
        const job = yield* submit()
        const stale = yield* claimed(job.id, "worker-a", 1_000)
        yield* advance(1_001)
        const current = yield* claimed(job.id, "worker-b")
        const before = yield* store.get({ jobId: job.id })
        const attemptsBefore = yield* store.attempts({ jobId: job.id })
        const at = yield* now
        const fenced = { jobId: job.id, token: stale.leaseToken, now: at }
        const errors = yield* Effect.all([
          Effect.flip(store.heartbeat({ ...fenced, leaseMs: LEASE, progress: 0.5 })),
          Effect.flip(store.complete({ ...fenced, result: { stale: true } })),
          Effect.flip(store.fail({ ...fenced, errorClass: "server_error", error: "stale" })),
          Effect.flip(store.retry({ ...fenced, errorClass: "timeout", error: "stale", runAfter: at })),
          Effect.flip(store.abandon({ ...fenced, reason: "budget" })),
          Effect.flip(store.release(fenced))
        ])
        for (const error of errors) {
          expect(error).toMatchObject({
            _tag: "LeaseLost",
            jobId: job.id,
            token: stale.leaseToken,
            currentToken: current.leaseToken,
            state: "running"
          })
        }
        expect(yield* store.get({ jobId: job.id })).toEqual(before)
        expect(yield* store.attempts({ jobId: job.id })).toEqual(attemptsBefore)
      })
    )

    it.effect("fenced writes on a job that is no longer running fail with LeaseLost", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit()
        const running = yield* claimed(job.id)
        const at = yield* now
        yield* store.complete({ jobId: job.id, token: running.leaseToken, result: "done", now: at })
        const before = yield* store.get({ jobId: job.id })
        const fenced = { jobId: job.id, token: running.leaseToken, now: at }
        const errors = yield* Effect.all([
          Effect.flip(store.heartbeat({ ...fenced, leaseMs: LEASE })),
          Effect.flip(store.complete({ ...fenced, result: "again" })),
          Effect.flip(store.fail({ ...fenced, errorClass: "unknown", error: "late" })),
          Effect.flip(store.retry({ ...fenced, errorClass: "unknown", error: "late", runAfter: at })),
          Effect.flip(store.abandon({ ...fenced, reason: "deadline" })),
          Effect.flip(store.release(fenced))
        ])
        for (const error of errors) {
          expect(error).toMatchObject({ _tag: "LeaseLost", currentToken: running.leaseToken, state: "succeeded" })
        }
        expect(yield* store.get({ jobId: job.id })).toEqual(before)
      })
    )

    it.effect("heartbeat extends the lease, stores progress, and survives a lapse nobody took over", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed } = yield* fixture
        const job = yield* submit()
        const running = yield* claimed(job.id, "worker-a", 1_000)
        yield* advance(500)
        const first = yield* store.heartbeat({
          jobId: job.id,
          token: running.leaseToken,
          leaseMs: 2_000,
          progress: 0.25,
          now: yield* now
        })
        expect(first).toEqual({ leaseUntil: (yield* now) + 2_000, cancelRequested: false })
        expect(yield* store.get({ jobId: job.id })).toMatchObject({ progress: 0.25, leaseUntil: first.leaseUntil })
        yield* advance(5_000)
        const late = yield* store.heartbeat({
          jobId: job.id,
          token: running.leaseToken,
          leaseMs: 2_000,
          now: yield* now
        })
        expect(late.leaseUntil).toBe((yield* now) + 2_000)
        expect(yield* store.get({ jobId: job.id })).toMatchObject({ progress: 0.25, leaseToken: 1, state: "running" })
      })
    )

    it.effect("complete: succeeded with the result, progress 1, lease and error cleared", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit()
        const first = yield* claimed(job.id)
        const at = yield* now
        yield* store.retry({
          jobId: job.id,
          token: first.leaseToken,
          errorClass: "rate_limited",
          error: "429",
          runAfter: at,
          now: at
        })
        const second = yield* claimed(job.id)
        const done = yield* store.complete({
          jobId: job.id,
          token: second.leaseToken,
          result: { text: "ok", tokens: 12 },
          now: at
        })
        expect(done).toMatchObject({
          state: "succeeded",
          result: { text: "ok", tokens: 12 },
          progress: 1,
          leaseOwner: null,
          leaseUntil: null,
          errorClass: null,
          lastError: null,
          abandonReason: null
        })
        expect(yield* store.get({ jobId: job.id })).toEqual(done)
        const attempts = yield* store.attempts({ jobId: job.id })
        expect(attempts.map((a) => a.outcome)).toEqual(["retried", "succeeded"])
        expect(attempts[0]).toMatchObject({ errorClass: "rate_limited", endedAt: at })
      })
    )

    it.effect("fail: failed with the error class and evidence, lease cleared", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit()
        const running = yield* claimed(job.id)
        const failed = yield* store.fail({
          jobId: job.id,
          token: running.leaseToken,
          errorClass: "invalid_request",
          error: "400 bad prompt",
          now: yield* now
        })
        expect(failed).toMatchObject({
          state: "failed",
          errorClass: "invalid_request",
          lastError: "400 bad prompt",
          leaseOwner: null,
          leaseUntil: null,
          leaseToken: 1
        })
        const [attempt] = yield* store.attempts({ jobId: job.id })
        expect(attempt).toMatchObject({ outcome: "failed", errorClass: "invalid_request" })
        const settled = yield* store.claim({ jobId: job.id, owner: "worker-b", leaseMs: LEASE, now: yield* now })
        expect(settled).toMatchObject({ _tag: "Settled", job: { state: "failed" } })
      })
    )

    it.effect("retry: queued with runAfter and the error; NotDue until then, then claimable", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed } = yield* fixture
        const job = yield* submit()
        const running = yield* claimed(job.id)
        const at = yield* now
        const retried = yield* store.retry({
          jobId: job.id,
          token: running.leaseToken,
          errorClass: "overloaded",
          error: "529",
          runAfter: at + 4_000,
          now: at
        })
        expect(retried).toMatchObject({
          state: "queued",
          runAfter: at + 4_000,
          errorClass: "overloaded",
          lastError: "529",
          leaseOwner: null,
          leaseUntil: null,
          attempts: 1
        })
        const early = yield* store.claim({ jobId: job.id, owner: "worker-a", leaseMs: LEASE, now: at + 3_999 })
        expect(early).toMatchObject({ _tag: "NotDue", until: at + 4_000 })
        yield* advance(4_000)
        expect(yield* claimed(job.id)).toMatchObject({ attempts: 2, leaseToken: 2 })
      })
    )

    it.effect("abandon: abandoned with the reason and the optional error", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit()
        const running = yield* claimed(job.id)
        const abandoned = yield* store.abandon({
          jobId: job.id,
          token: running.leaseToken,
          reason: "deadline",
          errorClass: "timeout",
          error: "deadline passed mid-call",
          now: yield* now
        })
        expect(abandoned).toMatchObject({
          state: "abandoned",
          abandonReason: "deadline",
          errorClass: "timeout",
          lastError: "deadline passed mid-call",
          leaseOwner: null,
          leaseUntil: null
        })
        const [attempt] = yield* store.attempts({ jobId: job.id })
        expect(attempt!.outcome).toBe("abandoned")
      })
    )

    it.effect("release: queued and due now, the attempt handed back", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit({ maxAttempts: 1 })
        const running = yield* claimed(job.id)
        const at = yield* now
        const released = yield* store.release({ jobId: job.id, token: running.leaseToken, now: at })
        expect(released).toMatchObject({
          state: "queued",
          runAfter: at,
          attempts: 1,
          attemptsBase: 1,
          leaseOwner: null,
          leaseUntil: null
        })
        expect(attemptsLeft(released)).toBe(1)
        const again = yield* claimed(job.id, "worker-b")
        expect(again).toMatchObject({ attempts: 2, leaseToken: 2 })
        const attempts = yield* store.attempts({ jobId: job.id })
        expect(attempts.map((a) => a.outcome)).toEqual(["released", "running"])
      })
    )

    it.effect("attempts and tokens strictly increase over claims, retries, releases, takeovers and replays", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed } = yield* fixture
        const job = yield* submit({ maxAttempts: 10 })
        const tokens: Array<number> = []
        const attempts: Array<number> = []
        const record = (j: Job) => {
          tokens.push(j.leaseToken)
          attempts.push(j.attempts)
        }
        const a = yield* claimed(job.id)
        record(a)
        let at = yield* now
        yield* store.retry({
          jobId: job.id,
          token: a.leaseToken,
          errorClass: "timeout",
          error: "t",
          runAfter: at,
          now: at
        })
        const b = yield* claimed(job.id, "worker-b", 1_000)
        record(b)
        yield* advance(1_001)
        const c = yield* claimed(job.id, "worker-c")
        record(c)
        at = yield* now
        yield* store.release({ jobId: job.id, token: c.leaseToken, now: at })
        const d = yield* claimed(job.id, "worker-d")
        record(d)
        yield* store.fail({ jobId: job.id, token: d.leaseToken, errorClass: "server_error", error: "500", now: at })
        yield* store.replay({ jobIds: [job.id], now: at })
        const e = yield* claimed(job.id, "worker-e")
        record(e)
        for (let i = 1; i < tokens.length; i++) {
          expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!)
          expect(attempts[i]!).toBeGreaterThan(attempts[i - 1]!)
        }
        const rows = yield* store.attempts({ jobId: job.id })
        expect(rows.map((r) => r.token)).toEqual(tokens)
        expect(new Set(rows.map((r) => r.token)).size).toBe(rows.length)
      })
    )

    it.effect("claim settles a job with no attempt left as failed (last error class; lease_expired on takeover)", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed } = yield* fixture
        const retried = yield* submit({ maxAttempts: 1 })
        const a = yield* claimed(retried.id)
        const at = yield* now
        yield* store.retry({
          jobId: retried.id,
          token: a.leaseToken,
          errorClass: "rate_limited",
          error: "429",
          runAfter: at,
          now: at
        })
        const settled = yield* store.claim({ jobId: retried.id, owner: "worker-b", leaseMs: LEASE, now: at })
        expect(settled).toMatchObject({
          _tag: "Settled",
          job: { state: "failed", errorClass: "rate_limited", attempts: 1, leaseToken: 1 }
        })

        const expired = yield* submit({ maxAttempts: 1 })
        yield* claimed(expired.id, "worker-a", 1_000)
        yield* advance(1_001)
        const takeover = yield* store.claim({ jobId: expired.id, owner: "worker-b", leaseMs: LEASE, now: yield* now })
        expect(takeover).toMatchObject({
          _tag: "Settled",
          job: { state: "failed", errorClass: "lease_expired", attempts: 1, leaseOwner: null }
        })
        const rows = yield* store.attempts({ jobId: expired.id })
        expect(rows.map((r) => r.outcome)).toEqual(["expired"])
      })
    )

    it.effect("claim settles a job past its deadline as abandoned(deadline)", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit } = yield* fixture
        const at = yield* now
        const job = yield* submit({ deadlineAt: at + 1_000 })
        yield* advance(1_000)
        const settled = yield* store.claim({ jobId: job.id, owner: "worker-a", leaseMs: LEASE, now: yield* now })
        expect(settled).toMatchObject({
          _tag: "Settled",
          job: { state: "abandoned", abandonReason: "deadline", attempts: 0 }
        })
        expect(yield* store.attempts({ jobId: job.id })).toEqual([])
      })
    )

    it.effect("claim of an expired lease with a cancel requested settles it as abandoned(cancelled)", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed } = yield* fixture
        const job = yield* submit()
        yield* claimed(job.id, "worker-a", 1_000)
        yield* store.cancel({ jobId: job.id, now: yield* now })
        yield* advance(1_001)
        const settled = yield* store.claim({ jobId: job.id, owner: "worker-b", leaseMs: LEASE, now: yield* now })
        expect(settled).toMatchObject({ _tag: "Settled", job: { state: "abandoned", abandonReason: "cancelled" } })
      })
    )

    it.effect("charges: a reservation then its settlement, each call id counted once", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit()
        const running = yield* claimed(job.id)
        const at = yield* now
        const base = { jobId: job.id, token: running.leaseToken, now: at }
        expect(yield* store.charge({ ...base, callId: "call-1", amountCents: 10, settled: false })).toEqual({
          costCents: 10
        })
        expect(yield* store.charge({ ...base, callId: "call-1", amountCents: 99, settled: false })).toEqual({
          costCents: 10
        })
        expect(yield* store.charge({ ...base, callId: "call-1", amountCents: 7.5, settled: true })).toEqual({
          costCents: 7.5
        })
        expect(yield* store.charge({ ...base, callId: "call-1", amountCents: 50, settled: true })).toEqual({
          costCents: 7.5
        })
        expect(yield* store.charge({ ...base, callId: "call-1", amountCents: 50, settled: false })).toEqual({
          costCents: 7.5
        })
        expect(yield* store.charge({ ...base, callId: "call-2", amountCents: 3, settled: true })).toEqual({
          costCents: 10.5
        })
        expect(yield* store.charge({ ...base, callId: "call-2", amountCents: 3, settled: true })).toEqual({
          costCents: 10.5
        })
        expect((yield* store.get({ jobId: job.id })).costCents).toBe(10.5)
        const rows = yield* store.charges({ jobId: job.id })
        expect(rows.map((r) => [r.callId, r.amountCents, r.settled, r.token])).toEqual([
          ["call-1", 7.5, true, running.leaseToken],
          ["call-2", 3, true, running.leaseToken]
        ])
      })
    )

    it.effect("charges are accepted from stale tokens and on finished jobs; unknown job is JobNotFound", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed, factory: f } = yield* fixture
        const job = yield* submit()
        const stale = yield* claimed(job.id, "worker-a", 1_000)
        yield* advance(1_001)
        const current = yield* claimed(job.id, "worker-b")
        const at = yield* now
        yield* store.charge({
          jobId: job.id,
          callId: "stale",
          token: stale.leaseToken,
          amountCents: 4,
          settled: true,
          now: at
        })
        yield* store.complete({ jobId: job.id, token: current.leaseToken, result: null, now: at })
        const after = yield* store.charge({
          jobId: job.id,
          callId: "late",
          token: current.leaseToken,
          amountCents: 6,
          settled: true,
          now: at
        })
        expect(after.costCents).toBe(10)
        expect(yield* store.get({ jobId: job.id })).toMatchObject({ state: "succeeded", costCents: 10 })
        const unknown = yield* f.submitOptions({ queue: "never-submitted" })
        const error = yield* Effect.flip(
          store.charge({ jobId: unknown.id, callId: "x", token: 1, amountCents: 1, settled: true, now: at })
        )
        expect(error).toMatchObject({ _tag: "JobNotFound" })
      })
    )

    it.effect("budget: claim abandons when spend plus the estimate would exceed it, never overspending", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit({ budgetCents: 10, maxAttempts: 10 })
        const first = yield* claimed(job.id)
        const at = yield* now
        yield* store.charge({
          jobId: job.id,
          callId: "c1",
          token: first.leaseToken,
          amountCents: 6,
          settled: true,
          now: at
        })
        yield* store.retry({
          jobId: job.id,
          token: first.leaseToken,
          errorClass: "timeout",
          error: "t",
          runAfter: at,
          now: at
        })
        const exact = yield* store.claim({ jobId: job.id, owner: "w", leaseMs: LEASE, estimateCents: 4, now: at })
        expectTag(exact, "Claimed")
        const second = claimedJob(exact)
        yield* store.charge({
          jobId: job.id,
          callId: "c2",
          token: second.leaseToken,
          amountCents: 3,
          settled: true,
          now: at
        })
        yield* store.retry({
          jobId: job.id,
          token: second.leaseToken,
          errorClass: "timeout",
          error: "t",
          runAfter: at,
          now: at
        })
        const over = yield* store.claim({ jobId: job.id, owner: "w", leaseMs: LEASE, estimateCents: 2, now: at })
        expect(over).toMatchObject({
          _tag: "Settled",
          job: { state: "abandoned", abandonReason: "budget", costCents: 9 }
        })
        expect((yield* store.get({ jobId: job.id })).attempts).toBe(2)
      })
    )

    it.effect("budget: without an estimate the largest spend under one earlier token serves", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit({ budgetCents: 20, maxAttempts: 10 })
        const first = yield* claimed(job.id)
        const at = yield* now
        const charge = (callId: string, amountCents: number) =>
          store.charge({ jobId: job.id, callId, token: first.leaseToken, amountCents, settled: true, now: at })
        yield* charge("c1", 4)
        yield* charge("c2", 4)
        yield* store.retry({
          jobId: job.id,
          token: first.leaseToken,
          errorClass: "timeout",
          error: "t",
          runAfter: at,
          now: at
        })
        const second = yield* claimed(job.id)
        yield* store.charge({
          jobId: job.id,
          callId: "c3",
          token: second.leaseToken,
          amountCents: 5,
          settled: true,
          now: at
        })
        yield* store.retry({
          jobId: job.id,
          token: second.leaseToken,
          errorClass: "timeout",
          error: "t",
          runAfter: at,
          now: at
        })
        // Spent 13; the largest attempt spent 8 (two calls under token 1): 13 + 8 > 20.
        const settled = yield* store.claim({ jobId: job.id, owner: "w", leaseMs: LEASE, now: at })
        expect(settled).toMatchObject({ _tag: "Settled", job: { state: "abandoned", abandonReason: "budget" } })

        const roomy = yield* submit({ budgetCents: 20, maxAttempts: 10 })
        const r1 = yield* claimed(roomy.id)
        yield* store.charge({
          jobId: roomy.id,
          callId: "r1",
          token: r1.leaseToken,
          amountCents: 8,
          settled: true,
          now: at
        })
        yield* store.retry({
          jobId: roomy.id,
          token: r1.leaseToken,
          errorClass: "timeout",
          error: "t",
          runAfter: at,
          now: at
        })
        // Spent 8; 8 + 8 <= 20.
        expect((yield* claimed(roomy.id)).attempts).toBe(2)
      })
    )

    it.effect("budget: spend at or over the budget abandons even with a zero estimate", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit({ budgetCents: 5 })
        const first = yield* claimed(job.id)
        const at = yield* now
        yield* store.charge({
          jobId: job.id,
          callId: "c1",
          token: first.leaseToken,
          amountCents: 5,
          settled: false,
          now: at
        })
        yield* store.release({ jobId: job.id, token: first.leaseToken, now: at })
        const settled = yield* store.claim({ jobId: job.id, owner: "w", leaseMs: LEASE, estimateCents: 0, now: at })
        expect(settled).toMatchObject({ _tag: "Settled", job: { state: "abandoned", abandonReason: "budget" } })
      })
    )

    it.effect("cancel: queued is abandoned at once; running gets a request the holder sees; terminal is rejected", () =>
      Effect.gen(function* () {
        const { store, now, advance, submit, claimed, tenant } = yield* fixture
        const queued = yield* submit()
        const cancelled = yield* store.cancel({ jobId: queued.id, tenant, now: yield* now })
        expect(cancelled).toMatchObject({ state: "abandoned", abandonReason: "cancelled" })

        const job = yield* submit()
        const running = yield* claimed(job.id)
        const requestedAt = yield* now
        const requested = yield* store.cancel({ jobId: job.id, now: requestedAt })
        expect(requested).toMatchObject({ state: "running", cancelRequestedAt: requestedAt })
        yield* advance(100)
        const again = yield* store.cancel({ jobId: job.id, now: yield* now })
        expect(again.cancelRequestedAt).toBe(requestedAt)
        const beat = yield* store.heartbeat({
          jobId: job.id,
          token: running.leaseToken,
          leaseMs: LEASE,
          now: yield* now
        })
        expect(beat.cancelRequested).toBe(true)

        const before = yield* store.get({ jobId: queued.id })
        const error = yield* Effect.flip(store.cancel({ jobId: queued.id, now: yield* now }))
        expect(error).toMatchObject({ _tag: "AlreadyTerminal", state: "abandoned" })
        expect(yield* store.get({ jobId: queued.id })).toEqual(before)
        const hidden = yield* Effect.flip(store.cancel({ jobId: job.id, tenant: `${tenant}-other`, now: yield* now }))
        expect(hidden).toMatchObject({ _tag: "JobNotFound" })
      })
    )

    it.effect("list: every filter applies, newest first, at most limit", () =>
      Effect.gen(function* () {
        const { store, queue, tenant, advance, submit, claimed } = yield* fixture
        const a = yield* submit({ type: "alpha" })
        yield* advance(10)
        const b = yield* submit({ type: "beta" })
        yield* advance(10)
        const c = yield* submit({ type: "alpha", tenant: `${tenant}-other` })
        yield* advance(10)
        yield* claimed(b.id)
        expect((yield* store.list({ queue })).map((j) => j.id)).toEqual([c.id, b.id, a.id])
        expect((yield* store.list({ queue, limit: 2 })).map((j) => j.id)).toEqual([c.id, b.id])
        expect((yield* store.list({ queue, tenant })).map((j) => j.id)).toEqual([b.id, a.id])
        expect((yield* store.list({ queue, type: "alpha" })).map((j) => j.id)).toEqual([c.id, a.id])
        expect((yield* store.list({ queue, state: "running" })).map((j) => j.id)).toEqual([b.id])
        expect(yield* store.list({ queue, state: "failed" })).toEqual([])
      })
    )

    it.effect("deadLetters: failed jobs newest first, grouped by (errorClass, inputHash) with count and cost", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit, claimed } = yield* fixture
        const failWith = (input: { readonly k: string }, errorClass: "auth" | "invalid_request", cents: number) =>
          Effect.gen(function* () {
            const job = yield* submit({ input, type: errorClass === "auth" ? "a" : "b" })
            const running = yield* claimed(job.id)
            const at = yield* now
            yield* store.charge({
              jobId: job.id,
              callId: `c-${job.id}`,
              token: running.leaseToken,
              amountCents: cents,
              settled: true,
              now: at
            })
            yield* store.fail({ jobId: job.id, token: running.leaseToken, errorClass, error: errorClass, now: at })
            yield* advance(10)
            return job
          })
        const j1 = yield* failWith({ k: "x" }, "invalid_request", 1)
        const j2 = yield* failWith({ k: "x" }, "invalid_request", 2)
        const j3 = yield* failWith({ k: "y" }, "auth", 5)
        const j4 = yield* failWith({ k: "x" }, "invalid_request", 4)
        const done = yield* submit()
        const running = yield* claimed(done.id)
        yield* store.complete({ jobId: done.id, token: running.leaseToken, result: null, now: yield* now })

        const all = yield* store.deadLetters({ queue })
        expect(all.jobs.map((j) => j.id)).toEqual([j4.id, j3.id, j2.id, j1.id])
        expect(all.groups).toEqual([
          { errorClass: "invalid_request", inputHash: j1.inputHash, count: 3, costCents: 7 },
          { errorClass: "auth", inputHash: j3.inputHash, count: 1, costCents: 5 }
        ])
        const limited = yield* store.deadLetters({ queue, limit: 1 })
        expect(limited.jobs.map((j) => j.id)).toEqual([j4.id])
        expect(limited.groups).toEqual(all.groups)
        const auth = yield* store.deadLetters({ queue, errorClass: "auth" })
        expect(auth.jobs.map((j) => j.id)).toEqual([j3.id])
        expect(auth.groups).toEqual([{ errorClass: "auth", inputHash: j3.inputHash, count: 1, costCents: 5 }])
        expect((yield* store.deadLetters({ queue, type: "b" })).jobs).toHaveLength(3)
      })
    )

    it.effect("replay: failed -> queued with a fresh run; history and spend stay; others are skipped", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit({ maxAttempts: 1 })
        const running = yield* claimed(job.id)
        const at = yield* now
        yield* store.charge({
          jobId: job.id,
          callId: "c",
          token: running.leaseToken,
          amountCents: 3,
          settled: true,
          now: at
        })
        yield* store.fail({
          jobId: job.id,
          token: running.leaseToken,
          errorClass: "server_error",
          error: "500",
          now: at
        })
        const succeeded = yield* submit()
        const s = yield* claimed(succeeded.id)
        yield* store.complete({ jobId: succeeded.id, token: s.leaseToken, result: "ok", now: at })
        const successBefore = yield* store.get({ jobId: succeeded.id })

        const result = yield* store.replay({ jobIds: [job.id, succeeded.id], now: at })
        expect(result).toEqual({ replayed: [job.id], skipped: [succeeded.id] })
        expect(yield* store.get({ jobId: succeeded.id })).toEqual(successBefore)
        const replayed = yield* store.get({ jobId: job.id })
        expect(replayed).toMatchObject({
          state: "queued",
          runAfter: at,
          attempts: 1,
          attemptsBase: 1,
          costCents: 3,
          leaseToken: 1,
          leaseOwner: null
        })
        expect(attemptsLeft(replayed)).toBe(1)
        const again = yield* store.replay({ jobIds: [job.id], now: at })
        expect(again).toEqual({ replayed: [], skipped: [job.id] })
        const rerun = yield* claimed(job.id)
        expect(rerun).toMatchObject({ attempts: 2, leaseToken: 2 })
        expect(yield* store.attempts({ jobId: job.id })).toHaveLength(2)
        expect(yield* store.charges({ jobId: job.id })).toHaveLength(1)
      })
    )

    it.effect("replay: an id named twice is replayed once, its repeat skipped", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit({ maxAttempts: 1 })
        const running = yield* claimed(job.id)
        const at = yield* now
        yield* store.fail({ jobId: job.id, token: running.leaseToken, errorClass: "auth", error: "401", now: at })

        const result = yield* store.replay({ jobIds: [job.id, job.id], now: at })

        expect(result).toEqual({ replayed: [job.id], skipped: [job.id] })
        expect(yield* store.get({ jobId: job.id })).toMatchObject({ state: "queued", attempts: 1, attemptsBase: 1 })
      })
    )

    it.effect("replay: a cancel requested before the failure does not settle the replayed run", () =>
      Effect.gen(function* () {
        const { store, now, submit, claimed } = yield* fixture
        const job = yield* submit()
        const running = yield* claimed(job.id)
        const at = yield* now
        yield* store.cancel({ jobId: job.id, now: at })
        yield* store.fail({ jobId: job.id, token: running.leaseToken, errorClass: "auth", error: "401", now: at })
        expect((yield* store.get({ jobId: job.id })).cancelRequestedAt).not.toBeNull()

        yield* store.replay({ jobIds: [job.id], now: at })

        expect(yield* store.get({ jobId: job.id })).toMatchObject({ state: "queued", cancelRequestedAt: null })
        const rerun = yield* claimed(job.id, "worker-b")
        expect(rerun).toMatchObject({ state: "running", attempts: 2, leaseOwner: "worker-b" })
      })
    )

    it.effect("replay by filter moves only matching failed jobs and never touches succeeded ones", () =>
      Effect.gen(function* () {
        const { store, queue, now, submit, claimed } = yield* fixture
        const at = yield* now
        const ids: Array<JobId> = []
        for (const errorClass of ["timeout", "timeout", "auth"] as const) {
          const job = yield* submit({ maxAttempts: 1 })
          const running = yield* claimed(job.id)
          yield* store.fail({ jobId: job.id, token: running.leaseToken, errorClass, error: errorClass, now: at })
          ids.push(job.id)
        }
        const ok = yield* submit()
        const r = yield* claimed(ok.id)
        yield* store.complete({ jobId: ok.id, token: r.leaseToken, result: 1, now: at })
        const result = yield* store.replay({ queue, errorClass: "timeout", now: at })
        expect([...result.replayed].sort()).toEqual([ids[0]!, ids[1]!].sort())
        expect((yield* store.get({ jobId: ids[2]! })).state).toBe("failed")
        expect((yield* store.get({ jobId: ok.id })).state).toBe("succeeded")
        const rest = yield* store.replay({ queue, now: at })
        expect(rest.replayed).toEqual([ids[2]!])
        expect((yield* store.list({ queue, state: "queued" })).length).toBe(3)
      })
    )

    it.effect("updatedAt strictly increases on every accepted write, even when now goes backwards", () =>
      Effect.gen(function* () {
        const { store, now, submit } = yield* fixture
        const at = yield* now
        const job = yield* submit({ runAfter: at - 10_000 })
        const seen: Array<number> = [job.updatedAt]
        const claim = claimedJob(yield* store.claim({ jobId: job.id, owner: "w", leaseMs: LEASE, now: at - 1_000 }))
        seen.push(claim.updatedAt)
        yield* store.heartbeat({
          jobId: job.id,
          token: claim.leaseToken,
          leaseMs: LEASE,
          progress: 0.1,
          now: at - 2_000
        })
        seen.push((yield* store.get({ jobId: job.id })).updatedAt)
        yield* store.heartbeat({
          jobId: job.id,
          token: claim.leaseToken,
          leaseMs: LEASE,
          progress: 0.2,
          now: at - 2_000
        })
        seen.push((yield* store.get({ jobId: job.id })).updatedAt)
        yield* store.charge({
          jobId: job.id,
          callId: "c",
          token: claim.leaseToken,
          amountCents: 1,
          settled: false,
          now: at - 3_000
        })
        seen.push((yield* store.get({ jobId: job.id })).updatedAt)
        seen.push(
          (yield* store.complete({ jobId: job.id, token: claim.leaseToken, result: 1, now: at - 4_000 })).updatedAt
        )
        for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!)
        expect(seen[seen.length - 1]! - seen[0]!).toBeLessThan(1)
      })
    )

    it.effect(
      "sweep: expired leases are requeued, failed when no attempt is left, abandoned on cancel or deadline",
      () =>
        Effect.gen(function* () {
          const { store, queue, now, advance, submit, claimed } = yield* fixture
          const t0 = yield* now
          const requeue = yield* submit({ maxAttempts: 3 })
          const exhausted = yield* submit({ maxAttempts: 1 })
          const cancelled = yield* submit()
          const late = yield* submit({ deadlineAt: t0 + 1_500 })
          const live = yield* submit()
          const queuedLate = yield* submit({ deadlineAt: t0 + 1_500, runAfter: t0 + 60_000 })
          for (const job of [requeue, exhausted, cancelled, late]) yield* claimed(job.id, "worker-a", 1_000)
          yield* claimed(live.id, "worker-a", 60_000)
          yield* store.cancel({ jobId: cancelled.id, now: t0 })
          yield* advance(2_000)
          const at = yield* now
          const result = yield* store.sweep({ queue, now: at })
          expect(result.requeued).toEqual([requeue.id])
          expect(result.expiredFailed).toEqual([exhausted.id])
          expect([...result.abandoned].sort()).toEqual([cancelled.id, late.id, queuedLate.id].sort())
          expect(yield* store.get({ jobId: requeue.id })).toMatchObject({
            state: "queued",
            runAfter: at,
            leaseOwner: null,
            leaseUntil: null,
            leaseToken: 1
          })
          expect((yield* store.attempts({ jobId: requeue.id })).map((a) => a.outcome)).toEqual(["expired"])
          expect(yield* store.get({ jobId: exhausted.id })).toMatchObject({
            state: "failed",
            errorClass: "lease_expired"
          })
          expect(yield* store.get({ jobId: cancelled.id })).toMatchObject({
            state: "abandoned",
            abandonReason: "cancelled"
          })
          expect(yield* store.get({ jobId: late.id })).toMatchObject({ state: "abandoned", abandonReason: "deadline" })
          expect(yield* store.get({ jobId: queuedLate.id })).toMatchObject({
            state: "abandoned",
            abandonReason: "deadline"
          })
          expect(yield* store.get({ jobId: live.id })).toMatchObject({ state: "running", leaseToken: 1 })
          const second = yield* store.sweep({ queue, now: at })
          expect(second).toMatchObject({ requeued: [], expiredFailed: [], abandoned: [] })
          const next = yield* claimed(requeue.id, "worker-b")
          expect(next).toMatchObject({ leaseToken: 2, attempts: 2 })
        })
    )

    it.effect("sweep: stale lists queued, due jobs untouched for republishAfterMs, and leaves their record alone", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit } = yield* fixture
        const t0 = yield* now
        const old = yield* submit()
        const notDue = yield* submit({ runAfter: t0 + 600_000 })
        yield* advance(20_000)
        const fresh = yield* submit()
        yield* advance(15_000)
        const at = yield* now
        const result = yield* store.sweep({ queue, republishAfterMs: 30_000, now: at })
        expect(result.stale.map((j) => j.id)).toEqual([old.id])
        expect(yield* store.get({ jobId: old.id })).toEqual(old)
        // `old` was just handed out; with a shorter interval only `fresh` is due for a republish.
        const wide = yield* store.sweep({ queue, republishAfterMs: 10_000, now: at })
        expect(wide.stale.map((j) => j.id)).toEqual([fresh.id])
        expect(yield* store.get({ jobId: fresh.id })).toEqual(fresh)
        expect(yield* store.get({ jobId: notDue.id })).toEqual(notDue)
        const otherQueue = yield* store.sweep({ queue: `${queue}-other`, republishAfterMs: 0, now: at })
        expect(otherQueue.stale).toEqual([])
      })
    )

    it.effect("sweep: a waiting job is returned as stale once per republishAfterMs, least recently touched first", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit } = yield* fixture
        const a = yield* submit()
        yield* advance(1_000)
        const b = yield* submit()
        const sweep = (limit?: number) =>
          Effect.flatMap(now, (at) => store.sweep({ queue, republishAfterMs: 30_000, limit, now: at }))
        const staleIds = (result: { readonly stale: ReadonlyArray<Job> }) => result.stale.map((job) => job.id)
        yield* advance(30_000)

        // t+31 s: both waited long enough; the limit lets one out, the one untouched longest.
        expect(staleIds(yield* sweep(1))).toEqual([a.id])
        yield* advance(500)
        expect(staleIds(yield* sweep())).toEqual([b.id])
        expect(staleIds(yield* sweep())).toEqual([])
        // The mark is no write to the record: updatedAt and every field stay as they were.
        expect(yield* store.get({ jobId: a.id })).toEqual(a)
        expect(yield* store.get({ jobId: b.id })).toEqual(b)

        // Each comes back exactly one interval after it was handed out.
        yield* advance(29_499)
        expect(staleIds(yield* sweep())).toEqual([])
        yield* advance(1)
        expect(staleIds(yield* sweep())).toEqual([a.id])
        yield* advance(500)
        expect(staleIds(yield* sweep())).toEqual([b.id])
        // Both due again: the earlier mark goes first.
        yield* advance(40_000)
        expect(staleIds(yield* sweep())).toEqual([a.id, b.id])
        // A write to the record restarts the wait from that write.
        yield* advance(10_000)
        const running = yield* Effect.flatMap(now, (at) =>
          store.claim({ jobId: a.id, owner: "worker-a", leaseMs: LEASE, now: at })
        )
        yield* Effect.flatMap(now, (at) =>
          store.release({ jobId: a.id, token: claimedJob(running).leaseToken, now: at })
        )
        yield* advance(20_000)
        expect(staleIds(yield* sweep())).toEqual([b.id])
        // The release's updatedAt is one microsecond after the claim's (strictly monotonic under a frozen clock).
        yield* advance(10_000)
        expect(staleIds(yield* sweep())).toEqual([])
        yield* advance(1)
        expect(staleIds(yield* sweep())).toEqual([a.id])
      })
    )

    it.effect("sweep: limit bounds the jobs one pass writes, all kinds together, expired leases first", () =>
      Effect.gen(function* () {
        const { store, queue, now, advance, submit, claimed } = yield* fixture
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

        expect(yield* sweep(0)).toEqual({ requeued: [], expiredFailed: [], abandoned: [], stale: [] })
        const first = yield* sweep(3)
        expect(first).toMatchObject({
          requeued: [expired1.id, expired2.id],
          expiredFailed: [],
          abandoned: [overdue1.id]
        })
        expect(first.stale).toEqual([])
        expect((yield* store.get({ jobId: overdue2.id })).state).toBe("queued")

        // The rest on the next pass; the requeued jobs were just written, so they are not stale.
        const second = yield* sweep(3)
        expect(second).toMatchObject({ requeued: [], expiredFailed: [], abandoned: [overdue2.id] })
        expect(second.stale.map((job) => job.id)).toEqual([waiting.id])
        expect((yield* store.get({ jobId: overdue2.id })).abandonReason).toBe("deadline")
      })
    )

    it.effect(
      "stats: counts by state, oldest due queued job per priority, cost by error class, failures in window",
      () =>
        Effect.gen(function* () {
          const { store, queue, now, advance, submit, claimed } = yield* fixture
          const t0 = yield* now
          yield* submit({ priority: 0 })
          yield* advance(10)
          yield* submit({ priority: 0 })
          yield* submit({ priority: 5 })
          const running = yield* submit()
          yield* claimed(running.id)
          const failing = yield* submit({ maxAttempts: 1 })
          const f = yield* claimed(failing.id)
          const t1 = yield* now
          yield* store.charge({
            jobId: failing.id,
            callId: "c",
            token: f.leaseToken,
            amountCents: 7,
            settled: true,
            now: t1
          })
          yield* advance(1_000)
          const t2 = yield* now
          yield* store.fail({ jobId: failing.id, token: f.leaseToken, errorClass: "auth", error: "401", now: t2 })
          const stats = yield* store.stats({ queue, failedSince: t2 })
          expect(stats.byState).toEqual({ queued: 3, running: 1, succeeded: 0, failed: 1, abandoned: 0 })
          expect(stats.oldestQueuedAt).toEqual({ "0": t0, "5": t0 + 10 })
          expect(stats.costCentsByErrorClass).toEqual({ auth: 7 })
          expect(stats.failedInWindow).toBe(1)
          const later = yield* store.stats({ queue, failedSince: t2 + 1 })
          expect(later.failedInWindow).toBe(0)
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

    if (capabilities.concurrent) {
      it.effect("contention: racing claims, stale writes and duplicate charges across many jobs", () =>
        Effect.gen(function* () {
          const { store, now, advance, submit, claimed } = yield* fixture
          const jobs = yield* Effect.all(Array.from({ length: 8 }, () => submit({ maxAttempts: 5 })))
          const at = yield* now
          // Token 1 becomes stale at once: each job is claimed and released before the race.
          for (const job of jobs) {
            const first = yield* claimed(job.id, "worker-a")
            yield* store.release({ jobId: job.id, token: first.leaseToken, now: at })
          }
          yield* advance(1)
          const results = yield* Effect.forEach(
            jobs,
            (job) =>
              Effect.all(
                [
                  ...Array.from({ length: 6 }, (_, w) =>
                    Effect.map(
                      store.claim({ jobId: job.id, owner: `worker-${w}`, leaseMs: LEASE, now: at }),
                      (r) => r._tag
                    )
                  ),
                  ...Array.from({ length: 3 }, () =>
                    Effect.map(
                      Effect.either(store.heartbeat({ jobId: job.id, token: 1, leaseMs: LEASE, now: at })),
                      (e) => (e._tag === "Left" ? e.left._tag : "Extended")
                    )
                  ),
                  ...Array.from({ length: 3 }, () =>
                    Effect.map(
                      Effect.either(store.complete({ jobId: job.id, token: 1, result: "stale", now: at })),
                      (e) => (e._tag === "Left" ? e.left._tag : "Completed")
                    )
                  ),
                  ...Array.from({ length: 4 }, () =>
                    Effect.as(
                      store.charge({ jobId: job.id, callId: "dup", token: 1, amountCents: 2, settled: true, now: at }),
                      "Charged"
                    )
                  )
                ],
                { concurrency: "unbounded" }
              ),
            { concurrency: "unbounded" }
          )
          for (const [i, tags] of results.entries()) {
            expect(tags.filter((t) => t === "Claimed")).toHaveLength(1)
            expect(tags.filter((t) => t === "LeaseLost")).toHaveLength(6)
            const job = yield* store.get({ jobId: jobs[i]!.id })
            expect(job).toMatchObject({ leaseToken: 2, attempts: 2, costCents: 2 })
          }
        })
      )
    } else {
      reason("contention across many jobs", "capabilities.concurrent is false")
    }

    if (capabilities.sharedState) {
      it.effect("two instances of the store: one live lease, and fencing holds across them", () =>
        Effect.gen(function* () {
          const { store, now, submit } = yield* fixture
          const other = Context.get(yield* Effect.orDie(Layer.build(options.layer)), Store)
          const job = yield* submit()
          const at = yield* now
          const results = yield* Effect.all(
            Array.from({ length: 8 }, (_, i) =>
              (i % 2 === 0 ? store : other).claim({ jobId: job.id, owner: `worker-${i}`, leaseMs: 1_000, now: at })
            ),
            { concurrency: "unbounded" }
          )
          expect(results.filter((r) => r._tag === "Claimed")).toHaveLength(1)
          const takeover = claimedJob(
            yield* other.claim({ jobId: job.id, owner: "worker-x", leaseMs: LEASE, now: at + 1_001 })
          )
          const error = yield* Effect.flip(store.complete({ jobId: job.id, token: 1, result: null, now: at + 1_001 }))
          expect(error).toMatchObject({ _tag: "LeaseLost", currentToken: takeover.leaseToken })
        }).pipe(Effect.scoped)
      )
    } else {
      reason("two instances sharing one database", "capabilities.sharedState is false")
    }

    if (skipped.length > 0) {
      console.info(`[StoreConformance: ${options.name}] not run: ${skipped.join("; ")}`)
    }
  })
}
