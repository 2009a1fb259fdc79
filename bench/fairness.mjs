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
// The stores, the worker processes and the provider's bucket and 429 are bench/fleet.mjs's, shared with w7-tokens.mjs.
import * as Fleet from "./fleet.mjs"

const QUEUE = "fair"
const TYPE = "fair.call"
/** The Postgres database of the runs and the workers' pools. */
const STORE = { database: "slowcall_bench_fairness", poolMax: 4 }
/** With `--limiter`: the provider key every call names. */
const RESOURCE = "bench:fairness:key"

const args = Fleet.parseArgs(process.argv.slice(2))

// ---------------------------------------------------------------------------------------------------------------
// Worker process
// ---------------------------------------------------------------------------------------------------------------

const runWorker = async () => {
  const lib = await Fleet.loadLib()
  const { Effect, Schema } = lib
  const { backend, prefix, providerUrl, fair, concurrency, halfLifeMs, limiter } = JSON.parse(process.env.FAIR_BENCH)
  // The call: one request per try; a 429 waits its retry-after and tries again (bounded), holding the slot.
  const call = async (input) => {
    for (let tries = 0; tries < 1_000; tries++) {
      const res = await fetch(`${providerUrl}/call?tenant=${input.tenant}&id=${input.id}&ms=${input.ms}`, {
        method: "POST"
      })
      await res.arrayBuffer()
      if (res.status === 200) return null
      const retryAfterS = Number(res.headers.get("retry-after") ?? "1")
      await Fleet.sleep(Math.max(1, retryAfterS) * 1_000)
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
    throw Fleet.providerError(res)
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
  const worker = lib.Worker.make({
    queue: QUEUE,
    concurrency,
    handlers: [handler],
    ...(fair ? { fairness: { halfLifeMs } } : {})
  })
  await Fleet.serveWorker(lib, backend, { ...STORE, prefix }, worker)
}

// ---------------------------------------------------------------------------------------------------------------
// The fake provider
// ---------------------------------------------------------------------------------------------------------------

/** A token bucket of `rpm` per minute holding one second's worth; every request recorded as [at, tenant, id, status]. */
const startProvider = async (rpm) => {
  const requests = Fleet.bucket(rpm)
  const records = []
  const provider = await Fleet.serveProvider((at, params, res) => {
    const tenant = params.get("tenant")
    const id = Number(params.get("id"))
    const waitMs = requests.waitFor(at, 1)
    if (waitMs > 0) {
      records.push([at, tenant, id, 429])
      Fleet.rateLimited(res, waitMs)
      return
    }
    requests.take(1)
    records.push([at, tenant, id, 200])
    setTimeout(() => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end("{}")
    }, Fleet.callMsOf(params))
  })
  return { ...provider, records }
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

/** A seeded uniform call time per job, so on and off runs send the same calls. */
const callTimes = (n, [lo, hi], seed) => {
  const draw = Fleet.uniform(seed)
  return Array.from({ length: n }, () => Math.round(lo + draw() * (hi - lo)))
}

const runOnce = async (lib, o, backend, mode) => {
  const { Effect } = lib
  const prefix = `slowcall-bench-fair-${process.pid}-${mode}`
  const store = await Fleet.openStore(lib, backend, { ...STORE, prefix })
  const provider = await startProvider(o.rpm)
  if (o.limiter)
    await store.run(
      Effect.flatMap(lib.Limiter.Limiter, (limiter) =>
        limiter.define({ items: [{ resource: RESOURCE, limits: { requestsPerMinute: o.rpm } }] })
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
  const workers = await Fleet.forkWorkers(import.meta.url, o.workers, "FAIR_BENCH", env)
  const times = callTimes(o.a + o.b, o.callMs, 20261230)
  const submit = async (tenant, from, count) => {
    const at = Fleet.nowMs()
    for (let start = 0; start < count; start += 1_000) {
      const items = []
      for (let i = start; i < Math.min(count, start + 1_000); i++) {
        items.push({ queue: QUEUE, type: TYPE, tenant, input: { tenant, id: from + i, ms: times[from + i] } })
      }
      await store.run(store.client.submitMany(items))
    }
    return at
  }
  const startedAt = Fleet.nowMs()
  await submit("A", 0, o.a)
  await Fleet.sleep(Math.max(0, startedAt + o.bAfterS * 1_000 - Fleet.nowMs()))
  const bAt = await submit("B", o.a, o.b)
  const bIds = new Set(Array.from({ length: o.b }, (_, i) => o.a + i))
  const doneB = () => provider.records.filter((r) => r[1] === "B" && r[3] === 200).length
  const deadline = bAt + o.capS * 1_000
  while (doneB() < o.b && Fleet.nowMs() < deadline) await Fleet.sleep(100)
  const endedAt = Fleet.nowMs()
  await Fleet.stopWorkers(workers)
  await store.close()
  await provider.close()
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
  const lib = await Fleet.loadLib()
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
