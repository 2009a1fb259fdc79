// `npm run bench:compare`: slowcall side by side with its peers in one run of the shared benchmark harness, and the
// ratios the benchmarks page quotes, computed from that one run.
//
// 1. Installs the peers with the harness's own `setup.sh` when their folder (ANCHORS_DEPS, default /tmp/anchors) is
//    missing; that script also starts PostgreSQL and Redis when they are down.
// 2. Runs the harness's `run.mjs` for the peers (BullMQ, Graphile Worker plain and batched) and slowcall's adapters
//    (bench/slowcall.mjs on the Postgres server, bench/slowcall-redis.mjs on Redis), one after the other on the same
//    machine, one run.mjs each (a run that fails is tried once more), merging the raw results into
//    bench/results/run-<stamp>.json beside the log (the harness folder is never written to), and the harness's
//    tables to bench/results/tables-<stamp>.md.
// 3. Measures, the same day, what Postgres allows for slowcall's own batched statements (bench/ceiling.mjs through
//    pgbench) and slowcall on embedded PGlite in one process (bench/pglite.mjs: PGlite cannot be shared by the
//    harness's two processes), and memory with a backlog (bench/memory.mjs: a worker's resident set with 100,000 and
//    1,000,000 jobs queued, bytes per queued job on disk), and prints them beside the ratios.
// 4. Prints the ratios; with `--json` the last line is one JSON object:
//    {"w1":{"pg_vs_graphile_batched":r,"redis_vs_bullmq":r},"w2_p50":{"pg_vs_graphile":r,"redis_vs_bullmq":r},
//     "w4":{"pg_1m_vs_1k":r,"redis_100k_vs_1k":r},"enqueue":{"pg_bulk_vs_graphile":r,"pg_single_vs_graphile":r},
//     "worker_cpu_ms_per_job":{"pg":x,"graphile_batched":x,"bullmq":x}}
//    (w1 and enqueue: higher is better; w2 and w4: lower is better; a figure the run did not measure is null).
//    Everything, ceiling and PGlite included, is also written to bench/results/compare-<stamp>.json.
//
// Own flags: --json, --no-ceiling, --no-pglite, --no-memory. Every other argument goes to run.mjs (`--quick`, `--reps 1`,
// `--workloads w1,w2`, `--peers ...`); without `--reps` one repetition is run. ANCHORS_HARNESS points at another copy of
// the harness (default ../shared/bench beside the repository).
import { spawn, spawnSync } from "node:child_process"
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"

const root = resolve(import.meta.dirname, "..")
const harness = resolve(process.env.ANCHORS_HARNESS ?? join(root, "..", "shared", "bench"))
const deps = process.env.ANCHORS_DEPS ?? "/tmp/anchors"
const resultsDir = join(root, "bench", "results")
const PG = "bench/slowcall.mjs"
const REDIS = "bench/slowcall-redis.mjs"
const PEERS = ["bullmq", "graphile", "graphile-batched", PG, REDIS]

const own = new Set(["--json", "--no-ceiling", "--no-pglite", "--no-memory"])
const argv = process.argv.slice(2)
const flags = new Set(argv.filter((a) => own.has(a)))
const args = argv.filter((a) => !own.has(a))
const quick = args.includes("--quick")
if (!args.some((a) => a === "--reps" || a.startsWith("--reps="))) args.push("--reps", "1")
/** The peers to run: the `--peers` given (taken out of the harness arguments), else all of them. */
const peersAt = args.findIndex((a) => a === "--peers" || a.startsWith("--peers="))
const peers =
  peersAt < 0
    ? PEERS
    : (args[peersAt].startsWith("--peers=") ? args[peersAt].slice("--peers=".length) : (args[peersAt + 1] ?? ""))
        .split(",")
        .filter(Boolean)
if (peersAt >= 0) args.splice(peersAt, args[peersAt].startsWith("--peers=") ? 1 : 2)

if (!existsSync(join(harness, "run.mjs"))) {
  console.error(`benchmark harness not found at ${harness} (set ANCHORS_HARNESS)`)
  process.exit(1)
}
if (!existsSync(deps)) {
  console.error(`peers not installed in ${deps}: running ${join(harness, "setup.sh")}`)
  const setup = spawnSync("bash", [join(harness, "setup.sh")], { stdio: ["ignore", 2, 2], env: process.env })
  if (setup.status !== 0) process.exit(setup.status ?? 1)
}

const stamp = new Date()
  .toISOString()
  .replace(/[-:]/g, "")
  .replace(/\.\d+Z$/, "Z")
mkdirSync(resultsDir, { recursive: true })
const runFile = join(resultsDir, `run-${stamp}.json`)
const logFile = join(resultsDir, `run-${stamp}.log`)
const tablesFile = join(resultsDir, `tables-${stamp}.md`)
const compareFile = join(resultsDir, `compare-${stamp}.json`)

