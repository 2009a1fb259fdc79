/**
 * Every exported rule of `Protocol.ts`, with its boundary times. Jobs are built with the protocol's own constructors
 * (`newJob`, `claimTransition`) and, where a state is hard to reach, by patching a field of such a record.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Job, JobId } from "../src/Job.js"
import { attemptsLeft } from "../src/Job.js"
import * as Protocol from "../src/Protocol.js"

const ID = "01890a5d-ac96-774b-bcce-b302099a8057" as JobId
const T0 = 1_000_000
const LEASE = 10_000

const item = (extra: Partial<Protocol.SubmitItem> = {}): Protocol.SubmitItem => ({
  id: ID,
  queue: "q",
  type: "t",
  version: 1,
  inputHash: "h",
  input: { n: 1 },
  maxAttempts: 3,
  ...extra
})

const queued = (extra: Partial<Protocol.SubmitItem> = {}, now = T0): Job => Protocol.newJob(item(extra), now)

/** A job claimed at `now` by `w` (first claim, token 1). */
const running = (extra: Partial<Protocol.SubmitItem> = {}, now = T0): Job =>
  Protocol.claimTransition(queued(extra, now), now, { _tag: "Claim", takeover: false }, { owner: "w", leaseMs: LEASE })
    .job

const claimLease = { owner: "w2", leaseMs: LEASE }

describe("Protocol.bump", () => {
  it("is store time when the clock has moved past the previous value", () => {
    expect(Protocol.bump(1_000, 1_005)).toBe(1_005)
  })

  it("is one microsecond past the previous value when the clock stands still or moved back", () => {
    expect(Protocol.bump(1_000, 1_000)).toBe(1_000.001)
    expect(Protocol.bump(1_000.001, 999)).toBe(1_000.002)
    // A clock that moved by less than a microsecond past the previous value does not win.
    expect(Protocol.bump(1_000, 1_000.0004)).toBe(1_000.001)
  })

  it("steps exactly one microsecond at a time, without drift, also at epoch-sized times", () => {
    let small = 1_000
    for (let i = 0; i < 1_000; i++) small = Protocol.bump(small, 1_000)
    expect(small).toBe(1_001)
    const epoch = 1_700_000_000_000
    const seen = [epoch]
    for (let i = 0; i < 5; i++) seen.push(Protocol.bump(seen[seen.length - 1]!, epoch))
    for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!)
    expect(Math.round((seen[5]! - epoch) * 1_000)).toBe(5)
  })
})

describe("Protocol.budgetFits", () => {
  it("without a budget everything fits", () => {
    expect(Protocol.budgetFits(null, 1_000_000, 1_000_000)).toBe(true)
  })

  it("a spend equal to the budget stops even a zero estimate", () => {
    expect(Protocol.budgetFits(10, 10, 0)).toBe(false)
    expect(Protocol.budgetFits(0, 0, 0)).toBe(false)
  })

  it("spend plus estimate equal to the budget fits; one cent more does not", () => {
    expect(Protocol.budgetFits(10, 4, 6)).toBe(true)
    expect(Protocol.budgetFits(10, 4, 7)).toBe(false)
    expect(Protocol.budgetFits(10, 9, 0)).toBe(true)
  })

  it("a spend past the budget fits nothing", () => {
    expect(Protocol.budgetFits(10, 11, 0)).toBe(false)
  })
})

describe("Protocol.fallbackEstimate", () => {
  it("is 0 with no charges", () => {
    expect(Protocol.fallbackEstimate([])).toBe(0)
  })

  it("is the largest total charged under any one token", () => {
    const charges = [
      { token: 1, amountCents: 3 },
      { token: 2, amountCents: 5 },
      { token: 1, amountCents: 4 },
      { token: 3, amountCents: 6 }
    ]
    // Token 1 spent 7 over two calls: more than any single call.
    expect(Protocol.fallbackEstimate(charges)).toBe(7)
  })

  it("reads any iterable once (a Map's values)", () => {
    const rows = new Map([
      ["a", { token: 1, amountCents: 2 }],
      ["b", { token: 2, amountCents: 9 }]
    ])
    expect(Protocol.fallbackEstimate(rows.values())).toBe(9)
  })
})

