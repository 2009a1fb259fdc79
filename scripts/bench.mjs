// `npm run bench`: slowcall side by side with peer job queues in one run of the shared benchmark harness.
//
// 1. Installs the peers with the harness's own `setup.sh` when their folder (ANCHORS_DEPS, default /tmp/anchors)
//    is missing; that script also starts PostgreSQL and Redis when they are down.
// 2. Runs the harness's `run.mjs` with the peers plus bench/slowcall.mjs, writing the raw results and the log to
//    bench/results/run-<stamp>.{json,log} in this repository (the harness folder is never written to).
// 3. Renders the tables with the harness's `report.mjs` to bench/results/tables-<stamp>.md and prints them.
//
// Every argument is passed to run.mjs (`npm run bench -- --quick --reps 1`). Without `--peers` the peers are
// BENCH_PEERS below; with it, bench/slowcall.mjs is appended unless already named. The harness is looked up at
// ANCHORS_HARNESS, default ../shared/bench beside the repository.
import { spawn, spawnSync } from "node:child_process"
import { createWriteStream, existsSync, mkdirSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"

const BENCH_PEERS = ["bullmq", "graphile-batched", "pgboss-fetch"]

const root = resolve(import.meta.dirname, "..")
const harness = resolve(process.env.ANCHORS_HARNESS ?? join(root, "..", "shared", "bench"))
const deps = process.env.ANCHORS_DEPS ?? "/tmp/anchors"
const adapter = join(root, "bench", "slowcall.mjs")
// run.mjs (and the worker processes it forks) run in the repository root, so the adapter's key in the tables is
// this short relative path.
const adapterKey = "bench/slowcall.mjs"
const resultsDir = join(root, "bench", "results")

if (!existsSync(join(harness, "run.mjs"))) {
  console.error(`benchmark harness not found at ${harness} (set ANCHORS_HARNESS)`)
  process.exit(1)
}

if (!existsSync(deps)) {
  console.error(`peers not installed in ${deps}: running ${join(harness, "setup.sh")}`)
  const setup = spawnSync("bash", [join(harness, "setup.sh")], { stdio: "inherit", env: process.env })
  if (setup.status !== 0) process.exit(setup.status ?? 1)
}

const args = process.argv.slice(2)
const peersAt = args.findIndex((arg) => arg === "--peers" || arg.startsWith("--peers="))
if (peersAt === -1) {
  args.unshift("--peers", [...BENCH_PEERS, adapterKey].join(","))
} else {
  const inline = args[peersAt].startsWith("--peers=")
  const valueAt = inline ? peersAt : peersAt + 1
  const current = inline ? args[peersAt].slice("--peers=".length) : (args[valueAt] ?? "")
  const names = current.split(",").filter(Boolean)
  if (!names.some((name) => resolve(root, name) === adapter)) names.push(adapterKey)
  args[valueAt] = inline ? `--peers=${names.join(",")}` : names.join(",")
}

const stamp = new Date()
  .toISOString()
  .replace(/[-:]/g, "")
  .replace(/\.\d+Z$/, "Z")
mkdirSync(resultsDir, { recursive: true })
const runFile = join(resultsDir, `run-${stamp}.json`)
const logFile = join(resultsDir, `run-${stamp}.log`)
const tablesFile = join(resultsDir, `tables-${stamp}.md`)
const runArgs = [join(harness, "run.mjs"), ...args, "--out", runFile]
console.error(`node ${runArgs.map((arg) => (arg === "" ? "''" : arg)).join(" ")}`)

// run.mjs logs progress on stderr: show it and keep a copy beside the results.
const log = createWriteStream(logFile)
const child = spawn(process.execPath, runArgs, { cwd: root, stdio: ["ignore", "inherit", "pipe"] })
child.stderr.on("data", (chunk) => {
  process.stderr.write(chunk)
  log.write(chunk)
})
const code = await new Promise((done) => child.on("close", (status) => done(status ?? 1)))
log.end()
if (code !== 0 || !existsSync(runFile)) {
  console.error(`run.mjs exited with ${code}`)
  process.exit(code || 1)
}

const report = spawnSync(process.execPath, [join(harness, "report.mjs"), runFile], { encoding: "utf8" })
if (report.status !== 0) {
  process.stderr.write(report.stderr)
  process.exit(report.status ?? 1)
}
writeFileSync(tablesFile, report.stdout)
console.log(report.stdout)
console.error(`results: ${runFile}\ntables:  ${tablesFile}`)
