import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as Schedule from "../src/Schedule.js"

const job = { queue: "reports", type: "summary" }
const valid = (options: Partial<Schedule.MakeOptions> = {}) =>
  Either.getOrThrow(Schedule.make({ id: "s", cron: "0 2 * * *", job, ...options }))
const problem = (options: Record<string, unknown>) => {
  const result = Schedule.make({ id: "s", cron: "0 2 * * *", job, ...options } as Schedule.MakeOptions)
  return Either.isLeft(result) ? { path: result.left.path, message: result.left.message } : undefined
}
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

describe("Schedule.make", () => {
  it("fills the defaults and keeps only the template's given fields", () => {
    expect(valid()).toEqual({
      id: "s",
      cron: "0 2 * * *",
      timezone: "UTC",
      job: { queue: "reports", type: "summary" },
      overlap: "skip",
      catchUp: "skip",
      graceMs: 60_000
    })
  })

  it("names the wrong field with a typed error", () => {
    expect(problem({ id: "" })).toEqual({ path: "id", message: "must not be empty" })
    expect(problem({ id: "x".repeat(201) })?.path).toBe("id")
    expect(problem({ cron: "61 * * * *" })?.path).toBe("cron")
    expect(problem({ cron: "not a cron" })?.path).toBe("cron")
    expect(problem({ cron: "0 0 31 2 *" })).toEqual({ path: "cron", message: "never fires" })
    expect(problem({ timezone: "Mars/Olympus" })?.path).toBe("timezone")
    expect(problem({ overlap: "queue" })?.path).toBe("overlap")
    expect(problem({ catchUp: "all" })?.path).toBe("catchUp")
    expect(problem({ catchUp: { all: 0 } })?.path).toBe("catchUp.all")
    expect(problem({ catchUp: { all: 1.5 } })?.path).toBe("catchUp.all")
    expect(problem({ graceMs: -1 })?.path).toBe("graceMs")
    expect(problem({ job: { queue: "", type: "t" } })).toEqual({ path: "job.queue", message: "must not be empty" })
    expect(problem({ job: { queue: "q" } })?.path).toBe("job.type")
    expect(problem({ job: { ...job, maxAttempts: 0 } })?.path).toBe("job.maxAttempts")
    expect(problem({ job: { ...job, input: { a: Number.NaN } } })?.path).toMatch(/^job\.input/)
    expect(problem({ job: { ...job, tenant: "a\u0000b" } })?.path).toBe("job.tenant")
    const error = Schedule.make({ id: "nightly", cron: "x", job })
    expect(Either.isLeft(error) && error.left._tag).toBe("InvalidSchedule")
    expect(Either.isLeft(error) && error.left.scheduleId).toBe("nightly")
  })

  it("decodes its own JSON back to an equal value", () => {
    const schedule = valid({
      timezone: "Europe/Berlin",
      overlap: "cancelPrevious",
      catchUp: { all: 3_600_000 },
      job: { ...job, input: { day: "yesterday" }, priority: 2, deadlineMs: 60_000 }
    })
    expect(Schedule.decode(JSON.parse(JSON.stringify(schedule)))).toEqual(Either.right(schedule))
  })

  it("accepts six fields with seconds first", () => {
    const every = valid({ cron: "* * * * * *" })
    expect(Schedule.nextTick(every, Date.parse("2026-01-01T00:00:00.500Z"))).toBe(Date.parse("2026-01-01T00:00:01Z"))
  })
})

describe("ticks in a timezone with daylight saving time (Europe/Berlin, 2026)", () => {
  // Spring: 2026-03-29 at 02:00 CET the clocks jump to 03:00 CEST; 02:30 does not exist that day.
  it("a fixed time in the skipped hour runs once, at the first instant after the gap", () => {
    const nightly = valid({ cron: "30 2 * * *", timezone: "Europe/Berlin" })
    const ticks: Array<string | null> = []
    let at = Date.parse("2026-03-27T12:00:00Z")
    for (let i = 0; i < 3; i++) {
      const next = Schedule.nextTick(nightly, at)!
      ticks.push(iso(next))
      at = next
    }
    expect(ticks).toEqual([
      "2026-03-28T01:30:00.000Z", // 02:30 CET
      "2026-03-29T01:00:00.000Z", // 03:00 CEST: the first valid instant after the gap
      "2026-03-30T00:30:00.000Z" // 02:30 CEST
    ])
  })

  it("an hourly pattern skips the hour that does not exist", () => {
    const hourly = valid({ cron: "0 * * * *", timezone: "Europe/Berlin" })
    const ticks = Schedule.candidateTicks(
      { ...hourly, catchUp: { all: 4 * 3_600_000 } },
      Date.parse("2026-03-28T23:30:00Z"),
      Date.parse("2026-03-29T02:30:00Z")
    ).map(iso)
    // local 01:00 CET, 03:00 CEST, 04:00 CEST: three ticks in three real hours, no local 02:00
    expect(ticks).toEqual(["2026-03-29T00:00:00.000Z", "2026-03-29T01:00:00.000Z", "2026-03-29T02:00:00.000Z"])
  })

  // Autumn: 2026-10-25 at 03:00 CEST the clocks go back to 02:00 CET; 02:00-02:59 happens twice.
  it("a fixed time in the repeated hour runs once, at its first occurrence", () => {
    const nightly = valid({ cron: "30 2 * * *", timezone: "Europe/Berlin", catchUp: { all: 3 * 86_400_000 } })
    const ticks = Schedule.candidateTicks(
      nightly,
      Date.parse("2026-10-23T12:00:00Z"),
      Date.parse("2026-10-26T12:00:00Z")
    ).map(iso)
    expect(ticks).toEqual([
      "2026-10-24T00:30:00.000Z", // 02:30 CEST
      "2026-10-25T00:30:00.000Z", // 02:30 CEST, the first of the two 02:30s
      "2026-10-26T01:30:00.000Z" // 02:30 CET
    ])
  })

  it("a pattern through the hours runs at both occurrences of the repeated hour", () => {
    const halfHourly = valid({ cron: "0,30 * * * *", timezone: "Europe/Berlin", catchUp: { all: 3 * 3_600_000 } })
    const ticks = Schedule.candidateTicks(
      halfHourly,
      Date.parse("2026-10-24T23:45:00Z"),
      Date.parse("2026-10-25T01:45:00Z")
    ).map(iso)
    expect(ticks).toEqual([
      "2026-10-25T00:00:00.000Z", // 02:00 CEST
      "2026-10-25T00:30:00.000Z", // 02:30 CEST
      "2026-10-25T01:00:00.000Z", // 02:00 CET
      "2026-10-25T01:30:00.000Z" // 02:30 CET
    ])
    // and the keys of the repeated local times differ, since they are instants
    expect(new Set(ticks.map((tick) => Schedule.requestKey("h", Date.parse(tick!)))).size).toBe(4)
  })
})

