/**
 * The Redis server's work per job for the submit, claim, heartbeat and settle scripts, in figures that do not
 * depend on timing: N no-op jobs submitted in bulk (500 per call), then rounds of `Store.claimNext` (up to 100
 * jobs), one `Store.heartbeat` of every claimed job and one `Store.settle` completing them, until nothing is left.
 * Every round is the same, so the command counts per job are exact; the server microseconds are what `INFO
 * commandstats` reports (noisy on a busy machine, but free of the worker's timing), and the server process's CPU
 * time (`INFO cpu`, which a busy machine inflates less, though it includes the statistics reads themselves). The
 * commands are printed twice: those of the submits, and those of the claim, heartbeat and settle rounds.
 *
 *   node scripts/bundled.mjs bench/redis-script-cost.ts [N] [port] [--types]      (N = 5000, port = 7120)
 *
 * With `--types`, each claimNext names the job's (type, version) as the only runnable pair, as a Worker's claims
 * name its handlers' (the path `bench/explain.mjs --redis` measures); without it, no filter.
 *
 * Starts a redis-server of its own on `port` (no persistence), so no other client's commands enter the statistics,
 * and stops it at the end. Prints, per job: script calls and server microseconds per verb, the commands the scripts
 * ran by name, and a JSON line with the same figures.
 */
import { spawn } from "node:child_process"
import { Effect } from "effect"
import { Redis } from "ioredis"
import * as RedisStore from "../packages/adapter-redis/src/RedisStore.js"
import * as Client from "../packages/core/src/Client.js"
import type { JobId } from "../packages/core/src/Job.js"
import * as Store from "../packages/core/src/Store.js"

const positional = process.argv.slice(2).filter((arg) => !arg.startsWith("--"))
const N = Number(positional[0] ?? 5_000)
const PORT = Number(positional[1] ?? 7_120)
const TYPES = process.argv.includes("--types") ? [{ type: "noop", version: 1 }] : undefined
const BATCH = 100
const url = `redis://127.0.0.1:${PORT}/0`
const queue = "cost"

type Stats = Record<string, { calls: number; usec: number }>

const commandStats = async (redis: Redis): Promise<Stats> =>
  Object.fromEntries(
    (await redis.info("commandstats"))
      .split("\n")
      .filter((line) => line.startsWith("cmdstat_"))
      .map((line) => {
        const [name, rest] = line.trim().slice("cmdstat_".length).split(":") as [string, string]
        const fields = Object.fromEntries(rest.split(",").map((kv) => kv.split("=") as [string, string]))
        return [name, { calls: Number(fields.calls), usec: Number(fields.usec) }]
      })
  )

/** The server process's CPU time so far (user and system), in microseconds: unlike `usec`, not inflated when the
 * machine is busy and the server waits for a core. */
const cpuUsec = async (redis: Redis): Promise<number> => {
  const info = await redis.info("cpu")
  const field = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, "m").exec(info)?.[1] ?? 0)
  return Math.round((field("used_cpu_user") + field("used_cpu_sys")) * 1e6)
}

const scriptUsec = (stats: Stats): number => (stats.evalsha?.usec ?? 0) + (stats.eval?.usec ?? 0)