describe("Protocol.chargeStep", () => {
  const reservation = { callId: "c1", token: 1, amountCents: 5, settled: false }
  const inserted = Protocol.chargeStep(undefined, reservation, T0)!

  it("a new call id inserts the row and moves the spend by its amount", () => {
    expect(inserted).toEqual({
      row: { callId: "c1", token: 1, amountCents: 5, settled: false, createdAt: T0, updatedAt: T0 },
      deltaCents: 5
    })
    const settledAtOnce = Protocol.chargeStep(undefined, { ...reservation, amountCents: 3, settled: true }, T0)
    expect(settledAtOnce).toEqual({
      row: { callId: "c1", token: 1, amountCents: 3, settled: true, createdAt: T0, updatedAt: T0 },
      deltaCents: 3
    })
  })

  it("a settlement of an unsettled row sets the amount, marks it settled and moves the spend by the difference", () => {
    const lower = Protocol.chargeStep(inserted.row, { ...reservation, amountCents: 2, settled: true }, T0 + 100)
    expect(lower).toEqual({
      row: { callId: "c1", token: 1, amountCents: 2, settled: true, createdAt: T0, updatedAt: T0 + 100 },
      deltaCents: -3
    })
    const higher = Protocol.chargeStep(inserted.row, { ...reservation, amountCents: 9, settled: true }, T0)
    expect(higher?.deltaCents).toBe(4)
    // Same store time as the insert: the row's updatedAt still moves forward.
    expect(higher?.row.updatedAt).toBe(T0 + 0.001)
  })

  it("is not fenced: a settlement under another token applies and the row keeps its token", () => {
    const step = Protocol.chargeStep(inserted.row, { ...reservation, token: 7, amountCents: 1, settled: true }, T0 + 1)
    expect(step?.row.token).toBe(1)
    expect(step?.deltaCents).toBe(-4)
  })

  it("a second reservation for a call id changes nothing", () => {
    expect(Protocol.chargeStep(inserted.row, { ...reservation, amountCents: 50 }, T0 + 1)).toBeUndefined()
  })

  it("nothing changes a settled row", () => {
    const settled = Protocol.chargeStep(inserted.row, { ...reservation, amountCents: 2, settled: true }, T0 + 1)!.row
    expect(Protocol.chargeStep(settled, { ...reservation, amountCents: 8, settled: true }, T0 + 2)).toBeUndefined()
    expect(Protocol.chargeStep(settled, { ...reservation, amountCents: 8, settled: false }, T0 + 2)).toBeUndefined()
  })
})

describe("Protocol.charged", () => {
  it("moves the spend by the delta and bumps updatedAt, nothing else", () => {
    const job = running()
    const after = Protocol.charged(job, -2, T0)
    expect(after).toEqual({ ...job, costCents: -2, updatedAt: Protocol.bump(job.updatedAt, T0) })
    expect(Protocol.charged(after, 5, T0 + 10)).toMatchObject({ costCents: 3, updatedAt: T0 + 10 })
  })
})

describe("Protocol.newJob and submitVerdict", () => {
  it("a new record is queued, unspent, due delayMs after now, created and updated at now", () => {
    const job = Protocol.newJob(item({ delayMs: 250, priority: 4, budgetCents: 30, deadlineAt: T0 + 60_000 }), T0)
    expect(job).toEqual({
      id: ID,
      queue: "q",
      tenant: null,
      type: "t",
      version: 1,
      requestKey: null,
      inputHash: "h",
      input: { n: 1 },
      inputRef: null,
      fingerprint: null,
      state: "queued",
      abandonReason: null,
      attempts: 0,
      attemptsBase: 0,
      maxAttempts: 3,
      leaseToken: 0,
      leaseOwner: null,
      leaseUntil: null,
      runAfter: T0 + 250,
      priority: 4,
      deadlineAt: T0 + 60_000,
      budgetCents: 30,
      costCents: 0,
      errorClass: null,
      lastError: null,
      progress: 0,
      result: null,
      cancelRequestedAt: null,
      traceId: null,
      createdAt: T0,
      updatedAt: T0
    })
  })

  it("a negative or absent delay means due now", () => {
    expect(Protocol.newJob(item({ delayMs: -500 }), T0).runAfter).toBe(T0)
    expect(Protocol.newJob(item(), T0).runAfter).toBe(T0)
  })

  it("without fingerprints, the same input under a known request key is Existing; other input is KeyReused", () => {
    const existing = queued({ requestKey: "k" })
    expect(Protocol.submitVerdict(existing, item({ requestKey: "k" }))).toBe("Existing")
    expect(Protocol.submitVerdict(existing, item({ requestKey: "k", inputHash: "other" }))).toBe("KeyReused")
    // One side without a fingerprint: the input hash alone decides.
    expect(Protocol.submitVerdict(existing, item({ requestKey: "k", fingerprint: "f1:x" }))).toBe("Existing")
    const fingerprinted = queued({ requestKey: "k", fingerprint: "f1:x" })
    expect(Protocol.submitVerdict(fingerprinted, item({ requestKey: "k", priority: 9 }))).toBe("Existing")
  })

  it("with fingerprints on both sides, the fingerprints decide, even when the input hash is the same", () => {
    const existing = queued({ requestKey: "k", fingerprint: "f1:a" })
    expect(existing.fingerprint).toBe("f1:a")
    expect(Protocol.submitVerdict(existing, item({ requestKey: "k", fingerprint: "f1:a" }))).toBe("Existing")
    expect(Protocol.submitVerdict(existing, item({ requestKey: "k", fingerprint: "f1:b" }))).toBe("KeyReused")
  })
})

