/**
 * Store conformance, fencing: `heartbeat` and `settle` apply only while the job is running under exactly the given
 * token (`Protocol.holds`); any other token, a job that is no longer running, or no job at all gives `LeaseLost`
 * for that item and changes nothing. Under the current token each of the five outcomes writes what
 * `Protocol.settleTransition` says, a heartbeat extends the lease and never moves its end back
 * (`Protocol.heartbeatTransition`), and a cancel of
 * a running job reaches its holder through the heartbeat. Every accepted write moves `updatedAt` strictly forward.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import { attemptsLeft } from "@slowcall/core/Job"
import type { Outcome } from "@slowcall/core/Protocol"
import { Effect } from "effect"
import { type Area, expectTag, LEASE, only, outcome } from "./fixture.js"

/** One of each outcome, for the tests that try them all. */
const everyOutcome: ReadonlyArray<Outcome> = [
  outcome.complete({ stale: true }),
  outcome.retry(0, "timeout", "stale"),
  outcome.fail("server_error", "stale"),
  outcome.abandon("budget"),
  outcome.release
]

/** Stale, future and missing tokens, and the heartbeat. */
const fenceTests = ({ it, fixture }: Area): void => {
  it.effect("stale-token heartbeats and settlements are LeaseLost and change nothing", () =>
    Effect.gen(function* () {
      const { advance, submit, claimed, heartbeat, settle, get, attempts } = yield* fixture
      const job = yield* submit()
      const stale = yield* claimed(job.id, "worker-a", 1_000)
      yield* advance(1_001)
      const current = yield* claimed(job.id, "worker-b")
      const before = yield* get(job.id)
      const attemptsBefore = yield* attempts(job.id)
      const lost = {
        _tag: "LeaseLost",
        jobId: job.id,
        token: stale.leaseToken,
        currentToken: current.leaseToken,
        state: "running"
      }

      const beat = yield* heartbeat({ jobId: job.id, token: stale.leaseToken, leaseMs: LEASE, progress: 0.5 })
      const settles = yield* Effect.forEach(everyOutcome, (o) => settle(job.id, stale.leaseToken, o))

      expect(beat).toEqual(lost)
      for (const result of settles) expect(result).toEqual(lost)
      expect(yield* get(job.id)).toEqual(before)
      expect(yield* attempts(job.id)).toEqual(attemptsBefore)
    })
  )

  it.effect("a token from the future is LeaseLost too", () =>
    Effect.gen(function* () {
      const { submit, claimed, heartbeat, settle, get } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      const ahead = running.leaseToken + 1

      const beat = yield* heartbeat({ jobId: job.id, token: ahead, leaseMs: LEASE })
      const done = yield* settle(job.id, ahead, outcome.complete(null))

      for (const result of [beat, done]) {
        expect(result).toEqual({
          _tag: "LeaseLost",
          jobId: job.id,
          token: ahead,
          currentToken: running.leaseToken,
          state: "running"
        })
      }
      expect(yield* get(job.id)).toEqual(running)
    })
  )

  it.effect("fenced writes on a job that is no longer running are LeaseLost, naming its state", () =>
    Effect.gen(function* () {
      const { submit, claimed, settled, heartbeat, settle, get } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      const done = yield* settled(job.id, running.leaseToken, outcome.complete("done"))

      const beat = yield* heartbeat({ jobId: job.id, token: running.leaseToken, leaseMs: LEASE })
      const settles = yield* Effect.forEach(everyOutcome, (o) => settle(job.id, running.leaseToken, o))

      for (const result of [beat, ...settles]) {
        expect(result).toEqual({
          _tag: "LeaseLost",
          jobId: job.id,
          token: running.leaseToken,
          currentToken: running.leaseToken,
          state: "succeeded"
        })
      }
      expect(yield* get(job.id)).toEqual(done)
    })
  )

  it.effect("fenced writes on a queued job or on no job at all are LeaseLost", () =>
    Effect.gen(function* () {
      const { factory, submit, heartbeat, settle } = yield* fixture
      const queued = yield* submit()
      const unknown = yield* factory.jobId

      const onQueued = yield* settle(queued.id, 0, outcome.complete(null))
      const onNothing = yield* heartbeat({ jobId: unknown, token: 1, leaseMs: LEASE })
      const settleNothing = yield* settle(unknown, 1, outcome.release)

      expect(onQueued).toEqual({ _tag: "LeaseLost", jobId: queued.id, token: 0, currentToken: 0, state: "queued" })
      for (const result of [onNothing, settleNothing]) {
        expect(result).toEqual({ _tag: "LeaseLost", jobId: unknown, token: 1, currentToken: null, state: null })
      }
    })
  )

  it.effect("heartbeat extends the lease, stores progress, and survives a lapse nobody took over", () =>
    Effect.gen(function* () {
      const { now, advance, submit, claimed, heartbeat, get } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id, "worker-a", 1_000)
      yield* advance(500)

      const first = yield* heartbeat({ jobId: job.id, token: running.leaseToken, leaseMs: 2_000, progress: 0.25 })

      expect(first).toEqual({
        _tag: "Renewed",
        leaseUntil: (yield* now) + 2_000,
        cancelRequested: false,
        costCents: 0
      })
      expect(yield* get(job.id)).toMatchObject({ progress: 0.25, leaseUntil: (yield* now) + 2_000 })
      yield* advance(5_000)
      const late = yield* heartbeat({ jobId: job.id, token: running.leaseToken, leaseMs: 2_000 })
      expect(late).toMatchObject({ _tag: "Renewed", leaseUntil: (yield* now) + 2_000 })
      expect(yield* get(job.id)).toMatchObject({ progress: 0.25, leaseToken: 1, state: "running" })
    })
  )

  it.effect("a heartbeat never moves a lease's end back: a shorter renewal keeps the later end", () =>
    Effect.gen(function* () {
      const { now, advance, submit, claimed, heartbeat, get } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id, "worker-a", 10_000)
      const end = (yield* now) + 10_000
      yield* advance(1_000)

      // Applied after a renewal that reached further (an older call landing late): the end stays.
      const short = yield* heartbeat({ jobId: job.id, token: running.leaseToken, leaseMs: 2_000 })

      expect(short).toMatchObject({ _tag: "Renewed", leaseUntil: end })
      expect(yield* get(job.id)).toMatchObject({ leaseUntil: end, leaseToken: running.leaseToken })
      const long = yield* heartbeat({ jobId: job.id, token: running.leaseToken, leaseMs: 20_000 })
      expect(long).toMatchObject({ _tag: "Renewed", leaseUntil: (yield* now) + 20_000 })
    })
  )

  it.effect("heartbeat clamps progress to 0..1", () =>
    Effect.gen(function* () {
      const { submit, claimed, heartbeat, get } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)

      yield* heartbeat({ jobId: job.id, token: running.leaseToken, leaseMs: LEASE, progress: 1.5 })
      const high = (yield* get(job.id)).progress
      yield* heartbeat({ jobId: job.id, token: running.leaseToken, leaseMs: LEASE, progress: -0.5 })
      const low = (yield* get(job.id)).progress

      expect([high, low]).toEqual([1, 0])
    })
  )
}

