// `node bench/explain.mjs [--redis] [--pickup] [--n N]`: where the time of two benchmark misses goes, measured with
// the same adapter files the peer harness runs (bench/slowcall.mjs, bench/slowcall-redis.mjs), in one process.
//
// --redis   W1 on Redis, seen from the server: N jobs bulk-submitted, then the server's command statistics reset
//           (CONFIG RESETSTAT) and a worker at concurrency 16 processes them all. Prints, per job, the script calls
//           (EVALSHA), the server's microseconds inside them, the commands the scripts ran by name, and the worker
//           process's CPU. Uses SLOWCALL_BENCH_REDIS_URL (default redis://127.0.0.1:6379/3), its own key prefix.
// --pickup  W2 on Postgres split in two: an idle worker at concurrency 16, then N single submits one every 10 ms
//           (as W2). For each job: how long `client.submit` took (the submit's commit, with its NOTIFY) and how long
//           from the submit's return to the handler's start (the wake-up, the claim and the dispatch). Prints p50 and
//           p99 of both. Uses the harness's Postgres (ANCHORS_PG_URL, default postgres://postgres@127.0.0.1:5432).
//
// Without a flag it runs both. Nothing here is a timed assertion; the benchmarks page quotes the figures.
import { performance } from "node:perf_hooks"

const args = process.argv.slice(2)
const flag = (name) => args.includes(`--${name}`)
const at = args.indexOf("--n")
const N = at >= 0 ? Number(args[at + 1]) : undefined
const both = !flag("redis") && !flag("pickup")

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
const ms = (x) => x.toFixed(2)

const waitDrained = async (adapter, timeoutMs) => {
  const end = Date.now() + timeoutMs
  while ((await adapter.pending()) > 0) {
    if (Date.now() > end) throw new Error("jobs still pending after the time limit")
    await new Promise((r) => setTimeout(r, 20))
  }
}

if (both || flag("redis")) {
  const n = N ?? 10_000
  const { default: create } = await import("./slowcall-redis.mjs")
  const ioredis = await import("ioredis")
  const url = process.env.SLOWCALL_BENCH_REDIS_URL || "redis://127.0.0.1:6379/3"
  const redis = new ioredis.Redis(url)
  const adapter = create({})
  await adapter.setup({ fresh: true })
  for (let i = 0; i < n; i += 1000) {
    await adapter.enqueueBulk(Array.from({ length: Math.min(1000, n - i) }, (_, k) => ({ i: i + k })))
  }
  await redis.config("RESETSTAT")
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await adapter.startWorker({ concurrency: 16, handler: async () => {} })
  await waitDrained(adapter, 120_000)
  const wall = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  await adapter.stop()
  const stats = Object.fromEntries(
    (await redis.info("commandstats"))
      .split("\n")
      .filter((l) => l.startsWith("cmdstat_"))
      .map((l) => {
        const [name, rest] = l.trim().slice("cmdstat_".length).split(":")
        const f = Object.fromEntries(rest.split(",").map((kv) => kv.split("=")))
        return [name, { calls: Number(f.calls), usec: Number(f.usec) }]
      })
  )
  await adapter.teardown()
  redis.disconnect()
  const scripts = stats.evalsha ?? { calls: 0, usec: 0 }
  const inner = Object.entries(stats)
    .filter(([name]) => !["evalsha", "eval", "info", "config", "ping", "select", "client", "hello"].includes(name))
    .sort((a, b) => b[1].calls - a[1].calls)
  console.log(`W1 on Redis, ${n} jobs, concurrency 16: ${Math.round((n / wall) * 1000)} jobs/s`)
  console.log(
    `  worker CPU per job: ${ms(((cpu.user + cpu.system) / 1000 / n) * 1000)} us; wall per job ${ms((wall / n) * 1000)} us`
  )
  console.log(
    `  scripts: ${scripts.calls} EVALSHA (${ms(n / Math.max(1, scripts.calls))} jobs per call), ${ms(scripts.usec / n)} us of server time per job`
  )
  console.log(
    `  commands the scripts ran, per job: ${inner.map(([name, s]) => `${name} ${ms(s.calls / n)}`).join(", ")}`
  )
  console.log(
    JSON.stringify({
      redis: {
        n,
        jobsPerS: Math.round((n / wall) * 1000),
        workerCpuUsPerJob: Math.round(((cpu.user + cpu.system) / n) * 100) / 100,
        scriptCalls: scripts.calls,
        serverUsPerJob: Math.round((scripts.usec / n) * 100) / 100,
        commandsPerJob: Object.fromEntries(inner.map(([name, s]) => [name, Math.round((s.calls / n) * 100) / 100]))
      }
    })
  )
}

if (both || flag("pickup")) {
  const n = N ?? 1_000
  const { default: create } = await import("./slowcall.mjs")
  const adapter = create({})
  await adapter.setup({ fresh: true })
  const started = new Map()
  await adapter.startWorker({
    concurrency: 16,
    handler: async (payload) => {
      started.set(payload.i, performance.now())
    }
  })
  await new Promise((r) => setTimeout(r, 1_000))
  const submitted = []
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    const due = t0 + i * 10
    const wait = due - performance.now()
    if (wait > 0) await new Promise((r) => setTimeout(r, wait))
    const before = performance.now()
    await adapter.enqueue([{ i }])
    submitted.push({ i, before, after: performance.now() })
  }
  await waitDrained(adapter, 60_000)
  await adapter.stop()
  await adapter.teardown()
  const submit = submitted.map((s) => s.after - s.before).sort((a, b) => a - b)
  const wake = submitted.map((s) => started.get(s.i) - s.after).sort((a, b) => a - b)
  const total = submitted.map((s) => started.get(s.i) - s.before).sort((a, b) => a - b)
  console.log(`W2 on Postgres, ${n} single submits one every 10 ms, idle worker at concurrency 16:`)
  console.log(
    `  submit call (commit + NOTIFY):       p50 ${ms(quantile(submit, 0.5))} ms, p99 ${ms(quantile(submit, 0.99))} ms`
  )
  console.log(
    `  submit returned -> handler started:  p50 ${ms(quantile(wake, 0.5))} ms, p99 ${ms(quantile(wake, 0.99))} ms`
  )
  console.log(
    `  enqueue call -> handler started:     p50 ${ms(quantile(total, 0.5))} ms, p99 ${ms(quantile(total, 0.99))} ms`
  )
  console.log(
    JSON.stringify({
      pickup: {
        n,
        submitP50Ms: quantile(submit, 0.5),
        submitP99Ms: quantile(submit, 0.99),
        wakeP50Ms: quantile(wake, 0.5),
        wakeP99Ms: quantile(wake, 0.99),
        totalP50Ms: quantile(total, 0.5),
        totalP99Ms: quantile(total, 0.99)
      }
    })
  )
}
