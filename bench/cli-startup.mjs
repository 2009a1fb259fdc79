// How long the `slowcall` command and `npm start` take to be useful, measured from outside as a user waits for them:
//
//   npm run bench:cli [-- --runs N] [--json]
//
// - `slowcall --help` and `slowcall jobs list` (against a running `serve --memory`): wall time of the whole process,
//   median of N runs (default 7), after one unmeasured run.
// - `npm start` to a healthy /healthz: from spawning `npm start -- --port P --data-dir D` until GET /healthz answers
//   200, median of N runs. Warm: the data directory exists (PGlite reopens it) and the command's bundle is built.
//   Cold: a new data directory each run (PGlite creates its database first).
// - The bundle build: what the first command after a source edit pays once (scripts/cli-bundle.mjs --force).
// - CPU time (user + system) too, since a busy machine stretches wall time far more than CPU time: of the one-shot
//   commands with GNU time (/usr/bin/time), of `npm start` until healthy from /proc (npm, its shell and the server).
//
// Every process started here is stopped (its process group, SIGTERM) before the next run. Timings depend on the
// machine and its load: quote them with the date, the machine and the command.
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { cpus, loadavg, tmpdir } from "node:os"
import { join } from "node:path"

const root = new URL("..", import.meta.url).pathname
const bin = join(root, "packages/cli/bin/slowcall.mjs")
const args = process.argv.slice(2)
const runsAt = args.indexOf("--runs")
const runs = Math.max(1, Math.min(50, runsAt >= 0 ? Number(args[runsAt + 1]) : 7))
const json = args.includes("--json")

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** GNU time, when installed: the CPU time of a command, which a busy machine inflates far less than wall time. */
const gnuTime = existsSync("/usr/bin/time") ? "/usr/bin/time" : undefined

/** Runs a command to its end: `{ wall, cpu }` in ms (cpu: user + system, or null without GNU time). */
const timed = (command, argv, options = {}) =>
  new Promise((resolve, reject) => {
    const started = performance.now()
    const [file, fileArgs] = gnuTime === undefined ? [command, argv] : [gnuTime, ["-f", "cpu %U %S", command, ...argv]]
    const child = spawn(file, fileArgs, { cwd: root, stdio: ["ignore", "ignore", "pipe"], ...options })
    let stderr = ""
    child.stderr.on("data", (chunk) => {
      stderr += chunk
    })
    child.once("exit", (code) => {
      const wall = performance.now() - started
      if (code !== 0) return reject(new Error(`${command} ${argv.join(" ")} exited with ${code}: ${stderr}`))
      const cpu = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(stderr)
      resolve({ wall, cpu: cpu === null ? null : (Number(cpu[1]) + Number(cpu[2])) * 1000 })
    })
  })

const freePort = () =>
  new Promise((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

const healthy = async (port) => {
  try {
    return (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200
  } catch {
    return false
  }
}

/** Starts a long-running process in its own group; `stop` ends the group and waits for it. */
const background = (command, argv) => {
  const child = spawn(command, argv, { cwd: root, stdio: "ignore", detached: true })
  const exited = new Promise((resolve) => child.once("exit", resolve))
  return {
    child,
    stop: async () => {
      try {
        process.kill(-child.pid, "SIGTERM")
      } catch {
        // already gone
      }
      const forced = setTimeout(() => {
        try {
          process.kill(-child.pid, "SIGKILL")
        } catch {
          // already gone
        }
      }, 20_000)
      await exited
      clearTimeout(forced)
    }
  }
}

/**
 * The CPU time (user + system, ms) the processes of group `pgid` have used so far, from /proc (Linux; null
 * elsewhere). Clock ticks are taken as 100 per second, the kernel's USER_HZ on Linux.
 */
const groupCpu = (pgid) => {
  if (!existsSync("/proc/self/stat")) return null
  let ticks = 0
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      // after the command name: state (3), ppid, pgrp (5), ..., utime (14), stime (15)
      if (Number(fields[2]) === pgid) ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // ended meanwhile
    }
  }
  return ticks * 10
}

/** `{ wall, cpu }` ms from spawning `npm start` until /healthz answers 200 (at most 120 s). */
const startToHealthy = async (dataDir) => {
  const port = await freePort()
  const started = performance.now()
  const npmStart = background("npm", ["start", "--silent", "--", "--port", String(port), "--data-dir", dataDir])
  try {
    while (performance.now() - started < 120_000) {
      if (await healthy(port)) return { wall: performance.now() - started, cpu: groupCpu(npmStart.child.pid) }
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    throw new Error("npm start: /healthz did not answer 200 within 120 s")
  } finally {
    await npmStart.stop()
  }
}

/** One unmeasured run, then `runs` measured ones; a sample is a wall time in ms or `{ wall, cpu }`. */
const measure = async (label, once) => {
  await once()
  const samples = []
  for (let i = 0; i < runs; i++) samples.push(await once())
  const walls = samples.map((s) => (typeof s === "number" ? s : s.wall))
  const cpus = samples.map((s) => (typeof s === "number" ? null : s.cpu)).filter((c) => c !== null)
  return {
    label,
    medianMs: Math.round(median(walls)),
    cpuMedianMs: cpus.length === 0 ? null : Math.round(median(cpus)),
    samplesMs: walls.map(Math.round)
  }
}

const results = []
const scratch = mkdtempSync(join(tmpdir(), "slowcall-bench-cli-"))
try {
  const build = await timed(process.execPath, [join(root, "scripts/cli-bundle.mjs"), "--force"])
  results.push({
    label: "bundle build (first command after a source edit)",
    medianMs: Math.round(build.wall),
    // esbuild builds in a process of its own, which GNU time does not count
    cpuMedianMs: null
  })

  results.push(await measure("slowcall --help", () => timed(process.execPath, [bin, "--help"])))

  const port = await freePort()
  const server = background(process.execPath, [bin, "serve", "--memory", "--port", String(port)])
  try {
    for (let i = 0; i < 600 && !(await healthy(port)); i++) await new Promise((resolve) => setTimeout(resolve, 50))
    results.push(
      await measure("slowcall jobs list (server running)", () =>
        timed(process.execPath, [bin, "jobs", "list", "--url", `http://127.0.0.1:${port}`])
      )
    )
  } finally {
    await server.stop()
  }

  const warmDir = join(scratch, "warm")
  results.push(await measure("npm start to healthy /healthz, warm", () => startToHealthy(warmDir)))
  let cold = 0
  results.push(
    await measure("npm start to healthy /healthz, cold", () => startToHealthy(join(scratch, `cold-${cold++}`)))
  )
} finally {
  rmSync(scratch, { recursive: true, force: true })
}

const machine = {
  date: new Date().toISOString().slice(0, 10),
  node: process.version,
  cpus: `${cpus().length} x ${cpus()[0]?.model ?? "?"}`,
  loadAverage1m: Math.round(loadavg()[0] * 100) / 100,
  runs
}
if (json) console.log(JSON.stringify({ machine, results }))
else {
  console.log(
    `${machine.date}, Node ${machine.node}, ${machine.cpus}, load ${machine.loadAverage1m}, median of ${runs}`
  )
  console.log(`${"".padEnd(52)} ${"wall".padStart(9)} ${"cpu".padStart(9)}`)
  for (const r of results) {
    const cpu = r.cpuMedianMs === null || r.cpuMedianMs === undefined ? "" : `${r.cpuMedianMs} ms`
    console.log(`${r.label.padEnd(52)} ${`${r.medianMs} ms`.padStart(9)} ${cpu.padStart(9)}`)
  }
}
