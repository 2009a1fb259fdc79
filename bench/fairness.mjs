// Fair shares across tenants, measured: tenant A submits a flood, tenant B a few interactive jobs ten seconds later,
// and every call goes to one provider resource that allows 600 requests per minute. How long do B's jobs wait, with
// the workers' `fairness` option on and off, on Postgres and on Redis?
//
//   npm run bench:fairness                                   # both backends, fairness on and off
//   npm run bench:fairness -- --backends postgres --modes on --a 2000
//
// The orchestrator (this process) starts a fake provider on 127.0.0.1 (a token bucket of `--rpm` requests per
// minute refilled continuously, holding one second's worth; a request over it is answered 429 at once with
// `retry-after` in whole seconds, the time to the next token rounded up, and takes no token; an admitted request
// waits `--call-ms` and answers 200), forks `--workers` worker processes (each `Worker.make` at `--concurrency`),
// submits A's jobs, waits `--b-after-s`, submits B's, and runs until every B job has succeeded or `--cap-s` after B.
//
// Without `--limiter`, the workers are not limited by the fleet's Limiter: each handler calls the provider and, on a
// 429, sleeps the retry-after and calls again, holding its slot meanwhile. The provider therefore admits 10 calls a
// second whoever sends them, slots free up as fast as calls succeed, and which job takes a freed slot is decided by
// the claim order alone: that order is what the `fairness` option changes.
//
// With `--limiter`, the provider's limit is also one resource in the store's Limiter (`--rpm` requests per minute),
// named by the handler: each call is admitted by the Limiter first, a call without room sends its job back to the
// queue until the refill (no attempt used) and frees its slot, and a 429 pauses the resource for every worker. Which
// job runs next is then the claim order among the jobs due again: the fleet as a user who declares limits runs it.
//
// Reported per run, from the provider's own records and the submit times: B's pickup (submit to the job's first
// request, when its handler started), B's done (submit to its successful request), p50/p99/max; how many B jobs were
// picked up and done by the end; A's successful calls per second over the run; the provider's 200s and 429s.
// Options: --backends postgres,redis --modes on,off --a 5000 --b 50 --b-after-s 10 --rpm 600 --call-ms 100-300
// --workers 2 --concurrency 4 --cap-s 60 --half-life-ms 30000 --limiter --json (one JSON line at the end).
import { fork } from "node:child_process"
import http from "node:http"
import { pathToFileURL } from "node:url"
import { bundleOf } from "../scripts/bundle.mjs"

const QUEUE = "fair"
const TYPE = "fair.call"
const PG_URL_BASE = process.env.SLOWCALL_BENCH_PG_URL || "postgres://postgres@127.0.0.1:5432"
const PG_DB = "slowcall_bench_fairness"
const REDIS_URL = process.env.SLOWCALL_BENCH_REDIS_URL || "redis://127.0.0.1:6379/3"
/** With `--limiter`: the provider key every call names. */
const RESOURCE = "bench:fairness:key"

const nowMs = () => performance.timeOrigin + performance.now()
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const args = (() => {
  const out = {}
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i]
    if (!name.startsWith("--")) continue
    const next = argv[i + 1]
    if (next === undefined || next.startsWith("--")) out[name.slice(2)] = true
    else out[name.slice(2)] = argv[++i]
  }
  return out
})()

const loadLib = async () => {
  const [effect, lib] = await Promise.all([
    import("effect"),
    bundleOf(new URL("./lib.ts", import.meta.url).pathname).then((file) => import(pathToFileURL(file).href))
  ])
  return { ...effect, ...lib }
}

/** The Store layer of a backend (the workers' and the orchestrator's). */
const storeLayer = async (lib, backend, { migrate, prefix }) => {
  if (backend === "postgres") {
    const pg = (await import("pg")).default
    const pool = new pg.Pool({ connectionString: `${PG_URL_BASE}/${PG_DB}`, max: 4 })
    pool.on("error", () => {})
    return { layer: lib.PgStore.layer({ pool, migrate }), close: () => pool.end() }
  }
  return { layer: lib.RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false }), close: async () => {} }
}

