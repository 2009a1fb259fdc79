/**
 * The soak's slopes and verdict on hand-made series: a known line gives its slope back, restarted processes do not
 * read as growth, and each kind of growth the soak exists to catch (a leaking worker, a queue falling behind, a
 * Store that outgrows its retention) turns it red on its own line, while a run too short to judge stays unjudged.
 */
import { describe, expect, it } from "@effect/vitest"
import {
  defaultThresholds,
  judged,
  type Point,
  pooledSlopePerHour,
  type Series,
  slopeFailures,
  slopePerHour,
  slopes,
  type Window
} from "../chaos/SoakStats.js"

const minute = 60_000
const hour = 60 * minute

/** One point every 10 s from `fromMs` to `toMs`, valued `f(t)`. */
const series = (fromMs: number, toMs: number, f: (t: number) => number): Array<Point> => {
  const out: Array<Point> = []
  for (let t = fromMs; t <= toMs; t += 10_000) out.push({ t, value: f(t) })
  return out
}

/** A steady run of 60 minutes: flat memory with a GC sawtooth, queue age near zero, a Store held by retention. */
const steady = (): Series => {
  const end = hour
  const sawtooth = (t: number) => ((t / 10_000) % 6) * 2e6
  return {
    sentinelRss: series(0, end, (t) => 130e6 + sawtooth(t)),
    sentinelHeap: series(0, end, (t) => 30e6 + sawtooth(t)),
    // Three processes one after another, each starting higher than the last ended: no growth within any.
    rssByProcess: [
      series(0, 20 * minute, () => 120e6),
      series(20 * minute, 40 * minute, () => 140e6),
      series(40 * minute, end, () => 160e6)
    ],
    heapByProcess: [series(0, end, () => 30e6)],
    eventLoopP99: series(0, end, () => 20),
    queueAge: series(0, end, (t) => ((t / 10_000) % 3) * 0.5),
    // Grows for the first retention period, then stays.
    storeBytes: series(0, end, (t) => 1e6 + Math.min(t, 5 * minute) * 10)
  }
}

const window: Window = { startMs: 0, endMs: hour, warmupMs: 5 * minute, retentionMs: 5 * minute }

describe("slopePerHour", () => {
  it("gives back the slope of a line, per hour", () => {
    const points = series(0, 10 * minute, (t) => 5 + (t / hour) * 42)
    expect(slopePerHour(points)).toBeCloseTo(42, 6)
  })

  it("is null without two distinct times", () => {
    expect(slopePerHour([])).toBeNull()
    expect(slopePerHour([{ t: 1, value: 3 }])).toBeNull()
    expect(
      slopePerHour([
        { t: 1, value: 3 },
        { t: 1, value: 9 }
      ])
    ).toBeNull()
  })
})

describe("pooledSlopePerHour", () => {
  it("reads restarted processes at rising levels as flat, and one growth common to them as that growth", () => {
    const flat = [series(0, 10 * minute, () => 100), series(10 * minute, 20 * minute, () => 300)]
    expect(pooledSlopePerHour(flat)).toBeCloseTo(0, 9)
    // A single fit over the same points would call it growth.
    expect(slopePerHour(flat.flat())).toBeGreaterThan(500)
    const growing = [
      series(0, 10 * minute, (t) => 100 + (t / hour) * 60),
      series(10 * minute, 20 * minute, (t) => 500 + (t / hour) * 60)
    ]
    expect(pooledSlopePerHour(growing)).toBeCloseTo(60, 6)
  })
})

describe("slopes and slopeFailures", () => {
  it("a steady hour is judged and green", () => {
    const s = slopes(steady(), window)
    expect(judged(s)).toBe(true)
    expect(s.judgedMinutes).toBe(55)
    expect(s.pooledRssMbPerHour).toBeCloseTo(0, 6)
    expect(s.storeSteadyMbPerHour).toBeCloseTo(0, 6)
    expect(slopeFailures(s)).toEqual([])
  })

  it("a worker that leaks heap is red on its heap, and on its resident set once that grows too", () => {
    const leaking = { ...steady(), sentinelHeap: series(0, hour, (t) => 30e6 + (t / hour) * 20e6) }
    expect(slopeFailures(slopes(leaking, window))).toEqual([expect.stringMatching(/^worker heap grows 20\.00 MB\/h/)])
    const bloated = { ...leaking, sentinelRss: series(0, hour, (t) => 130e6 + (t / hour) * 40e6) }
    expect(slopeFailures(slopes(bloated, window))).toHaveLength(2)
  })

  it("a queue falling behind is red on its age's slope and its level in the last quarter", () => {
    const behind = { ...steady(), queueAge: series(0, hour, (t) => (t / hour) * 120) }
    const failures = slopeFailures(slopes(behind, window))
    expect(failures).toEqual([
      expect.stringMatching(/^oldest queued age grows 12\d\.\d\d s\/h/),
      expect.stringMatching(/^oldest queued age reached 120\.0 s in the last quarter/)
    ])
  })

  it("a Store that keeps growing under retention is red; without retention its growth is reported, not judged", () => {
    const unbounded = { ...steady(), storeBytes: series(0, hour, (t) => 1e6 + t * 10) }
    expect(slopeFailures(slopes(unbounded, window))).toEqual([
      expect.stringMatching(/^store size grows 36\.00 MB\/h under retention/)
    ])
    const noRetention = slopes(unbounded, { ...window, retentionMs: undefined })
    expect(noRetention.storeMbPerHour).toBeCloseTo(36, 6)
    expect(noRetention.storeSteadyMbPerHour).toBeNull()
    expect(slopeFailures(noRetention)).toEqual([])
  })

  it("a judged run that sampled nothing is red", () => {
    const empty: Series = {
      sentinelRss: [],
      sentinelHeap: [],
      rssByProcess: [],
      heapByProcess: [],
      eventLoopP99: [],
      queueAge: [],
      storeBytes: []
    }
    expect(slopeFailures(slopes(empty, window))).toEqual([
      "worker resident set: no samples",
      "worker heap: no samples",
      "oldest queued age: no samples",
      "oldest queued age: no samples in the last quarter"
    ])
  })

  it("a run shorter than the judged minimum is reported, not judged, whatever it shows", () => {
    const short: Window = { startMs: 0, endMs: 8 * minute, warmupMs: minute }
    const leaking = { ...steady(), sentinelHeap: series(0, hour, (t) => 30e6 + (t / hour) * 500e6) }
    const s = slopes(leaking, short)
    expect(judged(s)).toBe(false)
    expect(s.sentinelHeapMbPerHour).toBeCloseTo(500, 6)
    expect(slopeFailures(s)).toEqual([])
    expect(judged(s, { ...defaultThresholds, minJudgedMinutes: 5 })).toBe(true)
    expect(slopeFailures(s, { ...defaultThresholds, minJudgedMinutes: 5 })).toHaveLength(1)
  })
})
