/**
 * Run sets: many plans from one seed, each checked, failures shrunk to their smallest case (fast-check), with a
 * report that aggregates totals, coverage and a hash of every history. The same options always give the same
 * report.
 *
 * @since 0.1.0
 */
import * as fc from "fast-check"
import {
  type Coverage,
  check,
  emptyCoverage,
  emptyTotals,
  type Totals,
  type Verdict,
  type Violation
} from "./Checkers.js"
import { type Event, hashAll } from "./History.js"
import { mixSeed } from "./internal/prng.js"
import * as Plan from "./Plan.js"
import { type RunPlanOptions, type RunResult, runPlan } from "./Run.js"

/**
 * What a run set is asked to do.
 *
 * @since 0.1.0
 * @category models
 */
export interface SimulateOptions extends RunPlanOptions {
  readonly seed: number
  readonly runs: number
  readonly jobs: number
  readonly workers: number
  readonly faults: ReadonlyArray<Plan.FaultKind>
  /** Every allowed fault kind in every plan (no swarm subsets). */
  readonly allFaults?: boolean | undefined
  /** Shrink failures (default true). */
  readonly shrink?: boolean | undefined
  /** Most plans tried while shrinking one failure. Default 150. */
  readonly shrinkBudget?: number | undefined
  /** Stop at the first failing run (mutant hunting). */
  readonly stopOnFailure?: boolean | undefined
  /**
   * With `stopOnFailure`: stop at the first failing run that breaks one of these invariants (a mutant hunt for its
   * named invariant); failing runs that break only others are reported, neither shrunk nor stopped at.
   */
  readonly stopOn?: ReadonlyArray<string> | undefined
  /**
   * Shrink a failure toward plans that still break one of these invariants, when the failing run broke any of them
   * (a mutant's witness keeps failing on the invariant named for it). Default: any invariant the failing run broke.
   */
  readonly shrinkOn?: ReadonlyArray<string> | undefined
}

/**
 * A failure, shrunk, with everything needed to understand and replay it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Failure {
  readonly run: number
  readonly runSeed: number
  readonly invariants: ReadonlyArray<string>
  /** Violation counts per invariant in the original (unshrunk) run. */
  readonly anomalies: Readonly<Record<string, number>>
  /** fast-check's seed and path of the shrunk case: `fc.assert(property, { seed, path })` replays it in one run. */
  readonly fcSeed: number
  readonly fcPath: string
  /** The shrunk plan, with every derived parameter. */
  readonly plan: Plan.Plan
  readonly violations: ReadonlyArray<Violation>
  readonly faultsFired: Readonly<Record<string, number>>
  readonly timeline: ReadonlyArray<string>
  readonly totals: Totals
  readonly historyHash: string
  /** Whether replaying the shrunk plan gave the same history again. */
  readonly determinism: "ok" | "mismatch"
}

/**
 * The report of a run set; the `--json` output of `slowcall simulate`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Report extends Totals {
  readonly seed: number
  readonly runs: number
  readonly jobs: number
  readonly workers: number
  readonly faults: ReadonlyArray<string>
  readonly violations: ReadonlyArray<{ readonly run: number; readonly invariant: string; readonly message: string }>
  readonly coverage: Coverage
  readonly faultsFired: Readonly<Record<string, number>>
  readonly historyHash: string
  readonly determinism: "ok" | "mismatch"
  /** Runs until the first failure (1-based), or null. */
  readonly firstFailureRun: number | null
  readonly failures: ReadonlyArray<Failure>
}

/**
 * Run a plan and check it.
 *
 * @since 0.1.0
 * @category combinators
 */
export const runAndCheck = (plan: Plan.Plan, options: RunPlanOptions = {}): { run: RunResult; verdict: Verdict } => {
  const run = runPlan(plan, options)
  return { run, verdict: check(run.events, plan, run.outcome, run.defect) }
}

const addTotals = (into: Totals, from: Totals): void => {
  into.submitted += from.submitted
  into.acknowledged += from.acknowledged
  into.terminal += from.terminal
  into.lost += from.lost
  into.duplicateGenerations.excused += from.duplicateGenerations.excused
  into.duplicateGenerations.unexcused += from.duplicateGenerations.unexcused
  into.staleWrites += from.staleWrites
  into.billedCents += from.billedCents
  into.ledgerCents += from.ledgerCents
}

/**
 * A per-worker / per-job timeline of the events that touch the given jobs, in virtual ms from the run's start.
 *
 * @since 0.1.0
 * @category combinators
 */
