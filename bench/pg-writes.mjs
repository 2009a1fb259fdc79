// `node bench/pg-writes.mjs [--n N] [--schema-sql FILE]`: what one W1 job writes on the Postgres server, counted
// rather than timed.
// N no-op jobs (default 5,000) are bulk-submitted and then processed by the real worker at concurrency 16 (prefetch
// 500), with the same adapter file the peer harness runs (bench/slowcall.mjs), on a database of its own
// (SLOWCALL_WRITES_DB, default `wt_writes`) recreated for the run. Autovacuum is off on the machines, so the counts
// do not depend on its timing.
//
// Printed per job, for the submit phase and the processing phase apart:
// - the adapter's statements sent (each opens with a `/* slowcall:<name> */` tag; counted in the client);
// - heap tuple versions written per table (inserts, updates, HOT updates, deletes) and B-tree index entries inserted
//   per index, read from the WAL records of this database only (pg_walinspect; an entry is a leaf insert, a
//   posting-list insert or a page split, each of which carries one new entry), and the WAL bytes of those records;
// - at the end, when every connection of the run has closed (so the server has flushed their statistics),
//   `n_tup_hot_upd / n_tup_upd` of `jobs` and `attempts` over the whole run (pg_stat_user_tables);
// - the distinct claimNext statement texts the worker prepared, and the plans the server made for them on the worker's
//   connections (pg_prepared_statements: generic and custom plans).
// Needs a superuser connection (pg_walinspect) on ANCHORS_PG_URL (default postgres://postgres@127.0.0.1:5432).
//
// `--schema-sql FILE` runs FILE (every `__SCHEMA__` replaced by the quoted schema, as the migrator does) once the
// migrations have run and before any job is written: a candidate schema's write cost is then counted with the real
// statements. bench/pg-writes/ holds the candidates measured for HOT transitions (docs/guide/benchmarks.md).
import { readFileSync } from "node:fs"
import pgModule from "pg"
import { PREFETCH } from "./common.mjs"
import create from "./slowcall.mjs"

const pg = pgModule.default ?? pgModule
const args = process.argv.slice(2)
const at = args.indexOf("--n")
const N = at >= 0 ? Number(args[at + 1]) : 5_000
const sqlAt = args.indexOf("--schema-sql")
const schemaSql = sqlAt >= 0 ? readFileSync(args[sqlAt + 1], "utf8").replaceAll("__SCHEMA__", '"slowcall"') : undefined
const DB = process.env.SLOWCALL_WRITES_DB || "wt_writes"
const BASE = process.env.ANCHORS_PG_URL || "postgres://postgres@127.0.0.1:5432"

// Every statement any client of this process sends, by its first comment (the adapter tags its statements).
const sent = new Map()
const clients = new Set()
let counting = false
const originalQuery = pg.Client.prototype.query
pg.Client.prototype.query = function (config, ...rest) {
  if (counting) {
    clients.add(this)
    const text = typeof config === "string" ? config : config?.text
    // Untagged statements are this script's own (the pending count it polls) and the listener's.
    const tag = /^\/\* slowcall:(\w+) \*\//.exec(text ?? "")?.[1]
    if (tag === undefined) return originalQuery.call(this, config, ...rest)
    const entry = sent.get(tag) ?? { calls: 0, texts: new Set() }
    entry.calls += 1
    entry.texts.add(text)
    sent.set(tag, entry)
  }
  return originalQuery.call(this, config, ...rest)
}