describe("Protocol.fingerprint", () => {
  const fields: Protocol.FingerprintFields = {
    type: "t",
    version: 1,
    inputHash: "h",
    maxAttempts: 3,
    priority: 0,
    budgetCents: null,
    deadlineAt: null,
    schedule: { delayMs: 0 }
  }

  it("is a versioned sha-256 that equal fields always repeat", () => {
    expect(Protocol.fingerprint(fields)).toMatch(/^f1:[0-9a-f]{64}$/)
    expect(Protocol.fingerprint({ ...fields })).toBe(Protocol.fingerprint(fields))
    expect(Protocol.fingerprint({ ...fields, schedule: { delayMs: -0 } })).toBe(Protocol.fingerprint(fields))
  })

  it("changes with every field the key vouches for", () => {
    const variants: ReadonlyArray<Partial<Protocol.FingerprintFields>> = [
      { type: "u" },
      { version: 2 },
      { inputHash: "h2" },
      { maxAttempts: 4 },
      { priority: 1 },
      { budgetCents: 0 },
      { budgetCents: 10 },
      { deadlineAt: 0 },
      { deadlineAt: 5_000 },
      { schedule: { delayMs: 1 } },
      // An absolute due time is another request than a delay of the same number.
      { schedule: { runAfter: 0 } }
    ]
    const seen = new Set([Protocol.fingerprint(fields)])
    for (const variant of variants) seen.add(Protocol.fingerprint({ ...fields, ...variant }))
    expect(seen.size).toBe(variants.length + 1)
  })
})

describe("Protocol.settleReason", () => {
  it("lists the reasons in the contract's order: cancelled, deadline, exhausted, budget", () => {
    const all: Job = {
      ...queued({ deadlineAt: T0, budgetCents: 5, maxAttempts: 1 }),
      attempts: 1,
      costCents: 5,
      cancelRequestedAt: T0 - 1
    }
    expect(Protocol.settleReason(all, T0, 0)).toBe("cancelled")
    expect(Protocol.settleReason({ ...all, cancelRequestedAt: null }, T0, 0)).toBe("deadline")
    expect(Protocol.settleReason({ ...all, cancelRequestedAt: null, deadlineAt: null }, T0, 0)).toBe("exhausted")
    expect(Protocol.settleReason({ ...all, cancelRequestedAt: null, deadlineAt: null, attempts: 0 }, T0, 0)).toBe(
      "budget"
    )
  })

  it("a deadline exactly now settles; one millisecond later does not", () => {
    expect(Protocol.settleReason(queued({ deadlineAt: T0 }), T0, 0)).toBe("deadline")
    expect(Protocol.settleReason(queued({ deadlineAt: T0 + 1 }), T0, 0)).toBeUndefined()
  })

  it("an undefined estimate skips the budget", () => {
    const spent = { ...queued({ budgetCents: 5 }), costCents: 5 }
    expect(Protocol.settleReason(spent, T0, 0)).toBe("budget")
    expect(Protocol.settleReason(spent, T0, undefined)).toBeUndefined()
  })
})