export const timeline = (events: ReadonlyArray<Event>, jobIds: ReadonlySet<string>, limit = 60): Array<string> => {
  const start = events[0]?.t ?? 0
  const lines: Array<string> = []
  for (const e of events) {
    const at = `+${String(e.t - start).padStart(6)}ms`
    switch (e.k) {
      case "write":
        if (jobIds.has(e.jobId)) {
          lines.push(
            `${at} ${e.who.padEnd(8)} ${e.outcome === null ? e.op : `settle ${e.outcome}`}${e.token === null ? "" : `(t${e.token})`} ${e.ok ? "ok" : "REJECTED"} ${e.res} ${e.before?.state ?? "-"}->${e.after?.state ?? "-"} token ${e.before?.token ?? "-"}->${e.after?.token ?? "-"}`
          )
        }
        break
      case "call":
        if (jobIds.has(e.jobId)) {
          const asked = e.asked < e.t ? ` (asked at +${e.asked - start}ms)` : ""
          lines.push(
            `${at} ${e.who.padEnd(8)} model call t${e.token} ${e.outcome} ${e.cents}c until +${e.end - start}ms${asked}`
          )
        }
        break
      case "msg":
        if (jobIds.has(e.jobId) && e.op !== "extend") lines.push(`${at} ${e.who.padEnd(8)} ${e.op} (job ${e.state})`)
        break
      case "fault":
        lines.push(`${at} ${e.who.padEnd(8)} FAULT ${e.id} at ${e.point}`)
        break
      case "life":
        lines.push(`${at} ${e.who.padEnd(8)} ${e.what}${e.ms === null ? "" : ` ${e.ms}ms`}`)
        break
      case "op":
        if (jobIds.has(e.jobId)) lines.push(`${at} operator ${e.what} (was ${e.before}) ${e.ok ? "ok" : "refused"}`)
        break
      case "lost":
        if (jobIds.has(e.jobId)) lines.push(`${at} ${e.who.padEnd(8)} learns t${e.token} lost (${e.op} reply)`)
        break
      case "reply":
        if (jobIds.has(e.jobId))
          lines.push(`${at} ${e.who.padEnd(8)} reply of ${e.callId.slice(-4)}: billed ${e.cents}c`)
        break
      case "outage":
        lines.push(`${at} store    OUTAGE for ${e.ms}ms`)
        break
      default:
        break
    }
  }
  return lines.length > limit ? [...lines.slice(0, limit / 2), "...", ...lines.slice(-limit / 2)] : lines
}

const countBy = (violations: ReadonlyArray<Violation>): Record<string, number> => {
  const counts: Record<string, number> = {}
  for (const v of violations) counts[v.invariant] = (counts[v.invariant] ?? 0) + 1
  return counts
}

/**
 * Shrink a failing run: fast-check regenerates the plan from `runSeed`, and shrinks while the same invariants
 * keep failing, within `budget` plan runs. Deterministic (no time limit).
 *
 * @since 0.1.0
 * @category combinators
 */
export const shrink = (
  arbitrary: fc.Arbitrary<Plan.Plan>,
  runSeed: number,
  invariants: ReadonlySet<string>,
  budget: number,
  options: RunPlanOptions = {}
): { plan: Plan.Plan; seed: number; path: string } | undefined => {
  let tries = 0
  const details = fc.check(
    fc.property(arbitrary, (plan) => {
      if (tries++ > budget) return true
      const { verdict } = runAndCheck(plan, options)
      return !verdict.violations.some((v) => invariants.has(v.invariant))
    }),
    { seed: runSeed, numRuns: 1 }
  )
  if (!details.failed || details.counterexample === null) return undefined
  return { plan: details.counterexample[0], seed: details.seed, path: details.counterexamplePath ?? "" }
}

/**
 * Replay a shrunk case from fast-check's seed and path in exactly one run.
 *
 * @since 0.1.0
 * @category combinators
 */
export const replayPath = (
  arbitrary: fc.Arbitrary<Plan.Plan>,
  seed: number,
  path: string,
  options: RunPlanOptions = {}
): { plan: Plan.Plan; verdict: Verdict; runs: number } | undefined => {
  let runs = 0
  let found: { plan: Plan.Plan; verdict: Verdict } | undefined
  fc.check(
    fc.property(arbitrary, (plan) => {
      // Only the first value fast-check produces is the replayed case; later ones are not run.
      if (found !== undefined) return true
      runs++
      const { verdict } = runAndCheck(plan, options)
      found = { plan, verdict }
      return verdict.violations.length === 0
    }),
    { seed, path, numRuns: 1, endOnFailure: true }
  )
  return found === undefined ? undefined : { ...found, runs }
}

/**
 * The plan generator a run set uses.
 *
 * @since 0.1.0
 * @category constructors
 */
export const arbitraryFor = (options: SimulateOptions): fc.Arbitrary<Plan.Plan> =>
  Plan.arbitrary({
    jobs: options.jobs,
    workers: options.workers,
    faults: options.faults,
    allFaults: options.allFaults
  })

/**
 * The plan of run `i` of a run set.
 *
 * @since 0.1.0
 * @category constructors
 */
export const planOf = (arbitrary: fc.Arbitrary<Plan.Plan>, runSeed: number): Plan.Plan =>
  fc.sample(arbitrary, { seed: runSeed, numRuns: 1 })[0]!