/** Runs `node file args` in the repository root (with `env` added); its stderr is shown and kept in the run's log. */
const runNode = (file, fileArgs, log, env = {}) =>
  new Promise((done) => {
    const shown = Object.entries(env).map(([key, value]) => `${key}=${value} `)
    console.error(`${shown.join("")}node ${[file, ...fileArgs].map((arg) => (arg === "" ? "''" : arg)).join(" ")}`)
    const child = spawn(process.execPath, [file, ...fileArgs], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env }
    })
    let stdout = ""
    child.stdout.on("data", (chunk) => {
      stdout += chunk
    })
    child.stderr.on("data", (chunk) => {
      process.stderr.write(chunk)
      log.write(chunk)
    })
    child.on("close", (status) => done({ status: status ?? 1, stdout }))
  })

// The workloads of this run, as the harness will read them (its default: W1-W4).
const workloadsAt = args.findIndex((a) => a === "--workloads" || a.startsWith("--workloads="))
const workloads = (
  workloadsAt < 0
    ? "w1,w2,w3,w4"
    : args[workloadsAt].startsWith("--workloads=")
      ? args[workloadsAt].slice("--workloads=".length)
      : (args[workloadsAt + 1] ?? "")
)
  .split(",")
  .filter(Boolean)
if (workloadsAt >= 0) args.splice(workloadsAt, args[workloadsAt].startsWith("--workloads=") ? 1 : 2)
const SLOW_CALLS = new Set(["w5", "w6", "w6b", "w7"])

/**
 * The harness runs of one peer: one for every workload, except for slowcall's adapters, whose slow-call workloads
 * (W5-W7) run apart with the Worker's default `prefetch` of 0. The prefetch of 500 (bench/common.mjs, Graphile's
 * batched local queue) is what short no-op jobs at high rates want (W1-W4); with calls of seconds it only keeps jobs
 * from the other workers: in W6 the victim then holds all 200 jobs, the survivor starts none, and the kill lands
 * while the victim's first calls end. A `SLOWCALL_BENCH_PREFETCH` in the environment applies to every workload.
 */
const runsOf = (name) => {
  const ours = name === PG || name === REDIS
  if (!ours || process.env.SLOWCALL_BENCH_PREFETCH !== undefined) return [{ workloads, env: {} }]
  const fast = workloads.filter((w) => !SLOW_CALLS.has(w))
  const slow = workloads.filter((w) => SLOW_CALLS.has(w))
  return [
    ...(fast.length > 0 ? [{ workloads: fast, env: {} }] : []),
    ...(slow.length > 0 ? [{ workloads: slow, env: { SLOWCALL_BENCH_PREFETCH: "0" } }] : [])
  ]
}

/** A peer's results of two harness runs: each workload's rows from the run that measured it. */
const mergePeer = (before, after) => {
  if (before === undefined) return after
  const out = { ...before, skipped: { ...before.skipped, ...after.skipped } }
  for (const [key, value] of Object.entries(after)) {
    if (/^w\d/.test(key) && Array.isArray(value) && value.length > 0) out[key] = value
  }
  return out
}

// One harness run per peer (two for slowcall's adapters, see `runsOf`), merged into one results file: a run that
// fails (a peer's own client crashing on a connection the harness terminated, say) is run once more, and never takes
// the others' figures with it.
const log = createWriteStream(logFile)
let merged
for (const name of peers) {
  for (const [i, run] of runsOf(name).entries()) {
    const part = join(resultsDir, `run-${stamp}-${name.replace(/[^a-z0-9-]+/gi, "_")}-${i}.json`)
    const runArgs = [...args, "--workloads", run.workloads.join(","), "--peers", name, "--out", part]
    let status = 1
    for (let attempt = 1; attempt <= 2 && status !== 0; attempt++) {
      status = (await runNode(join(harness, "run.mjs"), runArgs, log, run.env)).status
      if (status !== 0) console.error(`run.mjs for ${name} exited with ${status}${attempt === 1 ? ": once more" : ""}`)
    }
    if (status !== 0 || !existsSync(part)) {
      log.end()
      process.exit(status || 1)
    }
    const result = JSON.parse(readFileSync(part, "utf8"))
    if (merged === undefined) merged = { ...result, peers: {}, suiteSeconds: 0 }
    for (const [peer, rows] of Object.entries(result.peers)) merged.peers[peer] = mergePeer(merged.peers[peer], rows)
    merged.finishedAt = result.finishedAt
    merged.suiteSeconds += result.suiteSeconds ?? 0
    merged.machine = { ...merged.machine, loadavgEnd: result.machine?.loadavgEnd }
    rmSync(part, { force: true })
  }
}
writeFileSync(runFile, `${JSON.stringify(merged, null, 2)}\n`)
const report = spawnSync(process.execPath, [join(harness, "report.mjs"), runFile], { encoding: "utf8" })
if (report.status === 0) writeFileSync(tablesFile, report.stdout)

