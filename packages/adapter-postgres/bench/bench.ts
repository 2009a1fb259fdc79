/**
 * Benchmark of the Postgres adapter (a script, not a test): `npm run bench:pg`.
 *
 * For the real server (DATABASE_URL, default the machine's test database) and for PGlite in memory it measures:
 * - throughput: jobs per second through receive (PgTransport, batches of 8) -> claim -> settle -> ack, 8 loops, the
 *   claim and the settle of a batch each one statement;
 * - pickup latency: submit -> delivery to a receiver already waiting (LISTEN/NOTIFY), p50 and p99;
 * - claim cost: one receive + claim + settle round on a queue with 1k and with 100k due jobs.
 * Each backend works in a fresh schema that is dropped afterwards. Prints a Markdown table.
 */
import { makeJobId } from "@slowcall/core/Ids"
import { Effect, Fiber, Layer } from "effect"
import { type Driver, makePgDriver, makePgliteDriver } from "../src/internal/driver.js"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import * as PgTransport from "../src/PgTransport.js"

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const THROUGHPUT_JOBS = Number(process.env.BENCH_JOBS ?? 2_000)
const LATENCY_SAMPLES = Number(process.env.BENCH_SAMPLES ?? 200)
const CLAIM_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 300)

interface Result {
  readonly backend: string
  readonly throughput: number
  readonly p50: number
  readonly p99: number
  readonly claim1k: number
  readonly claim100k: number
}

const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN
}

const submitOne = (queue: string, n: number) =>
  Effect.gen(function* () {
    const store = yield* PgStore.PgStore
    const id = yield* makeJobId
    yield* store.submit({
      items: [{ id, queue, type: "bench", version: 1, inputHash: `h${n}`, input: { n }, maxAttempts: 3 }]
    })
    return id
  })

/** Runs receive -> claim -> settle -> ack until `count` jobs of `queue` are done, one statement per batch verb. */
const drain = (queue: string, count: number, loops: number) =>
  Effect.gen(function* () {
    const store = yield* PgStore.PgStore
    const transport = yield* PgTransport.PgTransport
    let done = 0
    const loop = (owner: string) =>
      Effect.gen(function* () {
        while (done < count) {
          const batch = yield* transport.receive({ queue, max: 8, visibilityMs: 30_000, waitMs: 100 })
          if (batch.length === 0) continue
          const claims = yield* store.claim({
            items: batch.map((delivery) => ({ jobId: delivery.jobId, owner, leaseMs: 30_000 }))
          })
          const settled = yield* store.settle({
            items: claims.results.flatMap((claim) =>
              claim._tag === "Claimed"
                ? [
                    {
                      jobId: claim.job.id,
                      token: claim.job.leaseToken,
                      outcome: { _tag: "Complete", result: null } as const
                    }
                  ]
                : []
            )
          })
          done += settled.results.filter((result) => result._tag === "Settled").length
          for (const delivery of batch) yield* transport.ack({ delivery })
        }
      })
    yield* Effect.all(
      Array.from({ length: loops }, (_, i) => loop(`bench-${i}`)),
      { concurrency: "unbounded" }
    )
  })

const bulkQueue = (driver: Driver, schema: string, queue: string, count: number) =>
  Effect.promise(() =>
    driver.query(
      `INSERT INTO "${schema}".jobs (id, queue, type, version, input_hash, state, max_attempts, run_after,
         created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'bench', 1, 'h', 'queued', 3, now() - n * interval '1 millisecond', now(), now()
       FROM generate_series(1, $2::int) n`,
      [queue, count]
    )
  )

