import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Due from "../src/Due.js"

const s = 1000
const ticks = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => (from + i) * s)

describe("Due.due", () => {
  it("makes the on-time tick under every policy", () => {
    for (const catchUp of ["skip", "latest", { all: 60 * s }] as const) {
      expect(Due.due({ now: 5.2 * s, cursor: 4 * s, catchUp, graceMs: 60 * s, ticks: [5 * s] })).toEqual({
        make: [5 * s],
        advanceTo: 5 * s
      })
    }
  })

  it("after a ten-tick outage: skip makes the ticks on time, latest one job, all ten", () => {
    const input = { now: 10.3 * s, cursor: 0, graceMs: 1.5 * s, ticks: ticks(1, 10) }
    expect(Due.due({ ...input, catchUp: "skip" })).toEqual({ make: [9 * s, 10 * s], advanceTo: 10 * s })
    expect(Due.due({ ...input, catchUp: "latest" })).toEqual({ make: [10 * s], advanceTo: 10 * s })
    expect(Due.due({ ...input, catchUp: { all: 60 * s } })).toEqual({ make: ticks(1, 10), advanceTo: 10 * s })
    expect(Due.due({ ...input, catchUp: { all: 3 * s } })).toEqual({ make: ticks(8, 10), advanceTo: 10 * s })
  })

  it("a pass that comes late, but within the grace, loses no tick under any policy", () => {
    const input = { now: 3.2 * s, cursor: 0, graceMs: 3.5 * s, ticks: ticks(1, 3) }
    for (const catchUp of ["skip", "latest", { all: 1 }] as const) {
      expect(Due.due({ ...input, catchUp })).toEqual({ make: ticks(1, 3), advanceTo: 3 * s })
    }
  })

  it("a late newest tick: skip makes nothing but moves on, latest still makes it", () => {
    const nightly = { now: 3_600 * s, cursor: 0, graceMs: 60 * s, ticks: [1_800 * s] }
    expect(Due.due({ ...nightly, catchUp: "skip" })).toEqual({ make: [], advanceTo: 1_800 * s })
    expect(Due.due({ ...nightly, catchUp: "latest" })).toEqual({ make: [1_800 * s], advanceTo: 1_800 * s })
  })

  it("never makes a tick outside (cursor, now] and never moves the cursor back", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: 100 }), { maxLength: 20 }),
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 0, max: 100 }),
        fc.oneof(
          fc.constant("skip" as const),
          fc.constant("latest" as const),
          fc.record({ all: fc.integer({ min: 1, max: 100 }) })
        ),
        fc.integer({ min: 1, max: 100 }),
        (raw, cursor, now, catchUp, graceMs) => {
          const sorted = [...raw].sort((a, b) => a - b)
          const result = Due.due({ now, cursor, catchUp, graceMs, ticks: sorted })
          for (const tick of result.make) {
            expect(tick > cursor && tick <= now).toBe(true)
          }
          const inRange = sorted.filter((tick) => tick > cursor && tick <= now)
          expect(result.advanceTo).toBe(inRange.length === 0 ? null : inRange[inRange.length - 1])
          if (catchUp === "latest" && inRange.length > 0) {
            const missed = inRange.some((tick) => now - tick > graceMs)
            expect(result.make).toEqual(missed ? [inRange[inRange.length - 1]] : inRange)
          }
          // skip and all make every tick on time
          if (catchUp !== "latest") {
            for (const tick of inRange) if (now - tick <= graceMs) expect(result.make).toContain(tick)
          }
          expect(new Set(result.make).size).toBe(result.make.length)
        }
      )
    )
  })
})
