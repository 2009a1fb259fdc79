import { describe, expect, it } from "@effect/vitest"
import type { Attempt, Charge, Job, JobId } from "@slowcall/core/Job"
import { throttleEvidence } from "@slowcall/core/Protocol"
import {
  attemptsText,
  etag,
  etagMatches,
  inputLimits,
  inputView,
  jobDetail,
  jobView,
  money,
  redactEvidence,
  retryAfterSeconds,
  revision
} from "../src/View.js"

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
    expect(Object.keys(view)).not.toContain("leaseToken")
    expect(Object.keys(view)).not.toContain("leaseOwner")
    expect(Object.keys(view)).not.toContain("inputHash")
    expect(Object.keys(view)).toHaveLength(24)
  })

  it("a job waiting for its provider resource shows which, why and until when; no other job does", () => {
    const lastError = throttleEvidence({ resource: "openai:gpt-4.1:key-a", why: "requests", until: t0 + 2_000 })
    const throttled = job({ errorClass: "rate_limited", lastError, runAfter: t0 + 2_000, attemptsBase: 1 })
    expect(jobView(throttled).throttled).toEqual({
      resource: "openai:gpt-4.1:key-a",
      reason: "requests",
      until: "2026-01-02T03:04:07.000Z"
    })
    // Running again, or a rate limit that was an ordinary failure: not throttled.
    expect(jobView({ ...throttled, state: "running" }).throttled).toBeNull()
    expect(jobView(job({ errorClass: "rate_limited", lastError: "HTTP 429" })).throttled).toBeNull()
    expect(jobView(job()).throttled).toBeNull()
  })

  it("the lease's end is shown while the job runs, and only then", () => {
    const running = job({ state: "running", leaseToken: 1, leaseOwner: "w1", leaseUntil: t0 + 30_000 })
    expect(jobView(running).leaseUntil).toBe("2026-01-02T03:04:35.000Z")
    expect(jobView(job({ state: "succeeded", leaseUntil: t0 + 30_000 })).leaseUntil).toBeNull()
    expect(jobView(job()).leaseUntil).toBeNull()
  })

  it("money: dollars with two decimals, more only when two cannot show the amount, at most six", () => {
    const shown = [1000, 3, 0, 2.5, 0.4, 123456, 0.01, 0.00001, 1.23456789, -250, 100000000].map(money)
    expect(shown).toEqual([
      "$10.00",
      "$0.03",
      "$0.00",
      "$0.025",
      "$0.004",
      "$1,234.56",
      "$0.0001",
      "$0.00",
      "$0.012346",
      "-$2.50",
      "$1,000,000.00"
    ])
  })

  it("the input is shown redacted: whole up to 8 KB of JSON, a 300-character preview, or the reference", () => {
    const shown = inputView(job({ input: { secret: "input", text: "hi" } }))
    expect(shown).toEqual({
      input: { secret: "[redacted]", text: "hi" },
      inputPreview: '{"secret":"[redacted]","text":"hi"}',
      inputTruncated: false,
      inputRef: null
    })
    expect(jobView(job()).input).toEqual({ secret: "[redacted]" })
    expect(inputView(job({ input: null }))).toMatchObject({ input: null, inputPreview: "null", inputTruncated: false })

    // Exactly at the limit it is shown; one byte more (a two-byte character) and it is withheld.
    const atLimit = { t: "a".repeat(inputLimits.inputLimitBytes - 8) }
    expect(JSON.stringify(atLimit).length).toBe(inputLimits.inputLimitBytes)
    expect(inputView(job({ input: atLimit }))).toMatchObject({ input: atLimit, inputTruncated: false })
    const over = { t: `${"a".repeat(inputLimits.inputLimitBytes - 9)}é` }
    const withheld = inputView(job({ input: over }))
    expect(withheld).toMatchObject({ input: null, inputTruncated: true })
    expect(withheld.inputPreview).toHaveLength(inputLimits.previewLength)
    expect(withheld.inputPreview!.endsWith("…")).toBe(true)

    // The preview cuts whole characters: an emoji (two UTF-16 units) is never split.
    const emoji = inputView(job({ input: "😀".repeat(400) })).inputPreview!
    expect([...emoji]).toHaveLength(inputLimits.previewLength)
    expect(emoji.startsWith('"😀😀')).toBe(true)
    expect(emoji.endsWith("😀…")).toBe(true)

    expect(inputView(job({ input: null, inputRef: "https://u:pw12345@store/x?sig=abc123" }))).toEqual({
      input: null,
      inputPreview: null,
      inputTruncated: false,
      inputRef: "https://u:[redacted]@store/x?sig=[redacted]"
    })
  })

  it("attempts read as this run against its cap, and the lifetime count once a replay started a new run", () => {
    // Three runs of three attempts: the lifetime count passes the cap, this run's count never does.
    expect(attemptsText(jobView(job({ attempts: 9, attemptsBase: 6, maxAttempts: 3 })))).toBe("3/3 (9 in all)")
    expect(attemptsText(jobView(job({ attempts: 7, attemptsBase: 6, maxAttempts: 3 })))).toBe("1/3 (7 in all)")
    expect(attemptsText(jobView(job({ attempts: 2, attemptsBase: 0, maxAttempts: 3 })))).toBe("2/3")
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
    const detail = jobDetail(job({ state: "succeeded", updatedAt: t0 + 1500 }), attempts, charges, t0 + 2000)
    expect(detail.now).toBe("2026-01-02T03:04:07.000Z")
    expect(detail.timeline.find((entry) => entry.event === "charged")?.detail).toBe("$0.02 (c1)")
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