describe("Schedule.candidateTicks", () => {
  const everySecond = valid({ cron: "* * * * * *" })
  it("for skip and latest gives the ticks within the grace and the newest older one, however long the outage", () => {
    const day = 86_400_000
    const base = Date.parse("2026-01-01T00:00:00Z")
    const short = { ...everySecond, graceMs: 2_000 }
    expect(Schedule.candidateTicks(short, base, base + day + 500)).toEqual([
      base + day - 2000,
      base + day - 1000,
      base + day
    ])
    expect(Schedule.candidateTicks({ ...short, catchUp: "latest" }, base, base + 1000)).toEqual([base + 1000])
    expect(Schedule.candidateTicks(short, base, base + 999)).toEqual([])
    expect(Schedule.candidateTicks(short, base, base)).toEqual([])
    const nightly = valid({ cron: "0 2 * * *" })
    expect(Schedule.candidateTicks(nightly, base, base + 30 * day)).toEqual([base + 29 * day + 2 * 3_600_000])
  })

  it("for all gives the window's ticks after the cursor, at most maxCatchUpTicks of the newest", () => {
    const base = Date.parse("2026-01-01T00:00:00Z")
    const all = { ...everySecond, catchUp: { all: 10_000 }, graceMs: 1_000 }
    expect(Schedule.candidateTicks(all, base, base + 3_000)).toEqual([base + 1000, base + 2000, base + 3000])
    const late = Schedule.candidateTicks(all, base, base + 60_000)
    expect(late[0]).toBe(base + 49_000)
    expect(late.length).toBe(12)
    const huge = Schedule.candidateTicks(
      { ...everySecond, catchUp: { all: 86_400_000 }, graceMs: 1_000 },
      base,
      base + 86_400_000
    )
    expect(huge.length).toBe(Schedule.limits.maxCatchUpTicks)
    expect(huge[huge.length - 1]).toBe(base + 86_400_000)
  })

  it("agrees with nextTick stepping through (after, upTo], for passes on time, between ticks and late", () => {
    const base = Date.parse("2026-03-29T00:00:00Z")
    const schedules = [
      { ...valid({ cron: "*/2 * * * * *" }), graceMs: 30_000 },
      { ...valid({ cron: "*/3 * * * * *" }), graceMs: 30_000 },
      // Through the night Berlin's clocks went forward (2026-03-29, 02:00 local).
      { ...valid({ cron: "0,30 * * * *", timezone: "Europe/Berlin" }), graceMs: 6 * 3_600_000 }
    ]
    for (const schedule of schedules) {
      for (const after of [base, base + 500, base + 999, base + 1000, base + 1_800_000, base + 3_599_999]) {
        for (const span of [0, 1, 499, 1000, 1500, 2000, 2001, 6_000, 25_000, 3_600_000, 4 * 3_600_000]) {
          const upTo = after + span
          const stepped: Array<number> = []
          for (let tick = Schedule.nextTick(schedule, after); tick !== null && tick <= upTo; ) {
            stepped.push(tick)
            tick = Schedule.nextTick(schedule, tick)
          }
          // Those within the grace, and the newest before it.
          const older = stepped.filter((tick) => tick < upTo - schedule.graceMs)
          const expected = [...older.slice(-1), ...stepped.slice(older.length)]
          expect(Schedule.candidateTicks(schedule, after, upTo)).toEqual(expected)
        }
      }
    }
  })

  it("keys a tick by its instant in UTC and wraps the template's input", () => {
    const schedule = valid({ job: { ...job, input: { scope: "all" }, deadlineMs: 1000, tenant: "acme" } })
    const tick = Date.parse("2026-05-01T02:00:00Z")
    expect(Schedule.submitOptions(schedule, tick)).toMatchObject({
      queue: "reports",
      type: "summary",
      tenant: "acme",
      requestKey: "schedule:s:2026-05-01T02:00:00.000Z",
      deadlineAt: tick + 1000,
      input: { schedule: "s", at: tick, tick: "2026-05-01T02:00:00.000Z", input: { scope: "all" } }
    })
  })
})