// ---------------------------------------------------------------------------------------------------------------
// Worker process
// ---------------------------------------------------------------------------------------------------------------

const runWorker = async () => {
  const lib = await loadLib()
  const { Effect, Layer, Schema, Scope, Exit } = lib
  const { backend, prefix, providerUrl, fair, concurrency, halfLifeMs, limiter } = JSON.parse(process.env.FAIR_BENCH)
  const { layer, close } = await storeLayer(lib, backend, { migrate: false, prefix })
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  // The call: one request per try; a 429 waits its retry-after and tries again (bounded), holding the slot.
  const call = async (input) => {
    for (let tries = 0; tries < 1_000; tries++) {
      const res = await fetch(`${providerUrl}/call?tenant=${input.tenant}&id=${input.id}&ms=${input.ms}`, {
        method: "POST"
      })
      await res.arrayBuffer()
      if (res.status === 200) return null
      const retryAfterS = Number(res.headers.get("retry-after") ?? "1")
      await sleep(Math.max(1, retryAfterS) * 1_000)
    }
    throw new Error("provider kept answering 429")
  }
  // With the Limiter: one request per call; a 429 fails the call as an SDK would, with the server's retry-after.
  const limitedCall = async (input) => {
    const res = await fetch(`${providerUrl}/call?tenant=${input.tenant}&id=${input.id}&ms=${input.ms}`, {
      method: "POST"
    })
    await res.arrayBuffer()
    if (res.status === 200) return null
    throw Object.assign(new Error(`${res.status} from the provider`), {
      status: res.status,
      headers: { "retry-after": res.headers.get("retry-after") ?? undefined }
    })
  }
  const handler = lib.Handler.make({
    type: TYPE,
    version: 1,
    input: Schema.Struct({ tenant: Schema.String, id: Schema.Number, ms: Schema.Number }),
    result: Schema.Null,
    attempt: { timeoutMs: 300_000 },
    ...(limiter ? { resource: RESOURCE } : {}),
    run: limiter
      ? (input, ctx) =>
          ctx.call({
            estimateCents: 0,
            cost: () => 0,
            run: Effect.tryPromise({ try: () => limitedCall(input), catch: (error) => error })
          })
      : (input) => Effect.promise(() => call(input))
  })
  await Effect.runPromise(
    Scope.extend(
      lib.Worker.make({
        queue: QUEUE,
        concurrency,
        handlers: [handler],
        ...(fair ? { fairness: { halfLifeMs } } : {})
      }),
      scope
    ).pipe(Effect.provide(context))
  )
  process.send?.("ready")
  process.on("message", async (message) => {
    if (message !== "stop") return
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await close()
    process.exit(0)
  })
}

// ---------------------------------------------------------------------------------------------------------------
// The fake provider
// ---------------------------------------------------------------------------------------------------------------

/** A token bucket of `rpm` per minute holding one second's worth; every request recorded as [at, tenant, id, status]. */
const startProvider = async (rpm) => {
  const perMs = rpm / 60_000
  const capacity = Math.max(1, rpm / 60)
  let tokens = capacity
  let refilledAt = nowMs()
  const records = []
  const server = http.createServer((req, res) => {
    const at = nowMs()
    const url = new URL(req.url, "http://provider")
    tokens = Math.min(capacity, tokens + (at - refilledAt) * perMs)
    refilledAt = at
    req.resume()
    const tenant = url.searchParams.get("tenant")
    const id = Number(url.searchParams.get("id"))
    if (tokens < 1) {
      records.push([at, tenant, id, 429])
      const retryAfterS = Math.max(1, Math.ceil((1 - tokens) / perMs / 1_000))
      res.writeHead(429, { "retry-after": String(retryAfterS), "content-type": "application/json" })
      res.end('{"error":{"type":"rate_limit_error"}}')
      return
    }
    tokens -= 1
    records.push([at, tenant, id, 200])
    setTimeout(
      () => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      },
      Math.max(0, Number(url.searchParams.get("ms")) || 0)
    )
  })
  server.keepAliveTimeout = 60_000
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    records,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(resolve)
      })
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Orchestrator
// ---------------------------------------------------------------------------------------------------------------