/** The five settle outcomes under the current token. */
const outcomeTests = ({ it, fixture }: Area): void => {
  it.effect("complete: succeeded with the result, progress 1, lease and error cleared", () =>
    Effect.gen(function* () {
      const { now, submit, claimed, settled, get, attempts } = yield* fixture
      const job = yield* submit()
      const first = yield* claimed(job.id)
      const at = yield* now
      yield* settled(job.id, first.leaseToken, outcome.retry(0, "rate_limited", "429"))
      const second = yield* claimed(job.id)

      const done = yield* settled(job.id, second.leaseToken, outcome.complete({ text: "ok", tokens: 12 }))

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
      expect(yield* get(job.id)).toEqual(done)
      const rows = yield* attempts(job.id)
      expect(rows.map((a) => a.outcome)).toEqual(["retried", "succeeded"])
      expect(rows[0]).toMatchObject({ errorClass: "rate_limited", evidence: "429", endedAt: at })
      expect(rows[1]).toMatchObject({ errorClass: null, evidence: null, endedAt: at })
    })
  )

  it.effect("fail: failed with the error class and evidence, lease cleared, a dead letter", () =>
    Effect.gen(function* () {
      const { submit, claimed, settled, attempts } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)

      const failed = yield* settled(job.id, running.leaseToken, outcome.fail("invalid_request", "400 bad prompt"))

      expect(failed).toMatchObject({
        state: "failed",
        errorClass: "invalid_request",
        lastError: "400 bad prompt",
        leaseOwner: null,
        leaseUntil: null,
        leaseToken: 1
      })
      const [attempt] = yield* attempts(job.id)
      expect(attempt).toMatchObject({ outcome: "failed", errorClass: "invalid_request", evidence: "400 bad prompt" })
    })
  )

  it.effect("retry: queued again delayMs after store time with the error; NotDue until then", () =>
    Effect.gen(function* () {
      const { now, advance, submit, claimed, settled, claim, attempts } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      const at = yield* now

      const retried = yield* settled(job.id, running.leaseToken, outcome.retry(4_000, "overloaded", "529"))

      expect(retried).toMatchObject({
        state: "queued",
        runAfter: at + 4_000,
        errorClass: "overloaded",
        lastError: "529",
        leaseOwner: null,
        leaseUntil: null,
        attempts: 1
      })
      expect(yield* claim(job.id, { at: at + 3_999 })).toMatchObject({ _tag: "NotDue", until: at + 4_000 })
      expect((yield* attempts(job.id))[0]).toMatchObject({ outcome: "retried", errorClass: "overloaded" })
      yield* advance(4_000)
      expect(yield* claimed(job.id)).toMatchObject({ attempts: 2, leaseToken: 2 })
    })
  )

  it.effect("retry whose delay reaches the deadline abandons the job (deadline) instead", () =>
    Effect.gen(function* () {
      const { now, submit, claimed, settled, attempts } = yield* fixture
      const at = yield* now
      const exact = yield* submit({ deadlineAt: at + 4_000 })
      const roomy = yield* submit({ deadlineAt: at + 4_001 })
      const a = yield* claimed(exact.id)
      const b = yield* claimed(roomy.id)

      const abandoned = yield* settled(exact.id, a.leaseToken, outcome.retry(4_000, "overloaded", "529"))
      const queued = yield* settled(roomy.id, b.leaseToken, outcome.retry(4_000, "overloaded", "529"))

      expect(abandoned).toMatchObject({
        state: "abandoned",
        abandonReason: "deadline",
        errorClass: "overloaded",
        lastError: "529",
        leaseOwner: null
      })
      expect((yield* attempts(exact.id))[0]).toMatchObject({ outcome: "abandoned", errorClass: "overloaded" })
      expect(queued).toMatchObject({ state: "queued", runAfter: at + 4_000 })
    })
  )

  it.effect("abandon: abandoned with the reason and the optional error", () =>
    Effect.gen(function* () {
      const { submit, claimed, settled, attempts } = yield* fixture
      const job = yield* submit()
      const bare = yield* submit()
      const running = yield* claimed(job.id)
      const bareRunning = yield* claimed(bare.id)

      const abandoned = yield* settled(
        job.id,
        running.leaseToken,
        outcome.abandon("deadline", "timeout", "deadline passed mid-call")
      )
      const bareAbandoned = yield* settled(bare.id, bareRunning.leaseToken, outcome.abandon("budget"))

      expect(abandoned).toMatchObject({
        state: "abandoned",
        abandonReason: "deadline",
        errorClass: "timeout",
        lastError: "deadline passed mid-call",
        leaseOwner: null,
        leaseUntil: null
      })
      expect(bareAbandoned).toMatchObject({ state: "abandoned", abandonReason: "budget", errorClass: null })
      expect((yield* attempts(job.id))[0]).toMatchObject({
        outcome: "abandoned",
        evidence: "deadline passed mid-call"
      })
    })
  )

  it.effect("release: queued and due now, the attempt handed back", () =>
    Effect.gen(function* () {
      const { now, submit, claimed, settled, attempts } = yield* fixture
      const job = yield* submit({ maxAttempts: 1 })
      const running = yield* claimed(job.id)
      const at = yield* now

      const released = yield* settled(job.id, running.leaseToken, outcome.release)

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
      expect((yield* attempts(job.id)).map((a) => a.outcome)).toEqual(["released", "running"])
    })
  )

  it.effect("throttle: queued until the wait ends, the attempt handed back, shown as rate_limited", () =>
    Effect.gen(function* () {
      const { now, advance, submit, claimed, settled, attempts } = yield* fixture
      const job = yield* submit({ maxAttempts: 1 })
      const running = yield* claimed(job.id)
      const at = yield* now
      const why = "throttled: waiting for openai:gpt-4.1:key-a (requests) until 2026-01-01T00:00:02.000Z"

      const throttled = yield* settled(job.id, running.leaseToken, outcome.throttle(2_000, why))

      expect(throttled).toMatchObject({
        state: "queued",
        runAfter: at + 2_000,
        attempts: 1,
        attemptsBase: 1,
        costCents: 0,
        errorClass: "rate_limited",
        lastError: why,
        leaseOwner: null,
        leaseUntil: null
      })
      expect(attemptsLeft(throttled)).toBe(1)
      expect((yield* attempts(job.id))[0]).toMatchObject({
        outcome: "released",
        errorClass: "rate_limited",
        evidence: why
      })
      yield* advance(2_000)
      const again = yield* claimed(job.id, "worker-b")
      expect(again).toMatchObject({ attempts: 2, attemptsBase: 1, leaseToken: 2 })
      const done = yield* settled(job.id, again.leaseToken, outcome.complete("ok"))
      expect(done).toMatchObject({ state: "succeeded", errorClass: null, lastError: null })
    })
  )

  it.effect("throttle: a wait that reaches the deadline abandons the job (deadline)", () =>
    Effect.gen(function* () {
      const { now, submit, claimed, settled } = yield* fixture
      const at = yield* now
      const job = yield* submit({ deadlineAt: at + 1_000 })
      const running = yield* claimed(job.id)
      const abandoned = yield* settled(job.id, running.leaseToken, outcome.throttle(5_000, "throttled: paused"))
      expect(abandoned).toMatchObject({
        state: "abandoned",
        abandonReason: "deadline",
        errorClass: "rate_limited",
        lastError: "throttled: paused",
        attemptsBase: 0
      })
    })
  )
}

