// `npm test`: the one command that runs everything CI runs, in order, and ends with one summary line
// ("N passed, N failed") counting every vitest test plus every non-vitest step.
import { spawnSync } from "node:child_process"
import { mkdirSync, readFileSync, rmSync } from "node:fs"
import { ensureInstalled } from "./ensure-installed.mjs"

// The first command on a fresh clone may be `npm test`: install from the lock first when node_modules is missing or
// stale.
ensureInstalled()

const restartTest = "packages/adapter-postgres/test/Restart.integration.test.ts"
const steps = [
  { name: "typecheck", cmd: "npm run --silent check" },
  { name: "lint", cmd: "npm run --silent lint" },
  { name: "docs build", cmd: "npm run --silent docs:build" },
  // Every public package builds, packs, and passes publint and arethetypeswrong as it would be published.
  { name: "packages: publint + attw", cmd: "npm run --silent pack:check" },
  // Every test file but the one that restarts the Postgres server, which would cut other files' connections.
  {
    name: "vitest",
    cmd: `npx vitest run --exclude '${restartTest}' --reporter=default --reporter=json --outputFile=test-output/vitest.json`,
    report: "test-output/vitest.json"
  },
  {
    name: "vitest (server restart, alone)",
    cmd: `npx vitest run ${restartTest} --reporter=default --reporter=json --outputFile=test-output/vitest-restart.json`,
    report: "test-output/vitest-restart.json"
  },
  { name: "examples", cmd: "npm run --silent examples" },
  // The other Node lines `engines` names: core's unit suites and the conformance suites on the memory Store and PGlite.
  { name: "node 22: unit + conformance", cmd: "node scripts/node-versions.mjs 22" },
  { name: "node 24: unit + conformance", cmd: "node scripts/node-versions.mjs 24" },
  // The shipped `serve` processes on real servers under seeded faults (kills, pauses, the database down, cut
  // connections, the emulator restarted): nothing lost, stuck, doubled without excuse, under-counted or duplicated.
  // Small runs (about a minute each); Redis with appendfsync always, the setting that loses nothing.
  { name: "chaos: pg", cmd: "npm run --silent chaos -- --backend pg --jobs 40 --minutes 0.5 --seed 10 --json" },
  {
    name: "chaos: redis",
    cmd: "npm run --silent chaos -- --backend redis --redis-fsync always --jobs 40 --minutes 0.5 --seed 3 --json"
  },
  { name: "chaos: pg+sqs", cmd: "npm run --silent chaos -- --backend pg+sqs --jobs 40 --minutes 0.5 --seed 6 --json" },
  // The acceptance run of the simulator: 2,000 plans, every invariant, every coverage counter above zero.
  { name: "simulator: 2,000 plans", cmd: "node scripts/simulate-ci.mjs --seed 1 --runs 2000" },
  // Every known-bug mutant must turn the simulator red on its named invariant; the clean tree passes the same budget.
  { name: "mutants", cmd: "npm run --silent mutants" }
]

mkdirSync("test-output", { recursive: true })
let passed = 0
let failed = 0
const failures = []
for (const step of steps) {
  console.log(`\n== ${step.name}: ${step.cmd}`)
  if (step.report) rmSync(step.report, { force: true })
  const started = process.hrtime.bigint()
  const { status } = spawnSync(step.cmd, {
    shell: true,
    stdio: "inherit",
    env: { ...process.env, FORCE_COLOR: "0", NO_COLOR: "1" }
  })
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  if (step.report) {
    let report
    try {
      report = JSON.parse(readFileSync(step.report, "utf8"))
    } catch {
      report = undefined
    }
    if (report === undefined || report.numTotalTests === 0) {
      failed += 1
      failures.push(`${step.name}: no test report`)
    } else {
      passed += report.numPassedTests
      failed += report.numFailedTests + (status === 0 ? 0 : report.numFailedTests === 0 ? 1 : 0)
      if (status !== 0) failures.push(`${step.name}: ${report.numFailedTests} failed tests (exit ${status})`)
      if (report.numPendingTests + report.numTodoTests > 0) {
        failed += 1
        failures.push(`${step.name}: ${report.numPendingTests + report.numTodoTests} skipped or todo tests`)
      }
    }
  } else if (status === 0) {
    passed += 1
  } else {
    failed += 1
    failures.push(`${step.name}: exit ${status}`)
  }
  console.log(`== ${step.name}: ${status === 0 ? "ok" : "FAILED"} in ${seconds.toFixed(1)} s`)
}
for (const f of failures) console.log(`FAILED ${f}`)
console.log(`\nslowcall: ${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