describe("Protocol.claimVerdict", () => {
  it("a terminal job is Settled", () => {
    const job = running()
    for (const outcome of [
      { _tag: "Complete", result: null },
      { _tag: "Fail", errorClass: "auth", error: "no" },
      { _tag: "Abandon", reason: "cancelled" }
    ] as const) {
      const settled = Protocol.settleTransition(job, T0, outcome).job
      expect(Protocol.claimVerdict(settled, T0 + 1, 0)).toEqual({ _tag: "Settled" })
    }
  })

  it("a lease ending exactly now is Busy until its end; a millisecond later it is taken over", () => {
    const job = running()
    const end = T0 + LEASE
    expect(Protocol.claimVerdict(job, end, 0)).toEqual({ _tag: "Busy", until: end })
    expect(Protocol.claimVerdict(job, end + 1, 0)).toEqual({ _tag: "Claim", takeover: true })
  })

  it("runAfter exactly now is due; a millisecond in the future is NotDue until then", () => {
    const job = queued({ delayMs: 500 })
    expect(Protocol.claimVerdict(job, T0 + 500, 0)).toEqual({ _tag: "Claim", takeover: false })
    expect(Protocol.claimVerdict(job, T0 + 499, 0)).toEqual({ _tag: "NotDue", until: T0 + 500 })
  })

  it("a claimable job with a settle reason is settled, with the takeover flag of the claim", () => {
    expect(Protocol.claimVerdict(queued({ deadlineAt: T0 }), T0, 0)).toEqual({
      _tag: "Settle",
      takeover: false,
      reason: "deadline"
    })
    const lapsed = { ...running({ maxAttempts: 1 }) }
    expect(Protocol.claimVerdict(lapsed, T0 + LEASE + 1, 0)).toEqual({
      _tag: "Settle",
      takeover: true,
      reason: "exhausted"
    })
  })

  it("budget: spend equal to the budget stops a zero estimate; spend plus estimate equal to it claims", () => {
    const job = { ...queued({ budgetCents: 10 }), costCents: 10 }
    expect(Protocol.claimVerdict(job, T0, 0)).toEqual({ _tag: "Settle", takeover: false, reason: "budget" })
    expect(Protocol.claimVerdict({ ...job, costCents: 4 }, T0, 6)).toEqual({ _tag: "Claim", takeover: false })
    expect(Protocol.claimVerdict({ ...job, costCents: 4 }, T0, 7)).toEqual({
      _tag: "Settle",
      takeover: false,
      reason: "budget"
    })
  })
})

describe("Protocol.isClaimable", () => {
  it("holds exactly where claimVerdict claims or settles", () => {
    const job = running()
    expect(Protocol.isClaimable(job, T0 + LEASE)).toBe(false)
    expect(Protocol.isClaimable(job, T0 + LEASE + 1)).toBe(true)
    const later = queued({ delayMs: 500 })
    expect(Protocol.isClaimable(later, T0 + 499)).toBe(false)
    expect(Protocol.isClaimable(later, T0 + 500)).toBe(true)
    expect(Protocol.isClaimable(Protocol.settleTransition(job, T0, { _tag: "Complete", result: 1 }).job, T0)).toBe(
      false
    )
  })
})

describe("Protocol.claimTransition", () => {
  it("a first claim runs the job under token 1 until now + leaseMs and starts an attempt row", () => {
    const job = { ...queued(), cancelRequestedAt: T0 - 5 }
    const t = Protocol.claimTransition(job, T0, { _tag: "Claim", takeover: false }, claimLease)
    expect(t.job).toEqual({
      ...job,
      state: "running",
      attempts: 1,
      leaseToken: 1,
      leaseOwner: "w2",
      leaseUntil: T0 + LEASE,
      cancelRequestedAt: null,
      updatedAt: T0 + 0.001
    })
    expect(t.start).toEqual({ token: 1, worker: "w2" })
    expect(t.end).toBeUndefined()
    expect(t.becameFailed).toBe(false)
  })

  it("a takeover ends the previous holder's attempt expired and starts the next token", () => {
    const job = running()
    const at = T0 + LEASE + 1
    const t = Protocol.claimTransition(job, at, { _tag: "Claim", takeover: true }, claimLease)
    expect(t.job).toMatchObject({
      state: "running",
      attempts: 2,
      leaseToken: 2,
      leaseOwner: "w2",
      leaseUntil: at + LEASE
    })
    expect(t.end).toEqual({ token: 1, outcome: "expired", errorClass: "lease_expired", evidence: null })
    expect(t.start).toEqual({ token: 2, worker: "w2" })
  })

  it("settles by reason: cancelled, deadline and budget abandon; the lease is cleared", () => {
    const cancelled = Protocol.claimTransition(
      { ...queued(), cancelRequestedAt: T0 },
      T0,
      { _tag: "Settle", takeover: false, reason: "cancelled" },
      claimLease
    )
    expect(cancelled.job).toMatchObject({ state: "abandoned", abandonReason: "cancelled", attempts: 0 })
    expect(cancelled.end).toBeUndefined()
    expect(cancelled.start).toBeUndefined()
    const lapsed = running()
    for (const reason of ["cancelled", "deadline", "budget"] as const) {
      const t = Protocol.claimTransition(lapsed, T0 + LEASE + 1, { _tag: "Settle", takeover: true, reason }, claimLease)
      expect(t.job).toMatchObject({
        state: "abandoned",
        abandonReason: reason,
        leaseOwner: null,
        leaseUntil: null,
        leaseToken: 1,
        attempts: 1
      })
      expect(t.end).toEqual({ token: 1, outcome: "expired", errorClass: "lease_expired", evidence: null })
      expect(t.start).toBeUndefined()
      expect(t.becameFailed).toBe(false)
    }
  })

  it("an exhausted run fails: a queued job keeps its error class, a takeover records lease_expired", () => {
    const retried = Protocol.settleTransition(running({ maxAttempts: 1 }), T0, {
      _tag: "Retry",
      delayMs: 0,
      errorClass: "server_error",
      error: "500"
    }).job
    const fromQueue = Protocol.claimTransition(
      retried,
      T0,
      { _tag: "Settle", takeover: false, reason: "exhausted" },
      claimLease
    )
    expect(fromQueue.job).toMatchObject({ state: "failed", errorClass: "server_error" })
    expect(fromQueue.becameFailed).toBe(true)
    const taken = Protocol.claimTransition(
      running({ maxAttempts: 1 }),
      T0 + LEASE + 1,
      { _tag: "Settle", takeover: true, reason: "exhausted" },
      claimLease
    )
    expect(taken.job).toMatchObject({ state: "failed", errorClass: "lease_expired", leaseOwner: null })
    expect(taken.becameFailed).toBe(true)
  })
})

