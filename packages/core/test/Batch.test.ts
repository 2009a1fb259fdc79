/**
 * The batch rules of `Batch.ts`, each with the case it exists for: counts moved by item writes, the finishing rule
 * (callbacks once, `onSuccess` only without failures, finished again after a replay without a second callback), the
 * batch budget and cancel in the claim verdict, chunk placement and idempotent opening.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Batch from "../src/Batch.js"
import type { Job, JobId } from "../src/Job.js"
import * as Protocol from "../src/Protocol.js"

const T0 = 1_000_000
const BATCH = "01890a5d-ac96-774b-bcce-b302099a8000" as Batch.BatchId
const jobId = (n: number) => `01890a5d-ac96-774b-bcce-b302099a8${String(n).padStart(3, "0")}` as JobId

const callback = (n: number): Batch.Callback => ({
  id: jobId(900 + n),
  queue: "q",
  type: "done",
  version: 1,
  inputHash: "h",
  input: { batchId: BATCH },
  maxAttempts: 3
})

const spec = (extra: Partial<Batch.BatchSpec> = {}): Batch.BatchSpec => ({
  id: BATCH,
  requestKey: "import-1",
  tenant: "t",
  fingerprint: "b1:x",
  size: 2,
  onComplete: callback(1),
  onSuccess: callback(2),
  ...extra
})

const item = (n: number, extra: Partial<Protocol.SubmitItem> = {}): Protocol.SubmitItem => ({
  id: jobId(n),
  queue: "q",
  type: "t",
  version: 1,
  inputHash: "h",
  input: { n },
  maxAttempts: 1,
  ...extra
})

/** A batch with its two items landed, and the two queued jobs. */
const filled = (extra: Partial<Batch.BatchSpec> = {}) => {
  const batch = Batch.newBatch(spec(extra), T0)
  const jobs = [0, 1].map((n) => Protocol.newJob(Batch.itemOf(batch, item(n)), T0))
  return { batch: Batch.appended(batch, 2, T0), jobs }
}

const claimed = (job: Job, now: number) =>
  Protocol.claimTransition(job, now, { _tag: "Claim", takeover: false }, { owner: "w", leaseMs: 1_000 }).job

const settled = (job: Job, now: number, outcome: Protocol.Outcome) => Protocol.settleTransition(job, now, outcome).job

const ok: Protocol.Outcome = { _tag: "Complete", result: null }
const fail: Protocol.Outcome = { _tag: "Fail", errorClass: "auth", error: "bad key" }

/** Runs one item through claim and settle, applying each write to the batch. */
const run = (batch: Batch.Batch, job: Job, now: number, outcome: Protocol.Outcome) => {
  const running = claimed(job, now)
  const a = Batch.afterItemWrite(batch, job, running)
  const done = settled(running, now + 1, outcome)
  const b = Batch.afterItemWrite(a.batch, running, done)
  return { batch: b.batch, job: done, callbacks: [...a.callbacks, ...b.callbacks] }
}

