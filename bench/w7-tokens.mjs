// W7, token-bound: the shared harness's W7 (a fleet against one provider key's limits) with the limits providers set
// on tokens. The harness's fake provider (shared/bench/lib/provider.mjs) limits requests and concurrency only, so this
// script keeps W7's shape (1,000 jobs bulk-submitted, 4 worker processes at concurrency 16, one provider key, calls of
// 200-800 ms, 25 attempts with a 1 s backoff) and its own provider adds what OpenAI and Anthropic count:
//
//   node bench/w7-tokens.mjs                       # Postgres and Redis, full size
//   node bench/w7-tokens.mjs --backends redis --n 300 --json
//
// The provider (this process, 127.0.0.1, a random port) keeps four limits, each a token bucket refilled continuously
// holding one second's worth, and a cap on requests at once: `--rpm` requests, `--itpm` input tokens and `--otpm`
// output tokens per minute, `--max-concurrency` at once. A request names its input tokens and `max_tokens`; it is
// admitted when every bucket holds what it asks (input tokens, and `max_tokens` for the output, as OpenAI counts it at
// admission) and a slot is free; then it takes them, waits the job's call time and answers 200 with the output tokens
// it "generated" (the job's, drawn uniformly from 1 to `max_tokens`, seeded), and gives back the output reservation it
// did not use. Otherwise it answers 429 at once with `retry-after` in whole seconds (the time the emptiest bucket needs,
// rounded up, at least 1) and takes nothing. It records every request (time, job, status) and the most it held at once.
//
// The workers are slowcall's, as `bench/slowcall.mjs` and `bench/slowcall-redis.mjs` run them in W7 (prefetch 500,
// the throttle recheck of 200 ms), with the provider's four limits defined as one fleet resource in the Store; each
// call reserves its input tokens and `max_tokens`, and is corrected from the usage the provider answered.
//
// Reported per backend: the provider's 200s and 429s (share of requests), its most requests at once, the makespan
// (submit to the last success) against the token-bound ideal max(N / RPM, sum(input) / ITPM, sum(output) / OTPM,
// sum(call) / concurrency), and the throughput ratio ideal / makespan; jobs not succeeded by the cap.
// Options: --backends postgres,redis --n 1000 --workers 4 --concurrency 16 --rpm 1200 --itpm 600000 --otpm 120000
// --max-concurrency 8 --input-tokens 500 --max-tokens 400 --call-ms 200-800 --cap-s 600 --json
import { fork } from "node:child_process"
import http from "node:http"
import { pathToFileURL } from "node:url"
import { bundleOf } from "../scripts/bundle.mjs"

const QUEUE = "w7tokens"
const TYPE = "w7tokens.call"
const PG_URL_BASE = process.env.SLOWCALL_BENCH_PG_URL || "postgres://postgres@127.0.0.1:5432"
const PG_DB = "slowcall_bench_w7tokens"
const REDIS_URL = process.env.SLOWCALL_BENCH_REDIS_URL || "redis://127.0.0.1:6379/3"
const RESOURCE = "bench:w7tokens:key"
const PREFETCH = Number(process.env.SLOWCALL_BENCH_PREFETCH ?? 500)
const RECHECK_MS = Number(process.env.SLOWCALL_BENCH_RECHECK_MS ?? 200)

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

