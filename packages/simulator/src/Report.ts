/**
 * Rendering a run set's report: the JSON object of `slowcall simulate --json` and the human-readable text, and
 * the corpus entry a failure is saved as.
 *
 * @since 0.1.0
 */
import type { Plan } from "./Plan.js"
import type { Failure, Report } from "./Simulate.js"

/**
 * The `--json` object: every field issue 3 lists, plus the failures' replay data.
 *
 * @since 0.1.0
 * @category combinators
 */
export const toJson = (report: Report) => ({
  seed: report.seed,
  runs: report.runs,
  jobs: report.jobs,
  workers: report.workers,
  faults: report.faults,
  submitted: report.submitted,
  acknowledged: report.acknowledged,
  terminal: report.terminal,
  lost: report.lost,
  duplicateGenerations: report.duplicateGenerations,
  staleWrites: report.staleWrites,
  billedCents: report.billedCents,
  ledgerCents: report.ledgerCents,
  violations: report.violations,
  coverage: report.coverage,
  faultsFired: report.faultsFired,
  historyHash: report.historyHash,
  determinism: report.determinism,
  firstFailureRun: report.firstFailureRun,
  failures: report.failures.map((f) => ({
    run: f.run,
    invariants: f.invariants,
    anomalies: f.anomalies,
    replay: replayLine(f),
    fcSeed: f.fcSeed,
    fcPath: f.fcPath,
    plan: f.plan,
    faultsFired: f.faultsFired,
    witness: f.violations.map((v) => ({ invariant: v.invariant, message: v.message, events: v.witness })),
    timeline: f.timeline,
    totals: f.totals,
    determinism: f.determinism
  }))
})

/**
 * Whether every coverage counter is above zero.
 *
 * @since 0.1.0
 * @category combinators
 */
export const coverageComplete = (report: Report): boolean => Object.values(report.coverage).every((n) => n > 0)

/**
 * The file name a failure is saved under in a corpus directory.
 *
 * @since 0.1.0
 * @category combinators
 */
export const corpusName = (failure: Failure): string => `${failure.invariants.join("-")}-${failure.historyHash}.json`

/**
 * The command that replays a failure in one run.
 *
 * @since 0.1.0
 * @category combinators
 */
export const replayLine = (failure: Failure, corpusDir = "packages/simulator/corpus"): string =>
  `npm run simulate -- --replay ${corpusDir}/${corpusName(failure)}   (or fast-check: seed ${failure.fcSeed}, path "${failure.fcPath}")`

/**
 * A corpus entry: the shrunk plan and what it broke when it was found. Replaying it must pass on a correct tree.
 *
 * @since 0.1.0
 * @category models
 */
export interface CorpusEntry {
  readonly invariants: ReadonlyArray<string>
  readonly foundWith: string
  readonly fcSeed: number
  readonly fcPath: string
  readonly plan: Plan
}

/**
 * The corpus entry of a failure.
 *
 * @since 0.1.0
 * @category constructors
 */
export const corpusEntry = (failure: Failure, foundWith: string): CorpusEntry => ({
  invariants: failure.invariants,
  foundWith,
  fcSeed: failure.fcSeed,
  fcPath: failure.fcPath,
  plan: failure.plan
})

/**
 * The human-readable report.
 *
 * @since 0.1.0
 * @category combinators
 */
export const format = (report: Report): string => {
  const lines: Array<string> = []
  const ok = report.violations.length === 0
  lines.push(
    `slowcall simulate: seed ${report.seed}, ${report.runs} runs, ${report.jobs} jobs x ${report.workers} workers, faults ${report.faults.join(",") || "none"}`
  )
  lines.push(ok ? "result: every invariant holds" : `result: ${report.violations.length} violation(s)`)
  lines.push(
    `totals: submitted ${report.submitted}, acknowledged ${report.acknowledged}, terminal ${report.terminal}, lost ${report.lost}, duplicate generations ${report.duplicateGenerations.unexcused} unexcused / ${report.duplicateGenerations.excused} excused, stale writes ${report.staleWrites}, billed ${report.billedCents}c vs ledger ${report.ledgerCents}c`
  )
  lines.push(
    `coverage: ${Object.entries(report.coverage)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}${coverageComplete(report) ? "" : "  (some counter is zero: the run set did not exercise it)"}`
  )
  lines.push(
    `faults fired: ${Object.entries(report.faultsFired)
      .sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true }))
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`
  )
  lines.push(`historyHash: ${report.historyHash}   determinism: ${report.determinism}`)
  for (const failure of report.failures) {
    lines.push("")
    lines.push(
      `FAILED run ${failure.run}: ${failure.invariants.join(", ")}  anomalies ${JSON.stringify(failure.anomalies)}`
    )
    lines.push(`replay: ${replayLine(failure)}`)
    lines.push(`determinism: ${failure.determinism}`)
    lines.push(`shrunk plan: ${JSON.stringify(failure.plan)}`)
    lines.push(`faults that fired: ${JSON.stringify(failure.faultsFired)}`)
    for (const v of failure.violations.slice(0, 5)) {
      lines.push(`  ${v.invariant} job ${v.jobId ?? "-"}: ${v.message}`)
      for (const e of v.witness) lines.push(`    witness ${JSON.stringify(e)}`)
    }
    lines.push("  timeline:")
    for (const line of failure.timeline) lines.push(`    ${line}`)
  }
  return lines.join("\n")
}