const quantile = (sorted, q) => {
  if (sorted.length === 0) return null
  const pos = (sorted.length - 1) * q
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
}

/** A seeded uniform call time per job (mulberry32), so on and off runs send the same calls. */
const callTimes = (n, [lo, hi], seed) => {
  let a = seed >>> 0
  const out = []
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    out.push(Math.round(lo + (((t ^ (t >>> 14)) >>> 0) / 4294967296) * (hi - lo)))
  }
  return out
}

const recreateDatabase = async () => {
  const pg = (await import("pg")).default
  const admin = new pg.Client({ connectionString: `${PG_URL_BASE}/postgres` })
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${PG_DB}" WITH (FORCE)`)
    await admin.query(`CREATE DATABASE "${PG_DB}"`)
  } finally {
    await admin.end()
  }
}

const dropRedisKeys = async (prefix) => {
  const { Redis } = await import("ioredis")
  const redis = new Redis(REDIS_URL)
  try {
    let cursor = "0"
    for (let round = 0; round < 100_000; round++) {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000)
      if (keys.length > 0) await redis.unlink(...keys)
      cursor = next
      if (cursor === "0") break
    }
  } finally {
    redis.disconnect()
  }
}

const runOnce = async (lib, o, backend, mode) => {
  const { Effect, Layer, Scope, Exit } = lib
  const prefix = `slowcall-bench-fair-${process.pid}-${mode}`
  if (backend === "postgres") await recreateDatabase()
  else await dropRedisKeys(prefix)
  const provider = await startProvider(o.rpm)
  const { layer, close } = await storeLayer(lib, backend, { migrate: true, prefix })
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const client = await Effect.runPromise(Effect.provide(lib.Client.make, context))
  if (o.limiter)
    await Effect.runPromise(
      Effect.provide(
        Effect.flatMap(lib.Limiter.Limiter, (limiter) =>
          limiter.define({ items: [{ resource: RESOURCE, limits: { requestsPerMinute: o.rpm } }] })
        ),
        context
      )
    )
  const env = {
    backend,
    prefix,
    providerUrl: provider.url,
    fair: mode === "on",
    concurrency: o.concurrency,
    halfLifeMs: o.halfLifeMs,
    limiter: o.limiter
  }
  const workers = []
  for (let i = 0; i < o.workers; i++) {
    const child = fork(new URL(import.meta.url).pathname, ["--worker"], {
      env: { ...process.env, FAIR_BENCH: JSON.stringify(env) },
      stdio: ["ignore", "inherit", "inherit", "ipc"]
    })
    workers.push(child)
  }
  await Promise.all(workers.map((child) => new Promise((resolve) => child.once("message", resolve))))
  const times = callTimes(o.a + o.b, o.callMs, 20261230)
  const submit = async (tenant, from, count) => {
    const at = nowMs()
    for (let start = 0; start < count; start += 1_000) {
      const items = []
      for (let i = start; i < Math.min(count, start + 1_000); i++) {
        items.push({ queue: QUEUE, type: TYPE, tenant, input: { tenant, id: from + i, ms: times[from + i] } })
      }
      await Effect.runPromise(Effect.provide(client.submitMany(items), context))
    }
    return at
  }
  const startedAt = nowMs()
  await submit("A", 0, o.a)
  await sleep(Math.max(0, startedAt + o.bAfterS * 1_000 - nowMs()))
  const bAt = await submit("B", o.a, o.b)
  const bIds = new Set(Array.from({ length: o.b }, (_, i) => o.a + i))
  const doneB = () => provider.records.filter((r) => r[1] === "B" && r[3] === 200).length
  const deadline = bAt + o.capS * 1_000
  while (doneB() < o.b && nowMs() < deadline) await sleep(100)
  const endedAt = nowMs()
  await Promise.all(
    workers.map(
      (child) =>
        new Promise((resolve) => {
          child.once("exit", resolve)
          child.send("stop")
          setTimeout(() => child.kill("SIGKILL"), 15_000).unref()
        })
    )
  )
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await close()
  await provider.close()
  if (backend === "redis") await dropRedisKeys(prefix)
  const firstRequest = new Map()
  const firstSuccess = new Map()
  for (const [at, tenant, id, status] of provider.records) {
    if (tenant !== "B" || !bIds.has(id)) continue
    if (!firstRequest.has(id)) firstRequest.set(id, at)
    if (status === 200 && !firstSuccess.has(id)) firstSuccess.set(id, at)
  }
  const seconds = (values) => [...values].map((at) => (at - bAt) / 1_000).sort((x, y) => x - y)
  const pickup = seconds(firstRequest.values())
  const done = seconds(firstSuccess.values())
  const window = (endedAt - startedAt) / 1_000
  const aDone = provider.records.filter((r) => r[1] === "A" && r[3] === 200).length
  const stats = (sorted) => ({
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    max: sorted.length === 0 ? null : sorted[sorted.length - 1]
  })
  return {
    backend,
    fairness: mode,
    limiter: o.limiter,
    bPickedUp: pickup.length,
    bDone: done.length,
    bPickupS: stats(pickup),
    bDoneS: stats(done),
    aCallsPerS: aDone / window,
    runS: window,
    provider200: provider.records.filter((r) => r[3] === 200).length,
    provider429: provider.records.filter((r) => r[3] === 429).length
  }
}

