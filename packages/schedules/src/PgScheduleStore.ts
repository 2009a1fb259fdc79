/**
 * The ScheduleStore on Postgres (a server or embedded PGlite, through `@slowcall/adapter-postgres`'s `PgDriver`):
 * one row per schedule in `<schema>.schedules` (migration `0012_schedules.sql`, applied by `PgMigrator` with the
 * job tables). Each verb is one statement, an atomic SQL version of `ScheduleStore.Rules`; store time is the
 * server's `now()` (the statement's transaction start), or the caller's `now`.
 *
 * @since 0.1.0
 */
import { PgDriver } from "@slowcall/adapter-postgres/PgDriver"
import { StoreError } from "@slowcall/core/Errors"
import { Effect, Either, Layer } from "effect"
import * as Schedule from "./Schedule.js"
import type { AdvanceResult, RecordResult, ScheduleRecord, ScheduleStoreService } from "./ScheduleStore.js"
import { byId, ScheduleStore } from "./ScheduleStore.js"

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/

const NOW_MS = "coalesce($1::float8, extract(epoch from now()) * 1000)"

const statements = (schema: string) => {
  if (!SCHEMA_NAME.test(schema)) throw new Error(`invalid schema name ${JSON.stringify(schema)}`)
  const t = `"${schema}".schedules`
  const columns = "id, definition, paused, cursor_ms, last_job_id, created_ms"
  return {
    /** $1 now, $2 JSON array of definitions: the records in input order (a later item sees an earlier one). */
    upsert: `WITH input AS (
        SELECT d.value AS definition, d.ordinality AS n FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY AS d
      ), written AS (
        INSERT INTO ${t} AS s (id, definition, cursor_ms, created_ms)
        SELECT DISTINCT ON (definition->>'id') definition->>'id', definition, ${NOW_MS}, ${NOW_MS}
        FROM input ORDER BY definition->>'id', n DESC
        ON CONFLICT (id) DO UPDATE SET definition = EXCLUDED.definition
        RETURNING ${columns.replaceAll(/(\w+)/g, "s.$1")}
      )
      SELECT w.*, ${NOW_MS} AS now_ms FROM input i JOIN written w ON w.id = i.definition->>'id'
      ORDER BY i.n`,
    now: `SELECT ${NOW_MS} AS now_ms`,
    /** $1 now: one row with now_ms and every schedule as a JSON array, by id. */
    list: `SELECT ${NOW_MS} AS now_ms,
      coalesce((SELECT jsonb_agg(to_jsonb(s)) FROM ${t} s), '[]'::jsonb) AS rows`,
    /** $1 now, $2 id: one row with now_ms, the schedule's columns null when there is none. */
    get: `SELECT s.*, ${NOW_MS} AS now_ms FROM (SELECT 1) AS one LEFT JOIN ${t} s ON s.id = $2`,
    pause: `WITH u AS (UPDATE ${t} SET paused = true WHERE id = $2 RETURNING ${columns})
      SELECT u.*, ${NOW_MS} AS now_ms FROM (SELECT 1) AS one LEFT JOIN u ON true`,
    resume: `WITH u AS (
        UPDATE ${t} SET paused = false, cursor_ms = CASE WHEN paused THEN greatest(cursor_ms, ${NOW_MS})
          ELSE cursor_ms END
        WHERE id = $2 RETURNING ${columns}
      )
      SELECT u.*, ${NOW_MS} AS now_ms FROM (SELECT 1) AS one LEFT JOIN u ON true`,
    /** $1 now, $2 id, $3 to, $4 last job id or null: the row after, and whether this statement moved it. */
    advance: `WITH u AS (
        UPDATE ${t} SET cursor_ms = $3::float8, last_job_id = coalesce($4::text, last_job_id)
        WHERE id = $2 AND cursor_ms < $3::float8 RETURNING ${columns}
      )
      SELECT coalesce(u.id, s.id) AS id, coalesce(u.definition, s.definition) AS definition,
        coalesce(u.paused, s.paused) AS paused, coalesce(u.cursor_ms, s.cursor_ms) AS cursor_ms,
        CASE WHEN u.id IS NULL THEN s.last_job_id ELSE u.last_job_id END AS last_job_id,
        coalesce(u.created_ms, s.created_ms) AS created_ms, u.id IS NOT NULL AS advanced, ${NOW_MS} AS now_ms
      FROM (SELECT 1) AS one LEFT JOIN u ON true LEFT JOIN ${t} s ON s.id = $2`,
    remove: `WITH d AS (DELETE FROM ${t} WHERE id = $2 RETURNING id)
      SELECT (SELECT count(*) FROM d) > 0 AS removed, ${NOW_MS} AS now_ms`
  }
}

interface Row {
  readonly id: string | null
  readonly definition: unknown
  readonly paused: boolean
  readonly cursor_ms: number | string
  readonly last_job_id: string | null
  readonly created_ms: number | string
  readonly now_ms: number | string
}

