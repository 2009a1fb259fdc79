import { describe, expect, it } from "@effect/vitest"
import type { Attempt, Charge, Job, JobId } from "@slowcall/core/Job"
import { etag, etagMatches, jobDetail, jobView, redactEvidence, retryAfterSeconds, revision } from "../src/View.js"

const t0 = Date.UTC(2026, 0, 2, 3, 4, 5)
const job = (overrides: Partial<Job> = {}): Job => ({
  id: "01900000-0000-7000-8000-000000000001" as JobId,
  queue: "default",
  tenant: "acme",
  type: "demo.echo",
  version: 1,
  requestKey: "k",
  inputHash: "abc",
  input: { secret: "input" },
  inputRef: null,
  fingerprint: null,
  state: "queued",
  abandonReason: null,
  attempts: 0,
  attemptsBase: 0,
  maxAttempts: 5,
  leaseToken: 0,
  leaseOwner: null,
  leaseUntil: null,
  runAfter: t0,
  priority: 0,
  deadlineAt: null,
  budgetCents: null,
  costCents: 0,
  errorClass: null,
  lastError: null,
  progress: 0,
  result: null,
  cancelRequestedAt: null,
  traceId: null,
  createdAt: t0,
  updatedAt: t0,
  ...overrides
})

describe("View", () => {
  it("the job view has exactly the contract's fields, ISO times, and hides internals", () => {
    const view = jobView(job({ deadlineAt: t0 + 60_000, updatedAt: t0 + 0.001 }))
    expect(view.createdAt).toBe("2026-01-02T03:04:05.000Z")
    expect(view.deadline).toBe("2026-01-02T03:05:05.000Z")
    expect(Object.keys(view)).not.toContain("tenant")
    expect(Object.keys(view)).not.toContain("input")
    expect(Object.keys(view)).not.toContain("leaseToken")
    expect(Object.keys(view)).toHaveLength(18)
  })

  it("revision and ETag change with every microsecond step of updatedAt", () => {
    const a = job({ updatedAt: t0 })
    const b = job({ updatedAt: t0 + 0.001 })
    expect(revision(b)).toBe(revision(a) + 1)
    expect(etag(a)).not.toBe(etag(b))
    expect(etagMatches(etag(a), etag(a))).toBe(true)
    expect(etagMatches(`W/${etag(a)}, "other"`, etag(a))).toBe(true)
    expect(etagMatches("*", etag(a))).toBe(true)
    expect(etagMatches(etag(b), etag(a))).toBe(false)
    expect(etagMatches(undefined, etag(a))).toBe(false)
  })

  it("the Retry-After hint grows with the job's age, is capped, and is absent once terminal", () => {
    const queued = job()
    const hints = [0, 5_000, 30_000, 120_000, 3_600_000].map((age) => retryAfterSeconds(queued, t0 + age))
    expect(hints).toEqual([1, 1, 4, 13, 30])
    for (let i = 1; i < hints.length; i++) expect(hints[i]!).toBeGreaterThanOrEqual(hints[i - 1]!)
    for (const state of ["succeeded", "failed", "abandoned"] as const) {
      expect(retryAfterSeconds(job({ state }), t0 + 1000)).toBeUndefined()
    }
  })

  it("evidence and lastError are redacted and truncated", () => {
    const text = `Authorization: Bearer abcdef123456 key sk-ant-0123456789abcdef ${"x".repeat(3000)}`
    const redacted = redactEvidence(text)
    expect(redacted).not.toContain("abcdef123456")
    expect(redacted).not.toContain("0123456789abcdef")
    expect(redacted.length).toBeLessThanOrEqual(2000)
    expect(jobView(job({ lastError: "url ?key=AIzaSyTopSecretValue1" })).lastError).not.toContain("TopSecret")
  })

  it("the job detail orders the timeline and keeps attempts and charges", () => {
    const attempts: Array<Attempt> = [
      {
        jobId: job().id,
        token: 1,
        worker: "w1",
        startedAt: t0 + 100,
        endedAt: t0 + 500,
        outcome: "retried",
        errorClass: "rate_limited",
        evidence: "429 Bearer sk-abcdefabcdefabcdef"
      },
      {
        jobId: job().id,
        token: 2,
        worker: "w2",
        startedAt: t0 + 1000,
        endedAt: t0 + 1500,
        outcome: "succeeded",
        errorClass: null,
        evidence: null
      }
    ]
    const charges: Array<Charge> = [
      {
        jobId: job().id,
        callId: "c1",
        token: 1,
        amountCents: 2,
        settled: true,
        createdAt: t0 + 200,
        updatedAt: t0 + 400
      }
    ]
    const detail = jobDetail(job({ state: "succeeded", updatedAt: t0 + 1500 }), attempts, charges)
    expect(detail.timeline.map((entry) => entry.event)).toEqual([
      "submitted",
      "attempt 1 claimed",
      "charged",
      "attempt 1 retried",
      "attempt 2 claimed",
      "attempt 2 succeeded",
      "succeeded"
    ])
    expect(detail.attempts[0]!.evidence).not.toContain("abcdefabcdef")
    expect(detail.charges[0]).toMatchObject({ callId: "c1", amountCents: 2, settled: true })
  })
})
