/**
 * One mutant hunt (run by scripts/mutants.ts inside a scratch copy of the repository): runs a fixed seed budget,
 * stops at the first failing run, shrinks it, and prints one JSON line.
 * Usage: node scripts/bundled.mjs packages/simulator/scripts/hunt.ts <seed> <runs> <jobs> <workers> (or with tsx)
 */
import { faultKinds } from "@slowcall/simulator/Plan"
import * as Report from "@slowcall/simulator/Report"
import { simulate } from "@slowcall/simulator/Simulate"

const [seed = "1", runs = "200", jobs = "12", workers = "3"] = process.argv.slice(2)
const report = simulate({
  seed: Number(seed),
  runs: Number(runs),
  jobs: Number(jobs),
  workers: Number(workers),
  faults: faultKinds,
  stopOnFailure: true,
  shrinkBudget: 80
})
const failure = report.failures[0]
process.stdout.write(
  `${JSON.stringify({
    runs: report.runs,
    firstFailureRun: report.firstFailureRun,
    invariants: [...new Set(report.violations.map((v) => v.invariant))],
    message: report.violations[0]?.message ?? null,
    corpus: failure === undefined ? null : { name: Report.corpusName(failure), entry: Report.corpusEntry(failure, "") }
  })}\n`
)