describe("Protocol.holds and heartbeatTransition", () => {
  it("the fence holds only for a running job under exactly that token", () => {
    const job = running()
    expect(Protocol.holds(job, 1)).toBe(true)
    expect(Protocol.holds(job, 2)).toBe(false)
    expect(Protocol.holds(Protocol.settleTransition(job, T0, { _tag: "Release" }).job, 1)).toBe(false)
  })

  it("a heartbeat runs the lease to now + leaseMs, also after it lapsed, and keeps progress unless given", () => {
    const job = running()
    const lapsed = T0 + LEASE + 500
    const t = Protocol.heartbeatTransition(job, lapsed, { leaseMs: 2_000 })
    expect(t.job).toEqual({ ...job, leaseUntil: lapsed + 2_000, updatedAt: lapsed })
    expect(t.end).toBeUndefined()
    expect(t.start).toBeUndefined()
  })

  it("a heartbeat never moves the lease's end back: a shorter renewal keeps the later end", () => {
    const job = running()
    const later = Protocol.heartbeatTransition(job, T0 + 100, { leaseMs: 10 * LEASE }).job
    // An older renewal applied after it (on Postgres, its transaction began first): the end stays.
    const older = Protocol.heartbeatTransition(later, T0 + 50, { leaseMs: LEASE }).job
    expect(later.leaseUntil).toBe(T0 + 100 + 10 * LEASE)
    expect(older.leaseUntil).toBe(later.leaseUntil)
    expect(older.updatedAt).toBeGreaterThan(later.updatedAt)
  })

  it("progress is clamped to 0..1 and updatedAt moves even at the same store time", () => {
    const job = running()
    expect(Protocol.heartbeatTransition(job, T0, { leaseMs: LEASE, progress: 1.5 }).job).toMatchObject({
      progress: 1,
      updatedAt: T0 + 0.002
    })
    expect(Protocol.heartbeatTransition(job, T0, { leaseMs: LEASE, progress: -0.5 }).job.progress).toBe(0)
    expect(Protocol.heartbeatTransition(job, T0, { leaseMs: LEASE, progress: 0.25 }).job.progress).toBe(0.25)
  })
})

