// What Postgres allows for slowcall's own batched statements, measured with pgbench: the ceiling the benchmarks page
// sets beside the worker's W1 figure (a worker can come close to it, never beat it).
//
//   node bench/ceiling.mjs [--quick] [--json] [--clients 4] [--seconds 10] [--batches 64,500]
//
// It migrates a database of its own (`anchors_ceiling` on ANCHORS_PG_URL), wraps the Postgres adapter's claimNext,
// settle and charge statements, exactly as the adapter sends them, in SQL functions, and drives them through pgbench
// with `--clients` connections for `--seconds` per cell, one cell per batch size and shape:
// - `noop`:   claimNext of N due jobs (their attempt rows included), then one fenced settle of the N as Complete;
// - `billed`: the same plus what a billed call adds per job: a reservation and a settlement in the charge ledger
//             (one charge statement each for the N).
// Each cell runs on a queue seeded for it, and counts the jobs it completed (succeeded rows), so a queue that ran out
// is never mistaken for speed. Sync commit on, as the server is configured; JIT off, as the adapter's own sessions run.
// Prints one line per cell and, with `--json`, a last line
// `{"clients":c,"seconds":s,"cells":[{"shape":"noop","batch":n,"jobsPerS":x},...]}`.
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { bundleOf } from "../scripts/bundle.mjs"

const argv = process.argv.slice(2)
const flag = (name, fallback) => {
  const i = argv.indexOf(`--${name}`)
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback
}
const quick = argv.includes("--quick")
const clients = Number(flag("clients", "4"))
const seconds = Number(flag("seconds", quick ? "4" : "10"))
const batches = flag("batches", quick ? "64" : "64,500")
  .split(",")
  .map(Number)
const BASE = process.env.ANCHORS_PG_URL || "postgres://postgres@127.0.0.1:5432"
const DB = "anchors_ceiling"
const SCHEMA = "slowcall"

const [{ Effect, Exit, Layer, Scope }, lib, pgModule] = await Promise.all([
  import("effect"),
  bundleOf(new URL("./lib.ts", import.meta.url).pathname).then((file) => import(pathToFileURL(file).href)),
  import("pg")
])
const pg = pgModule.default

const admin = new pg.Client({ connectionString: `${BASE}/postgres` })
await admin.connect()
await admin.query(`DROP DATABASE IF EXISTS "${DB}" WITH (FORCE)`)
await admin.query(`CREATE DATABASE "${DB}"`)
await admin.end()

// The schema, migrated by the adapter itself.
const scope = await Effect.runPromise(Scope.make())
await Effect.runPromise(
  Layer.buildWithScope(lib.PgStore.layer({ connectionString: `${BASE}/${DB}`, schema: SCHEMA, migrate: true }), scope)
)
await Effect.runPromise(Scope.close(scope, Exit.void))

const st = lib.PgStatements.makeStatements(SCHEMA)
const db = new pg.Client({ connectionString: `${BASE}/${DB}` })
await db.connect()
// The adapter's statements, unchanged, as PL/pgSQL functions (whose statements are prepared and their plans cached,
// as the adapter's prepared statements are): pgbench can then pass one statement's reply to the next.
const fn = async (name, args, sql, cols) =>
  db.query(`CREATE FUNCTION ${name}(${args}) RETURNS TABLE(${cols.join(", ")}) LANGUAGE plpgsql AS $fn$
    BEGIN RETURN QUERY ${sql}; END $fn$`)
/** The column list of a statement's reply, for `AS c(...)`: read from a dry run's field descriptions. */
const columnsOf = async (sql, params) => {
  await db.query("BEGIN")
  try {
    const r = await db.query(sql, params)
    return r.fields.map(
      (f) =>
        `${f.name} ${f.dataTypeID === 16 ? "boolean" : f.dataTypeID === 23 ? "int" : f.dataTypeID === 20 ? "bigint" : f.dataTypeID === 701 ? "float8" : f.dataTypeID === 3802 ? "jsonb" : "text"}`
    )
  } finally {
    await db.query("ROLLBACK")
  }
}
const claimCols = await columnsOf(st.claimNext(1), ["none", 1, "x", 1000, null, null, null])
const settleCols = await columnsOf(st.settle, [[], [], [], [], [], [], [], [], null])
const chargeCols = await columnsOf(st.charge, [[], [], [], [], [], null])
// RETURNS TABLE names become PL/pgSQL variables: prefixed, so they never shadow the statements' own column names.
const out = (cols) => cols.map((c) => `o_${c}`)
// claimNext is one prepared statement per pick limit (a power of two): one function per batch size.
for (const n of batches) {
  await fn(`ceiling_claim_${n}`, "text, int, text, float8, float8, text[], int[]", st.claimNext(n), out(claimCols))
}
await fn(
  "ceiling_settle",
  "uuid[], int[], text[], text[], float8[], text[], text[], text[], float8",
  st.settle,
  out(settleCols)
)
await fn("ceiling_charge", "uuid[], text[], int[], float8[], boolean[], float8", st.charge, out(chargeCols))