const admin = new pg.Client({ connectionString: `${BASE}/${DB}` })
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const adapter = create({ db: DB })
await adapter.setup({ fresh: true, role: "worker" })
await admin.connect()
if (schemaSql !== undefined) await admin.query(schemaSql)
await admin.query("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
const dbOid = (await admin.query("SELECT oid FROM pg_database WHERE datname = current_database()")).rows[0].oid

/** Counters of this database now (after the backends' pending statistics are flushed). */
const snapshot = async () => {
  await sleep(1_200)
  await admin.query("SELECT pg_stat_clear_snapshot()")
  const tables = await admin.query(
    `SELECT relname, n_tup_ins::int8 AS ins, n_tup_upd::int8 AS upd, n_tup_hot_upd::int8 AS hot, n_tup_del::int8 AS del
     FROM pg_stat_user_tables WHERE schemaname = 'slowcall'`
  )
  const lsn = (await admin.query("SELECT pg_current_wal_lsn() AS lsn")).rows[0].lsn
  return {
    tables: Object.fromEntries(tables.rows.map((r) => [r.relname, r])),
    lsn
  }
}

/** B-tree entries inserted and heap records, per relation of this database, between two WAL positions. */
const walBetween = async (from, to) => {
  const names = new Map(
    (
      await admin.query(
        `SELECT c.relfilenode::text AS node, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'slowcall'`
      )
    ).rows.map((r) => [r.node, r.relname])
  )
  const rows = await admin.query(
    `SELECT resource_manager AS rm, record_type AS type, record_length AS len, description, block_ref
     FROM pg_get_wal_records_info($1, $2) WHERE block_ref LIKE $3`,
    [from, to, `%/${dbOid}/%`]
  )
  const entries = new Map()
  const heap = new Map()
  let bytes = 0
  for (const r of rows.rows) {
    bytes += Number(r.len)
    const node = /rel \d+\/\d+\/(\d+)/.exec(r.block_ref)?.[1]
    const name = names.get(node) ?? `rel ${node}`
    if (r.rm === "Btree" && /^(INSERT_LEAF|INSERT_POST|SPLIT_L|SPLIT_R)$/.test(r.type)) {
      entries.set(name, (entries.get(name) ?? 0) + 1)
    } else if (r.rm === "Heap" || r.rm === "Heap2") {
      const kind = r.type === "MULTI_INSERT" ? "INSERT" : r.type.replace("+INIT", "")
      if (!/^(INSERT|UPDATE|HOT_UPDATE|DELETE)$/.test(kind)) continue
      const n = r.type === "MULTI_INSERT" ? Number(/ntuples:? (\d+)/.exec(r.description)?.[1] ?? 1) : 1
      const counts = heap.get(name) ?? {}
      counts[kind] = (counts[kind] ?? 0) + n
      heap.set(name, counts)
    }
  }
  return { entries, heap, bytes }
}

const report = async (phase, before, after, jobs) => {
  const per = (x) => (x / jobs).toFixed(3)
  const wal = await walBetween(before.lsn, after.lsn)
  const statements = [...sent.entries()].map(([tag, e]) => `${tag} ${e.calls}`).join(", ")
  const total = [...sent.values()].reduce((s, e) => s + e.calls, 0)
  console.log(`\n## ${phase}: ${jobs} jobs`)
  console.log(`statements per job ${per(total)} (${statements})`)
  for (const [name, c] of wal.heap) {
    const versions = (c.INSERT ?? 0) + (c.UPDATE ?? 0) + (c.HOT_UPDATE ?? 0)
    console.log(
      `${name}: tuple versions per job ${per(versions)} (inserts ${per(c.INSERT ?? 0)}, updates ${per(c.UPDATE ?? 0)}, HOT updates ${per(c.HOT_UPDATE ?? 0)}, deletes ${per(c.DELETE ?? 0)})`
    )
  }
  const entries = [...wal.entries.entries()].sort((x, y) => y[1] - x[1])
  const sum = entries.reduce((s, [, n]) => s + n, 0)
  console.log(`index entries per job ${per(sum)}: ${entries.map(([name, n]) => `${name} ${per(n)}`).join(", ")}`)
  console.log(`WAL bytes per job (records of this database) ${(wal.bytes / jobs).toFixed(0)}`)
  sent.clear()
}

const s0 = await snapshot()
counting = true
for (let i = 0; i < N; i += 1000) {
  await adapter.enqueueBulk(Array.from({ length: Math.min(1000, N - i) }, (_, k) => ({ i: i + k })))
}
counting = false
const s1 = await snapshot()
await report("submit (enqueueBulk, 1,000 per call)", s0, s1, N)

counting = true
await adapter.startWorker({ concurrency: 16, handler: async () => {} })
const end = Date.now() + 300_000
while ((await adapter.pending()) > 0) {
  if (Date.now() > end) throw new Error("jobs still pending after 300 s")
  await sleep(50)
}
counting = false
const claimTexts = sent.get("claimNext")?.texts.size ?? 0
// The worker's connections, idle now that every job is done: the claimNext statements each has prepared, and the
// plans the server made for them.
const plans = { connections: 0, prepared: 0, generic: 0, custom: 0 }
for (const client of clients) {
  const rows = await originalQuery.call(
    client,
    `SELECT count(*)::int AS n, coalesce(sum(generic_plans), 0)::int AS generic,
       coalesce(sum(custom_plans), 0)::int AS custom
     FROM pg_prepared_statements WHERE statement LIKE '/* slowcall:claimNext %'`
  )
  plans.connections += 1
  plans.prepared += rows.rows[0].n
  plans.generic += rows.rows[0].generic
  plans.custom += rows.rows[0].custom
}
await adapter.stop()
const s2 = await snapshot()
await report(`process (worker, concurrency 16, prefetch ${PREFETCH}, no-op handler)`, s1, s2, N)
console.log(`claimNext statement texts sent: ${claimTexts}`)
console.log(
  `claimNext prepared on the ${plans.connections} connections: ${plans.prepared} statements, ${plans.custom} custom plans, ${plans.generic} generic plans`
)

await adapter.teardown()
// Every other backend of the run has exited now, so its statistics are flushed: the whole run's counters.
const s3 = await snapshot()
for (const name of ["jobs", "attempts"]) {
  const a = s3.tables[name]
  const b = s0.tables[name]
  const d = (k) => Number(a[k]) - Number(b?.[k] ?? 0)
  console.log(
    `pg_stat_user_tables ${name} over the run: n_tup_ins ${d("ins")}, n_tup_upd ${d("upd")}, n_tup_hot_upd ${d("hot")} (HOT share ${d("upd") === 0 ? "-" : (d("hot") / d("upd")).toFixed(3)}), n_tup_del ${d("del")}`
  )
}
await admin.end()