/** Mean ms of one receive + claim + settle round on a queue with `backlog` due jobs. */
const claimCost = (driver: Driver, schema: string, backlog: number) =>
  Effect.gen(function* () {
    const queue = `claim-${backlog}`
    // Every round takes the next due job of a queue `backlog` deep (the queue stays that deep within one job).
    yield* bulkQueue(driver, schema, queue, backlog)
    yield* Effect.promise(() => driver.query(`ANALYZE "${schema}".jobs`))
    const store = yield* PgStore.PgStore
    const transport = yield* PgTransport.PgTransport
    const samples: Array<number> = []
    for (let i = 0; i < CLAIM_ROUNDS; i++) {
      const start = performance.now()
      const [delivery] = yield* transport.receive({ queue, max: 1, visibilityMs: 30_000, waitMs: 0 })
      if (delivery === undefined) continue
      const [claim] = (yield* store.claim({ items: [{ jobId: delivery.jobId, owner: "bench", leaseMs: 30_000 }] }))
        .results
      if (claim?._tag === "Claimed") {
        yield* store.settle({
          items: [{ jobId: delivery.jobId, token: claim.job.leaseToken, outcome: { _tag: "Complete", result: null } }]
        })
      }
      samples.push(performance.now() - start)
    }
    return samples.reduce((sum, x) => sum + x, 0) / Math.max(1, samples.length)
  })

const pickupLatency = Effect.gen(function* () {
  const transport = yield* PgTransport.PgTransport
  const samples: Array<number> = []
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const waiting = yield* Effect.fork(
      transport.receive({ queue: "latency", max: 1, visibilityMs: 30_000, waitMs: 5_000 })
    )
    yield* Effect.sleep("2 millis")
    const start = performance.now()
    yield* submitOne("latency", i)
    const deliveries = yield* Fiber.join(waiting)
    if (deliveries.length > 0) samples.push(performance.now() - start)
  }
  return samples
})

const measure = (backend: string, driver: Driver, schema: string) =>
  Effect.gen(function* () {
    yield* Effect.forEach(
      Array.from({ length: THROUGHPUT_JOBS }, (_, n) => n),
      (n) => submitOne("throughput", n),
      { concurrency: 8, discard: true }
    )
    const start = performance.now()
    yield* drain("throughput", THROUGHPUT_JOBS, 8)
    const throughput = THROUGHPUT_JOBS / ((performance.now() - start) / 1000)
    const latency = yield* pickupLatency
    const claim1k = yield* claimCost(driver, schema, 1_000)
    const claim100k = yield* claimCost(driver, schema, 100_000)
    return {
      backend,
      throughput,
      p50: percentile(latency, 50),
      p99: percentile(latency, 99),
      claim1k,
      claim100k
    } satisfies Result
  }).pipe(
    Effect.provide(
      Layer.merge(PgStore.layerFromDriver({ schema }), PgTransport.layerFromDriver({ schema, pollMs: 1_000 })).pipe(
        Layer.provide(Layer.succeed(PgDriver.PgDriver, driver))
      )
    )
  )

const server = Effect.gen(function* () {
  const schema = `bench_${process.pid}`
  const driver = makePgDriver({ connectionString: DATABASE_URL, max: 12 })
  try {
    return yield* measure("postgres 15 server (node-postgres)", driver, schema)
  } finally {
    yield* Effect.promise(() => driver.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`))
    yield* Effect.promise(() => driver.close())
  }
})

const pglite = Effect.gen(function* () {
  const driver = yield* Effect.promise(() => makePgliteDriver({}))
  try {
    return yield* measure("PGlite 0.5 in memory (in process)", driver, "slowcall")
  } finally {
    yield* Effect.promise(() => driver.close())
  }
})

const main = Effect.gen(function* () {
  const results: Array<Result> = [yield* server, yield* pglite]
  const row = (cells: ReadonlyArray<string>) => `| ${cells.join(" | ")} |`
  console.log(
    [
      row([
        "backend",
        "throughput (jobs/s)",
        "pickup p50 (ms)",
        "pickup p99 (ms)",
        "claim, 1k queued (ms)",
        "claim, 100k queued (ms)"
      ]),
      row(["---", "---:", "---:", "---:", "---:", "---:"]),
      ...results.map((r) =>
        row([
          r.backend,
          r.throughput.toFixed(0),
          r.p50.toFixed(1),
          r.p99.toFixed(1),
          r.claim1k.toFixed(2),
          r.claim100k.toFixed(2)
        ])
      )
    ].join("\n")
  )
  console.log(
    `\n${THROUGHPUT_JOBS} jobs through 8 receive/claim/settle loops; ${LATENCY_SAMPLES} pickup samples; ` +
      `${CLAIM_ROUNDS} claim rounds per backlog; Node ${process.version}.`
  )
})

Effect.runPromise(main.pipe(Effect.provide(Layer.empty))).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
