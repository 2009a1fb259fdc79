/**
 * Store conformance, charges and budgets: the ledger is keyed by call id and counted once (`Protocol.chargeStep`),
 * a reservation is replaced by its settlement and a settled row is final, charges are accepted from stale tokens and
 * on finished jobs (the money was spent), an amount below 0 is refused (`Protocol.chargeProblem`), `costCents` is
 * always the ledger's sum, and a claim never starts an
 * attempt the budget cannot cover (`Protocol.budgetFits`, with `Protocol.fallbackEstimate` when the claim gives no
 * estimate).
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import { Effect } from "effect"
import { type Area, expectTag, LEASE, outcome } from "./fixture.js"

/** The ledger. */
const ledgerTests = ({ it, fixture }: Area): void => {
  it.effect("a reservation then its settlement, each call id counted once", () =>
    Effect.gen(function* () {
      const { now, submit, claimed, charged, get, charges } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      const at = yield* now
      const base = { jobId: job.id, token: running.leaseToken }

      const spend = [
        yield* charged({ ...base, callId: "call-1", amountCents: 10, settled: false }),
        yield* charged({ ...base, callId: "call-1", amountCents: 99, settled: false }),
        yield* charged({ ...base, callId: "call-1", amountCents: 7.5, settled: true }),
        yield* charged({ ...base, callId: "call-1", amountCents: 50, settled: true }),
        yield* charged({ ...base, callId: "call-1", amountCents: 50, settled: false }),
        yield* charged({ ...base, callId: "call-2", amountCents: 3, settled: true }),
        yield* charged({ ...base, callId: "call-2", amountCents: 3, settled: true })
      ]

      expect(spend).toEqual([10, 10, 7.5, 7.5, 7.5, 10.5, 10.5])
      expect((yield* get(job.id)).costCents).toBe(10.5)
      const rows = yield* charges(job.id)
      expect(rows).toEqual([
        {
          jobId: job.id,
          callId: "call-1",
          token: running.leaseToken,
          amountCents: 7.5,
          settled: true,
          createdAt: at,
          updatedAt: rows[0]!.updatedAt
        },
        {
          jobId: job.id,
          callId: "call-2",
          token: running.leaseToken,
          amountCents: 3,
          settled: true,
          createdAt: at,
          updatedAt: at
        }
      ])
      // The settlement wrote the reservation's row again: strictly after it, in the same millisecond.
      expect(rows[0]!.updatedAt).toBeGreaterThan(at)
      expect(rows[0]!.updatedAt).toBeLessThan(at + 1)
    })
  )

  it.effect("a charge that changes nothing leaves the job record alone", () =>
    Effect.gen(function* () {
      const { submit, claimed, charged, get } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      yield* charged({ jobId: job.id, callId: "c", token: running.leaseToken, amountCents: 2, settled: true })
      const before = yield* get(job.id)

      const again = yield* charged({
        jobId: job.id,
        callId: "c",
        token: running.leaseToken,
        amountCents: 9,
        settled: true
      })

      expect(again).toBe(2)
      expect(yield* get(job.id)).toEqual(before)
    })
  )

  it.effect("charges are accepted from stale tokens and on finished jobs; an unknown job is NotFound", () =>
    Effect.gen(function* () {
      const { factory, advance, submit, claimed, settled, charged, charge, get, charges } = yield* fixture
      const job = yield* submit()
      const stale = yield* claimed(job.id, "worker-a", 1_000)
      yield* advance(1_001)
      const current = yield* claimed(job.id, "worker-b")

      yield* charged({ jobId: job.id, callId: "stale", token: stale.leaseToken, amountCents: 4, settled: true })
      yield* settled(job.id, current.leaseToken, outcome.complete(null))
      const after = yield* charged({
        jobId: job.id,
        callId: "late",
        token: current.leaseToken,
        amountCents: 6,
        settled: true
      })

      expect(after).toBe(10)
      expect(yield* get(job.id)).toMatchObject({ state: "succeeded", costCents: 10 })
      expect((yield* charges(job.id)).map((c) => [c.callId, c.token])).toEqual([
        ["stale", stale.leaseToken],
        ["late", current.leaseToken]
      ])
      const unknown = yield* factory.jobId
      expect(yield* charge({ jobId: unknown, callId: "x", token: 1, amountCents: 1, settled: true })).toEqual({
        _tag: "NotFound",
        jobId: unknown
      })
      expect(yield* charges(unknown)).toEqual([])
    })
  )

  it.effect("an amount below 0 or not a finite number fails the whole call with Constraint and writes nothing", () =>
    Effect.gen(function* () {
      const { store, submit, claimed, charged, get, charges } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      const base = { jobId: job.id, token: running.leaseToken }
      yield* charged({ ...base, callId: "kept", amountCents: 5, settled: false })
      const before = yield* get(job.id)

      const refused = yield* Effect.forEach([-0.5, Number.NaN, Number.POSITIVE_INFINITY], (amountCents) =>
        Effect.flip(
          store.charge({
            items: [
              { ...base, callId: "fine", amountCents: 1, settled: true },
              { ...base, callId: "kept", amountCents, settled: true }
            ],
            now: undefined
          })
        )
      )

      expect(refused.map((error) => [error.reason, error.operation])).toEqual([
        ["Constraint", "charge"],
        ["Constraint", "charge"],
        ["Constraint", "charge"]
      ])
      expect(yield* get(job.id)).toEqual(before)
      expect((yield* charges(job.id)).map((c) => [c.callId, c.amountCents, c.settled])).toEqual([["kept", 5, false]])
    })
  )

  it.effect("heartbeat reports the job's spend", () =>
    Effect.gen(function* () {
      const { submit, claimed, charged, heartbeat } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      yield* charged({ jobId: job.id, callId: "c", token: running.leaseToken, amountCents: 3.5, settled: false })

      const beat = yield* heartbeat({ jobId: job.id, token: running.leaseToken, leaseMs: LEASE })

      expect(beat).toMatchObject({ _tag: "Renewed", costCents: 3.5 })
    })
  )
}

