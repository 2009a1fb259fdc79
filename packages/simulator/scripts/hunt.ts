/**
 * One mutant hunt (run by scripts/mutants.ts inside a scratch copy of the repository): runs a fixed seed budget,
 * stops at the first failing run, shrinks it, and prints one JSON line. With `--replay FILE` it replays one corpus
 * entry instead (a mutant's witness) and prints the invariants it broke.
 * Usage: node scripts/bundled.mjs packages/simulator/scripts/hunt.ts <seed> <runs> <jobs> <workers> [I1,I2] (or tsx);
 *        the optional last argument names the invariants to hunt for: the hunt stops at the first run that breaks
 *        one of them, and the shrunk witness must keep breaking it
 *        node scripts/bundled.mjs packages/simulator/scripts/hunt.ts --replay <corpus entry>
 */
import { readFileSync } from "node:fs"
import { faultKinds } from "@slowcall/simulator/Plan"
import * as Report from "@slowcall/simulator/Report"
import { replayPlan, simulate } from "@slowcall/simulator/Simulate"

const args = process.argv.slice(2)
if (args[0] === "--replay") {
  const entry = JSON.parse(readFileSync(args[1] ?? "", "utf8")) as Report.CorpusEntry
  const report = replayPlan(entry.plan)
  process.stdout.write(`${JSON.stringify({ invariants: [...new Set(report.violations.map((v) => v.invariant))] })}\n`)
} else {
  const [seed = "1", runs = "200", jobs = "12", workers = "3", shrinkOn = ""] = args
  const report = simulate({
    seed: Number(seed),
    runs: Number(runs),
    jobs: Number(jobs),
    workers: Number(workers),
    faults: faultKinds,
    stopOnFailure: true,
    // A hunt for named invariants stops at the first run that breaks one of them.
    stopOn: shrinkOn === "" ? undefined : shrinkOn.split(","),
    shrinkBudget: 80,
    shrinkOn: shrinkOn === "" ? undefined : shrinkOn.split(",")
  })
  const failure = report.failures[0]
  process.stdout.write(
    `${JSON.stringify({
      runs: report.runs,
      firstFailureRun: report.firstFailureRun,
      // The run the hunt stopped at: the first that broke a named invariant (when it was given one).
      killRun: report.failures[0] === undefined ? null : report.failures[0].run + 1,
      invariants: [...new Set(report.violations.map((v) => v.invariant))],
      message: report.violations[0]?.message ?? null,
      corpus:
        failure === undefined ? null : { name: Report.corpusName(failure), entry: Report.corpusEntry(failure, "") }
    })}\n`
  )
}
