/**
 * The read statements of `Query.stats`'s spend and waiting groups, `Query.count` and `Query.countQueued`, built once
 * per schema.
 * Plain SELECTs that neither write nor lock; kept apart from `statements.ts` (the protocol writes and the older
 * reads) because they are reads only.
 *
 * - spend: the ledger rows whose call started at or after `$3` (all rows when NULL), summed per (queue, tenant,
 *   type, state) of their jobs in ledger order, with the number of jobs. The window scan uses
 *   `charges_created_at` (migration 0004).
 * - waiting: due queued jobs (run_after at or before store time) per (type, version), with the oldest due time.
 *   Read through `queued_entries` (migration 0015), which holds exactly the queued jobs.
 * - count: the rows a listing's filters select, counted through a LIMIT so the scan stops at `upTo`.
 * - countQueued: queued rows of one queue (and tenant), counted through a LIMIT so the scan stops at `upTo`; with a
 *   tenant the scan reads the entries' fair order (migration 0015).
 * - pages of a listing (`Query.list` with `requestKey`, `inputHash` or `after`): the listing's filters and order, plus
 *   the request key, the input hash and a keyset cursor, the (created_at, seq) of the `after` job; no such job, no
 *   rows.
 * - estimates: `Protocol.fallbackEstimate` of each of a batch of jobs (0 for an id naming no job), in the batch's
 *   order; the ledger is read through its primary key (job id first).
 *
 * @internal
 */

import { fallbackEstimate, jobColumns } from "./statements.js"

/**
 * A page of a listing in one direction. Inputs: as `listNewest`, then $7 request key, $8 after (a job id), $9 input
 * hash.
 */
const page = (s: string, direction: "ASC" | "DESC"): string => `/* slowcall:listPage */ SELECT ${jobColumns("j")}
    FROM ${s}.jobs j
    WHERE ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2)
      AND ($3::text IS NULL OR j.state = $3) AND ($4::text IS NULL OR j.type = $4)
      AND ($5::text IS NULL OR j.error_class = $5) AND ($7::text IS NULL OR j.request_key = $7)
      AND ($9::text IS NULL OR j.input_hash = $9)
      AND ($8::uuid IS NULL OR (j.created_at, j.seq) ${direction === "DESC" ? "<" : ">"}
        (SELECT c.created_at, c.seq FROM ${s}.jobs c WHERE c.id = $8::uuid))
    ORDER BY j.created_at ${direction}, j.seq ${direction} LIMIT $6::int`

const ms = (expr: string): string => `(extract(epoch from ${expr}) * 1000)::float8`
const ts = (expr: string): string => `to_timestamp((${expr})::float8 / 1000)`
const storeNow = (n: number): string => `coalesce(to_timestamp($${n}::float8 / 1000), now())`

/**
 * The statements for one schema (already quoted, `Statements.schema`).
 *
 * @internal
 */
export const makeReadStatements = (s: string) => ({
  pageNewest: page(s, "DESC"),
  pageOldest: page(s, "ASC"),
  /** estimates. Inputs: $1 job ids. One row per id, in their order. */
  estimates: `/* slowcall:estimates */ SELECT x.ord, ${fallbackEstimate(s, "x.id")}::float8 AS estimate
    FROM unnest($1::uuid[]) WITH ORDINALITY AS x(id, ord)
    ORDER BY x.ord`,
  /** spend. Inputs: $1 queue, $2 tenant, $3 spend-since ms (NULL: every row). */
  spend: `/* slowcall:statsSpend */ SELECT j.queue, j.tenant, j.type, j.state,
      sum(c.amount_cents ORDER BY c.seq)::float8 AS cost_cents, count(DISTINCT j.id)::int AS jobs
    FROM ${s}.charges c JOIN ${s}.jobs j ON j.id = c.job_id
    WHERE ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2)
      AND ($3::float8 IS NULL OR c.created_at >= ${ts("$3")})
    GROUP BY j.queue, j.tenant, j.type, j.state`,
  /** waiting. Inputs: $1 queue, $2 tenant, $3 now (NULL: store time). */
  waiting: `/* slowcall:statsWaiting */ SELECT j.type, j.version, count(*)::int AS count,
      ${ms("min(j.run_after)")} AS oldest
    FROM ${s}.queued_entries e JOIN ${s}.jobs j ON j.id = e.job_id
    WHERE e.run_after <= ${storeNow(3)} AND ($1::text IS NULL OR e.queue = $1) AND ($2::text IS NULL OR e.tenant = $2)
    GROUP BY j.type, j.version`,
  /** countQueued. Inputs: $1 queue, $2 tenant (NULL: any), $3 up to. */
  countQueued: `/* slowcall:countQueued */ SELECT count(*)::int AS n FROM (
      SELECT 1 FROM ${s}.queued_entries e WHERE e.queue = $1 AND ($2::text IS NULL OR e.tenant = $2)
      LIMIT greatest(0, $3::int)
    ) counted`,
  /**
   * count. Inputs: $1 queue, $2 tenant, $3 state, $4 type, $5 error class, $6 request key, $8 input hash (each
   * NULL: any), $7 up to. The listing's filters, counted through a LIMIT so the scan stops at `upTo`.
   */
  count: `/* slowcall:count */ SELECT count(*)::int AS n FROM (
      SELECT 1 FROM ${s}.jobs j
      WHERE ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2)
        AND ($3::text IS NULL OR j.state = $3) AND ($4::text IS NULL OR j.type = $4)
        AND ($5::text IS NULL OR j.error_class = $5) AND ($6::text IS NULL OR j.request_key = $6)
        AND ($8::text IS NULL OR j.input_hash = $8)
      LIMIT greatest(0, $7::int)
    ) counted`
})

/** @internal */
export type ReadStatements = ReturnType<typeof makeReadStatements>
