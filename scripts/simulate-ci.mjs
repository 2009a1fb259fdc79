// CI's simulator step: runs `slowcall simulate --json` with the given arguments and fails unless every invariant
// holds AND every coverage counter is above zero (a run set that never exercised a fault path proves nothing).
import { spawnSync } from "node:child_process"

const args = process.argv.slice(2)
const run = spawnSync("npm", ["run", "--silent", "simulate", "--", ...args, "--json"], {
  encoding: "utf8",
  maxBuffer: 256 * 1024 * 1024,
  stdio: ["ignore", "pipe", "inherit"]
})
let report
try {
  report = JSON.parse(run.stdout)
} catch {
  console.error(`simulate printed no JSON report (exit ${run.status}):\n${run.stdout.slice(0, 2000)}`)
  process.exit(1)
}
const zero = Object.entries(report.coverage).filter(([, n]) => !(n > 0))
console.log(
  `simulate: seed ${report.seed}, ${report.runs} runs, submitted ${report.submitted}, terminal ${report.terminal}, ` +
    `lost ${report.lost}, duplicate generations ${JSON.stringify(report.duplicateGenerations)}, ` +
    `billed ${report.billedCents}c, ledger ${report.ledgerCents}c (they differ by reservations standing for calls ` +
    `whose settlement never came; I6 and I12 check each call), historyHash ${report.historyHash}`
)
console.log(
  `coverage: ${Object.entries(report.coverage)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ")}`
)
if (report.violations.length > 0) console.error(`violations: ${JSON.stringify(report.violations).slice(0, 4000)}`)
if (zero.length > 0) console.error(`coverage counters at zero: ${zero.map(([k]) => k).join(", ")}`)
process.exit(run.status === 0 && report.violations.length === 0 && zero.length === 0 ? 0 : 1)