/** The last line of a script's stdout, parsed as JSON, or null when it printed none. */
const lastJson = (stdout) => {
  const line = stdout.trim().split("\n").pop()
  try {
    return JSON.parse(line)
  } catch {
    return null
  }
}
const ceiling = flags.has("--no-ceiling")
  ? null
  : lastJson(
      (await runNode(join(root, "bench", "ceiling.mjs"), quick ? ["--quick", "--json"] : ["--json"], log)).stdout
    )
const pglite = flags.has("--no-pglite")
  ? null
  : lastJson((await runNode(join(root, "bench", "pglite.mjs"), quick ? ["--quick", "--json"] : ["--json"], log)).stdout)
const memory = flags.has("--no-memory")
  ? null
  : lastJson((await runNode(join(root, "bench", "memory.mjs"), quick ? ["--quick", "--json"] : ["--json"], log)).stdout)
log.end()

const run = JSON.parse(readFileSync(runFile, "utf8"))
const median = (xs) => {
  const v = xs.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b)
  return v.length === 0 ? null : v[Math.floor((v.length - 1) / 2)]
}
/** The run's results of a peer, found by its key (a harness name, or an adapter path ending as given). */
const peer = (key) => {
  const entry = Object.entries(run.peers ?? {}).find(([k]) => k === key || k.endsWith(key))
  return entry?.[1]
}
const w1 = (key, pick) => median((peer(key)?.w1 ?? []).map(pick))
const w2p50 = (key) => median((peer(key)?.w2 ?? []).map((r) => r.p50))
/** W4: the median time of the measured window at `backlog`, or null. */
const w4ms = (key, backlog) => {
  const b = (peer(key)?.w4 ?? []).find((x) => x.backlog === backlog)
  return median((b?.reps ?? []).map((r) => r.ms))
}
const ratio = (a, b) => (a === null || b === null || b === 0 ? null : Math.round((a / b) * 100) / 100)
const cpuPerJob = (key) =>
  w1(key, (r) => (r.process?.completed > 0 ? r.process.workerCpuMs / r.process.completed : null))
const round3 = (x) => (x === null ? null : Math.round(x * 1000) / 1000)

const ratios = {
  w1: {
    pg_vs_graphile_batched: ratio(
      w1(PG, (r) => r.process?.jobsPerS),
      w1("graphile-batched", (r) => r.process?.jobsPerS)
    ),
    redis_vs_bullmq: ratio(
      w1(REDIS, (r) => r.process?.jobsPerS),
      w1("bullmq", (r) => r.process?.jobsPerS)
    )
  },
  w2_p50: {
    pg_vs_graphile: ratio(w2p50(PG), w2p50("graphile")),
    redis_vs_bullmq: ratio(w2p50(REDIS), w2p50("bullmq"))
  },
  w4: {
    pg_1m_vs_1k: ratio(w4ms(PG, 1_000_000), w4ms(PG, 1_000)),
    redis_100k_vs_1k: ratio(w4ms(REDIS, 100_000), w4ms(REDIS, 1_000))
  },
  enqueue: {
    pg_bulk_vs_graphile: ratio(
      w1(PG, (r) => r.enqueueBulk?.jobsPerS),
      w1("graphile", (r) => r.enqueueBulk?.jobsPerS)
    ),
    pg_single_vs_graphile: ratio(
      w1(PG, (r) => r.enqueueSingle?.jobsPerS),
      w1("graphile", (r) => r.enqueueSingle?.jobsPerS)
    )
  },
  worker_cpu_ms_per_job: {
    pg: round3(cpuPerJob(PG)),
    graphile_batched: round3(cpuPerJob("graphile-batched")),
    bullmq: round3(cpuPerJob("bullmq"))
  }
}

writeFileSync(
  compareFile,
  `${JSON.stringify({ stamp, run: runFile, tables: tablesFile, ratios, ceiling, pglite, memory }, null, 2)}\n`
)
if (report.status === 0) console.log(report.stdout)
if (ceiling !== null) console.log(`ceiling (pgbench, slowcall's batched statements): ${JSON.stringify(ceiling)}`)
if (pglite !== null) console.log(`slowcall on embedded PGlite, one process: ${JSON.stringify(pglite)}`)
if (memory !== null) console.log(`memory with a backlog (Postgres server): ${JSON.stringify(memory)}`)
console.error(`results: ${runFile}\ntables:  ${tablesFile}\ncompare: ${compareFile}`)
console.log(flags.has("--json") ? JSON.stringify(ratios) : JSON.stringify(ratios, null, 2))