const fmt = (x) => (x === null ? "-" : x.toFixed(2))

const main = async () => {
  const lib = await loadLib()
  const range = String(args["call-ms"] ?? "100-300")
    .split("-")
    .map(Number)
  const o = {
    a: Number(args.a ?? 5_000),
    b: Number(args.b ?? 50),
    bAfterS: Number(args["b-after-s"] ?? 10),
    rpm: Number(args.rpm ?? 600),
    callMs: range,
    workers: Number(args.workers ?? 2),
    concurrency: Number(args.concurrency ?? 4),
    capS: Number(args["cap-s"] ?? 60),
    halfLifeMs: Number(args["half-life-ms"] ?? 30_000),
    limiter: args.limiter === true
  }
  const backends = String(args.backends ?? "postgres,redis").split(",")
  const modes = String(args.modes ?? "on,off").split(",")
  const results = []
  for (const backend of backends) {
    for (const mode of modes) {
      const r = await runOnce(lib, o, backend, mode)
      results.push(r)
      console.log(
        `${backend} fairness ${mode}${o.limiter ? " (fleet limiter)" : ""}: B picked up ${r.bPickedUp}/${o.b}, done ${r.bDone}/${o.b}; ` +
          `B pickup p50/p99/max ${fmt(r.bPickupS.p50)}/${fmt(r.bPickupS.p99)}/${fmt(r.bPickupS.max)} s; ` +
          `B done p50/p99/max ${fmt(r.bDoneS.p50)}/${fmt(r.bDoneS.p99)}/${fmt(r.bDoneS.max)} s; ` +
          `A ${r.aCallsPerS.toFixed(2)} calls/s over ${r.runS.toFixed(1)} s; provider 200s ${r.provider200}, 429s ${r.provider429}`
      )
    }
  }
  if (args.json) console.log(JSON.stringify({ options: o, results }))
}

if (args.worker) await runWorker()
else await main()