/** Budgets. */
const budgetTests = ({ it, fixture }: Area): void => {
  it.effect("budget: claim abandons when spend plus the estimate would exceed it, never overspending", () =>
    Effect.gen(function* () {
      const { submit, claimed, charged, settled, claim, get } = yield* fixture
      const job = yield* submit({ budgetCents: 10, maxAttempts: 10 })
      const first = yield* claimed(job.id)
      yield* charged({ jobId: job.id, callId: "c1", token: first.leaseToken, amountCents: 6, settled: true })
      yield* settled(job.id, first.leaseToken, outcome.retry(0, "timeout", "t"))

      const exact = expectTag(yield* claim(job.id, { owner: "w", estimateCents: 4 }), "Claimed").job
      yield* charged({ jobId: job.id, callId: "c2", token: exact.leaseToken, amountCents: 3, settled: true })
      yield* settled(job.id, exact.leaseToken, outcome.retry(0, "timeout", "t"))
      const over = yield* claim(job.id, { owner: "w", estimateCents: 2 })

      expect(over).toMatchObject({
        _tag: "Settled",
        job: { state: "abandoned", abandonReason: "budget", costCents: 9 }
      })
      expect((yield* get(job.id)).attempts).toBe(2)
    })
  )

  it.effect("budget: without an estimate the largest spend under one earlier token serves", () =>
    Effect.gen(function* () {
      const { submit, claimed, charged, settled, claim } = yield* fixture
      const job = yield* submit({ budgetCents: 20, maxAttempts: 10 })
      const first = yield* claimed(job.id)
      yield* charged({ jobId: job.id, callId: "c1", token: first.leaseToken, amountCents: 4, settled: true })
      yield* charged({ jobId: job.id, callId: "c2", token: first.leaseToken, amountCents: 4, settled: true })
      yield* settled(job.id, first.leaseToken, outcome.retry(0, "timeout", "t"))
      const second = yield* claimed(job.id)
      yield* charged({ jobId: job.id, callId: "c3", token: second.leaseToken, amountCents: 5, settled: true })
      yield* settled(job.id, second.leaseToken, outcome.retry(0, "timeout", "t"))

      // Spent 13; the largest attempt spent 8 (two calls under token 1): 13 + 8 > 20.
      const result = yield* claim(job.id, { owner: "w" })

      expect(result).toMatchObject({ _tag: "Settled", job: { state: "abandoned", abandonReason: "budget" } })

      const roomy = yield* submit({ budgetCents: 20, maxAttempts: 10 })
      const r1 = yield* claimed(roomy.id)
      yield* charged({ jobId: roomy.id, callId: "r1", token: r1.leaseToken, amountCents: 8, settled: true })
      yield* settled(roomy.id, r1.leaseToken, outcome.retry(0, "timeout", "t"))
      // Spent 8; 8 + 8 <= 20.
      expect((yield* claimed(roomy.id)).attempts).toBe(2)
    })
  )

  it.effect("budget: spend at or over the budget abandons even with a zero estimate", () =>
    Effect.gen(function* () {
      const { submit, claimed, charged, settled, claim } = yield* fixture
      const job = yield* submit({ budgetCents: 5 })
      const first = yield* claimed(job.id)
      yield* charged({ jobId: job.id, callId: "c1", token: first.leaseToken, amountCents: 5, settled: false })
      yield* settled(job.id, first.leaseToken, outcome.release)

      const result = yield* claim(job.id, { owner: "w", estimateCents: 0 })

      expect(result).toMatchObject({ _tag: "Settled", job: { state: "abandoned", abandonReason: "budget" } })
    })
  )

  it.effect("budget: claimNext judges each job by the fallback estimate", () =>
    Effect.gen(function* () {
      const { store, queue, now, submit, claimed, charged, settled } = yield* fixture
      const job = yield* submit({ budgetCents: 10, maxAttempts: 10 })
      const first = yield* claimed(job.id)
      yield* charged({ jobId: job.id, callId: "c1", token: first.leaseToken, amountCents: 6, settled: true })
      yield* settled(job.id, first.leaseToken, outcome.retry(0, "timeout", "t"))

      // Spent 6; the largest attempt spent 6: 6 + 6 > 10.
      const reply = yield* store.claimNext({ queue, max: 5, owner: "w", leaseMs: LEASE, now: yield* now })

      expect(reply.results).toMatchObject([{ _tag: "Settled", job: { state: "abandoned", abandonReason: "budget" } }])
    })
  )
}

/** Registers the charge and budget tests. @internal */
export const chargeTests = (area: Area): void => {
  describe("charges and budgets", () => {
    ledgerTests(area)
    budgetTests(area)
  })
}
