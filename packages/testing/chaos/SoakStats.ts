/**
 * The soak's arithmetic and verdict, as pure functions over its samples, so that they are tested on their own
 * (`test/SoakStats.test.ts`) with series that must turn them red.
 *
 * Slopes are least-squares fits, in units per hour. Memory is judged on the worker the soak never restarts (its one
 * process lives the whole run); the other workers' processes are restarted every few minutes, so their slope is the
 * pooled within-process one (each process its own intercept, one common slope), reported beside it. Nothing is
 * judged on a run whose judged window (after the warm-up) is shorter than `minJudgedMinutes`: a slope over a few
 * minutes says more about the JIT and the first GCs than about a leak.
 */

/** One sample of one series: harness time in ms and a value. */
export interface Point {
  readonly t: number
  readonly value: number
}

const hourMs = 3_600_000

/**
 * The least-squares slope of `points`, per hour; null when fewer than two distinct times (no line to fit).
 */
export const slopePerHour = (points: ReadonlyArray<Point>): number | null => pooledSlopePerHour([points])

/**
 * The least-squares slope common to every group, each group with its own intercept (a process restarted starts at
 * its own level), per hour; null when no group has two distinct times.
 */
export const pooledSlopePerHour = (groups: ReadonlyArray<ReadonlyArray<Point>>): number | null => {
  let numerator = 0
  let denominator = 0
  for (const points of groups) {
    if (points.length < 2) continue
    const meanT = points.reduce((sum, p) => sum + p.t, 0) / points.length
    const meanV = points.reduce((sum, p) => sum + p.value, 0) / points.length
    for (const p of points) {
      numerator += (p.t - meanT) * (p.value - meanV)
      denominator += (p.t - meanT) ** 2
    }
  }
  return denominator === 0 ? null : (numerator / denominator) * hourMs
}

/** The points at or after `fromMs`. */
export const after = (points: ReadonlyArray<Point>, fromMs: number): Array<Point> => points.filter((p) => p.t >= fromMs)

/** The largest value, or null for no points. */
export const max = (points: ReadonlyArray<Point>): number | null =>
  points.length === 0 ? null : points.reduce((m, p) => Math.max(m, p.value), Number.NEGATIVE_INFINITY)

/** The mean value, or null for no points. */
export const mean = (points: ReadonlyArray<Point>): number | null =>
  points.length === 0 ? null : points.reduce((sum, p) => sum + p.value, 0) / points.length

/** What the soak holds a run to. Memory in MB (10^6 bytes), ages in seconds. */
export interface Thresholds {
  /** The never-restarted worker's resident set may grow at most this much per hour. */
  readonly rssMbPerHour: number
  /** The never-restarted worker's used V8 heap may grow at most this much per hour. */
  readonly heapMbPerHour: number
  /** The oldest queued job's age may grow at most this much per hour. */
  readonly queueAgeSecondsPerHour: number
  /** ... and stay at or under this in the run's last quarter. */
  readonly queueAgeMaxSeconds: number
  /**
   * With a retention setting: once the retention has turned over twice, the Store's size may grow at most this
   * fraction of its mean per hour (bounded, not merely slower).
   */
  readonly storeFractionPerHour: number
  /** Shorter judged windows are reported, not judged. */
  readonly minJudgedMinutes: number
}

/**
 * The soak's thresholds. A leak of 2 KB a job at 6,000 jobs an hour (the soak's default fleet on a busy 2-core
 * machine) is 12 MB/h of heap: the heap bound.
 * The queue-age bounds leave room for the SIGKILLed worker's jobs, which wait out their lease.
 */
export const defaultThresholds: Thresholds = {
  rssMbPerHour: 32,
  heapMbPerHour: 12,
  queueAgeSecondsPerHour: 60,
  queueAgeMaxSeconds: 60,
  storeFractionPerHour: 0.25,
  minJudgedMinutes: 10
}

/** The series of one run, each in harness ms. */
export interface Series {
  /** The never-restarted worker's resident set and used heap, bytes. */
  readonly sentinelRss: ReadonlyArray<Point>
  readonly sentinelHeap: ReadonlyArray<Point>
  /** Every process's resident set and used heap, bytes, one group per process. */
  readonly rssByProcess: ReadonlyArray<ReadonlyArray<Point>>
  readonly heapByProcess: ReadonlyArray<ReadonlyArray<Point>>
  /** Event-loop delay p99 of every sample of every process, ms. */
  readonly eventLoopP99: ReadonlyArray<Point>
  /** The oldest queued job's age, seconds. */
  readonly queueAge: ReadonlyArray<Point>
  /** The Store's size: Postgres tables with their indexes and TOAST, or Redis `used_memory`, bytes. */
  readonly storeBytes: ReadonlyArray<Point>
}

/** Where the windows start and end, ms of harness time. */
export interface Window {
  /** The load's start (after the capacity burst). */
  readonly startMs: number
  readonly endMs: number
  /** The warm-up left out of every judged slope. */
  readonly warmupMs: number
  /** The retention setting, when the Store has one. */
  readonly retentionMs?: number | undefined
}

