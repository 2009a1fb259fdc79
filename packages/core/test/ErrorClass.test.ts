import { describe, expect, it } from "@effect/vitest"
import { all, defaultCostOnError, ErrorClass, isRetryable, policy } from "../src/ErrorClass.js"

describe("ErrorClass", () => {
  it("has exactly one policy per error class, keyed by its own class", () => {
    expect([...all].sort()).toEqual([...ErrorClass.literals].sort())
    for (const c of ErrorClass.literals) {
      expect(policy(c).errorClass).toBe(c)
    }
  })

  const permanent = [
    "invalid_request",
    "auth",
    "content_filtered",
    "context_length",
    "invalid_input",
    "unknown_job_version",
    "quota_exhausted",
    "cancelled",
    "lease_lost"
  ] as const
  const retryable = ["rate_limited", "overloaded", "timeout", "network", "server_error", "lease_expired", "unknown"]

  it.each(permanent)("%s is permanent with no delay", (c) => {
    const p = policy(c)
    expect(p.retryable).toBe(false)
    expect(isRetryable(c)).toBe(false)
    expect(p.baseMs).toBe(0)
  })

  it.each(retryable)("%s is retryable with a positive base under its cap", (c) => {
    const p = policy(c as ErrorClass)
    expect(p.retryable).toBe(true)
    expect(p.baseMs).toBeGreaterThan(0)
    expect(p.capMs).toBeGreaterThanOrEqual(p.baseMs)
  })

  it("covers every class in one of the two lists", () => {
    expect([...permanent, ...retryable].sort()).toEqual([...ErrorClass.literals].sort())
  })

  it("honours Retry-After for rate limits, and backs off longer when overloaded", () => {
    expect(policy("rate_limited").honoursRetryAfter).toBe(true)
    expect(policy("overloaded").baseMs).toBeGreaterThan(policy("rate_limited").baseMs)
    expect(policy("overloaded").baseMs).toBeGreaterThan(policy("server_error").baseMs)
  })

  it("a failed call of a class providers do not bill settles at 0; any other keeps its reservation", () => {
    const notBilled = ["rate_limited", "overloaded", "invalid_request", "auth", "quota_exhausted", "context_length"]
    for (const c of ErrorClass.literals) {
      const expected = notBilled.includes(c) ? "nothing" : "estimate"
      expect(policy(c).billedOnError, c).toBe(expected)
      expect(defaultCostOnError(c), c).toBe(expected === "nothing" ? 0 : undefined)
    }
  })
})