describe("Batch counts and finishing", () => {
  it("moves one count per item transition and finishes on the last terminal item, with both callbacks", () => {
    const { batch, jobs } = filled()
    expect(batch.counts).toEqual({ queued: 2, running: 0, succeeded: 0, failed: 0, abandoned: 0 })
    const first = run(batch, jobs[0]!, T0 + 10, ok)
    expect(first.batch.counts).toEqual({ queued: 1, running: 0, succeeded: 1, failed: 0, abandoned: 0 })
    expect(first.batch.finishedAt).toBeNull()
    expect(first.callbacks).toEqual([])
    const last = run(first.batch, jobs[1]!, T0 + 20, ok)
    expect(last.batch.finishedAt).toBe(T0 + 21)
    expect(last.callbacks.map((c) => [c.id, c.requestKey, c.tenant])).toEqual([
      [jobId(901), Batch.callbackKey(BATCH, "onComplete"), "t"],
      [jobId(902), Batch.callbackKey(BATCH, "onSuccess"), "t"]
    ])
    expect([last.batch.onCompleteJobId, last.batch.onSuccessJobId]).toEqual([jobId(901), jobId(902)])
  })

  it("enqueues onSuccess only when no item failed, and only once even after a replay finishes it again", () => {
    const { batch, jobs } = filled()
    const first = run(batch, jobs[0]!, T0, ok)
    const last = run(first.batch, jobs[1]!, T0 + 10, fail)
    expect(last.callbacks.map((c) => c.id)).toEqual([jobId(901)])
    expect(last.batch.onSuccessJobId).toBeNull()
    // Replay the failed item: no longer finished; its success then finishes the batch with onSuccess alone.
    const replayed = Protocol.replayTransition(last.job, T0 + 20).job
    const reopened = Batch.afterItemWrite(last.batch, last.job, replayed)
    expect(reopened.batch.finishedAt).toBeNull()
    expect(reopened.batch.counts.queued).toBe(1)
    const again = run(reopened.batch, replayed, T0 + 30, ok)
    expect(again.batch.finishedAt).toBe(T0 + 31)
    expect(again.callbacks.map((c) => c.id)).toEqual([jobId(902)])
  })

  it("never finishes while items are still to land, whatever the landed items' states", () => {
    const batch = Batch.appended(Batch.newBatch(spec({ size: 3 }), T0), 2, T0)
    const jobs = [0, 1].map((n) => Protocol.newJob(item(n), T0))
    const done = run(run(batch, jobs[0]!, T0, ok).batch, jobs[1]!, T0 + 5, ok)
    expect(done.batch.finishedAt).toBeNull()
    expect(done.callbacks).toEqual([])
  })

  it("adds an item's spend to the batch cost and leaves the batch alone on a write that changes neither", () => {
    const { batch, jobs } = filled()
    const charged = Protocol.charged(jobs[0]!, 2.5, T0 + 1)
    const step = Batch.afterItemWrite(batch, jobs[0]!, charged)
    expect(step.batch.costCents).toBe(2.5)
    expect(step.batch.updatedAt).toBeGreaterThan(batch.updatedAt)
    const running = claimed(jobs[1]!, T0 + 2)
    const beat = Protocol.heartbeatTransition(running, T0 + 3, { leaseMs: 10 }).job
    expect(Batch.afterItemWrite(step.batch, running, beat).batch).toBe(step.batch)
  })
})

describe("Batch.chargeVerdict", () => {
  it("refuses a reservation past what is left of the budget, reservations in flight counted, and nothing else", () => {
    const { batch } = filled({ budgetCents: 10 })
    const reserve = (amountCents: number) => ({ amountCents, settled: false })
    const row: Protocol.ChargeRow = {
      callId: "c",
      token: 1,
      amountCents: 4,
      settled: false,
      createdAt: T0,
      updatedAt: T0
    }
    // 6c spent or reserved: a 4c reservation fits exactly, a 5c one does not.
    expect(Batch.chargeVerdict({ ...batch, costCents: 6 }, undefined, reserve(4))).toBe("Apply")
    expect(Batch.chargeVerdict({ ...batch, costCents: 6 }, undefined, reserve(5))).toBe("Refuse")
    // Nothing new starts once the budget is reached, not even a call estimated at 0.
    expect(Batch.chargeVerdict({ ...batch, costCents: 10 }, undefined, reserve(0))).toBe("Refuse")
    // A settlement is the money spent; a repeated reservation is the one already written.
    expect(Batch.chargeVerdict({ ...batch, costCents: 10 }, undefined, { amountCents: 5, settled: true })).toBe("Apply")
    expect(Batch.chargeVerdict({ ...batch, costCents: 10 }, row, reserve(4))).toBe("Apply")
    expect(Batch.chargeVerdict({ ...filled().batch, costCents: 1_000 }, undefined, reserve(5))).toBe("Apply")
  })
})

