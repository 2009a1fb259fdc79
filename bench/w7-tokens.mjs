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
// The stores, the worker processes and the provider's buckets and 429s are bench/fleet.mjs's, shared with fairness.mjs.
import * as Fleet from "./fleet.mjs"

const QUEUE = "w7tokens"
const TYPE = "w7tokens.call"
/** The Postgres database of the runs and the workers' pools. */
const STORE = { database: "slowcall_bench_w7tokens", poolMax: 8 }
const RESOURCE = "bench:w7tokens:key"
const PREFETCH = Number(process.env.SLOWCALL_BENCH_PREFETCH ?? 500)
const RECHECK_MS = Number(process.env.SLOWCALL_BENCH_RECHECK_MS ?? 200)

const args = Fleet.parseArgs(process.argv.slice(2))

// ---------------------------------------------------------------------------------------------------------------
// Worker process
// ---------------------------------------------------------------------------------------------------------------

const runWorker = async () => {
  const lib = await Fleet.loadLib()
  const { Effect, Schema } = lib
  const { backend, prefix, providerUrl, concurrency, backoffMs } = JSON.parse(process.env.W7_TOKENS)
  // One request per call; a 429 fails it as an SDK would, with the server's retry-after.
  const request = async (input) => {
    const query = `id=${input.id}&ms=${input.ms}&input=${input.inputTokens}&max=${input.maxTokens}&out=${input.outputTokens}`
    const res = await fetch(`${providerUrl}/call?${query}`, { method: "POST" })
    const body = await res.json()
    if (res.status === 200) return body.usage
    throw Fleet.providerError(res)
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
  const worker = lib.Worker.make({
    queue: QUEUE,
    concurrency,
    prefetch: PREFETCH,
    retry: { baseMs: backoffMs, capMs: backoffMs },
    throttle: { recheckMs: RECHECK_MS },
    handlers: [handler]
  })
  await Fleet.serveWorker(lib, backend, { ...STORE, prefix }, worker)
}

// ---------------------------------------------------------------------------------------------------------------
// The fake provider
// ---------------------------------------------------------------------------------------------------------------

/** The provider's four limits (see the header); every request recorded as [at, id, status, limit, ms short]. */
const startProvider = async (o) => {
  const requests = Fleet.bucket(o.rpm)
  const input = Fleet.bucket(o.itpm)
  const output = Fleet.bucket(o.otpm)
  let inFlight = 0
  let maxInFlight = 0
  const records = []
  const provider = await Fleet.serveProvider((at, params, res) => {
    const id = Number(params.get("id"))
    const inputTokens = Number(params.get("input"))
    const maxTokens = Number(params.get("max"))
    const outputTokens = Number(params.get("out"))
    const waits = [requests.waitFor(at, 1), input.waitFor(at, inputTokens), output.waitFor(at, maxTokens)]
    const waitMs = Math.max(...waits)
    if (inFlight >= o.maxConcurrency || waitMs > 0) {
      const limit =
        inFlight >= o.maxConcurrency ? "concurrency" : ["requests", "input", "output"][waits.indexOf(waitMs)]
      records.push([at, id, 429, limit, waitMs])
      Fleet.rateLimited(res, waitMs)
      return
    }
    requests.take(1)
    input.take(inputTokens)
    output.take(maxTokens)
    inFlight += 1
    maxInFlight = Math.max(maxInFlight, inFlight)
    records.push([at, id, 200, null])
    setTimeout(() => {
      inFlight -= 1
      output.giveBack(Fleet.nowMs(), maxTokens - outputTokens)
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ usage: { input_tokens: inputTokens, output_tokens: outputTokens } }))
    }, Fleet.callMsOf(params))
  })
  return { ...provider, records, maxInFlight: () => maxInFlight }
}

// ---------------------------------------------------------------------------------------------------------------
// Orchestrator
// ---------------------------------------------------------------------------------------------------------------

const runOnce = async (lib, o, backend) => {
  const { Effect } = lib
  const prefix = `slowcall-bench-w7tokens-${process.pid}`
  const store = await Fleet.openStore(lib, backend, { ...STORE, prefix })
  const provider = await startProvider(o)
  await store.run(
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
    )
  )
  const draw = Fleet.uniform(20261206)
  const jobs = Array.from({ length: o.n }, (_, id) => ({
    id,
    ms: Math.round(o.callMs[0] + draw() * (o.callMs[1] - o.callMs[0])),
    inputTokens: o.inputTokens,
    maxTokens: o.maxTokens,
    outputTokens: 1 + Math.floor(draw() * o.maxTokens)
  }))
  const env = { backend, prefix, providerUrl: provider.url, concurrency: o.concurrency, backoffMs: 1_000 }
  const workers = await Fleet.forkWorkers(import.meta.url, o.workers, "W7_TOKENS", env)
  const startedAt = Fleet.nowMs()
  for (let start = 0; start < o.n; start += 1_000) {
    const items = jobs
      .slice(start, start + 1_000)
      .map((input) => ({ queue: QUEUE, type: TYPE, input, maxAttempts: 25 }))
    await store.run(store.client.submitMany(items))
  }
  const succeeded = () => new Set(provider.records.filter((r) => r[2] === 200).map((r) => r[1])).size
  const deadline = startedAt + o.capS * 1_000
  while (succeeded() < o.n && Fleet.nowMs() < deadline) await Fleet.sleep(100)
  // The last success's answer: its admission plus its call time.
  const ends = provider.records.filter((r) => r[2] === 200).map((r) => r[0] + jobs[r[1]].ms)
  const lastEnd = ends.length === 0 ? Fleet.nowMs() : Math.max(...ends)
  await Fleet.stopWorkers(workers)
  await store.close()
  await provider.close()
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
  const lib = await Fleet.loadLib()
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