const seed = async (queue, n) => {
  await db.query(
    `INSERT INTO ${SCHEMA}.jobs (id, queue, type, version, input_hash, input, state, max_attempts, run_after,
       created_at, updated_at)
     SELECT gen_random_uuid(), $1, 'ceiling', 1, 'h', jsonb_build_object('i', g), 'queued', 3, now(), now(), now()
     FROM generate_series(1, $2) g`,
    [queue, n]
  )
  await db.query(`VACUUM ANALYZE ${SCHEMA}.jobs`)
}
const succeeded = async (queue) =>
  Number(
    (await db.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.jobs WHERE queue = $1 AND state = 'succeeded'`, [queue]))
      .rows[0].n
  )

const scriptOf = (queue, n, billed) => {
  const claim = `SELECT coalesce(string_agg(c.o_id, ','), '') AS ids, coalesce(string_agg(c.o_lease_token::text, ','), '')
  AS tokens, count(*)::int AS k FROM ceiling_claim_${n}('${queue}', ${n}, 'ceiling', 33000, NULL, NULL, NULL) AS c
  WHERE c.o_applied \\gset`
  const ids = `string_to_array(:ids, ',')::uuid[]`
  const tokens = `string_to_array(:tokens, ',')::int[]`
  const calls = `(SELECT coalesce(array_agg(x || ':1'), '{}') FROM unnest(string_to_array(:ids, ',')) x)`
  const charge = (amount, settled) =>
    `SELECT count(*) FROM ceiling_charge(${ids}, ${calls}, ${tokens}, array_fill(${amount}::float8, ARRAY[:k::int]),
  array_fill(${settled}, ARRAY[:k::int]), NULL);`
  const settle = `SELECT count(*) FROM ceiling_settle(${ids}, ${tokens}, array_fill('complete'::text, ARRAY[:k::int]),
  array_fill('null'::text, ARRAY[:k::int]), array_fill(NULL::float8, ARRAY[:k::int]), array_fill(NULL::text, ARRAY[:k::int]),
  array_fill(NULL::text, ARRAY[:k::int]), array_fill(NULL::text, ARRAY[:k::int]), NULL);`
  return [claim, ...(billed ? [charge(2, false), charge(2, true)] : []), settle].join("\n").replace(/\n {2}/g, " ")
}

const dir = mkdtempSync(join(tmpdir(), "slowcall-ceiling-"))
const cells = []
for (const billed of [false, true]) {
  for (const n of batches) {
    const queue = `ceiling-${billed ? "billed" : "noop"}-${n}`
    // Enough for the cell at 30,000 jobs/s, and never below a floor.
    await seed(queue, Math.max(50_000, Math.ceil(30_000 * seconds * (billed ? 0.6 : 1))))
    const file = join(dir, `${queue}.sql`)
    writeFileSync(file, `${scriptOf(queue, n, billed)}\n`)
    const before = await succeeded(queue)
    const t0 = performance.now()
    const run = spawnSync(
      "pgbench",
      [
        "-n",
        "-M",
        "prepared",
        "-c",
        String(clients),
        "-j",
        String(Math.min(clients, 2)),
        "-T",
        String(seconds),
        "-f",
        file,
        "-h",
        new URL(BASE).hostname,
        "-p",
        new URL(BASE).port || "5432",
        "-U",
        new URL(BASE).username || "postgres",
        DB
      ],
      // The session settings the adapter's own pool runs with (`internal/driver.ts`): JIT off.
      { encoding: "utf8", env: { ...process.env, PGOPTIONS: "-c jit=off" } }
    )
    const ms = performance.now() - t0
    if (run.status !== 0) {
      console.error(run.stdout, run.stderr)
      process.exit(1)
    }
    const done = (await succeeded(queue)) - before
    const cell = { shape: billed ? "billed" : "noop", batch: n, jobsPerS: Math.round((done / ms) * 1000) }
    cells.push(cell)
    console.log(
      `${cell.shape.padEnd(6)} batch ${String(n).padStart(4)}: ${cell.jobsPerS} jobs/s (${done} jobs, ${clients} clients, ${seconds} s)`
    )
  }
}
await db.end()
rmSync(dir, { recursive: true, force: true })
if (argv.includes("--json")) console.log(JSON.stringify({ clients, seconds, cells }))
