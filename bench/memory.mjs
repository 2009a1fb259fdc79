// Memory with a backlog: a worker's resident set while 100,000 and 1,000,000 jobs wait in its queue, and the bytes a
// queued job takes on disk (heap and each index of the jobs table), on the Postgres server.
//
//   node bench/memory.mjs [--quick] [--json]          (backlogs 100,000 and 1,000,000; --quick: 10,000 and 100,000)
//
// For each backlog it seeds the queue with rows shaped as Client.submitMany writes them (input, input hash, request
// fingerprint and trace id of the same sizes), runs VACUUM ANALYZE, reads the table and index sizes, then starts a
// worker process on the queue (concurrency 16, prefetch 500, a handler that waits 20 ms) and samples its resident set
// for 10 s (3 s with --quick) while it works through the backlog. With --json the last line is
// {"backlogs":[{"backlog":n,"tableBytesPerJob":b,"indexBytesPerJob":b,"indexes":{name:b},"workerRssMB":{"start":m,"max":m}}]}.
import { fork } from "node:child_process"
import { pathToFileURL } from "node:url"

const argv = process.argv.slice(2)
const quick = argv.includes("--quick")
const backlogs = quick ? [10_000, 100_000] : [100_000, 1_000_000]
const sampleMs = quick ? 3_000 : 10_000
const BASE = process.env.ANCHORS_PG_URL || "postgres://postgres@127.0.0.1:5432"
const DB = "anchors_memory"
const SCHEMA = "slowcall"

// The worker child: runs a worker on the queue and reports its resident set every 250 ms.
if (argv[0] === "--child") {
  const { bundleOf } = await import("../scripts/bundle.mjs")
  const [{ Effect, Layer, Schema, Scope }, lib] = await Promise.all([
    import("effect"),
    bundleOf(new URL("./lib.ts", import.meta.url).pathname).then((file) => import(pathToFileURL(file).href))
  ])
  const scope = await Effect.runPromise(Scope.make())
  const context = await Effect.runPromise(
    Layer.buildWithScope(lib.PgStore.layer({ connectionString: `${BASE}/${DB}`, schema: SCHEMA }), scope)
  )
  const handler = lib.Handler.make({
    type: "memory",
    version: 1,
    input: Schema.Unknown,
    result: Schema.Null,
    attempt: { timeoutMs: 30_000 },
    run: () => Effect.as(Effect.sleep(20), null)
  })
  await Effect.runPromise(
    Scope.extend(lib.Worker.make({ queue: argv[1], concurrency: 16, prefetch: 500, handlers: [handler] }), scope).pipe(
      Effect.provide(context)
    )
  )
  setInterval(() => process.send({ rss: process.memoryUsage().rss }), 250)
} else {
  const pg = (await import("pg")).default
  const admin = new pg.Client({ connectionString: `${BASE}/postgres` })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS "${DB}" WITH (FORCE)`)
  await admin.query(`CREATE DATABASE "${DB}"`)
  await admin.end()
  const { bundleOf } = await import("../scripts/bundle.mjs")
  const [{ Effect, Exit, Layer, Scope }, lib] = await Promise.all([
    import("effect"),
    bundleOf(new URL("./lib.ts", import.meta.url).pathname).then((file) => import(pathToFileURL(file).href))
  ])
  const scope = await Effect.runPromise(Scope.make())
  await Effect.runPromise(
    Layer.buildWithScope(lib.PgStore.layer({ connectionString: `${BASE}/${DB}`, schema: SCHEMA, migrate: true }), scope)
  )
  await Effect.runPromise(Scope.close(scope, Exit.void))
  const db = new pg.Client({ connectionString: `${BASE}/${DB}` })
  await db.connect()
  const results = []
  for (const backlog of backlogs) {
    const queue = `memory-${backlog}`
    await db.query(`TRUNCATE ${SCHEMA}.jobs CASCADE`)
    // The shape of a job Client.submitMany writes: a small JSON input, a 64-hex input hash and fingerprint, a trace id.
    await db.query(
      `INSERT INTO ${SCHEMA}.jobs (id, queue, type, version, input_hash, input, state, max_attempts, run_after,
         trace_id, fingerprint, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'memory', 1, md5(g::text) || md5((g + 1)::text), jsonb_build_object('id', g),
         'queued', 3, now(), replace(gen_random_uuid()::text, '-', ''), md5(g::text) || md5((g + 2)::text), now(), now()
       FROM generate_series(1, $2) g`,
      [queue, backlog]
    )
    await db.query(`VACUUM ANALYZE ${SCHEMA}.jobs`)
    const size = (
      await db.query(
        `SELECT pg_table_size('${SCHEMA}.jobs') AS heap, pg_indexes_size('${SCHEMA}.jobs') AS indexes,
           (SELECT json_object_agg(indexrelname, pg_relation_size(indexrelid)) FROM pg_stat_user_indexes
            WHERE schemaname = '${SCHEMA}' AND relname = 'jobs') AS each`
      )
    ).rows[0]
    const child = fork(new URL(import.meta.url).pathname, ["--child", queue], {
      stdio: ["ignore", "inherit", "inherit", "ipc"]
    })
    const samples = []
    child.on("message", (m) => samples.push(m.rss))
    await new Promise((resolve) => setTimeout(resolve, sampleMs))
    child.kill("SIGKILL")
    const mb = (b) => Math.round((b / 1024 / 1024) * 10) / 10
    const per = (b) => Math.round(Number(b) / backlog)
    const result = {
      backlog,
      tableBytesPerJob: per(size.heap),
      indexBytesPerJob: per(size.indexes),
      indexes: Object.fromEntries(Object.entries(size.each).map(([name, bytes]) => [name, per(bytes)])),
      workerRssMB: { start: mb(samples[0] ?? 0), max: mb(Math.max(0, ...samples)) }
    }
    results.push(result)
    console.log(
      `backlog ${backlog}: ${result.tableBytesPerJob} B table + ${result.indexBytesPerJob} B indexes per queued job; ` +
        `worker RSS ${result.workerRssMB.start} MB at start, at most ${result.workerRssMB.max} MB over ${sampleMs / 1000} s`
    )
  }
  await db.end()
  if (argv.includes("--json")) console.log(JSON.stringify({ backlogs: results }))
}
