/**
 * Rendering a run set's report: the JSON object of `slowcall simulate --json` and the human-readable text, and
 * the corpus entry a failure is saved as.
 *
 * @since 0.1.0
 */
import { faultKinds, faultLabel, type Plan } from "./Plan.js"
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

/** Fault kinds with their names and counts, in catalog order: `F5 store write fails: 12, F6 ...`. */
const firedList = (fired: { readonly [kind: string]: number }): string => {
  const entries = Object.entries(fired).sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true }))
  return entries.length === 0 ? "none" : entries.map(([kind, n]) => `${faultLabel(kind)}: ${n}`).join(", ")
}

/**
 * The provider's bill against slowcall's charge ledger, and what their difference means. A call's estimate is reserved
 * before the call; a reservation whose settlement never came (the worker crashed, or lost the reply mid-call) stands
 * as the record, above or below what the provider billed for that call. So the totals may differ either way without
 * a violation; the checkers judge each call (I6: every billed call is in the ledger; I12: a call whose amount reached
 * a live worker is settled at it).
 *
 * @since 0.3.0
 * @category combinators
 */
export const costLine = (billedCents: number, ledgerCents: number): string => {
  const totals = `billed ${billedCents}c, ledger ${ledgerCents}c`
  if (ledgerCents === billedCents) return `${totals} (equal)`
  const gap = Math.abs(ledgerCents - billedCents)
  const side = ledgerCents > billedCents ? "more" : "less"
  return `${totals} (${gap}c ${side} in the ledger: reservations standing for calls whose settlement never came, a crash or a lost reply mid-call; each call is checked by I6 and I12)`
}

/**
 * The human-readable report.
 *
 * @since 0.1.0
 * @category combinators
 */
export const format = (report: Report): string => {
  const lines: Array<string> = []
  const ok = report.violations.length === 0
  const faults =
    report.faults.length === 0
      ? "none"
      : report.faults.length === faultKinds.length
        ? `all ${faultKinds.length} kinds`
        : report.faults.map(faultLabel).join(", ")
  lines.push(
    `slowcall simulate: seed ${report.seed}, ${report.runs} runs, ${report.jobs} jobs x ${report.workers} workers, faults: ${faults}`
  )
  lines.push(ok ? "result: every invariant holds" : `result: ${report.violations.length} violation(s)`)
  lines.push(
    `totals: submitted ${report.submitted}, acknowledged ${report.acknowledged}, terminal ${report.terminal}, lost ${report.lost}, duplicate generations ${report.duplicateGenerations.unexcused} unexcused / ${report.duplicateGenerations.excused} excused, stale writes ${report.staleWrites}`
  )
  lines.push(`cost: ${costLine(report.billedCents, report.ledgerCents)}`)
  lines.push(
    `coverage: ${Object.entries(report.coverage)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}${coverageComplete(report) ? "" : "  (some counter is zero: the run set did not exercise it)"}`
  )
  lines.push(`faults fired: ${firedList(report.faultsFired)}`)
  lines.push(`historyHash: ${report.historyHash}   determinism: ${report.determinism}`)
  for (const failure of report.failures) {
    lines.push("")
    lines.push(
      `FAILED run ${failure.run}: ${failure.invariants.join(", ")}  anomalies ${JSON.stringify(failure.anomalies)}`
    )
    lines.push(`replay: ${replayLine(failure)}`)
    lines.push(`determinism: ${failure.determinism}`)
    lines.push(`shrunk plan: ${JSON.stringify(failure.plan)}`)
    lines.push(`faults that fired: ${firedList(failure.faultsFired)}`)
    for (const v of failure.violations.slice(0, 5)) {
      lines.push(`  ${v.invariant} job ${v.jobId ?? "-"}: ${v.message}`)
      for (const e of v.witness) lines.push(`    witness ${JSON.stringify(e)}`)
    }
    lines.push("  timeline:")
    for (const line of failure.timeline) lines.push(`    ${line}`)
  }
  return lines.join("\n")
}