/** Slopes per hour (memory in MB/h, ages in s/h, event loop in ms/h) and the levels they start from. */
export interface Slopes {
  readonly judgedMinutes: number
  readonly sentinelRssMbPerHour: number | null
  readonly sentinelHeapMbPerHour: number | null
  readonly pooledRssMbPerHour: number | null
  readonly pooledHeapMbPerHour: number | null
  readonly eventLoopP99MsPerHour: number | null
  readonly queueAgeSecondsPerHour: number | null
  readonly queueAgeMaxLastQuarterSeconds: number | null
  readonly storeMbPerHour: number | null
  /** The Store's slope once the retention has turned over twice, and its mean there; null without retention. */
  readonly storeSteadyMbPerHour: number | null
  readonly storeSteadyMeanMb: number | null
  readonly sentinelRssMeanMb: number | null
  readonly sentinelHeapMeanMb: number | null
  readonly eventLoopP99MeanMs: number | null
}

const mb = (bytes: number | null) => (bytes === null ? null : bytes / 1e6)

/** The slopes of a run's series over its judged window (from `startMs + warmupMs` to `endMs`). */
export const slopes = (series: Series, window: Window): Slopes => {
  const from = window.startMs + window.warmupMs
  const inWindow = (points: ReadonlyArray<Point>) => points.filter((p) => p.t >= from && p.t <= window.endMs)
  const lastQuarter = window.endMs - (window.endMs - from) / 4
  const steadyFrom = window.retentionMs === undefined ? undefined : window.startMs + 2 * window.retentionMs
  const steady =
    steadyFrom === undefined ? [] : series.storeBytes.filter((p) => p.t >= steadyFrom && p.t <= window.endMs)
  const sentinelRss = inWindow(series.sentinelRss)
  const sentinelHeap = inWindow(series.sentinelHeap)
  return {
    judgedMinutes: Math.max(0, (window.endMs - from) / 60_000),
    sentinelRssMbPerHour: mb(slopePerHour(sentinelRss)),
    sentinelHeapMbPerHour: mb(slopePerHour(sentinelHeap)),
    pooledRssMbPerHour: mb(pooledSlopePerHour(series.rssByProcess.map(inWindow))),
    pooledHeapMbPerHour: mb(pooledSlopePerHour(series.heapByProcess.map(inWindow))),
    eventLoopP99MsPerHour: slopePerHour(inWindow(series.eventLoopP99)),
    queueAgeSecondsPerHour: slopePerHour(inWindow(series.queueAge)),
    queueAgeMaxLastQuarterSeconds: max(series.queueAge.filter((p) => p.t >= lastQuarter && p.t <= window.endMs)),
    storeMbPerHour: mb(slopePerHour(inWindow(series.storeBytes))),
    storeSteadyMbPerHour: steadyFrom === undefined ? null : mb(slopePerHour(steady)),
    storeSteadyMeanMb: steadyFrom === undefined ? null : mb(mean(steady)),
    sentinelRssMeanMb: mb(mean(sentinelRss)),
    sentinelHeapMeanMb: mb(mean(sentinelHeap)),
    eventLoopP99MeanMs: mean(inWindow(series.eventLoopP99))
  }
}

/** Whether the run is long enough to judge its slopes. */
export const judged = (s: Slopes, thresholds: Thresholds = defaultThresholds): boolean =>
  s.judgedMinutes >= thresholds.minJudgedMinutes

/**
 * What turns a run red on its slopes, one line each; empty when they hold (or when the run is too short to judge).
 * A missing slope (no samples) on a judged run is red too: a soak that measured nothing proves nothing.
 */
export const slopeFailures = (s: Slopes, thresholds: Thresholds = defaultThresholds): Array<string> => {
  if (!judged(s, thresholds)) return []
  const out: Array<string> = []
  const bound = (name: string, value: number | null, limit: number, unit: string) => {
    if (value === null) out.push(`${name}: no samples`)
    else if (value > limit) out.push(`${name} grows ${value.toFixed(2)} ${unit} (bound ${limit})`)
  }
  bound("worker resident set", s.sentinelRssMbPerHour, thresholds.rssMbPerHour, "MB/h")
  bound("worker heap", s.sentinelHeapMbPerHour, thresholds.heapMbPerHour, "MB/h")
  bound("oldest queued age", s.queueAgeSecondsPerHour, thresholds.queueAgeSecondsPerHour, "s/h")
  if (s.queueAgeMaxLastQuarterSeconds === null) out.push("oldest queued age: no samples in the last quarter")
  else if (s.queueAgeMaxLastQuarterSeconds > thresholds.queueAgeMaxSeconds) {
    out.push(
      `oldest queued age reached ${s.queueAgeMaxLastQuarterSeconds.toFixed(1)} s in the last quarter (bound ${thresholds.queueAgeMaxSeconds})`
    )
  }
  if (s.storeSteadyMeanMb !== null && s.storeSteadyMbPerHour !== null) {
    const limit = thresholds.storeFractionPerHour * s.storeSteadyMeanMb
    if (s.storeSteadyMbPerHour > limit) {
      out.push(
        `store size grows ${s.storeSteadyMbPerHour.toFixed(2)} MB/h under retention (bound ${limit.toFixed(2)}: ` +
          `${thresholds.storeFractionPerHour} of its ${s.storeSteadyMeanMb.toFixed(2)} MB mean per hour)`
      )
    }
  }
  return out
}
