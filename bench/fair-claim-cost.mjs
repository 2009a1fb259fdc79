// What a fair claim costs the Store: one `claimNext` of 16 jobs, with `fair` and without, on a queue holding a
// backlog of 1,000 or 100,000 due jobs spread over 2 or 100 tenants, on the Postgres server and on Redis.
//
//   npm run bench:fairness:cost
//   npm run bench:fairness:cost -- --backends postgres --backlogs 1000 --tenants 2 --calls 40
//
// Each (backend, backlog, tenants) gets a fresh queue seeded with backlog + 2 x calls x 16 jobs (bulk submits of
// 1,000; Postgres then runs VACUUM ANALYZE, as W4 of the shared harness does), then `--calls` claims with `fair` and
// `--calls` without, interleaved one by one, each awaited. Reported: the median and p90 time of one claim, in ms, as
// the caller sees it (round trips included). Postgres uses its own database (slowcall_bench_faircost, recreated);
// Redis a key prefix of its own, deleted afterwards.
import { pathToFileURL } from "node:url"
import { bundleOf } from "../scripts/bundle.mjs"

const PG_URL_BASE = process.env.SLOWCALL_BENCH_PG_URL || "postgres://postgres@127.0.0.1:5432"
const PG_DB = "slowcall_bench_faircost"
const REDIS_URL = process.env.SLOWCALL_BENCH_REDIS_URL || "redis://127.0.0.1:6379/3"
const BATCH = 16

const args = (() => {
  const out = {}
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith("--")) continue
    out[argv[i].slice(2)] = argv[i + 1]
    i++
  }
  return out
})()

const [effect, lib, pgModule, { Redis }] = await Promise.all([
  import("effect"),
  bundleOf(new URL("./lib.ts", import.meta.url).pathname).then((file) => import(pathToFileURL(file).href)),
  import("pg"),
  import("ioredis")
])
const { Effect, Exit, Layer, Scope } = effect
const pg = pgModule.default

const nowMs = () => performance.timeOrigin + performance.now()
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * q))]

const setup = async (backend, prefix) => {
  if (backend === "postgres") {
    const admin = new pg.Client({ connectionString: `${PG_URL_BASE}/postgres` })
    await admin.connect()
    await admin.query(`DROP DATABASE IF EXISTS "${PG_DB}" WITH (FORCE)`)
    await admin.query(`CREATE DATABASE "${PG_DB}"`)
    await admin.end()
    // The adapter makes its own pool (with its session settings: JIT off); the bench's VACUUM uses one beside it.
    const connectionString = `${PG_URL_BASE}/${PG_DB}`
    const pool = new pg.Pool({ connectionString, max: 1 })
    pool.on("error", () => {})
    return {
      layer: lib.PgStore.layer({ connectionString, max: 4, migrate: true }),
      maintain: () => pool.query("VACUUM ANALYZE slowcall.jobs"),
      close: () => pool.end()
    }
  }
  return {
    layer: lib.RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false }),
    maintain: async () => {},
    close: async () => {
      const redis = new Redis(REDIS_URL)
      let cursor = "0"
      for (let round = 0; round < 100_000; round++) {
        const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000)
        if (keys.length > 0) await redis.unlink(...keys)
        cursor = next
        if (cursor === "0") break
      }
      redis.disconnect()
    }
  }
}

const measure = async (backend, backlogs, tenantCounts, calls) => {
  const prefix = `slowcall-bench-faircost-${process.pid}`
  const { layer, maintain, close } = await setup(backend, prefix)
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const run = (effect) => Effect.runPromise(Effect.provide(effect, context))
  const client = await run(lib.Client.make)
  const store = await run(lib.Store.Store)
  const rows = []
  for (const backlog of backlogs) {
    for (const tenants of tenantCounts) {
      const queue = `cost-${backlog}-${tenants}`
      const total = backlog + 2 * calls * BATCH
      for (let start = 0; start < total; start += 1_000) {
        const items = []
        for (let i = start; i < Math.min(total, start + 1_000); i++) {
          items.push({ queue, type: "cost", tenant: `t${i % tenants}`, input: { i } })
        }
        await run(client.submitMany(items))
      }
      await maintain()
      const fair = []
      const plain = []
      for (let i = 0; i < calls; i++) {
        for (const [list, options] of [
          [fair, { fair: {} }],
          [plain, {}]
        ]) {
          const at = nowMs()
          await run(store.claimNext({ queue, max: BATCH, owner: "cost", leaseMs: 60_000, ...options }))
          list.push(nowMs() - at)
        }
      }
      fair.sort((a, b) => a - b)
      plain.sort((a, b) => a - b)
      const row = {
        backend,
        backlog,
        tenants,
        fairMedianMs: quantile(fair, 0.5),
        fairP90Ms: quantile(fair, 0.9),
        plainMedianMs: quantile(plain, 0.5),
        plainP90Ms: quantile(plain, 0.9)
      }
      rows.push(row)
      console.log(
        `${backend} backlog ${backlog}, ${tenants} tenants: fair claim of ${BATCH} median ${row.fairMedianMs.toFixed(2)} ms ` +
          `(p90 ${row.fairP90Ms.toFixed(2)}), plain median ${row.plainMedianMs.toFixed(2)} ms (p90 ${row.plainP90Ms.toFixed(2)})`
      )
    }
  }
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await close()
  return rows
}

const backends = String(args.backends ?? "postgres,redis").split(",")
const backlogs = String(args.backlogs ?? "1000,100000")
  .split(",")
  .map(Number)
const tenantCounts = String(args.tenants ?? "2,100")
  .split(",")
  .map(Number)
const calls = Number(args.calls ?? 40)
const all = []
for (const backend of backends) all.push(...(await measure(backend, backlogs, tenantCounts, calls)))
if (process.argv.includes("--json")) console.log(JSON.stringify(all))
