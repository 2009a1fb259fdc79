/**
 * The cost of one `Client.submit` on the producer's side: N sequential submits, each awaited before the next, on the
 * memory store (no I/O: what is measured is the Client and the Effect runtime under it), on Redis and on Postgres
 * (the same plus the adapter's submit path and one round trip each).
 *
 *   node scripts/bundled.mjs bench/submit-overhead.ts [N] [memory,redis,postgres]     (N = 5000, all three)
 *   COUNT=1 node scripts/bundled.mjs bench/submit-overhead.ts                         (also: Effect operations per submit)
 *   node --cpu-prof scripts/bundled.mjs bench/submit-overhead.ts 20000 memory         (a CPU profile to read)
 *
 * Prints jobs/s and CPU ms per submit (the process's own user + system time over the timed submits) per store, then
 * the same for N more jobs through `submitMany`, 500 items a call. Redis
 * runs on 127.0.0.1:6379 under a key prefix of its own, deleted afterwards (SCAN + UNLINK, never a flush); Postgres
 * on 127.0.0.1:5432 (database `test`) in a schema of its own, dropped afterwards. Each run starts with 500 untimed
 * submits so the timed ones meet warm code.
 */
import { Effect, Layer } from "effect"
import { Redis } from "ioredis"
import pg from "pg"
import * as PgStore from "../packages/adapter-postgres/src/PgStore.js"
import * as RedisStore from "../packages/adapter-redis/src/RedisStore.js"
import * as Client from "../packages/core/src/Client.js"
import * as Store from "../packages/core/src/Store.js"
import * as Transport from "../packages/core/src/Transport.js"
import { OpCount, watch } from "./opCount.js"

const N = Number(process.argv[2] ?? 5_000)
const targets = (process.argv[3] ?? "memory,redis,postgres").split(",")
const WARMUP = 500
const BULK = 500
const REDIS_URL = "redis://127.0.0.1:6379"
const PG_URL = "postgres://postgres@127.0.0.1:5432/test"
const tag = `submitbench${process.pid}`

/** A small job input of the kind a model call takes. */
const inputOf = (i: number) => ({ prompt: `summarise document ${i}`, model: "small", maxTokens: 512, tags: ["a", "b"] })

const run = (name: string, layer: Layer.Layer<Store.Store | Store.Query | Transport.Transport, unknown>) =>
  Effect.gen(function* () {
    const client = yield* Client.make
    const queue = `${tag}-q`
    for (let i = 0; i < WARMUP; i++) yield* client.submit({ queue, type: "t", input: inputOf(-i) })
    const count = new OpCount()
    const loop = Effect.gen(function* () {
      for (let i = 0; i < N; i++) yield* client.submit({ queue, type: "t", input: inputOf(i) })
    })
    const started = performance.now()
    const cpu0 = process.cpuUsage()
    yield* process.env.COUNT ? watch(loop, count) : loop
    const cpu = process.cpuUsage(cpu0)
    const seconds = (performance.now() - started) / 1000
    console.log(
      `${name.padEnd(8)} ${N} submits, ${(N / seconds).toFixed(0).padStart(6)} jobs/s, cpu ms/submit ${((cpu.user + cpu.system) / 1000 / N).toFixed(4)} (user ${(cpu.user / 1000 / N).toFixed(4)}, system ${(cpu.system / 1000 / N).toFixed(4)})`
    )
    if (process.env.COUNT) {
      console.log(`  effect operations per submit ${(count.ops / N).toFixed(1)}`)
      for (const [kind, n] of [...count.byKind].sort((a, b) => b[1] - a[1]))
        console.log(`    ${(n / N).toFixed(2)} ${kind}`)
    }
    // The same number of jobs again through submitMany, BULK at a time: the per-item share of a batch.
    const bulk = Array.from({ length: BULK }, (_, i) => ({ queue, type: "t", input: inputOf(i) }))
    const bulkStarted = performance.now()
    const bulkCpu0 = process.cpuUsage()
    for (let done = 0; done < N; done += BULK) yield* client.submitMany(bulk)
    const bulkCpu = process.cpuUsage(bulkCpu0)
    const jobs = Math.ceil(N / BULK) * BULK
    console.log(
      `${name.padEnd(8)} ${jobs} in submitMany of ${BULK}, ${(jobs / ((performance.now() - bulkStarted) / 1000)).toFixed(0).padStart(6)} jobs/s, cpu ms/job ${((bulkCpu.user + bulkCpu.system) / 1000 / jobs).toFixed(4)}`
    )
  }).pipe(Effect.provide(layer), Effect.scoped)

const dropRedisKeys = async () => {
  const redis = new Redis(REDIS_URL)
  try {
    let cursor = "0"
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${tag}*`, "COUNT", 5000)
      cursor = next
      if (keys.length > 0) await redis.unlink(...keys)
    } while (cursor !== "0")
  } finally {
    redis.disconnect()
  }
}

const dropSchema = async () => {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${tag}" CASCADE`)
  } finally {
    await client.end()
  }
}

const main = async () => {
  if (targets.includes("memory")) {
    await Effect.runPromise(run("memory", Layer.merge(Store.layerMemory, Transport.layerMemory())))
  }
  if (targets.includes("redis")) {
    try {
      await Effect.runPromise(run("redis", RedisStore.layer({ url: REDIS_URL, prefix: tag, checkServer: false })))
    } finally {
      await dropRedisKeys()
    }
  }
  if (targets.includes("postgres")) {
    const pool = new pg.Pool({ connectionString: PG_URL, max: 4 })
    pool.on("error", () => {})
    try {
      await Effect.runPromise(run("postgres", PgStore.layer({ pool, schema: tag, migrate: true })))
    } finally {
      await pool.end()
      await dropSchema()
    }
  }
}

await main()
