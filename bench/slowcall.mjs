// slowcall in the peer benchmark harness (shared/bench): one adapter file with the shape documented at the top of
// the harness's adapters/index.mjs, so slowcall runs side by side with BullMQ, pg-boss and Graphile Worker in one
// run. Run it through `npm run bench:compare` (scripts/bench-compare.mjs), or directly:
//
//   node ../shared/bench/run.mjs --quick --reps 1 --peers graphile-batched,$PWD/bench/slowcall.mjs
//
// What it drives, all on the Postgres adapter (`PgStore.layer`: PgStore + PgTransport) with a database of its own
// (`anchors_slowcall` on ANCHORS_PG_URL), the full protocol every time (fencing tokens, attempt rows, the ledger):
// - enqueue:     `client.submit({ queue, type, input })`, one call per job, each awaited: validate and hash the input,
//                one INSERT statement (its trigger's NOTIFY wakes workers; a publish without a delay writes nothing).
// - enqueueBulk: `client.submitMany(chunk)`: validate and hash every input, one `Store.submit` batch (one INSERT
//                statement per 1,000 items, per-item idempotency results), and one NOTIFY per statement.
// - worker:      `Worker.make({ queue, concurrency, prefetch, handlers: [Handler.make(...)] })`. PgTransport's
//                messages are the Store's rows (`claimsFromStore`), so per round the worker makes one `claimNext`
//                statement (up to concurrency + prefetch due jobs, their attempt rows written in the same statement),
//                runs each handler, and settles every ended attempt in one fenced `settle` statement (attempt rows
//                closed in it) per round trip; heartbeats (one statement for every held lease) come every third of
//                the keep-alive (the harness's `leaseMs`, else the Worker's 6 s default), so only W3's longest calls
//                and W5-W6's slow ones see them; a lease that ended is taken over by the next `claimNext`, with no
//                Sweeper. The no-op handler makes no model call, so no
//                charge statement is written; a billed call would add one reservation and one settlement, batched
//                the same way.
// - pending:     count of `queued` and `running` jobs.
// PREFETCH (SLOWCALL_BENCH_PREFETCH, default 500, Graphile's own localQueue size in its batched preset) is the one
// setting changed from the Worker's defaults; `npm run bench:compare` sets it to 0 (the default) for the slow-call
// workloads W5-W7, where a local queue only keeps jobs from the other workers. The workspace code is imported from a bundle of bench/lib.ts
// (scripts/bundle.mjs: compiled once, cached by content), as a user's build would ship it.
import { pathToFileURL } from "node:url"
import { bundleOf } from "../scripts/bundle.mjs"
import { adapterCalls, infoOf, PREFETCH, QUEUE, settingsOf } from "./common.mjs"

const [effect, lib, pgModule] = await Promise.all([
  import("effect"),
  bundleOf(new URL("./lib.ts", import.meta.url).pathname).then((file) => import(pathToFileURL(file).href)),
  import("pg")
])
const { PgStore } = lib
const pg = pgModule.default

const SCHEMA = "slowcall"
const PG_URL_BASE = process.env.ANCHORS_PG_URL || "postgres://postgres@127.0.0.1:5432"

async function recreateDatabase(db) {
  const admin = new pg.Client({ connectionString: `${PG_URL_BASE}/postgres` })
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`)
    await admin.query(`CREATE DATABASE "${db}"`)
  } finally {
    await admin.end()
  }
}

/** @param {{ db?: string, poolMax?: number }} [options] */
export default function create(options = {}) {
  const db = options.db || "anchors_slowcall"
  const connectionString = `${PG_URL_BASE}/${db}`
  let pool
  const settings = settingsOf(options, lib.Lease.defaultKeepAliveMs)
  const calls = adapterCalls({ effect, lib, settings })

  return {
    name: "slowcall",
    package: "@slowcall/core + @slowcall/adapter-postgres",
    version: "0.1.0",
    backend: "postgres",
    api: {
      enqueue: "client.submit({ queue, type, input })",
      enqueueBulk: "client.submitMany(chunk): one Store.submit batch",
      worker: `Worker.make({ queue, concurrency, prefetch: ${PREFETCH}, handlers: [Handler.make(...)] }) on PgStore.layer (claimNext -> handler -> batched settle)`,
      workerShort: `Worker.make, prefetch ${PREFETCH} (claimNext -> batched settle)`
    },

    async setup({ fresh, role }) {
      if (fresh) await recreateDatabase(db)
      // The adapter makes and owns the pool its statements run on, as the package README sets it up: a pool passed
      // in keeps its own session settings, so its sessions would compile claims with JIT behind a large backlog
      // (see `sessionOptions` in the adapter's driver). The harness's own probes (pending, maintenance) use a pool
      // of one connection beside it.
      const max = options.poolMax ?? (role === "worker" ? 8 : 4)
      await calls.open(PgStore.layer({ connectionString, max, schema: SCHEMA, migrate: fresh }), { fresh })
      pool = new pg.Pool({ connectionString, max: 1 })
      pool.on("error", () => {})
    },

    enqueue: calls.enqueue,
    enqueueBulk: calls.enqueueBulk,
    startWorker: calls.startWorker,

    info: () => infoOf(settings, { database: db }),

    async pending() {
      const r = await pool.query(
        `select count(*)::int as n from ${SCHEMA}.jobs where queue = $1 and state in ('queued', 'running')`,
        [QUEUE]
      )
      return r.rows[0].n
    },

    // W4 calls this after seeding a large backlog: steady-state statistics, as autovacuum would give.
    async maintenance() {
      for (const table of ["jobs", "queued_entries", "lease_entries", "finished_entries"]) {
        await pool.query(`VACUUM ANALYZE ${SCHEMA}.${table}`)
      }
    },

    stop: calls.stop,

    async teardown() {
      await calls.close()
      if (pool) await pool.end()
      pool = undefined
    }
  }
}