describe("Protocol.settleTransition", () => {
  const at = T0 + 1_000
  const cleared = { leaseOwner: null, leaseUntil: null }

  it("Complete: succeeded with the result, progress 1, errors cleared, attempt succeeded", () => {
    const job = { ...running(), errorClass: "timeout" as const, lastError: "slow" }
    const t = Protocol.settleTransition(job, at, { _tag: "Complete", result: { ok: true } })
    expect(t.job).toEqual({
      ...job,
      ...cleared,
      state: "succeeded",
      result: { ok: true },
      progress: 1,
      errorClass: null,
      lastError: null,
      updatedAt: at
    })
    expect(t.end).toEqual({ token: 1, outcome: "succeeded", errorClass: null, evidence: null })
    expect(t.becameFailed).toBe(false)
  })

  it("Retry: queued again, due delayMs after the write, the attempt retried with its evidence", () => {
    const t = Protocol.settleTransition(running(), at, {
      _tag: "Retry",
      delayMs: 2_500,
      errorClass: "rate_limited",
      error: "429"
    })
    expect(t.job).toMatchObject({
      ...cleared,
      state: "queued",
      runAfter: at + 2_500,
      errorClass: "rate_limited",
      lastError: "429",
      attempts: 1,
      attemptsBase: 0
    })
    expect(t.end).toEqual({ token: 1, outcome: "retried", errorClass: "rate_limited", evidence: "429" })
    const negative = Protocol.settleTransition(running(), at, {
      _tag: "Retry",
      delayMs: -10,
      errorClass: "timeout",
      error: "slow"
    })
    expect(negative.job.runAfter).toBe(at)
  })

  it("Retry reaching the deadline abandons(deadline) instead; a millisecond before it, it queues", () => {
    const job = running({ deadlineAt: at + 2_500 })
    const outcome = { _tag: "Retry", delayMs: 2_500, errorClass: "rate_limited", error: "429" } as const
    const reached = Protocol.settleTransition(job, at, outcome)
    expect(reached.job).toMatchObject({
      ...cleared,
      state: "abandoned",
      abandonReason: "deadline",
      errorClass: "rate_limited",
      lastError: "429"
    })
    expect(reached.end).toEqual({ token: 1, outcome: "abandoned", errorClass: "rate_limited", evidence: "429" })
    expect(Protocol.settleTransition(job, at, { ...outcome, delayMs: 2_499 }).job.state).toBe("queued")
  })

  it("Fail: failed, a dead letter arrival, the attempt failed with its evidence", () => {
    const t = Protocol.settleTransition(running(), at, { _tag: "Fail", errorClass: "auth", error: "401" })
    expect(t.job).toMatchObject({ ...cleared, state: "failed", errorClass: "auth", lastError: "401" })
    expect(t.end).toEqual({ token: 1, outcome: "failed", errorClass: "auth", evidence: "401" })
    expect(t.becameFailed).toBe(true)
  })

  it("Abandon: abandoned for its reason; without an error class the job's own is kept", () => {
    const job = { ...running(), errorClass: "timeout" as const, lastError: "slow" }
    const bare = Protocol.settleTransition(job, at, { _tag: "Abandon", reason: "budget" })
    expect(bare.job).toMatchObject({
      ...cleared,
      state: "abandoned",
      abandonReason: "budget",
      errorClass: "timeout",
      lastError: "slow"
    })
    expect(bare.end).toEqual({ token: 1, outcome: "abandoned", errorClass: null, evidence: null })
    const given = Protocol.settleTransition(job, at, {
      _tag: "Abandon",
      reason: "cancelled",
      errorClass: "cancelled",
      error: "cancel requested"
    })
    expect(given.job).toMatchObject({
      abandonReason: "cancelled",
      errorClass: "cancelled",
      lastError: "cancel requested"
    })
    expect(given.end).toEqual({ token: 1, outcome: "abandoned", errorClass: "cancelled", evidence: "cancel requested" })
  })

  it("Release: queued, due now, the attempt not counted against the run", () => {
    const job = running()
    const t = Protocol.settleTransition(job, at, { _tag: "Release" })
    expect(t.job).toMatchObject({ ...cleared, state: "queued", runAfter: at, attempts: 1, attemptsBase: 1 })
    expect(attemptsLeft(t.job)).toBe(attemptsLeft(queued()))
    expect(t.end).toEqual({ token: 1, outcome: "released", errorClass: null, evidence: null })
  })

  it("a settle of a job that is not running is a defect of the caller", () => {
    expect(() => Protocol.settleTransition(queued(), at, { _tag: "Complete", result: null })).toThrow(
      /illegal transition complete from queued/
    )
  })
})

