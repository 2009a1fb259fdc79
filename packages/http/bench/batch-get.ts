/**
 * Benchmark (a script, not a test): `npm run bench:batch`. How fast `GET /v1/batches/{id}` answers for a batch of
 * 100,000 items on the Postgres server (DATABASE_URL, default the machine's test database).
 *
 * It opens a fresh schema, submits one batch of `BENCH_BATCH_ITEMS` items (default 100,000) through the Promise API,
 * moves a share of them through the Store (claimed, charged, succeeded or failed; some left running) so the counts
 * and the cost are not all zero, then serves the HTTP API over the same schema and reads the batch
 * `BENCH_REQUESTS` times (default 1,000) one request after another over a kept-alive connection, after 50 unmeasured
 * ones, each answer checked (200, the batch's id and size). Each read of the large batch is paired with one of a
 * batch of 10 items, in alternating order, so both see the same load on the machine: equal figures show the answer
 * does not grow with the batch. It also times the Store's read alone (`BatchStore.get`, the statement behind the
 * route) and, for contrast, what the answer would cost if the counts were counted: one `GROUP BY state` over the
 * large batch's items. Prints a Markdown table; drops the schema.
 */
import { loadavg } from "node:os"
import { HttpServer } from "@effect/platform"
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as Batch from "@slowcall/core/Batch"
import type { JobId } from "@slowcall/core/Job"
import { Store } from "@slowcall/core/Store"
import { open } from "@slowcall/promise"
import * as PgScheduleStore from "@slowcall/schedules/PgScheduleStore"
import { Effect, Layer, ManagedRuntime } from "effect"
import pg from "pg"
import * as Server from "../src/Server.js"

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const ITEMS = Number(process.env.BENCH_BATCH_ITEMS ?? 100_000)
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 1_000)
const WARMUP = 50
const COUNTED_RUNS = 30
/** Items moved through a claim (and, for most, a settlement) before the reads. */
const MOVED = Math.min(ITEMS, 5_000)

const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
}
const ms = (value: number) => value.toFixed(2)

const schema = `bench_batch_${Date.now().toString(36)}`
const admin = new pg.Client({ connectionString: DATABASE_URL })
await admin.connect()

