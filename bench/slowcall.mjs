// slowcall in the peer benchmark harness (shared/bench): one adapter file with the shape documented at the top of
// the harness's adapters/index.mjs, so slowcall runs side by side with BullMQ, pg-boss and Graphile Worker in one
// run. Run it through `npm run bench` (scripts/bench.mjs), or directly:
//
//   node ../shared/bench/run.mjs --quick --reps 1 --peers bullmq,graphile-batched,$PWD/bench/slowcall.mjs
//
// What it drives, all on the Postgres adapter with a database of its own (`anchors_slowcall` on ANCHORS_PG_URL):
// - enqueue:     Client.submit, one call per job, each awaited (validate + hash, one INSERT, one publish UPDATE).
// - enqueueBulk: the Postgres adapter's transactional enqueue: one PgStore submitInTransaction batch per slice,
//                the chunk split over up to BULK_CONCURRENCY concurrent transactions of at least BULK_MIN_SLICE jobs
//                (one statement, one commit and one wake-up per slice; the inserted rows are PgTransport's
//                messages, so nothing is published). SLOWCALL_BENCH_BULK=concurrent measures the one-job path
//                instead: Client.submit x chunk, BULK_CONCURRENCY at once.
// - worker:      the core Worker (receive from PgTransport -> claim -> handler -> fenced settle -> ack) with one
//                handler made by Handler.make that awaits the harness's handler.
// The workspace code is imported from a bundle of bench/lib.ts (scripts/bundle.mjs: compiled once, cached by content),
// as a user's build would ship it; the measured process never compiles TypeScript.
import { pathToFileURL } from "node:url"
import { bundleOf } from "../scripts/bundle.mjs"

const [{ Context, Effect, Exit, Layer, Schema, Scope }, lib, pgModule] = await Promise.all([
  import("effect"),
  bundleOf(new URL("./lib.ts", import.meta.url).pathname).then((file) => import(pathToFileURL(file).href)),
  import("pg")
])
const { PgStore, Client, Handler, Worker, Canonical, Ids } = lib
const pg = pgModule.default

const QUEUE = "anchors"
const TYPE = "anchors"
const SCHEMA = "slowcall"
/** Concurrent submits per bulk chunk; the producer's pool has this many connections. */
const BULK_CONCURRENCY = 16
const BULK = process.env.SLOWCALL_BENCH_BULK || "transaction"
/**
 * The handler's declared attempt: the harness's slowest W3 call is about 7.3 s, so a 30 s call timeout gives a
 * 33 s lease (heartbeat every 11 s) that no live attempt outruns.
 */
const ATTEMPT = { timeoutMs: 30_000 }

/** A chunk is split over concurrent transactions of at least this many jobs each. */
const BULK_MIN_SLICE = 100

/** Jobs the worker claims ahead of a free slot (its local queue). */
const PREFETCH = Number(process.env.SLOWCALL_BENCH_PREFETCH ?? 0)