describe("Protocol.cancelVerdict and cancelTransition", () => {
  it("queued abandons, running requests once, terminal cannot be undone", () => {
    const job = running()
    expect(Protocol.cancelVerdict(queued())).toBe("Abandon")
    expect(Protocol.cancelVerdict(job)).toBe("Request")
    expect(Protocol.cancelVerdict({ ...job, cancelRequestedAt: T0 })).toBe("Unchanged")
    for (const outcome of [
      { _tag: "Complete", result: null },
      { _tag: "Fail", errorClass: "auth", error: "no" },
      { _tag: "Abandon", reason: "deadline" }
    ] as const) {
      expect(Protocol.cancelVerdict(Protocol.settleTransition(job, T0, outcome).job)).toBe("AlreadyTerminal")
    }
  })

  it("Abandon ends a queued job abandoned(cancelled); Request flags a running one and keeps its lease", () => {
    const abandoned = Protocol.cancelTransition(queued(), T0 + 5, "Abandon")
    expect(abandoned.job).toMatchObject({ state: "abandoned", abandonReason: "cancelled", updatedAt: T0 + 5 })
    expect(abandoned.end).toBeUndefined()
    const job = running()
    const requested = Protocol.cancelTransition(job, T0 + 5, "Request")
    expect(requested.job).toEqual({ ...job, cancelRequestedAt: T0 + 5, updatedAt: T0 + 5 })
    expect(requested.end).toBeUndefined()
  })
})

describe("Protocol.replayable and replayTransition", () => {
  const failed = Protocol.settleTransition(running({ tenant: "acme" }), T0, {
    _tag: "Fail",
    errorClass: "auth",
    error: "401"
  }).job

  it("only a failed job is replayable", () => {
    expect(Protocol.replayable(failed)).toBe(true)
    expect(Protocol.replayable(queued())).toBe(false)
    expect(Protocol.replayable(running())).toBe(false)
    expect(Protocol.replayable(Protocol.settleTransition(running(), T0, { _tag: "Complete", result: 1 }).job)).toBe(
      false
    )
    expect(
      Protocol.replayable(Protocol.settleTransition(running(), T0, { _tag: "Abandon", reason: "budget" }).job)
    ).toBe(false)
  })

  it("every given filter must match", () => {
    expect(Protocol.replayable(failed, { queue: "q", tenant: "acme", errorClass: "auth", type: "t" })).toBe(true)
    expect(Protocol.replayable(failed, { queue: "other" })).toBe(false)
    expect(Protocol.replayable(failed, { tenant: "other" })).toBe(false)
    expect(Protocol.replayable(failed, { errorClass: "timeout" })).toBe(false)
    expect(Protocol.replayable(failed, { type: "other" })).toBe(false)
    expect(Protocol.replayable({ ...failed, tenant: null }, { tenant: "acme" })).toBe(false)
  })

  it("a replay queues a fresh run due now; history and spend stay", () => {
    const spent = { ...failed, costCents: 7, cancelRequestedAt: T0 - 1 }
    const t = Protocol.replayTransition(spent, T0 + 50)
    expect(t.job).toEqual({
      ...spent,
      state: "queued",
      runAfter: T0 + 50,
      attemptsBase: 1,
      abandonReason: null,
      cancelRequestedAt: null,
      leaseOwner: null,
      leaseUntil: null,
      updatedAt: T0 + 50
    })
    expect(attemptsLeft(t.job)).toBe(3)
    expect(t.end).toBeUndefined()
    expect(t.becameFailed).toBe(false)
  })
})