const storeLayer = async (lib, backend, { migrate, prefix }) => {
  if (backend === "postgres") {
    const pg = (await import("pg")).default
    const pool = new pg.Pool({ connectionString: `${PG_URL_BASE}/${PG_DB}`, max: 8 })
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
  const { backend, prefix, providerUrl, concurrency, backoffMs } = JSON.parse(process.env.W7_TOKENS)
  const { layer, close } = await storeLayer(lib, backend, { migrate: false, prefix })
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  // One request per call; a 429 fails it as an SDK would, with the server's retry-after.
  const request = async (input) => {
    const query = `id=${input.id}&ms=${input.ms}&input=${input.inputTokens}&max=${input.maxTokens}&out=${input.outputTokens}`
    const res = await fetch(`${providerUrl}/call?${query}`, { method: "POST" })
    const body = await res.json()
    if (res.status === 200) return body.usage
    throw Object.assign(new Error(`${res.status} from the provider`), {
      status: res.status,
      headers: { "retry-after": res.headers.get("retry-after") ?? undefined }
    })
  }
  const handler = lib.Handler.make({
    type: TYPE,
    version: 1,
    input: Schema.Struct({
      id: Schema.Number,
      ms: Schema.Number,
      inputTokens: Schema.Number,
      maxTokens: Schema.Number,
      outputTokens: Schema.Number
    }),
    result: Schema.Null,
    attempt: { timeoutMs: 30_000 },
    resource: RESOURCE,
    run: (input, ctx) =>
      Effect.as(
        ctx.call({
          estimateCents: 0,
          cost: () => 0,
          tokens: { input: input.inputTokens, maxOutput: input.maxTokens },
          usage: (usage) => ({ inputTokens: usage.input_tokens, outputTokens: usage.output_tokens }),
          run: Effect.tryPromise({ try: () => request(input), catch: (error) => error })
        }),
        null
      )
  })
  await Effect.runPromise(
    Scope.extend(
      lib.Worker.make({
        queue: QUEUE,
        concurrency,
        prefetch: PREFETCH,
        retry: { baseMs: backoffMs, capMs: backoffMs },
        throttle: { recheckMs: RECHECK_MS },
        handlers: [handler]
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

/** A bucket of `perMinute` refilled continuously, holding one second's worth (at least 1). */
const bucket = (perMinute) => {
  const perMs = perMinute / 60_000
  const capacity = Math.max(1, perMinute / 60)
  let level = capacity
  let at = nowMs()
  const refill = (t) => {
    level = Math.min(capacity, level + (t - at) * perMs)
    at = t
  }
  return {
    /** Ms until the bucket holds `amount` (0: it does now). */
    waitFor: (t, amount) => {
      refill(t)
      return level >= Math.min(amount, capacity) ? 0 : (Math.min(amount, capacity) - level) / perMs
    },
    take: (amount) => {
      level -= amount
    },
    giveBack: (t, amount) => {
      refill(t)
      level = Math.min(capacity, level + amount)
    }
  }
}

const startProvider = (o) => {
  const requests = bucket(o.rpm)
  const input = bucket(o.itpm)
  const output = bucket(o.otpm)
  let inFlight = 0
  let maxInFlight = 0
  const records = []
  const server = http.createServer((req, res) => {
    const at = nowMs()
    const url = new URL(req.url, "http://provider")
    req.resume()
    const id = Number(url.searchParams.get("id"))
    const inputTokens = Number(url.searchParams.get("input"))
    const maxTokens = Number(url.searchParams.get("max"))
    const outputTokens = Number(url.searchParams.get("out"))
    const waits = [requests.waitFor(at, 1), input.waitFor(at, inputTokens), output.waitFor(at, maxTokens)]
    const waitMs = Math.max(...waits)
    if (inFlight >= o.maxConcurrency || waitMs > 0) {
      const limit =
        inFlight >= o.maxConcurrency ? "concurrency" : ["requests", "input", "output"][waits.indexOf(waitMs)]
      records.push([at, id, 429, limit, waitMs])
      res.writeHead(429, {
        "retry-after": String(Math.max(1, Math.ceil(waitMs / 1_000))),
        "content-type": "application/json"
      })
      res.end('{"error":{"type":"rate_limit_error"}}')
      return
    }
    requests.take(1)
    input.take(inputTokens)
    output.take(maxTokens)
    inFlight += 1
    maxInFlight = Math.max(maxInFlight, inFlight)
    records.push([at, id, 200, null])
    setTimeout(
      () => {
        inFlight -= 1
        output.giveBack(nowMs(), maxTokens - outputTokens)
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ usage: { input_tokens: inputTokens, output_tokens: outputTokens } }))
      },
      Math.max(0, Number(url.searchParams.get("ms")) || 0)
    )
  })
  server.keepAliveTimeout = 60_000
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        records,
        maxInFlight: () => maxInFlight,
        close: () =>
          new Promise((done) => {
            server.closeAllConnections()
            server.close(done)
          })
      })
    )
  )
}

// ---------------------------------------------------------------------------------------------------------------
// Orchestrator
// ---------------------------------------------------------------------------------------------------------------

/** Seeded uniform draws (mulberry32). */
const uniform = (seed) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
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

