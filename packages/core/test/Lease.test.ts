import { describe, expect, it } from "@effect/vitest"
import * as Lease from "../src/Lease.js"

describe("Lease.leaseFor", () => {
  it.each([
    // timeoutMs, retries, fallbacks, marginMs, expected
    [3_000, 0, 0, undefined, 4_000], // 10% = 300 ms < 1 s minimum
    [30_000, 0, 0, undefined, 33_000], // 10% margin
    [30_000, 2, 0, undefined, 99_000], // 3 calls = 90 s + 9 s
    [30_000, 2, 1, undefined, 132_000], // 4 calls = 120 s + 12 s
    [10_000, 1, 1, 500, 30_500], // explicit margin wins, even below the default minimum
    [1, 0, 0, undefined, 1_001]
  ] as const)(
    "timeout %i x (1 + %i retries + %i fallbacks), margin %s -> %i",
    (timeoutMs, retries, fallbacks, marginMs, expected) => {
      expect(Lease.leaseFor({ timeoutMs, retries, fallbacks, marginMs })).toBe(expected)
    }
  )

  it("is never shorter than the worst case of the attempt", () => {
    for (const timeoutMs of [1, 50, 999, 10_000, 120_000]) {
      for (const retries of [0, 1, 3]) {
        for (const fallbacks of [0, 2]) {
          const attempt = { timeoutMs, retries, fallbacks }
          expect(Lease.leaseFor(attempt)).toBeGreaterThanOrEqual(Lease.worstCaseMs(attempt) + Lease.minimumMarginMs)
        }
      }
    }
  })
})

describe("Lease.heartbeatIntervalFor", () => {
  it.each([
    [4_000, 1_333],
    [33_000, 11_000],
    [3, 1],
    [1, 1]
  ])("lease %i -> every %i ms", (leaseMs, expected) => {
    expect(Lease.heartbeatIntervalFor(leaseMs)).toBe(expected)
  })

  it("leaves room for two missed heartbeats before the lease ends", () => {
    for (const leaseMs of [3, 100, 4_000, 99_000]) {
      expect(3 * Lease.heartbeatIntervalFor(leaseMs)).toBeLessThanOrEqual(leaseMs)
    }
  })
})
