/**
 * The worker's pure outcome decision: which settlement an ended attempt writes, or none.
 */
import { describe, expect, it } from "@effect/vitest"
import type { StopReason } from "../src/internal/worker/control.js"
import { decide, type Ended } from "../src/internal/worker/outcome.js"
import type { Job, JobId } from "../src/Job.js"
import type { Normalized } from "../src/Normalize.js"
import * as Protocol from "../src/Protocol.js"

const T0 = 1_000_000

/** A job claimed once (attempt 1 of `maxAttempts`), with the given budget. */
const claimed = (options: { readonly maxAttempts?: number; readonly budgetCents?: number | null } = {}): Job =>
  Protocol.claimTransition(
    Protocol.newJob(
      {
        id: "01890a5d-ac96-774b-bcce-b302099a8057" as JobId,
        queue: "q",
        type: "t",
        version: 1,
        inputHash: "h",
        input: null,
        maxAttempts: options.maxAttempts ?? 3,
        budgetCents: options.budgetCents ?? null
      },
      T0
    ),
    T0,
    { _tag: "Claim", takeover: false },
    { owner: "w", leaseMs: 10_000 }
  ).job

const serverError: Normalized = { errorClass: "server_error", retryable: true, status: 500, evidence: "500 boom" }
const authError: Normalized = { errorClass: "auth", retryable: false, status: 401, evidence: "401 bad key" }

const failed = (normalized: Normalized): Ended => ({ _tag: "Failed", normalized })

const run = (
  ended: Ended,
  options: {
    readonly job?: Job
    readonly stop?: StopReason | undefined
    readonly spentCents?: number
    readonly nextEstimateCents?: number
  } = {}
) =>
  decide({
    job: options.job ?? claimed(),
    ended,
    stop: options.stop,
    spentCents: options.spentCents ?? 0,
    nextEstimateCents: options.nextEstimateCents ?? 0
  })

const allEnds: ReadonlyArray<Ended> = [
  { _tag: "Succeeded", result: { ok: true } },
  { _tag: "Unstorable", error: "not JSON" },
  { _tag: "BudgetExceeded", error: "over" },
  { _tag: "DeadlineExceeded", error: "late" },
  failed(serverError)
]

describe("decide: stops", () => {
  it("a lost lease writes nothing, whatever the handler did", () => {
    for (const ended of allEnds) {
      expect(run(ended, { stop: "lease_lost" })).toEqual({ _tag: "HandOff", selfFenced: false })
    }
  })

  it("a handler that returned completes even after a stop (the fenced write decides)", () => {
    for (const stop of ["cancelled", "deadline", "shutdown", "self_fenced", undefined] as const) {
      expect(run({ _tag: "Succeeded", result: 7 }, { stop })).toEqual({
        _tag: "Settle",
        outcome: { _tag: "Complete", result: 7 }
      })
    }
  })

  it("an unstorable result fails the job (unknown) even after a stop", () => {
    for (const stop of ["cancelled", "shutdown", undefined] as const) {
      expect(run({ _tag: "Unstorable", error: "not JSON" }, { stop })).toEqual({
        _tag: "Settle",
        outcome: { _tag: "Fail", errorClass: "unknown", error: "not JSON" }
      })
    }
  })

  it("a stopped failure settles by the stop: cancel and deadline abandon, shutdown releases, self-fence hands off", () => {
    const ended = failed(serverError)
    expect(run(ended, { stop: "cancelled" })).toEqual({
      _tag: "Settle",
      outcome: { _tag: "Abandon", reason: "cancelled", errorClass: "cancelled", error: "cancel requested" }
    })
    expect(run(ended, { stop: "deadline" })).toEqual({
      _tag: "Settle",
      outcome: { _tag: "Abandon", reason: "deadline", error: "the deadline passed while the attempt ran" }
    })
    expect(run(ended, { stop: "shutdown" })).toEqual({ _tag: "Settle", outcome: { _tag: "Release" } })
    expect(run(ended, { stop: "self_fenced" })).toEqual({ _tag: "HandOff", selfFenced: true })
  })

  it("the stop wins over the handler's own budget or deadline failure", () => {
    expect(run({ _tag: "BudgetExceeded", error: "over" }, { stop: "shutdown" })).toEqual({
      _tag: "Settle",
      outcome: { _tag: "Release" }
    })
    expect(run({ _tag: "DeadlineExceeded", error: "late" }, { stop: "cancelled" })).toMatchObject({
      outcome: { _tag: "Abandon", reason: "cancelled" }
    })
  })
})

describe("decide: how the handler ended", () => {
  it("BudgetExceeded abandons(budget); DeadlineExceeded abandons(deadline), with their evidence", () => {
    expect(run({ _tag: "BudgetExceeded", error: "spend 10 + estimate 0 exceeds budget 10" })).toEqual({
      _tag: "Settle",
      outcome: { _tag: "Abandon", reason: "budget", error: "spend 10 + estimate 0 exceeds budget 10" }
    })
    expect(run({ _tag: "DeadlineExceeded", error: "deadline passed" })).toEqual({
      _tag: "Settle",
      outcome: { _tag: "Abandon", reason: "deadline", error: "deadline passed" }
    })
  })

  it("a permanent error fails at once, attempts left or not", () => {
    expect(run(failed(authError))).toEqual({
      _tag: "Settle",
      outcome: { _tag: "Fail", errorClass: "auth", error: "401 bad key" }
    })
  })

  it("a retryable error with no attempt left fails; with one left it retries", () => {
    expect(run(failed(serverError), { job: claimed({ maxAttempts: 1 }) })).toEqual({
      _tag: "Settle",
      outcome: { _tag: "Fail", errorClass: "server_error", error: "500 boom" }
    })
    expect(run(failed(serverError))).toEqual({ _tag: "Retry", normalized: serverError })
  })

  it("attempts left count from the current run (a replayed job has a fresh run)", () => {
    const replayed: Job = { ...claimed({ maxAttempts: 2 }), attempts: 3, attemptsBase: 2 }
    expect(run(failed(serverError), { job: replayed })).toEqual({ _tag: "Retry", normalized: serverError })
    expect(run(failed(serverError), { job: { ...replayed, attempts: 4 } })).toMatchObject({
      outcome: { _tag: "Fail" }
    })
  })

  it("a retry the budget cannot cover abandons(budget) with the error's class and evidence", () => {
    const job = claimed({ budgetCents: 10 })
    expect(run(failed(serverError), { job, spentCents: 6, nextEstimateCents: 6 })).toEqual({
      _tag: "Settle",
      outcome: { _tag: "Abandon", reason: "budget", errorClass: "server_error", error: "500 boom" }
    })
  })

  it("budget boundaries: spend equal to the budget stops a zero estimate; spend plus estimate equal to it retries", () => {
    const job = claimed({ budgetCents: 10 })
    expect(run(failed(serverError), { job, spentCents: 10, nextEstimateCents: 0 })).toMatchObject({
      _tag: "Settle",
      outcome: { _tag: "Abandon", reason: "budget" }
    })
    expect(run(failed(serverError), { job, spentCents: 4, nextEstimateCents: 6 })).toEqual({
      _tag: "Retry",
      normalized: serverError
    })
  })

  it("without a budget any spend retries", () => {
    expect(run(failed(serverError), { spentCents: 1e9, nextEstimateCents: 1e9 })).toEqual({
      _tag: "Retry",
      normalized: serverError
    })
  })
})