const runOnce = async (lib, o, backend) => {
  const { Effect, Layer, Scope, Exit } = lib
  const prefix = `slowcall-bench-w7tokens-${process.pid}`
  if (backend === "postgres") await recreateDatabase()
  else await dropRedisKeys(prefix)
  const provider = await startProvider(o)
  const { layer, close } = await storeLayer(lib, backend, { migrate: true, prefix })
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const client = await Effect.runPromise(Effect.provide(lib.Client.make, context))
  await Effect.runPromise(
    Effect.provide(
      Effect.flatMap(lib.Limiter.Limiter, (limiter) =>
        limiter.define({
          items: [
            {
              resource: RESOURCE,
              limits: {
                requestsPerMinute: o.rpm,
                inputTokensPerMinute: o.itpm,
                outputTokensPerMinute: o.otpm,
                maxConcurrent: o.maxConcurrency
              }
            }
          ]
        })
      ),
      context
    )
  )
  const draw = uniform(20261206)
  const jobs = Array.from({ length: o.n }, (_, id) => ({
    id,
    ms: Math.round(o.callMs[0] + draw() * (o.callMs[1] - o.callMs[0])),
    inputTokens: o.inputTokens,
    maxTokens: o.maxTokens,
    outputTokens: 1 + Math.floor(draw() * o.maxTokens)
  }))
  const env = { backend, prefix, providerUrl: provider.url, concurrency: o.concurrency, backoffMs: 1_000 }
  const workers = []
  for (let i = 0; i < o.workers; i++) {
    workers.push(
      fork(new URL(import.meta.url).pathname, ["--worker"], {
        env: { ...process.env, W7_TOKENS: JSON.stringify(env) },
        stdio: ["ignore", "inherit", "inherit", "ipc"]
      })
    )
  }
  await Promise.all(workers.map((child) => new Promise((resolve) => child.once("message", resolve))))
  const startedAt = nowMs()
  for (let start = 0; start < o.n; start += 1_000) {
    const items = jobs
      .slice(start, start + 1_000)
      .map((input) => ({ queue: QUEUE, type: TYPE, input, maxAttempts: 25 }))
    await Effect.runPromise(Effect.provide(client.submitMany(items), context))
  }
  const succeeded = () => new Set(provider.records.filter((r) => r[2] === 200).map((r) => r[1])).size
  const deadline = startedAt + o.capS * 1_000
  while (succeeded() < o.n && nowMs() < deadline) await sleep(100)
  // The last success's answer: its admission plus its call time.
  const ends = provider.records.filter((r) => r[2] === 200).map((r) => r[0] + jobs[r[1]].ms)
  const lastEnd = ends.length === 0 ? nowMs() : Math.max(...ends)
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
  const sum = (f) => jobs.reduce((total, job) => total + f(job), 0)
  const idealS = Math.max(
    o.n / (o.rpm / 60),
    sum((j) => j.inputTokens) / (o.itpm / 60),
    sum((j) => j.outputTokens) / (o.otpm / 60),
    sum((j) => j.ms) / 1_000 / o.maxConcurrency
  )
  const makespanS = (lastEnd - startedAt) / 1_000
  const ok = provider.records.filter((r) => r[2] === 200).length
  const limited = provider.records.filter((r) => r[2] === 429)
  const byLimit = {}
  for (const r of limited) byLimit[r[3]] = (byLimit[r[3]] ?? 0) + 1
  // How short the provider was at each 429 (ms of refill), and when it came (s after the submit).
  const short = limited.map((r) => Math.round(r[4])).sort((a, b) => a - b)
  return {
    backend,
    n: o.n,
    succeeded: succeeded(),
    provider200: ok,
    provider429: limited.length,
    share429: limited.length / Math.max(1, ok + limited.length),
    by429: byLimit,
    shortMs: short,
    at429S: limited.map((r) => Math.round((r[0] - startedAt) / 100) / 10),
    maxInFlight: provider.maxInFlight(),
    makespanS,
    idealS,
    throughputRatio: idealS / makespanS
  }
}

const main = async () => {
  const lib = await loadLib()
  const o = {
    n: Number(args.n ?? 1_000),
    workers: Number(args.workers ?? 4),
    concurrency: Number(args.concurrency ?? 16),
    rpm: Number(args.rpm ?? 1_200),
    itpm: Number(args.itpm ?? 600_000),
    otpm: Number(args.otpm ?? 120_000),
    maxConcurrency: Number(args["max-concurrency"] ?? 8),
    inputTokens: Number(args["input-tokens"] ?? 500),
    maxTokens: Number(args["max-tokens"] ?? 400),
    callMs: String(args["call-ms"] ?? "200-800")
      .split("-")
      .map(Number),
    capS: Number(args["cap-s"] ?? 600)
  }
  const results = []
  for (const backend of String(args.backends ?? "postgres,redis").split(",")) {
    const r = await runOnce(lib, o, backend)
    results.push(r)
    console.log(
      `${backend}: ${r.succeeded}/${r.n} succeeded; provider 200s ${r.provider200}, 429s ${r.provider429} ` +
        `(${(100 * r.share429).toFixed(2)}% ${JSON.stringify(r.by429)}), most at once ${r.maxInFlight}; ` +
        `makespan ${r.makespanS.toFixed(1)} s, token-bound ideal ${r.idealS.toFixed(1)} s, throughput ${r.throughputRatio.toFixed(2)}x the ideal`
    )
  }
  if (args.json) console.log(JSON.stringify({ options: o, results }))
}

if (args.worker) await runWorker()
else await main()
