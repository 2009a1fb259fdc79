/**
 * The Limiter on Postgres (a server or PGlite, through the same `Driver`): each call is one transaction that locks
 * the rows of the resources it names (creating missing ones) in sorted order, applies the rules of
 * `@slowcall/core/Limits` in TypeScript to the states those rows hold, and writes the new states back. See
 * `migrations/0008_limits.sql` for the table and why the locking is deadlock-free.
 *
 * Statements per call: BEGIN, the locking INSERT (which also reads store time), one UPDATE, COMMIT. Reads are one
 * statement without a lock. Store time is the server's `now()` (the transaction's start), or the caller's `now`.
 *
 * @internal
 */
import type { InvalidInput, StoreError } from "@slowcall/core/Errors"
import type { DefineResult, Limiter, LimitResult, Reply, ResumeResult } from "@slowcall/core/Limiter"
import * as Limits from "@slowcall/core/Limits"
import { Effect } from "effect"
import type { Driver, Queryable } from "./driver.js"
import { toStoreError } from "./errors.js"
import { micros } from "./rows.js"
import { quoteSchema } from "./statements.js"

const NOW_MS = "(extract(epoch from now()) * 1000)::float8"

/** The statements of one schema. */
const statements = (schema: string) => {
  const s = quoteSchema(schema)
  return {
    /** $1 the resources (sorted), $2 the state of a new row: every row locked, each state and store time. */
    lock: `INSERT INTO ${s}.limits AS l (resource, state)
      SELECT r, $2::jsonb FROM unnest($1::text[]) AS r ORDER BY r
      ON CONFLICT (resource) DO UPDATE SET state = l.state
      RETURNING l.resource, l.state, ${NOW_MS} AS now_ms`,
    /** $1 a JSON array of [resource, state], $2 store time (ms) or null. */
    write: `UPDATE ${s}.limits AS l SET state = v.state,
        updated_at = coalesce(to_timestamp($2::float8 / 1000), now())
      FROM jsonb_to_recordset($1::jsonb) AS v(resource text, state jsonb)
      WHERE l.resource = v.resource`,
    /** $1 the resources, or null for all: one row, store time and a JSON array of [resource, state]. */
    read: `SELECT ${NOW_MS} AS now_ms,
      coalesce((SELECT jsonb_agg(jsonb_build_array(resource, state)) FROM ${s}.limits
        WHERE $1::text[] IS NULL OR resource = ANY($1::text[])), '[]'::jsonb) AS states`,
    now: `SELECT ${NOW_MS} AS now_ms`
  }
}

type Statements = ReturnType<typeof statements>

/** A stored state as the rules take it: a row written before the learned cap existed has none. */
const stored = (state: Limits.LimitState): Limits.LimitState =>
  state.learned === undefined ? { ...state, learned: null } : state

/** The states of `resources`, locked for the transaction, and the store time. */
const lock = async (
  tx: Queryable,
  st: Statements,
  resources: ReadonlyArray<string>
): Promise<{ readonly now: number; readonly states: Map<string, Limits.LimitState> }> => {
  const sorted = [...new Set(resources)].sort()
  const rows = await tx.query<{ resource: string; state: Limits.LimitState; now_ms: unknown }>(st.lock, [
    sorted,
    JSON.stringify(Limits.empty)
  ])
  return { now: micros(rows[0]?.now_ms), states: new Map(rows.map((row) => [row.resource, stored(row.state)])) }
}

/**
 * One write call: lock the resources the items name, run `step` over the items in order on those states, write the
 * states back, all in one transaction.
 */
const writeCall = <I extends { readonly resource: string }, R>(
  driver: Driver,
  st: Statements,
  operation: string,
  problem: InvalidInput | undefined,
  options: { readonly items: ReadonlyArray<I>; readonly now?: number | undefined },
  step: (state: Limits.LimitState, item: I, now: number) => { readonly state: Limits.LimitState; readonly result: R }
): Effect.Effect<Reply<R>, InvalidInput | StoreError> => {
  if (problem !== undefined) return Effect.fail(problem)
  return Effect.tryPromise({
    try: async () => {
      if (options.items.length === 0) {
        const rows = await driver.query<{ now_ms: unknown }>(st.now)
        return { now: options.now ?? micros(rows[0]?.now_ms), results: [] }
      }
      return driver.transaction(async (tx) => {
        const locked = await lock(
          tx,
          st,
          options.items.map((item) => item.resource)
        )
        const now = options.now ?? locked.now
        const results = options.items.map((item) => {
          const next = step(locked.states.get(item.resource) ?? Limits.empty, item, now)
          locked.states.set(item.resource, next.state)
          return next.result
        })
        await tx.query(st.write, [
          JSON.stringify([...locked.states].map(([resource, state]) => ({ resource, state }))),
          options.now ?? null
        ])
        return { now, results }
      })
    },
    catch: (error) => toStoreError(operation, error)
  })
}

/**
 * The Limiter over a driver whose schema is migrated.
 *
 * @internal
 */
export const makeLimiter = (driver: Driver, schema: string): Limiter["Type"] => {
  const st = statements(schema)
  return {
    define: (options) =>
      writeCall(driver, st, "limiter.define", Limits.checkDefine(options), options, (state, item, now) => {
        const next = Limits.define(state, item.limits, now)
        return { state: next, result: { _tag: "Defined", view: Limits.view(next, now) } satisfies DefineResult }
      }),
    apply: (options) =>
      writeCall<(typeof options.items)[number], LimitResult>(
        driver,
        st,
        "limiter.apply",
        Limits.checkApply(options),
        options,
        Limits.applyItem
      ),
    resume: (options) =>
      writeCall(driver, st, "limiter.resume", Limits.checkResume(options), options, (state, _item, now) => {
        const next = Limits.resume(state, now)
        return {
          state: next.state,
          result: {
            _tag: "Resumed",
            wasPaused: next.wasPaused,
            view: Limits.view(next.state, now)
          } satisfies ResumeResult
        }
      }),
    read: (options) => {
      const problem = Limits.checkRead(options)
      if (problem !== undefined) return Effect.fail(problem)
      return Effect.tryPromise({
        try: async () => {
          const rows = await driver.query<{ now_ms: unknown; states: ReadonlyArray<[string, Limits.LimitState]> }>(
            st.read,
            [options.resources === undefined ? null : [...options.resources]]
          )
          const row = rows[0]!
          const now = options.now ?? micros(row.now_ms)
          const states = new Map(row.states.map(([resource, state]) => [resource, stored(state)] as const))
          const names = options.resources ?? [...states.keys()].sort()
          return {
            now,
            resources: names.map((resource) => Limits.describe(resource, states.get(resource) ?? Limits.empty, now))
          }
        },
        catch: (error) => toStoreError("limiter.read", error)
      })
    }
  }
}