/** Cancel, and updatedAt across every kind of write. */
const cancelTests = ({ it, fixture }: Area): void => {
  it.effect("cancel: queued is abandoned at once; running gets a request the holder sees; terminal is kept", () =>
    Effect.gen(function* () {
      const { now, advance, submit, claimed, cancel, heartbeat, get, tenant } = yield* fixture
      const queued = yield* submit()
      const cancelled = expectTag(yield* cancel(queued.id, tenant), "Cancelled")
      expect(cancelled.job).toMatchObject({ state: "abandoned", abandonReason: "cancelled" })

      const job = yield* submit()
      const running = yield* claimed(job.id)
      const requestedAt = yield* now
      const requested = expectTag(yield* cancel(job.id), "Cancelled")
      expect(requested.job).toMatchObject({ state: "running", cancelRequestedAt: requestedAt })
      yield* advance(100)
      const again = expectTag(yield* cancel(job.id), "Cancelled")
      expect(again.job).toEqual(requested.job)
      const beat = yield* heartbeat({ jobId: job.id, token: running.leaseToken, leaseMs: LEASE })
      expect(beat).toMatchObject({ _tag: "Renewed", cancelRequested: true })

      const before = yield* get(queued.id)
      expect(yield* cancel(queued.id)).toEqual({ _tag: "AlreadyTerminal", job: before })
      expect(yield* get(queued.id)).toEqual(before)
    })
  )

  it.effect("cancel of another tenant's job or of no job is NotFound, changing nothing", () =>
    Effect.gen(function* () {
      const { factory, submit, cancel, get, tenant } = yield* fixture
      const job = yield* submit()
      const unknown = yield* factory.jobId

      const hidden = yield* cancel(job.id, `${tenant}-other`)
      const missing = yield* cancel(unknown)

      expect(hidden).toEqual({ _tag: "NotFound", jobId: job.id })
      expect(missing).toEqual({ _tag: "NotFound", jobId: unknown })
      expect(yield* get(job.id)).toEqual(job)
    })
  )

  it.effect("updatedAt strictly increases on every accepted write, even when now goes backwards", () =>
    Effect.gen(function* () {
      const { store, now, item, claim, heartbeat, charge, settle, get } = yield* fixture
      const at = yield* now
      const job = expectTag(only(yield* store.submit({ items: [yield* item()], now: at - 10_000 })), "Created").job
      const claimed = expectTag(yield* claim(job.id, { owner: "w" }), "Claimed").job
      const seen: Array<number> = [job.updatedAt, claimed.updatedAt]

      yield* heartbeat({ jobId: job.id, token: claimed.leaseToken, leaseMs: LEASE, progress: 0.1 }, at - 2_000)
      seen.push((yield* get(job.id)).updatedAt)
      yield* heartbeat({ jobId: job.id, token: claimed.leaseToken, leaseMs: LEASE, progress: 0.2 }, at - 2_000)
      seen.push((yield* get(job.id)).updatedAt)
      yield* charge(
        { jobId: job.id, callId: "c", token: claimed.leaseToken, amountCents: 1, settled: false },
        at - 3_000
      )
      seen.push((yield* get(job.id)).updatedAt)
      const done = expectTag(yield* settle(job.id, claimed.leaseToken, outcome.complete(1), at - 4_000), "Settled")
      seen.push(done.job.updatedAt)

      for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!)
      // Every write after the claim went back in time: each moved updatedAt one microsecond past the claim's.
      expect(seen[seen.length - 1]! - claimed.updatedAt).toBeLessThan(1)
    })
  )
}

/** Registers the fencing, settle, heartbeat and cancel tests. @internal */
export const fencingTests = (area: Area): void => {
  describe("fencing", () => {
    fenceTests(area)
    outcomeTests(area)
    cancelTests(area)
  })
}