describe("Protocol.sweepVerdict and sweepTransition", () => {
  const end = T0 + LEASE

  it("a lease ending exactly now is left alone; a millisecond later it has expired", () => {
    const job = running()
    expect(Protocol.sweepVerdict(job, end)).toBeUndefined()
    expect(Protocol.sweepVerdict(job, end + 1)).toEqual({ _tag: "Expired", reason: "requeue" })
  })

  it("an expired lease is settled by cancel, deadline or exhaustion, never by budget", () => {
    const job = running({ budgetCents: 5, deadlineAt: end + 1 })
    expect(Protocol.sweepVerdict({ ...job, cancelRequestedAt: T0 }, end + 1)).toEqual({
      _tag: "Expired",
      reason: "cancelled"
    })
    expect(Protocol.sweepVerdict(job, end + 1)).toEqual({ _tag: "Expired", reason: "deadline" })
    expect(Protocol.sweepVerdict({ ...job, deadlineAt: null, maxAttempts: 1 }, end + 1)).toEqual({
      _tag: "Expired",
      reason: "exhausted"
    })
    expect(Protocol.sweepVerdict({ ...job, deadlineAt: null, costCents: 5 }, end + 1)).toEqual({
      _tag: "Expired",
      reason: "requeue"
    })
  })

  it("a queued job is overdue from its deadline exactly; before it, or without one, it is left alone", () => {
    expect(Protocol.sweepVerdict(queued({ deadlineAt: T0 + 10 }), T0 + 10)).toEqual({ _tag: "Overdue" })
    expect(Protocol.sweepVerdict(queued({ deadlineAt: T0 + 10 }), T0 + 9)).toBeUndefined()
    expect(Protocol.sweepVerdict(queued(), T0 + 1e9)).toBeUndefined()
  })

  it("terminal jobs are never swept", () => {
    const done = Protocol.settleTransition(running({ deadlineAt: T0 + 1 }), T0, { _tag: "Complete", result: 1 }).job
    expect(Protocol.sweepVerdict(done, T0 + 1e9)).toBeUndefined()
  })

  it("Overdue abandons(deadline) without an attempt row", () => {
    const t = Protocol.sweepTransition(queued({ deadlineAt: T0 + 10 }), T0 + 10, { _tag: "Overdue" })
    expect(t.job).toMatchObject({ state: "abandoned", abandonReason: "deadline", updatedAt: T0 + 10 })
    expect(t.end).toBeUndefined()
  })

  it("Expired: requeue is due now; every expired lease ends its attempt expired", () => {
    const job = running()
    const expired = { token: 1, outcome: "expired", errorClass: "lease_expired", evidence: null }
    const requeued = Protocol.sweepTransition(job, end + 1, { _tag: "Expired", reason: "requeue" })
    expect(requeued.job).toMatchObject({
      state: "queued",
      runAfter: end + 1,
      leaseOwner: null,
      leaseUntil: null,
      leaseToken: 1,
      attempts: 1
    })
    expect(requeued.end).toEqual(expired)
    const cancelled = Protocol.sweepTransition(job, end + 1, { _tag: "Expired", reason: "cancelled" })
    expect(cancelled.job).toMatchObject({ state: "abandoned", abandonReason: "cancelled" })
    expect(cancelled.end).toEqual(expired)
    const late = Protocol.sweepTransition(job, end + 1, { _tag: "Expired", reason: "deadline" })
    expect(late.job).toMatchObject({ state: "abandoned", abandonReason: "deadline" })
    expect(late.end).toEqual(expired)
    const exhausted = Protocol.sweepTransition(job, end + 1, { _tag: "Expired", reason: "exhausted" })
    expect(exhausted.job).toMatchObject({ state: "failed", errorClass: "lease_expired" })
    expect(exhausted.end).toEqual(expired)
    expect(exhausted.becameFailed).toBe(true)
  })
})

describe("Protocol.isStale and lastTouched", () => {
  const R = 30_000

  it("the last touch is the later of updatedAt and the republish mark", () => {
    const job = queued()
    expect(Protocol.lastTouched(job, null)).toBe(T0)
    expect(Protocol.lastTouched(job, T0 + 5)).toBe(T0 + 5)
    expect(Protocol.lastTouched(job, T0 - 5)).toBe(T0)
  })

  it("a due queued job untouched for more than republishAfterMs is stale; for exactly that long it is not", () => {
    const job = queued()
    expect(Protocol.isStale(job, null, T0 + R + 1, R)).toBe(true)
    expect(Protocol.isStale(job, null, T0 + R, R)).toBe(false)
  })

  it("a job touched at now is not stale at now, even with republishAfterMs 0", () => {
    const job = queued()
    expect(Protocol.isStale(job, null, T0, 0)).toBe(false)
    expect(Protocol.isStale(job, T0 + 1, T0 + 1, 0)).toBe(false)
    expect(Protocol.isStale(job, T0 + 1, T0 + 2, 0)).toBe(true)
  })

  it("a republish mark restarts the wait", () => {
    const job = queued()
    expect(Protocol.isStale(job, T0 + R, T0 + R + 1, R)).toBe(false)
    expect(Protocol.isStale(job, T0 + R, T0 + 2 * R, R)).toBe(false)
    expect(Protocol.isStale(job, T0 + R, T0 + 2 * R + 1, R)).toBe(true)
  })

  it("a job not due, past its deadline or not queued is never stale", () => {
    const at = T0 + R + 1
    expect(Protocol.isStale(queued({ delayMs: 2 * R }), null, at, R)).toBe(false)
    expect(Protocol.isStale(queued({ deadlineAt: at }), null, at, R)).toBe(false)
    expect(Protocol.isStale(queued({ deadlineAt: at + 1 }), null, at, R)).toBe(true)
    expect(Protocol.isStale(running(), null, at, R)).toBe(false)
  })
})

describe("Protocol.defaults", () => {
  it("a sweep writes at most 1000 jobs and republishes after 30 s; a listing returns 50", () => {
    expect(Protocol.defaults).toEqual({ sweepLimit: 1000, republishAfterMs: 30_000, listLimit: 50 })
  })
})