const statementNames = new Map()
const statementName = (text) => {
  let name = statementNames.get(text)
  if (name === undefined) {
    name = `slowcall_bench_${statementNames.size}`
    statementNames.set(text, name)
  }
  return name
}

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
  let layerScope
  let context
  let client
  let store
  let workerScope

  const runPromise = (effect) => Effect.runPromise(Effect.provide(effect, context))

  /** Every job of `jobs` through one PgStore.submitInTransaction batch inside one transaction on one connection. */
  async function submitAllInTransaction(jobs) {
    const conn = await pool.connect()
    // The adapter's own driver prepares its statements once per connection; do the same for the SqlClient handed
    // to submitInTransaction, so the server does not parse and plan the submit statement for every job.
    const sql = {
      query: (text, values) => conn.query({ name: statementName(text), text, values })
    }
    try {
      await conn.query("BEGIN")
      const items = await Effect.runPromise(
        Effect.forEach(jobs, (input) =>
          Effect.map(Effect.all({ id: Ids.makeJobId, inputHash: Canonical.inputHash(input) }), (o) => ({
            ...o,
            queue: QUEUE,
            type: TYPE,
            version: 1,
            input,
            maxAttempts: 3
          }))
        )
      )
      await Effect.runPromise(store.submitInTransaction(sql, { items }))
      await conn.query("COMMIT")
    } catch (error) {
      await conn.query("ROLLBACK").catch(() => {})
      throw error
    } finally {
      conn.release()
    }
  }

  return {
    name: "slowcall",
    package: "@slowcall/core + @slowcall/adapter-postgres",
    version: "0.1.0",
    backend: "postgres",
    api: {
      enqueue: "client.submit({ queue, type, input })",
      enqueueBulk:
        BULK === "transaction"
          ? "store.submitInTransaction(conn, { items: chunk }), one batch per transaction of >= 100 jobs"
          : `client.submit x chunk, ${BULK_CONCURRENCY} concurrent`,
      worker:
        "Worker.make({ queue, concurrency, handlers: [Handler.make(...)] }) on PgStore.layer (PgTransport receive -> claim -> settle)",
      workerShort: "Worker.make (receive -> claim -> settle)"
    },

    async setup({ fresh, role }) {
      if (fresh) await recreateDatabase(db)
      pool = new pg.Pool({
        connectionString,
        max: options.poolMax ?? (role === "worker" ? 17 : BULK_CONCURRENCY)
      })
      pool.on("error", () => {})
      layerScope = await Effect.runPromise(Scope.make())
      context = await Effect.runPromise(
        Layer.buildWithScope(PgStore.layer({ pool, schema: SCHEMA, migrate: fresh }), layerScope)
      )
      client = await runPromise(Client.make)
      // The service's method, not the module-level `PgStore.submitInTransaction`: the latter rebuilds every
      // statement text of the schema on each call, which costs more CPU than the submit itself.
      store = Context.get(context, PgStore.PgStore)
    },

    async enqueue(jobs) {
      for (const input of jobs) await runPromise(client.submit({ queue: QUEUE, type: TYPE, input }))
    },

    async enqueueBulk(jobs) {
      if (BULK === "transaction") {
        const slices = Math.min(BULK_CONCURRENCY, Math.ceil(jobs.length / BULK_MIN_SLICE))
        const size = Math.ceil(jobs.length / slices)
        await Promise.all(
          Array.from({ length: slices }, (_, i) => submitAllInTransaction(jobs.slice(i * size, (i + 1) * size)))
        )
        return
      }
      await runPromise(
        Effect.forEach(jobs, (input) => client.submit({ queue: QUEUE, type: TYPE, input }), {
          concurrency: BULK_CONCURRENCY,
          discard: true
        })
      )
    },

    async startWorker({ concurrency, handler }) {
      const job = Handler.make({
        type: TYPE,
        version: 1,
        input: Schema.Unknown,
        result: Schema.Null,
        attempt: ATTEMPT,
        run: (payload) =>
          Effect.as(
            Effect.promise(() => handler(payload)),
            null
          )
      })
      workerScope = await Effect.runPromise(Scope.make())
      await runPromise(
        Scope.extend(Worker.make({ queue: QUEUE, concurrency, prefetch: PREFETCH, handlers: [job] }), workerScope)
      )
    },

    async pending() {
      const r = await pool.query(
        `select count(*)::int as n from ${SCHEMA}.jobs where queue = $1 and state in ('queued', 'running')`,
        [QUEUE]
      )
      return r.rows[0].n
    },

    // W4 calls this after seeding a large backlog: steady-state statistics, as autovacuum would give.
    async maintenance() {
      await pool.query(`VACUUM ANALYZE ${SCHEMA}.jobs`)
    },

    // Closing the worker's scope stops receiving and lets running handlers finish (shutdownGraceMs).
    async stop() {
      if (workerScope) await Effect.runPromise(Scope.close(workerScope, Exit.void))
      workerScope = undefined
    },

    async teardown() {
      if (workerScope) await Effect.runPromise(Scope.close(workerScope, Exit.void))
      if (layerScope) await Effect.runPromise(Scope.close(layerScope, Exit.void))
      if (pool) await pool.end()
      workerScope = layerScope = context = client = store = pool = undefined
    }
  }
}
