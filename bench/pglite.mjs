// slowcall on embedded PGlite, measured in one process (PGlite is in-process: the harness's producer and worker
// processes could not share it), with the harness's W1 and W2 shapes: N jobs enqueued one at a time (Client.submit,
// each awaited), then again in chunks of 1,000 (Client.submitMany), then processed by a worker at concurrency 16
// with a no-op handler (first handler start to last handler end), and a pickup-latency run (an idle worker; one job
// every 10 ms; handler start minus the time just before the submit). The full protocol runs, as on the server.
//
//   node bench/pglite.mjs [--quick] [--json]      (N = 10,000 and 1,000 pickups; --quick: 1,000 and 200)
//
// With --json the last line is {"n":..,"enqueueSingle":jobs/s,"enqueueBulk":jobs/s,"process":jobs/s,
// "workerCpuMsPerJob":ms,"pickupP50Ms":ms,"pickupP99Ms":ms}. CPU is the whole process's (producer and worker share it).
import { pathToFileURL } from "node:url"
import { bundleOf } from "../scripts/bundle.mjs"

const quick = process.argv.includes("--quick")
const N = quick ? 1_000 : 10_000
const PICKUPS = quick ? 200 : 1_000
const QUEUE = "bench"

const [{ Deferred, Effect, Exit, Layer, Schema, Scope }, lib] = await Promise.all([
  import("effect"),
  bundleOf(new URL("./lib.ts", import.meta.url).pathname).then((file) => import(pathToFileURL(file).href))
])
const { Client, Handler, PgStore, Worker } = lib

const scope = await Effect.runPromise(Scope.make())
const context = await Effect.runPromise(Layer.buildWithScope(PgStore.layerPglite({ migrate: true }), scope))
const run = (effect) => Effect.runPromise(Effect.provide(effect, context))
const client = await run(Client.make)
const inputs = (from, n) => Array.from({ length: n }, (_, i) => ({ id: from + i }))

const perSecond = (n, ms) => Math.round((n / ms) * 1000)
const time = async (f) => {
  const t0 = performance.now()
  await f()
  return performance.now() - t0
}

// Enqueue: one at a time, then in chunks (each run on its own queue, so the worker below sees only the bulk set).
const singleMs = await time(async () => {
  for (const input of inputs(0, N)) await run(client.submit({ queue: `${QUEUE}-single`, type: "bench", input }))
})
const bulkMs = await time(async () => {
  for (let i = 0; i < N; i += 1000) {
    await run(
      client.submitMany(inputs(i, Math.min(1000, N - i)).map((input) => ({ queue: QUEUE, type: "bench", input })))
    )
  }
})

/** A worker whose no-op handler calls `onRun(input)`; closed by the returned function. */
const startWorker = async (queue, onRun) => {
  const handler = Handler.make({
    type: "bench",
    version: 1,
    input: Schema.Unknown,
    result: Schema.Null,
    attempt: { timeoutMs: 30_000 },
    run: (input) =>
      Effect.sync(() => {
        onRun(input)
        return null
      })
  })
  const workerScope = await Effect.runPromise(Scope.make())
  await run(Scope.extend(Worker.make({ queue, concurrency: 16, prefetch: 64, handlers: [handler] }), workerScope))
  return () => Effect.runPromise(Scope.close(workerScope, Exit.void))
}

// W1: process the bulk set.
let first = 0
let last = 0
let done = 0
const all = await Effect.runPromise(Deferred.make())
const cpu0 = process.cpuUsage()
const stopW1 = await startWorker(QUEUE, () => {
  const now = performance.now()
  if (first === 0) first = now
  last = now
  if (++done === N) Effect.runSync(Deferred.succeed(all, undefined))
})
await Effect.runPromise(Deferred.await(all))
const cpu = process.cpuUsage(cpu0)
await stopW1()

// W2: pickup latency of an idle worker.
const started = new Map()
const latencies = []
const stopW2 = await startWorker(`${QUEUE}-pickup`, (input) => {
  const t = started.get(input.id)
  if (t !== undefined) latencies.push(performance.now() - t)
})
await new Promise((resolve) => setTimeout(resolve, 1_000))
for (let i = 0; i < PICKUPS; i++) {
  const at = performance.now()
  started.set(i, at)
  await run(client.submit({ queue: `${QUEUE}-pickup`, type: "bench", input: { id: i } }))
  const wait = at + 10 - performance.now()
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
}
while (latencies.length < PICKUPS) await new Promise((resolve) => setTimeout(resolve, 50))
await stopW2()
await Effect.runPromise(Scope.close(scope, Exit.void))

latencies.sort((a, b) => a - b)
const q = (p) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] * 10) / 10
const result = {
  n: N,
  enqueueSingle: perSecond(N, singleMs),
  enqueueBulk: perSecond(N, bulkMs),
  process: perSecond(N, last - first),
  workerCpuMsPerJob: Math.round(((cpu.user + cpu.system) / 1000 / N) * 1000) / 1000,
  pickupP50Ms: q(0.5),
  pickupP99Ms: q(0.99)
}
console.log(
  `PGlite (in memory, one process): enqueue ${result.enqueueSingle}/s one at a time, ${result.enqueueBulk}/s bulk; ` +
    `W1 ${result.process} jobs/s (${result.workerCpuMsPerJob} ms CPU per job); pickup p50 ${result.pickupP50Ms} ms, ` +
    `p99 ${result.pickupP99Ms} ms`
)
if (process.argv.includes("--json")) console.log(JSON.stringify(result))