try {
  // The batch, through the Promise API (the queue migrates the schema).
  const queue = await open({ url: DATABASE_URL, schema, queue: "bench" })
  const submitStarted = performance.now()
  const submitted = await queue.submitBatch(
    Array.from({ length: ITEMS }, (_, n) => ({ type: "doc.import", input: { n } })),
    { onComplete: { type: "import.report" }, chunkSize: 1_000 }
  )
  const submitMs = performance.now() - submitStarted
  const small = await queue.submitBatch(
    Array.from({ length: 10 }, (_, n) => ({ type: "doc.import", input: { small: n } }))
  )
  await queue.close()
  const batchId = submitted.id

  const backend = PgScheduleStore.layer({ schema }).pipe(
    Layer.provideMerge(PgStore.layer({ connectionString: DATABASE_URL, schema, queryTimeoutMs: 30_000 }))
  )
  const runtime = ManagedRuntime.make(
    Server.layerNode({ port: 0, jobTypes: ["doc.import"] }).pipe(Layer.provideMerge(backend))
  )
  try {
    // A share of the items moves: claimed and charged; most settle (one in ten fails), the last 100 keep running.
    const ids = (
      await admin.query<{ id: string }>(`SELECT id FROM ${schema}.jobs WHERE batch_id = $1 ORDER BY id LIMIT $2`, [
        batchId,
        MOVED
      ])
    ).rows.map((row) => row.id as JobId)
    await runtime.runPromise(
      Effect.gen(function* () {
        const store = yield* Store
        for (let i = 0; i < ids.length; i += 500) {
          const chunk = ids.slice(i, i + 500)
          const now = Date.now()
          const claimed = yield* store.claim({
            now,
            items: chunk.map((jobId) => ({ jobId, owner: "bench/1", leaseMs: 600_000 }))
          })
          const tokens = claimed.results.flatMap((r) =>
            r._tag === "Claimed" ? [[r.job.id, r.job.leaseToken] as const] : []
          )
          yield* store.charge({
            now,
            items: tokens.map(([jobId, token]) => ({
              jobId,
              callId: `c-${jobId}`,
              token,
              amountCents: 1,
              settled: true
            }))
          })
          const settling = tokens.filter((_, k) => i + k < ids.length - 100)
          yield* store.settle({
            now,
            items: settling.map(([jobId, token], k) => ({
              jobId,
              token,
              outcome:
                (i + k) % 10 === 0
                  ? { _tag: "Fail" as const, errorClass: "content_filtered" as const, error: "refused" }
                  : { _tag: "Complete" as const, result: null }
            }))
          })
        }
      })
    )

    const address = await runtime.runPromise(Effect.map(HttpServer.HttpServer, (server) => server.address))
    if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")

    const base = `http://127.0.0.1:${address.port}/v1/batches/`
    let last: any = null
    const read = async (id: string, size: number) => {
      const started = performance.now()
      const res = await fetch(base + id)
      const body = (await res.json()) as any
      const took = performance.now() - started
      if (res.status !== 200 || body.id !== id || body.size !== size) {
        throw new Error(`unexpected answer ${res.status}: ${JSON.stringify(body).slice(0, 300)}`)
      }
      if (id === batchId) last = body
      return took
    }
    for (let i = 0; i < WARMUP; i++) await read(batchId, ITEMS)
    const large: Array<number> = []
    const tiny: Array<number> = []
    for (let i = 0; i < REQUESTS; i++) {
      if (i % 2 === 0) {
        large.push(await read(batchId, ITEMS))
        tiny.push(await read(small.id, 10))
      } else {
        tiny.push(await read(small.id, 10))
        large.push(await read(batchId, ITEMS))
      }
    }

    // The statement behind the route, through the Store's batch verbs.
    const stored = await runtime.runPromise(
      Effect.gen(function* () {
        const batches = yield* Batch.BatchStore
        const took: Array<number> = []
        for (let i = 0; i < REQUESTS; i++) {
          const started = performance.now()
          const batch = yield* batches.get({ batchId: batchId as Batch.BatchId })
          took.push(performance.now() - started)
          if (batch?.size !== ITEMS) return yield* Effect.die(`unexpected batch ${JSON.stringify(batch)}`)
        }
        return took
      })
    )

    // What counting instead of keeping would cost: one GROUP BY over the batch's items, per answer.
    const counted: Array<number> = []
    for (let i = 0; i < COUNTED_RUNS; i++) {
      const started = performance.now()
      await admin.query(`SELECT state, count(*) FROM ${schema}.jobs WHERE batch_id = $1 GROUP BY state`, [batchId])
      counted.push(performance.now() - started)
    }

    const row = (what: string, values: ReadonlyArray<number>) =>
      `| ${what} | ${values.length} | ${ms(percentile(values, 50))} | ${ms(percentile(values, 90))} | ${ms(percentile(values, 99))} | ${ms(Math.max(...values))} | ${ms(values.reduce((a, b) => a + b, 0) / values.length)} |`
    const n = ITEMS.toLocaleString("en")
    console.log(
      `batch of ${n} items submitted in ${(submitMs / 1000).toFixed(1)} s; counts ${JSON.stringify(last.counts)}, cost ${last.costCents}¢`
    )
    console.log(`load average over the last minute when the reads ended: ${loadavg()[0]!.toFixed(1)}`)
    console.log("")
    console.log("| measure | requests | p50 ms | p90 ms | p99 ms | max ms | mean ms |")
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    console.log(row(`\`GET /v1/batches/{id}\`, ${n} items`, large))
    console.log(row("`GET /v1/batches/{id}`, 10 items (interleaved)", tiny))
    console.log(row(`\`BatchStore.get\` alone, ${n} items`, stored))
    console.log(row(`counted instead: \`GROUP BY state\` over ${n} items`, counted))
  } finally {
    await runtime.dispose()
  }
} finally {
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  await admin.end()
}