describe("Batch.claimVerdict", () => {
  it("settles an item for budget once the batch's spend cannot cover the estimate, and claims while it can", () => {
    const { batch, jobs } = filled({ budgetCents: 10 })
    expect(Batch.claimVerdict(jobs[0]!, { ...batch, costCents: 6 }, T0, 4)._tag).toBe("Claim")
    expect(Batch.claimVerdict(jobs[0]!, { ...batch, costCents: 6 }, T0, 5)).toEqual({
      _tag: "Settle",
      takeover: false,
      reason: "budget"
    })
    expect(Batch.claimVerdict(jobs[0]!, { ...batch, costCents: 10 }, T0, 0)._tag).toBe("Settle")
  })

  it("settles an item of a cancelled batch as cancelled and keeps the job's own verdicts first", () => {
    const { batch, jobs } = filled()
    const cancelled = Batch.cancelTransition(batch, T0)
    expect(Batch.claimVerdict(jobs[0]!, cancelled, T0, 0)).toEqual({
      _tag: "Settle",
      takeover: false,
      reason: "cancelled"
    })
    const notDue = Protocol.newJob(item(5, { delayMs: 100 }), T0)
    expect(Batch.claimVerdict(notDue, cancelled, T0, 0)._tag).toBe("NotDue")
  })
})

describe("Batch creation rules", () => {
  it("places chunks only at or before the landed items and within the size", () => {
    const batch = Batch.appended(Batch.newBatch(spec({ size: 5 }), T0), 2, T0)
    expect(Batch.addVerdict(batch, 2, 3)).toEqual({ _tag: "Append", skip: 0 })
    expect(Batch.addVerdict(batch, 0, 3)).toEqual({ _tag: "Append", skip: 2 })
    expect(Batch.addVerdict(batch, 3, 1)).toEqual({ _tag: "Misplaced" })
    expect(Batch.addVerdict(batch, 2, 4)).toEqual({ _tag: "Misplaced" })
    expect(Batch.addVerdict(Batch.cancelTransition(batch, T0), 2, 1)).toEqual({ _tag: "Cancelled" })
  })

  it("gives items the batch's tenant, no key of their own and a deadline no later than the batch's", () => {
    const batch = Batch.newBatch(spec({ deadlineAt: T0 + 100 }), T0)
    const one = Batch.itemOf(batch, item(0, { requestKey: "k", tenant: "other", deadlineAt: T0 + 500 }))
    expect([one.tenant, one.requestKey, one.deadlineAt]).toEqual(["t", null, T0 + 100])
    expect(Batch.itemOf(batch, item(0, { deadlineAt: T0 + 50 })).deadlineAt).toBe(T0 + 50)
  })

  it("is the same batch for the same fingerprint and a reused key for another", () => {
    const fields = {
      itemFingerprints: ["f1:a", "f1:b"],
      budgetCents: null,
      deadlineAt: null,
      onComplete: null,
      onSuccess: null,
      parentJobId: null
    }
    const existing = Batch.newBatch(spec({ fingerprint: Batch.fingerprint(fields) }), T0)
    expect(Batch.openVerdict(existing, spec({ fingerprint: Batch.fingerprint(fields) }))).toBe("Existing")
    const reordered = Batch.fingerprint({ ...fields, itemFingerprints: ["f1:b", "f1:a"] })
    expect(Batch.openVerdict(existing, spec({ fingerprint: reordered }))).toBe("KeyReused")
    expect(Batch.fingerprint({ ...fields, budgetCents: 5 })).not.toBe(Batch.fingerprint(fields))
  })

  it("finishes a cancelled batch sealed at its landed items once those are terminal", () => {
    const batch = Batch.appended(Batch.newBatch(spec({ size: 4 }), T0), 1, T0)
    const job = Protocol.newJob(item(0), T0)
    const sealed = Batch.cancelTransition(batch, T0 + 1)
    expect(sealed.size).toBe(1)
    const abandoned = Protocol.cancelTransition(job, T0 + 1, "Abandon").job
    const step = Batch.afterItemWrite(sealed, job, abandoned)
    expect(step.batch.finishedAt).toBe(T0 + 1)
    expect(step.callbacks.map((c) => c.id)).toEqual([jobId(901)])
    expect(Batch.cancelVerdict(step.batch)).toBe("AlreadyFinished")
  })
})