/**
 * Run a whole run set and build its report. Invariant: a pure function of `options`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const simulate = (options: SimulateOptions): Report => {
  const arbitrary = arbitraryFor(options)
  const totals = emptyTotals()
  const coverage = emptyCoverage()
  const faultsFired: Record<string, number> = {}
  const hashes: Array<string> = []
  const violations: Array<{ run: number; invariant: string; message: string }> = []
  const failures: Array<Failure> = []
  let firstFailureRun: number | null = null
  let determinism: "ok" | "mismatch" = "ok"
  for (let i = 0; i < options.runs; i++) {
    const runSeed = mixSeed(options.seed, i)
    const plan = planOf(arbitrary, runSeed)
    const { run, verdict } = runAndCheck(plan, options)
    hashes.push(run.hash)
    addTotals(totals, verdict.totals)
    for (const key of Object.keys(coverage) as Array<keyof Coverage>) coverage[key] += verdict.coverage[key]
    for (const [id, n] of Object.entries(verdict.faultsFired)) faultsFired[id] = (faultsFired[id] ?? 0) + n
    if (i === 0 && runPlan(plan, options).hash !== run.hash) determinism = "mismatch"
    if (verdict.violations.length === 0) continue
    firstFailureRun ??= i + 1
    for (const v of verdict.violations) violations.push({ run: i, invariant: v.invariant, message: v.message })
    const stopOn = options.stopOnFailure === true ? options.stopOn : undefined
    if (stopOn !== undefined && stopOn.length > 0 && !verdict.violations.some((v) => stopOn.includes(v.invariant))) {
      continue
    }
    if (failures.length < 3) failures.push(failureReport(arbitrary, i, runSeed, plan, verdict, options))
    if (options.stopOnFailure === true) break
  }
  return {
    seed: options.seed,
    runs: hashes.length,
    jobs: options.jobs,
    workers: options.workers,
    faults: options.faults,
    ...totals,
    violations,
    coverage,
    faultsFired,
    historyHash: hashAll(hashes),
    determinism,
    firstFailureRun,
    failures
  }
}

const failureReport = (
  arbitrary: fc.Arbitrary<Plan.Plan>,
  run: number,
  runSeed: number,
  original: Plan.Plan,
  originalVerdict: Verdict,
  options: SimulateOptions
): Failure => {
  const broken = new Set(originalVerdict.violations.map((v) => v.invariant))
  const wanted = (options.shrinkOn ?? []).filter((invariant) => broken.has(invariant))
  const invariants = wanted.length > 0 ? new Set(wanted) : broken
  const shrunk =
    options.shrink === false ? undefined : shrink(arbitrary, runSeed, invariants, options.shrinkBudget ?? 150, options)
  const plan = shrunk?.plan ?? original
  const first = runAndCheck(plan, options)
  const again = runPlan(plan, options)
  const verdict = first.verdict.violations.length > 0 ? first.verdict : originalVerdict
  const jobIds = new Set(verdict.violations.map((v) => v.jobId).filter((id): id is string => id !== null))
  return {
    run,
    runSeed,
    invariants: [...new Set(verdict.violations.map((v) => v.invariant))],
    anomalies: countBy(originalVerdict.violations),
    fcSeed: shrunk?.seed ?? runSeed,
    fcPath: shrunk?.path ?? "0",
    plan,
    violations: verdict.violations,
    faultsFired: verdict.faultsFired,
    timeline: timeline(first.run.events, jobIds),
    totals: verdict.totals,
    historyHash: first.run.hash,
    determinism: again.hash === first.run.hash ? "ok" : "mismatch"
  }
}

/**
 * A one-run report of a saved plan (the `--replay` path).
 *
 * @since 0.1.0
 * @category constructors
 */
export const replayPlan = (plan: Plan.Plan, options: RunPlanOptions = {}): Report => {
  const { run, verdict } = runAndCheck(plan, options)
  const again = runPlan(plan, options)
  const jobIds = new Set(verdict.violations.map((v) => v.jobId).filter((id): id is string => id !== null))
  const failed = verdict.violations.length > 0
  return {
    seed: plan.seed,
    runs: 1,
    jobs: plan.jobs,
    workers: plan.workers,
    faults: plan.faults,
    ...verdict.totals,
    violations: verdict.violations.map((v) => ({ run: 0, invariant: v.invariant, message: v.message })),
    coverage: verdict.coverage,
    faultsFired: verdict.faultsFired,
    historyHash: hashAll([run.hash]),
    determinism: again.hash === run.hash ? "ok" : "mismatch",
    firstFailureRun: failed ? 1 : null,
    failures: failed
      ? [
          {
            run: 0,
            runSeed: plan.seed,
            invariants: [...new Set(verdict.violations.map((v) => v.invariant))],
            anomalies: countBy(verdict.violations),
            fcSeed: plan.seed,
            fcPath: "",
            plan,
            violations: verdict.violations,
            faultsFired: verdict.faultsFired,
            timeline: timeline(run.events, jobIds),
            totals: verdict.totals,
            historyHash: run.hash,
            determinism: again.hash === run.hash ? "ok" : "mismatch"
          }
        ]
      : []
  }
}