const startServer = async () => {
  const server = spawn("redis-server", ["--port", String(PORT), "--save", "", "--appendonly", "no"], {
    stdio: "ignore"
  })
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  probe.on("error", () => {})
  for (let i = 0; i < 100; i++) {
    try {
      await probe.connect()
      break
    } catch {
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  probe.disconnect()
  return server
}

const perVerb = {
  submit: { calls: 0, usec: 0 },
  claimNext: { calls: 0, usec: 0 },
  heartbeat: { calls: 0, usec: 0 },
  settle: { calls: 0, usec: 0 }
}

const run = (redis: Redis) =>
  Effect.gen(function* () {
    const client = yield* Client.make
    const store = yield* Store.Store
    yield* Effect.promise(() => redis.config("RESETSTAT"))
    const cpuStart = yield* Effect.promise(() => cpuUsec(redis))
    const measured = <A>(verb: keyof typeof perVerb, effect: Effect.Effect<A, unknown>) =>
      Effect.gen(function* () {
        const before = scriptUsec(yield* Effect.promise(() => commandStats(redis)))
        const out = yield* effect
        const after = scriptUsec(yield* Effect.promise(() => commandStats(redis)))
        perVerb[verb].calls++
        perVerb[verb].usec += after - before
        return out
      })
    for (let i = 0; i < N; i += 500) {
      yield* measured(
        "submit",
        client.submitMany(
          Array.from({ length: Math.min(500, N - i) }, (_, k) => ({ queue, type: "noop", input: { i: i + k } }))
        )
      )
    }
    const afterSubmit = yield* Effect.promise(() => commandStats(redis))
    const cpuSubmitted = yield* Effect.promise(() => cpuUsec(redis))
    let done = 0
    while (true) {
      const claimed = yield* measured(
        "claimNext",
        store.claimNext({ queue, max: BATCH, owner: "cost-worker", leaseMs: 30_000, types: TYPES })
      )
      const held = claimed.results.flatMap((r) =>
        r._tag === "Claimed" ? [{ jobId: r.job.id as JobId, token: r.job.leaseToken }] : []
      )
      if (held.length === 0) break
      yield* measured("heartbeat", store.heartbeat({ items: held.map((h) => ({ ...h, leaseMs: 30_000 })) }))
      const settled = yield* measured(
        "settle",
        store.settle({ items: held.map((h) => ({ ...h, outcome: { _tag: "Complete" as const, result: null } })) })
      )
      done += settled.results.filter((r) => r._tag === "Settled").length
    }
    if (done !== N) throw new Error(`settled ${done} of ${N} jobs`)
    const cpuEnd = yield* Effect.promise(() => cpuUsec(redis))
    return { afterSubmit, cpu: { submit: cpuSubmitted - cpuStart, rounds: cpuEnd - cpuSubmitted } }
  }).pipe(Effect.provide(RedisStore.layer({ url, prefix: "cost", checkServer: false })), Effect.scoped)

const main = async () => {
  const server = await startServer()
  const redis = new Redis(url)
  try {
    const { afterSubmit, cpu } = await Effect.runPromise(run(redis))
    const end = await commandStats(redis)
    const since = (from: Stats): Stats =>
      Object.fromEntries(
        Object.entries(end).map(([name, s]) => [
          name,
          { calls: s.calls - (from[name]?.calls ?? 0), usec: s.usec - (from[name]?.usec ?? 0) }
        ])
      )
    const inner = (stats: Stats) =>
      Object.entries(stats)
        .filter(
          ([name, s]) =>
            s.calls > 0 &&
            ![
              "evalsha",
              "eval",
              "info",
              "config",
              "config|resetstat",
              "ping",
              "select",
              "client",
              "hello",
              "quit"
            ].includes(name)
        )
        .sort((a, b) => b[1].calls - a[1].calls)
    const per = (x: number) => Math.round((x / N) * 100) / 100
    const rounds = since(afterSubmit)
    const sum = (rows: ReturnType<typeof inner>) => per(rows.reduce((n, [, s]) => n + s.calls, 0))
    console.log(`${N} jobs, submitted 500 per call; claimNext of ${BATCH}, one heartbeat and one settle per round`)
    for (const [verb, s] of Object.entries(perVerb)) {
      console.log(`  ${verb.padEnd(9)} ${s.calls} scripts, ${per(s.usec)} us of server time per job`)
    }
    console.log(`  claim, heartbeat and settle scripts: ${per(scriptUsec(rounds))} us per job`)
    console.log(
      `  server CPU (user + system) per job: submit ${per(cpu.submit)} us, claim, heartbeat and settle ${per(cpu.rounds)} us`
    )
    for (const [title, stats] of [
      ["submit", afterSubmit],
      ["claimNext, heartbeat and settle", rounds]
    ] as const) {
      const rows = inner(stats)
      console.log(`  commands the ${title} scripts ran, per job (calls, us): ${sum(rows)} in all`)
      for (const [name, s] of rows) console.log(`    ${name.padEnd(12)} ${per(s.calls)}  ${per(s.usec)}`)
    }
    console.log(
      JSON.stringify({
        n: N,
        scriptUsPerJob: per(scriptUsec(rounds)),
        serverCpuUsPerJob: { submit: per(cpu.submit), rounds: per(cpu.rounds) },
        perVerbUsPerJob: Object.fromEntries(Object.entries(perVerb).map(([v, s]) => [v, per(s.usec)])),
        submitCommandsPerJob: Object.fromEntries(inner(afterSubmit).map(([name, s]) => [name, per(s.calls)])),
        commandsPerJob: Object.fromEntries(inner(rounds).map(([name, s]) => [name, per(s.calls)])),
        commandUsPerJob: Object.fromEntries(inner(rounds).map(([name, s]) => [name, per(s.usec)]))
      })
    )
  } finally {
    redis.disconnect()
    server.kill("SIGTERM")
  }
}

await main()
