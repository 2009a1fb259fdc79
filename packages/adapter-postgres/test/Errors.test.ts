import { describe, expect, it } from "@effect/vitest"
import { StoreError } from "@slowcall/core/Errors"
import { classify, toStoreError } from "../src/internal/errors.js"

const withCode = (code: string, message = "boom") => Object.assign(new Error(message), { code })

describe("driver errors become StoreError in one switch", () => {
  it.each([
    ["40001", "Conflict"],
    ["40P01", "Conflict"],
    ["57014", "Timeout"],
    ["57P01", "Connection"],
    ["57P03", "Connection"],
    ["08006", "Connection"],
    ["08001", "Connection"],
    ["53300", "Connection"],
    ["23505", "Constraint"],
    ["23503", "Constraint"],
    ["22P05", "Constraint"],
    ["22021", "Constraint"],
    ["ECONNRESET", "Connection"],
    ["ECONNREFUSED", "Connection"],
    ["EPIPE", "Connection"],
    ["42P01", "Unknown"],
    ["22P02", "Unknown"]
  ] as const)("SQLSTATE / errno %s -> %s", (code, reason) => {
    const error = toStoreError("claim", withCode(code))
    expect(error).toBeInstanceOf(StoreError)
    expect(error.reason).toBe(reason)
    expect(error.operation).toBe("claim")
    expect(error.detail).toContain(code)
  })

  it("a client-side read timeout is ambiguous: the statement may have run", () => {
    expect(toStoreError("complete", new Error("Query read timeout")).reason).toBe("Ambiguous")
  })

  it("a connection that ended mid-statement is ambiguous", () => {
    expect(toStoreError("complete", new Error("Connection terminated unexpectedly")).reason).toBe("Ambiguous")
  })

  it("a pool that cannot connect in time is a timeout that applied nothing", () => {
    const error = toStoreError("claim", new Error("timeout exceeded when trying to connect"))
    expect(error.reason).toBe("Timeout")
    expect(error.isRetryable).toBe(true)
  })

  it("a value the server cannot store (U+0000 in jsonb, a NUL byte in text) is final, never retried", () => {
    const jsonb = toStoreError(
      "complete",
      withCode("22P05", "unsupported Unicode escape sequence: \\u0000 cannot be converted to text.")
    )
    expect(jsonb).toMatchObject({ reason: "Constraint", operation: "complete" })
    expect(jsonb.isRetryable).toBe(false)
    expect(classify(withCode("22P05"))).toBe("unstorable_value")
    const text = toStoreError("fail", withCode("22021", 'invalid byte sequence for encoding "UTF8": 0x00'))
    expect(text.reason).toBe("Constraint")
    expect(text.isRetryable).toBe(false)
  })

  it("constraint and unknown failures are not retryable; the others are", () => {
    expect(toStoreError("submit", withCode("23505")).isRetryable).toBe(false)
    expect(toStoreError("submit", new Error("syntax")).isRetryable).toBe(false)
    expect(toStoreError("submit", withCode("40001")).isRetryable).toBe(true)
  })

  it("anything that is not an Error is classified by its shape, never thrown again", () => {
    expect(classify("a string")).toBe("other")
    expect(classify(null)).toBe("other")
    expect(classify({ code: "08003" })).toBe("connection_exception")
    expect(toStoreError("get", 42).reason).toBe("Unknown")
  })

  it("a StoreError passes through unchanged", () => {
    const original = new StoreError({ reason: "Timeout", operation: "x", detail: "y" })
    expect(toStoreError("other", original)).toBe(original)
  })

  it("details are truncated", () => {
    const error = toStoreError("list", withCode("XX000", "x".repeat(5000)))
    expect(error.detail.length).toBeLessThan(600)
  })
})