const ms = (value: number | string): number => Math.round(Number(value) * 1000) / 1000

const recordOf = (row: Row): ScheduleRecord => {
  const schedule = Schedule.decode(row.definition)
  if (Either.isLeft(schedule)) {
    throw new StoreError({
      reason: "Unknown",
      operation: "schedules",
      detail: `stored schedule ${row.id}: ${schedule.left.message}`
    })
  }
  return {
    schedule: schedule.right,
    paused: row.paused,
    cursor: ms(row.cursor_ms),
    lastJobId: row.last_job_id,
    createdAt: ms(row.created_ms)
  }
}

const errorOf = (operation: string, error: unknown): StoreError => {
  if (error instanceof StoreError) return error
  const code = typeof error === "object" && error !== null ? String((error as { code?: unknown }).code ?? "") : ""
  const message = error instanceof Error ? error.message : String(error)
  const reason =
    code.startsWith("08") || /ECONN|EPIPE|terminat|closed/i.test(message)
      ? "Ambiguous"
      : /timeout/i.test(message)
        ? "Timeout"
        : code.startsWith("40")
          ? "Conflict"
          : "Unknown"
  return new StoreError({
    reason,
    operation: `schedules.${operation}`,
    detail: `${code || "error"}: ${message.slice(0, 500)}`
  })
}

/**
 * The ScheduleStore over a driver whose schema (`schema`, default `slowcall`) is migrated (`PgMigrator.migrate`,
 * which `PgStore`'s layers run by default).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  driver: PgDriver["Type"],
  options: { readonly schema?: string | undefined } = {}
): ScheduleStoreService => {
  const st = statements(options.schema ?? "slowcall")
  const run = <A>(operation: string, text: string, params: ReadonlyArray<unknown>, read: (rows: Array<Row>) => A) =>
    Effect.tryPromise({
      try: async () => read(await driver.query<Row>(text, params)),
      catch: (error) => errorOf(operation, error)
    })
  const one = (rows: Array<Row>): Row => {
    const row = rows[0]
    if (row === undefined) throw new StoreError({ reason: "Unknown", operation: "schedules", detail: "no row" })
    return row
  }
  const recordResult =
    (scheduleId: string) =>
    (rows: Array<Row>): { now: number; result: RecordResult } => {
      const row = one(rows)
      return {
        now: ms(row.now_ms),
        result: row.id === null ? { _tag: "NotFound", scheduleId } : { _tag: "Found", record: recordOf(row) }
      }
    }
  const nowParam = (o: { readonly now?: number | undefined } | undefined) => o?.now ?? null
  return {
    upsert: (schedules, o) =>
      schedules.length === 0
        ? run("upsert", st.now, [nowParam(o)], (rows) => ({
            now: ms(one(rows).now_ms),
            result: [] as ReadonlyArray<ScheduleRecord>
          }))
        : run("upsert", st.upsert, [nowParam(o), JSON.stringify(schedules)], (rows) => ({
            now: ms(one(rows).now_ms),
            result: rows.map(recordOf)
          })),
    list: (o) =>
      run("list", st.list, [nowParam(o)], (rows) => {
        const row = one(rows) as unknown as { now_ms: number | string; rows: Array<Row> }
        return { now: ms(row.now_ms), result: byId(row.rows.map(recordOf)) }
      }),
    get: (scheduleId, o) => run("get", st.get, [nowParam(o), scheduleId], recordResult(scheduleId)),
    pause: (scheduleId, o) => run("pause", st.pause, [nowParam(o), scheduleId], recordResult(scheduleId)),
    resume: (scheduleId, o) => run("resume", st.resume, [nowParam(o), scheduleId], recordResult(scheduleId)),
    advance: (scheduleId, to, lastJobId, o) =>
      run("advance", st.advance, [nowParam(o), scheduleId, to, lastJobId], (rows) => {
        const row = one(rows) as Row & { readonly advanced: boolean }
        const result: AdvanceResult =
          row.id === null
            ? { _tag: "NotFound", scheduleId }
            : { _tag: row.advanced ? "Advanced" : "Stale", record: recordOf(row) }
        return { now: ms(row.now_ms), result }
      }),
    remove: (scheduleId, o) =>
      run("remove", st.remove, [nowParam(o), scheduleId], (rows) => {
        const row = one(rows) as unknown as { removed: boolean; now_ms: number | string }
        return { now: ms(row.now_ms), result: row.removed }
      })
  }
}

/**
 * The ScheduleStore on the `PgDriver` of the process (the one `PgStore`'s layers use), in `schema`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: { readonly schema?: string | undefined } = {}
): Layer.Layer<ScheduleStore, never, PgDriver> =>
  Layer.effect(
    ScheduleStore,
    Effect.map(PgDriver, (driver) => make(driver, options))
  )
