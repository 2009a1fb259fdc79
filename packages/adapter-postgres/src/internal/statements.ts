/**
 * Every statement PgStore and PgTransport run, built once per schema. Each batch of a protocol verb is ONE
 * statement over `unnest`ed parameter arrays (one array per item field, one row per item), so every item is atomic
 * without an explicit transaction and the statements work unchanged inside a caller's transaction.
 *
 * Conventions shared by all statements:
 * - Store time is `coalesce(to_timestamp($now / 1000), now())`: the server's clock, or the test override. One
 *   statement reads one instant, and every reply row carries it as `now_ms`.
 * - Timestamps leave as epoch milliseconds (`extract(epoch ...) * 1000`, microsecond fraction kept).
 * - `updated_at = greatest(now, updated_at + 1 microsecond)` on every accepted write: strictly monotonic per job
 *   (`Protocol.bump`).
 * - Items arrive `WITH ORDINALITY`; every reply row names its item by `ord` (1-based). A batch statement never
 *   names one job twice (the caller cuts a batch into consecutive chunks that do not repeat a job or a request
 *   key), so `UPDATE ... FROM input` meets each row at most once.
 * - Conditional writes are `UPDATE ... FROM input WHERE <condition>`. Under READ COMMITTED, an UPDATE that meets a
 *   row changed by a concurrent transaction waits for it, then re-checks the WHERE clause and re-evaluates SET
 *   against the newest version. That is the whole locking strategy, no isolation upgrade, with one addition for
 *   batches: the rows a batch names are locked in id order first (CTE `locked`), so two batches over the same jobs
 *   in different orders wait for each other instead of deadlocking. Candidate sets the store chooses itself
 *   (claimNext, sweep, transport receive, outbox) are picked with FOR UPDATE SKIP LOCKED and never wait.
 * - Candidate sets are found through the entry tables of migration 0015 (`queued_entries`, `lease_entries`,
 *   `finished_entries`), which its triggers keep equal to the job rows in the same transaction, so that no index of
 *   `jobs` names a column a transition changes and claims and settlements are HOT updates. A pick joins each entry to
 *   its job, locks the job row (FOR UPDATE OF j) and repeats the conditions on the job's own columns: an entry that a
 *   concurrent transaction moved after the statement's snapshot is then passed over, as a changed row was before.
 *   The job's queue is not among those conditions: it never changes, and a condition on it let the planner reach the
 *   job through `jobs_queue_created` instead of the primary key on tables without statistics, reading every job of
 *   the queue for each entry. The planner orders a pick by an entry table's index when the table has statistics
 *   (autovacuum's ANALYZE); see the adapter page's Limits.
 * - Every item gets exactly one reply row: the row as written (`applied`), or the row as the statement's snapshot
 *   saw it (all job columns NULL when there is no such row), so the caller can tell why a write missed
 *   (`Protocol.claimVerdict`, `Protocol.holds`, `Protocol.cancelVerdict`, `Protocol.replayable`). When that
 *   snapshot contradicts the miss (a concurrent write won the row in between), the caller runs the item again.
 *
 * @internal
 */

import * as Fairness from "@slowcall/core/Fairness"

/** Epoch milliseconds of a timestamptz expression. */
const ms = (expr: string): string => `(extract(epoch from ${expr}) * 1000)::float8`

/** Store time: the test override in parameter `$n`, else the server's `now()`. */
const storeNow = (n: number): string => `coalesce(to_timestamp($${n}::float8 / 1000), now())`

const ts = (expr: string): string => `to_timestamp((${expr})::float8 / 1000)`

const millis = (expr: string): string => `(${expr}) * interval '1 millisecond'`

const bump = (alias: string, now: string): string => `greatest(${now}, ${alias}.updated_at + interval '1 microsecond')`

/** The job record's columns, converted for the boundary, one expression each. */
const jobColumnList = (a: string): ReadonlyArray<string> => [
  `${a}.id::text AS id`,
  `${a}.queue`,
  `${a}.tenant`,
  `${a}.type`,
  `${a}.version`,
  `${a}.request_key`,
  `${a}.input_hash`,
  `${a}.input`,
  `${a}.input_ref`,
  `${a}.fingerprint`,
  `${a}.state`,
  `${a}.abandon_reason`,
  `${a}.attempts`,
  `${a}.attempts_base`,
  `${a}.max_attempts`,
  `${a}.lease_token`,
  `${a}.lease_owner`,
  `${ms(`${a}.lease_until`)} AS lease_until`,
  `${ms(`${a}.run_after`)} AS run_after`,
  `${a}.priority`,
  `${ms(`${a}.deadline_at`)} AS deadline_at`,
  `${a}.budget_cents`,
  `${a}.cost_cents`,
  `${a}.error_class`,
  `${a}.last_error`,
  `${a}.progress`,
  `${a}.result`,
  `${ms(`${a}.cancel_requested_at`)} AS cancel_requested_at`,
  `${a}.trace_id`,
  `${ms(`${a}.created_at`)} AS created_at`,
  `${ms(`${a}.updated_at`)} AS updated_at`
]

/**
 * The job record's columns, converted for the boundary.
 *
 * @internal
 */
export const jobColumns = (a: string): string => jobColumnList(a).join(", ")

/** As many NULLs as there are job columns, for reply rows that carry no job. */
const noJob = jobColumnList("x")
  .map(() => "NULL")
  .join(", ")

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/

/**
 * The quoted schema identifier. Only plain identifiers are accepted, so the name can be spliced into SQL.
 *
 * @internal
 */
export const quoteSchema = (schema: string): string => {
  if (!SCHEMA_NAME.test(schema)) throw new Error(`invalid schema name ${JSON.stringify(schema)}`)
  return `"${schema}"`
}

const leaseCleared = "lease_owner = NULL, lease_until = NULL"

/**
 * CTE `locked`: the items of CTE `input` whose rows exist, each with its row's `columns`, the rows locked in id order
 * before any of them is written. Two batches that name the same jobs in different orders then queue behind each other
 * instead of deadlocking. Every batch write reads its items from it (`lockedInput`), so it runs first. `columns` are
 * read from the row as locked: after waiting for a concurrent writer, FOR UPDATE returns the newest version, where the
 * statement's snapshot would show the old one. The items travel with their rows so that the write reads one CTE: a
 * join of two CTEs is planned from guesses of their sizes, and a nested loop over them compared every item with every
 * row (262,144 comparisons for a claim of 512 jobs, two thirds of the statement's time).
 */
const lockedRows = (s: string, columns = "j.id"): string =>
  `locked AS (SELECT ${columns}, x.* FROM input x JOIN ${s}.jobs j ON j.id = x.job_id ORDER BY j.id FOR UPDATE OF j)`

/** The FROM of a batch write: the items whose rows `locked` holds, with those rows' columns. */
const lockedInput = "FROM locked i"

/**
 * `Protocol.fallbackEstimate` of job `id`: the largest total charged under one token, 0 without charges. Sums run
 * in ledger order, as the protocol's do.
 *
 * @internal
 */
export const fallbackEstimate = (s: string, id: string): string => `greatest(0, (
    SELECT max(spent.total) FROM (
      SELECT sum(c.amount_cents ORDER BY c.seq) AS total FROM ${s}.charges c WHERE c.job_id = ${id} GROUP BY c.token
    ) spent
  ))`

/**
 * `Protocol.settleReason` of row `j` at `now` with the estimate `i.estimate` (cancelled, deadline, exhausted,
 * budget, in that order), then, for an item of a batch, `Batch.claimVerdict`'s two (the batch cancelled, the batch's
 * budget), or 'claim' when none holds. Evaluated in SET, so on the newest row version.
 */
const claimVerdict = (s: string, now: string): string => `(CASE
    WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
    WHEN j.deadline_at IS NOT NULL AND j.deadline_at <= ${now} THEN 'deadline'
    WHEN j.attempts - j.attempts_base >= j.max_attempts THEN 'exhausted'
    WHEN j.budget_cents IS NOT NULL
      AND NOT (j.cost_cents < j.budget_cents AND j.cost_cents + i.estimate <= j.budget_cents) THEN 'budget'
    WHEN j.batch_id IS NOT NULL AND EXISTS (SELECT 1 FROM ${s}.batches b
      WHERE b.id = j.batch_id AND b.cancel_requested_at IS NOT NULL) THEN 'cancelled'
    WHEN j.batch_id IS NOT NULL AND EXISTS (SELECT 1 FROM ${s}.batches b WHERE b.id = j.batch_id
      AND b.budget_cents IS NOT NULL
      AND NOT (b.cost_cents < b.budget_cents AND b.cost_cents + i.estimate <= b.budget_cents)) THEN 'budget'
    ELSE 'claim'
  END)`

/**
 * Whether row `j` is the version the statement's snapshot saw. The verdict of a claim reads `j` on its newest version
 * (a row lock follows the row to it) but the fallback estimate reads the ledger under the snapshot; a charge that
 * committed in between would pair a new spend with an old estimate, an order no sequence of the two explains (found
 * by the concurrent property: a claim that should have settled the job for its budget ran it). A row changed since
 * the snapshot is passed over by `claimNext` and claimed again by `claim` (see `claimResult` in store.ts).
 */
const unchangedSinceSnapshot = (s: string, j: string): string =>
  `${j}.updated_at = (SELECT u.updated_at FROM ${s}.jobs u WHERE u.id = ${j}.id)`

/**
 * The claim write shared by `claim` and `claimNext`: CTE `input` holds (job_id, owner, lease_ms, estimate, seen_at,
 * ord), `seen_at` the job's `updated_at` as the snapshot saw it when the estimate was read from the ledger (NULL:
 * the caller gave it, or the pick made sure, `unchangedSinceSnapshot`).
 * One UPDATE whose WHERE is `Protocol.isClaimable` and whose SET is `Protocol.claimTransition` (run the job, or
 * settle it for the first reason that holds). Sibling statements end the previous holder's attempt (`expired`: at
 * most one attempt row of a job is `running`, the current token's, found by primary key with the token the job held
 * when `locked` locked it) and append the new one. `takeover` is whether
 * such a running attempt was ended: its attempt rows are read under the statement's snapshot and re-checked on the
 * newest version, so a holder that settled concurrently is not mistaken for a lapsed one. Without `takeover` (the fair
 * claimNext, which writes only rows it picked and locked as queued, and a queued job has no running attempt: every write that
 * leaves running ends it) there is no such attempt and `expired` is left out.
 */
const claimWrite = (s: string, now: string, options: { readonly takeover: boolean }): string => {
  const v = claimVerdict(s, now)
  return `${lockedRows(s, "j.id, j.lease_token")}, upd AS (
    UPDATE ${s}.jobs j SET
      state = CASE ${v} WHEN 'claim' THEN 'running' WHEN 'exhausted' THEN 'failed' ELSE 'abandoned' END,
      abandon_reason = CASE ${v} WHEN 'cancelled' THEN 'cancelled' WHEN 'deadline' THEN 'deadline'
        WHEN 'budget' THEN 'budget' ELSE NULL END,
      error_class = CASE WHEN ${v} = 'exhausted' AND j.state = 'running' THEN 'lease_expired' ELSE j.error_class END,
      failed_at = CASE WHEN ${v} = 'exhausted' THEN ${now} ELSE j.failed_at END,
      attempts = CASE WHEN ${v} = 'claim' THEN j.attempts + 1 ELSE j.attempts END,
      lease_token = CASE WHEN ${v} = 'claim' THEN j.lease_token + 1 ELSE j.lease_token END,
      lease_owner = CASE WHEN ${v} = 'claim' THEN i.owner ELSE NULL END,
      lease_until = CASE WHEN ${v} = 'claim' THEN ${now} + ${millis("i.lease_ms")} ELSE NULL END,
      cancel_requested_at = CASE WHEN ${v} = 'claim' THEN NULL ELSE j.cancel_requested_at END,
      updated_at = ${bump("j", now)}
    ${lockedInput}
    WHERE j.id = i.job_id AND (
      (j.state = 'queued' AND j.run_after <= ${now}) OR (j.state = 'running' AND j.lease_until < ${now})
    ) AND (i.seen_at IS NULL OR j.updated_at = i.seen_at)
    RETURNING j.*, i.ord, i.owner AS claim_owner, i.lease_token AS held_token
  ), ${
    options.takeover
      ? `ended AS (
    UPDATE ${s}.attempts a SET outcome = 'expired', ended_at = ${now}, error_class = 'lease_expired', evidence = NULL
    FROM upd WHERE a.job_id = upd.id AND a.token = upd.held_token AND a.outcome = 'running'
    RETURNING a.job_id
  ), `
      : ""
  }att AS (
    INSERT INTO ${s}.attempts (job_id, token, worker, started_at, outcome)
    SELECT upd.id, upd.lease_token, upd.claim_owner, ${now}, 'running' FROM upd WHERE upd.state = 'running'
  )`
}

/**
 * The reply of a batch write whose CTE `upd` returns the written rows with `ord`: one row per item of CTE `input`,
 * the written row (`applied`) or the row as the snapshot saw it (NULL job columns when there is none).
 * `visible` narrows which snapshot rows count as found (a tenant check).
 */
const writeReply = (s: string, now: string, extra: { readonly takeover?: boolean; readonly visible?: string } = {}) => {
  const takeover = extra.takeover === true ? "EXISTS (SELECT 1 FROM ended e WHERE e.job_id = upd.id)" : "false"
  return `SELECT upd.ord, true AS applied, ${takeover} AS takeover, ${ms(now)} AS now_ms, ${jobColumns("upd")}
  FROM upd
  UNION ALL
  SELECT i.ord, false, false, ${ms(now)}, ${jobColumns("j")}
  FROM input i LEFT JOIN ${s}.jobs j ON j.id = i.job_id${extra.visible === undefined ? "" : ` AND ${extra.visible}`}
  WHERE NOT EXISTS (SELECT 1 FROM upd WHERE upd.ord = i.ord)
  ORDER BY 1`
}

/** A filtered listing in created_at order (insertion order breaks ties); parameters as `listNewest`. */
const listing = (s: string, direction: "ASC" | "DESC"): string => `SELECT ${jobColumns("j")} FROM ${s}.jobs j
  WHERE ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2)
    AND ($3::text IS NULL OR j.state = $3) AND ($4::text IS NULL OR j.type = $4)
    AND ($5::text IS NULL OR j.error_class = $5)
  ORDER BY j.created_at ${direction}, j.seq ${direction} LIMIT $6::int`

/**
 * submit. Inputs: $1 ids, $2 queues, $3 tenants, $4 types, $5 versions, $6 request keys, $7 input hashes, $8
 * inputs (JSON text), $9 input refs, $10 priorities, $11 delays ms, $12 deadlines ms, $13 budgets, $14 max
 * attempts, $15 trace ids, $18 request fingerprints (one array element per item), $16 every id of the batch not
 * yet written (none may exist), $17 now. Outputs per item: `kind` 'created' with the new row, or 'existing' with the row holding its
 * request key (NULL columns when the snapshot shows none), and `clash`, the id of an existing job among $16
 * (then nothing is inserted). Locking: the unique index on (queue, tenant, request_key) NULLS NOT DISTINCT
 * arbitrates concurrent submits; ON CONFLICT DO NOTHING waits for the winner. A keyed item with no visible
 * holder means the winner committed after our snapshot: the caller runs it again. Rows are inserted in item
 * order, so `seq` (insertion order) follows the batch.
 */
const submitSql = (s: string): string => {
  const now = storeNow(17)
  return `WITH input AS (
      SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[],
        $8::text[], $9::text[], $10::int[], $11::float8[], $12::float8[], $13::float8[], $14::int[], $15::text[],
        $18::text[])
      WITH ORDINALITY AS i(id, queue, tenant, type, version, request_key, input_hash, input, input_ref, priority,
        delay_ms, deadline_ms, budget_cents, max_attempts, trace_id, fingerprint, ord)
    ), clash AS (
      SELECT j.id FROM ${s}.jobs j WHERE j.id = ANY($16::uuid[]) LIMIT 1
    ), ins AS (
      INSERT INTO ${s}.jobs (id, queue, tenant, type, version, request_key, input_hash, input, input_ref, state,
        max_attempts, run_after, priority, deadline_at, budget_cents, trace_id, created_at, updated_at, fingerprint)
      SELECT i.id, i.queue, i.tenant, i.type, i.version, i.request_key, i.input_hash, i.input::jsonb, i.input_ref,
        'queued', i.max_attempts, ${now} + ${millis("greatest(0, coalesce(i.delay_ms, 0))")},
        coalesce(i.priority, 0), ${ts("i.deadline_ms")}, i.budget_cents, i.trace_id, ${now}, ${now}, i.fingerprint
      FROM input i WHERE NOT EXISTS (SELECT 1 FROM clash) ORDER BY i.ord
      ON CONFLICT (queue, tenant, request_key) WHERE request_key IS NOT NULL DO NOTHING
      RETURNING *
    )
    SELECT i.ord, 'created' AS kind, (SELECT id::text FROM clash) AS clash, ${ms(now)} AS now_ms,
      ${jobColumns("ins")}
    FROM ins JOIN input i ON i.id = ins.id
    UNION ALL
    SELECT i.ord, 'existing', (SELECT id::text FROM clash), ${ms(now)}, ${jobColumns("j")}
    FROM input i LEFT JOIN ${s}.jobs j ON i.request_key IS NOT NULL AND j.queue = i.queue
      AND j.tenant IS NOT DISTINCT FROM i.tenant AND j.request_key = i.request_key
    WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = i.id)
    ORDER BY 1`
}

/**
 * claim. Inputs: $1 ids, $2 owners, $3 lease ms, $4 estimates (NULL: `Protocol.fallbackEstimate`), $5 now.
 * Outputs per item: `applied`, `takeover`, `now_ms` and the job (after the write, or as the snapshot saw it when
 * nothing was claimable). See `claimWrite` for the write. The fallback estimate reads the ledger under the
 * statement's snapshot, as a charge racing the claim could not be ordered before it anyway.
 */
const claimSql = (s: string): string => {
  const now = storeNow(5)
  return `WITH input AS (
      SELECT x.job_id, x.owner, x.lease_ms, coalesce(x.estimate, ${fallbackEstimate(s, "x.job_id")}) AS estimate,
        CASE WHEN x.estimate IS NULL THEN (SELECT u.updated_at FROM ${s}.jobs u WHERE u.id = x.job_id) END AS seen_at,
        x.ord
      FROM unnest($1::uuid[], $2::text[], $3::float8[], $4::float8[])
        WITH ORDINALITY AS x(job_id, owner, lease_ms, estimate, ord)
    ), ${claimWrite(s, now, { takeover: true })}
    ${writeReply(s, now, { takeover: true })}`
}

/**
 * The fallback estimate of a picked row `r` (`fallbackEstimate`), without reading the ledger when the job's spend is
 * 0: ledger amounts are never negative (`Protocol.chargeProblem`), so no token has charged anything then. The spend is
 * the picked row's, which is the snapshot's (`unchangedSinceSnapshot`), as the ledger read is.
 */
const pickedEstimate = (s: string): string =>
  `CASE WHEN r.cost_cents = 0 THEN 0::float8 ELSE ${fallbackEstimate(s, "r.id")} END`

/**
 * The bucket of a claimNext statement for a batch of `max`: the smallest power of two at or above it (1, 2, 4, ...).
 * The bucket is written into the statement as a literal, so a connection prepares one statement per bucket (at most
 * 11 for batches up to 1,024) instead of one per batch size, each of which the server planned anew several times.
 * The batch itself is the parameter $2, applied as an outer LIMIT above the locking pick: the executor pulls rows
 * through the row locks only until it has $2, so exactly the claimed rows are locked (a lock on a row it does not
 * claim would make claimers running at the same moment skip that row and leave it to a later round). The bucket's
 * literal bounds the planner's estimate of the pick (with a parameter alone it assumes a tenth of the table), so the
 * generic plan costs about what a custom one does and the server keeps it instead of planning on every execution.
 *
 * @internal
 */
export const claimNextLimit = (max: number): number => {
  let bucket = 1
  while (bucket < max) bucket *= 2
  return bucket
}

/**
/**
 * The pick of claimNext: at most `limit` rows from `query` (which locks with FOR UPDATE SKIP LOCKED under its own
 * literal LIMIT, the bucket), cut to `upTo` above the locks (`claimNextLimit`).
 */
const pickedUpTo = (query: string, upTo = "$2::int"): string => `SELECT c.* FROM (${query}) c LIMIT ${upTo}`

/**
 * claimNext in bucket `limit` (`claimNextLimit`). Inputs: $1 queue, $2 max (at most `limit`), $3 owner, $4 lease ms,
 * $5 now, $6 types and $7 versions (the `Protocol.runnableBy` filter as two arrays of equal length; NULL: no filter).
 * In `Protocol.claimNextOrder`: running jobs of the queue whose lease ended (taken over directly, no sweep needed;
 * `lease_entries` finds them, migration 0015), oldest insertion first, then due queued jobs, highest priority first, then
 * earliest run_after, then insertion order. Each group is picked with FOR UPDATE SKIP LOCKED so that concurrent
 * claimers take disjoint sets and never wait on each other, and locks only what it claims: the lapsed pick at most
 * $2, the queued pick what the lapsed leases left of $2 (a row locked and not claimed would be passed over by every
 * claimer running at the same moment, a pick no order of the claims explains: the concurrent property found it).
 * The picks are claimed as `claim` does with the fallback estimate (`pickedEstimate`). Outputs: only the written
 * rows (`applied`, `takeover` when a lapsed holder's attempt was ended), in pick order.
 */
const claimNextSql = (s: string, limit: number): string => {
  const now = storeNow(5)
  const runnable = "($6::text[] IS NULL OR (j.type, j.version) IN (SELECT * FROM unnest($6::text[], $7::int[])))"
  return `WITH lapsed AS (
      ${pickedUpTo(`SELECT j.id, j.seq, j.cost_cents FROM ${s}.lease_entries e JOIN ${s}.jobs j ON j.id = e.job_id
        WHERE e.lease_until < ${now} AND e.queue = $1
          AND j.state = 'running' AND j.lease_until < ${now} AND ${runnable}
          AND ${unchangedSinceSnapshot(s, "j")}
        ORDER BY j.seq LIMIT ${limit} FOR UPDATE OF j SKIP LOCKED`)}
    ), due AS (
      ${pickedUpTo(
        `SELECT j.id, j.priority, j.run_after, j.seq, j.cost_cents
        FROM ${s}.queued_entries e JOIN ${s}.jobs j ON j.id = e.job_id
        WHERE e.queue = $1 AND e.run_after <= ${now}
          AND j.state = 'queued' AND j.run_after <= ${now} AND ${runnable}
          AND ${unchangedSinceSnapshot(s, "j")}
        ORDER BY e.priority DESC, e.run_after, e.seq LIMIT ${limit} FOR UPDATE OF j SKIP LOCKED`,
        "(SELECT $2::int - count(*) FROM lapsed)"
      )}
    ), picked AS (
      SELECT l.id, 0 AS grp, 0 AS priority, NULL::timestamptz AS run_after, l.seq, l.cost_cents FROM lapsed l
      UNION ALL
      SELECT d.id, 1, d.priority, d.run_after, d.seq, d.cost_cents FROM due d
    ), ranked AS (
      SELECT p.*, row_number() OVER (ORDER BY p.grp, p.priority DESC, p.run_after, p.seq) AS ord FROM picked p
    ), input AS (
      SELECT r.id AS job_id, $3::text AS owner, $4::float8 AS lease_ms, ${pickedEstimate(s)} AS estimate,
        NULL::timestamptz AS seen_at, r.ord
      FROM ranked r WHERE r.ord <= $2::int
    ), ${claimWrite(s, now, { takeover: true })}
    SELECT upd.ord, true AS applied, EXISTS (SELECT 1 FROM ended e WHERE e.job_id = upd.id) AS takeover,
      ${ms(now)} AS now_ms, ${jobColumns("upd")} FROM upd
    UNION ALL
    SELECT 0, false, false, ${ms(now)}, ${noJob}
    ORDER BY 1`
}

// ---------------------------------------------------------------------------------------------------------------
// Fair claims (`Fairness.ts`)
// ---------------------------------------------------------------------------------------------------------------

/**
 * `Fairness.decayed` of a service `service` written at `at` (NULL: none), at store time `now`, decay step `$11`:
 * the same floating-point operations in the same order, with `Fairness.decayFactors` spliced in as literals.
 */
const fairDecayed = (service: string, at: string, now: string): string => {
  const steps = `greatest(0, floor(${ms(now)} / $11::float8) - floor(${ms(at)} / $11::float8))`
  const whole = `floor(${steps} / ${Fairness.defaults.steps})`
  const factors = `(ARRAY[${Fairness.decayFactors.map((f) => String(f)).join(", ")}]::float8[])`
  return `(CASE WHEN ${service} IS NULL OR ${whole} >= ${Fairness.defaults.forgetAfter} THEN 0::float8
    ELSE ${service} * ${factors}[(${steps} - ${whole} * ${Fairness.defaults.steps})::int + 1]
      * power(2::float8, -${whole}) END)`
}

/**
 * How many candidates beyond the batch a fair claim may pass over because another writer holds them. The bound keeps
 * the row lookups of the lock step a small, known number, which the planner then does by id (unbounded, it
 * estimated hundreds and read the whole table instead).
 */
const FAIR_PASS_OVER = 64

/**
 * claimNext with `fair` in bucket `limit` (`claimNextLimit`). Inputs: $1 queue, $2 max (at most `limit`), $3 owner, $4
 * lease ms, $5 now, $6 types and $7 versions (as claimNext), $8 tenants named in the weights and $9 their weights,
 * $10 the default weight, $11 the decay step ms (`Fairness.stepMs`). `Fairness.pick`: the tenants with queued jobs
 * (a loose index scan over the fair order of `queued_entries`, plus the no-tenant tenant), each with its decayed service and weight;
 * per tenant its first `limit` due runnable jobs in claim order, the k-th (from 0) keyed `decayed + k / weight`;
 * the $2 smallest keys (ties in claim order) are locked with SKIP LOCKED, so a row another writer holds is passed
 * over and keeps its rank (at most `limit` - $2 + `FAIR_PASS_OVER` of them), and claimed as claimNext claims; each
 * tenant with picks gets service
 * `decayed + picks / weight` at now, in the same statement. Outputs: as claimNext.
 *
 * Locking: service is read from the statement's snapshot, so two fair claims of one queue must not overlap: the
 * caller runs this statement in a transaction that first takes `fairLock` (one fair claim per queue at a time; the
 * statement's snapshot is taken after the lock). Claims that are not fair, sweeps and transport receives are not
 * blocked by it: they meet the rows as they meet any claimer's, with SKIP LOCKED or a row lock.
 */
const claimNextFairSql = (s: string, limit: number): string => {
  const now = storeNow(5)
  const n = limit
  const due = `e.queue = $1 AND e.run_after <= ${now} AND j.state = 'queued' AND j.run_after <= ${now}
        AND ($6::text[] IS NULL OR (j.type, j.version) IN (SELECT * FROM unnest($6::text[], $7::int[])))`
  const head = (match: string) => `SELECT h.*, row_number() OVER (ORDER BY h.priority DESC, h.run_after, h.seq) AS k
      FROM (
        SELECT e.job_id AS id, e.priority, e.run_after, e.seq
        FROM ${s}.queued_entries e JOIN ${s}.jobs j ON j.id = e.job_id
        WHERE ${match} AND ${due}
        ORDER BY e.priority DESC, e.run_after, e.seq LIMIT ${n}
      ) h`
  return `WITH RECURSIVE named AS (
      (SELECT e.tenant FROM ${s}.queued_entries e
        WHERE e.queue = $1 AND e.tenant IS NOT NULL ORDER BY e.tenant LIMIT 1)
      UNION ALL
      SELECT (SELECT e.tenant FROM ${s}.queued_entries e
        WHERE e.queue = $1 AND e.tenant > t.tenant ORDER BY e.tenant LIMIT 1)
      FROM named t WHERE t.tenant IS NOT NULL
    ), flows AS (
      SELECT t.tenant FROM named t WHERE t.tenant IS NOT NULL
      UNION ALL
      SELECT NULL::text WHERE EXISTS (
        SELECT 1 FROM ${s}.queued_entries e WHERE e.queue = $1 AND e.tenant IS NULL
      )
    ), weighted AS (
      SELECT f.tenant,
        coalesce((SELECT x.w FROM unnest($8::text[], $9::float8[]) AS x(t, w) WHERE x.t = f.tenant LIMIT 1),
          $10::float8) AS w,
        ${fairDecayed("fs.service", "fs.at", now)} AS d
      FROM flows f
      LEFT JOIN ${s}.fair_service fs ON fs.queue = $1 AND fs.tenant IS NOT DISTINCT FROM f.tenant
    ), cand AS (
      SELECT c.id, c.priority, c.run_after, c.seq, wt.tenant AS flow, wt.d + (c.k - 1)::float8 / wt.w AS key
      FROM weighted wt CROSS JOIN LATERAL (${head("e.tenant = wt.tenant")}) c
      WHERE wt.tenant IS NOT NULL
      UNION ALL
      SELECT c.id, c.priority, c.run_after, c.seq, NULL::text, wt.d + (c.k - 1)::float8 / wt.w
      FROM weighted wt CROSS JOIN LATERAL (${head("e.tenant IS NULL")}) c
      WHERE wt.tenant IS NULL
    ), ordered AS (
      SELECT * FROM cand c ORDER BY c.key, c.priority DESC, c.run_after, c.seq LIMIT ${n + FAIR_PASS_OVER}
    ), picked AS (
      ${pickedUpTo(`SELECT j.id, c.key, c.priority, c.run_after, c.seq, c.flow, j.cost_cents FROM ${s}.jobs j
        JOIN ordered c ON c.id = j.id
        WHERE j.state = 'queued' AND j.run_after <= ${now} AND ${unchangedSinceSnapshot(s, "j")}
        ORDER BY c.key, c.priority DESC, c.run_after, c.seq LIMIT ${n} FOR UPDATE OF j SKIP LOCKED`)}
    ), ranked AS (
      SELECT p.*, row_number() OVER (ORDER BY p.key, p.priority DESC, p.run_after, p.seq) AS ord FROM picked p
    ), input AS (
      SELECT r.id AS job_id, $3::text AS owner, $4::float8 AS lease_ms, ${pickedEstimate(s)} AS estimate,
        NULL::timestamptz AS seen_at, r.ord, r.flow
      FROM ranked r WHERE r.ord <= $2::int
    ), service AS (
      INSERT INTO ${s}.fair_service AS fs (queue, tenant, service, at)
      SELECT $1, wt.tenant, wt.d + p.picks::float8 / wt.w, ${now}
      FROM (SELECT i.flow, count(*) AS picks FROM input i GROUP BY i.flow) p
      JOIN weighted wt ON wt.tenant IS NOT DISTINCT FROM p.flow
      ON CONFLICT (queue, tenant) DO UPDATE SET service = EXCLUDED.service, at = EXCLUDED.at
    ), ${claimWrite(s, now, { takeover: false })}
    SELECT upd.ord, true AS applied, false AS takeover, ${ms(now)} AS now_ms, ${jobColumns("upd")} FROM upd
    UNION ALL
    SELECT 0, false, false, ${ms(now)}, ${noJob}
    ORDER BY 1`
}

/**
 * heartbeat. Inputs: $1 ids, $2 tokens, $3 lease ms, $4 progress (NULL: unchanged), $5 now. Fenced
 * (`Protocol.holds`); `Protocol.heartbeatTransition`: the lease runs to now + lease ms unless it ends later already
 * (`now` is the transaction's start: an older renewal held on a lock may commit after a newer one and must not move
 * the end back), progress clamped to 0..1.
 * Outputs per item: `applied` and the job (written, or the snapshot row for the LeaseLost reply).
 */
const heartbeatSql = (s: string): string => {
  const now = storeNow(5)
  return `WITH input AS (
      SELECT * FROM unnest($1::uuid[], $2::int[], $3::float8[], $4::float8[])
        WITH ORDINALITY AS i(job_id, token, lease_ms, progress, ord)
    ), ${lockedRows(s)}, upd AS (
      UPDATE ${s}.jobs j SET lease_until = greatest(j.lease_until, ${now} + ${millis("i.lease_ms")}),
        progress = CASE WHEN i.progress IS NULL THEN j.progress ELSE least(1, greatest(0, i.progress)) END,
        updated_at = ${bump("j", now)}
      ${lockedInput}
      WHERE j.id = i.job_id AND j.state = 'running' AND j.lease_token = i.token
      RETURNING j.*, i.ord
    )
    ${writeReply(s, now)}`
}

/**
 * settle. Inputs: $1 ids, $2 tokens, $3 kinds ('complete' | 'retry' | 'fail' | 'abandon' | 'release' |
 * 'throttle'), $4 results (JSON text), $5 retry and throttle delays ms, $6 error classes, $7 evidence, $8 abandon
 * reasons (NULL where a kind has no such field), $9 now. Fenced (`Protocol.holds`); `Protocol.settleTransition`,
 * including a retry or throttle whose run_after (now + delay) reaches the deadline becoming abandoned(deadline). The attempt row of the token ends
 * with the matching outcome in the same statement. Outputs per item: `applied` and the job.
 */
const settleSql = (s: string): string => {
  const now = storeNow(9)
  const runAfter = `${now} + ${millis("greatest(0, i.delay_ms)")}`
  // The outcome in effect: a retry that could not start before the deadline is an abandon.
  const kind = `(CASE WHEN i.kind IN ('retry', 'throttle') AND j.deadline_at IS NOT NULL
      AND ${runAfter} >= j.deadline_at THEN 'abandon' ELSE i.kind END)`
  return `WITH input AS (
      SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::float8[], $6::text[], $7::text[],
        $8::text[])
        WITH ORDINALITY AS i(job_id, token, kind, result, delay_ms, error_class, evidence, reason, ord)
    ), ${lockedRows(s)}, upd AS (
      UPDATE ${s}.jobs j SET
        state = CASE ${kind} WHEN 'complete' THEN 'succeeded' WHEN 'retry' THEN 'queued' WHEN 'release' THEN 'queued'
          WHEN 'throttle' THEN 'queued' WHEN 'fail' THEN 'failed' ELSE 'abandoned' END,
        abandon_reason = CASE WHEN ${kind} = 'abandon'
          THEN (CASE WHEN i.kind IN ('retry', 'throttle') THEN 'deadline' ELSE i.reason END) ELSE j.abandon_reason END,
        result = CASE WHEN i.kind = 'complete' THEN i.result::jsonb ELSE j.result END,
        progress = CASE WHEN i.kind = 'complete' THEN 1 ELSE j.progress END,
        error_class = CASE i.kind WHEN 'complete' THEN NULL WHEN 'release' THEN j.error_class
          ELSE coalesce(i.error_class, j.error_class) END,
        last_error = CASE i.kind WHEN 'complete' THEN NULL WHEN 'release' THEN j.last_error
          ELSE coalesce(i.evidence, j.last_error) END,
        run_after = CASE ${kind} WHEN 'retry' THEN ${runAfter} WHEN 'throttle' THEN ${runAfter} WHEN 'release' THEN ${now}
          ELSE j.run_after END,
        attempts_base = CASE WHEN ${kind} IN ('release', 'throttle') THEN j.attempts_base + 1
          ELSE j.attempts_base END,
        failed_at = CASE WHEN i.kind = 'fail' THEN ${now} ELSE j.failed_at END,
        visible_at = NULL, ${leaseCleared}, updated_at = ${bump("j", now)}
      ${lockedInput}
      WHERE j.id = i.job_id AND j.state = 'running' AND j.lease_token = i.token
      RETURNING j.*, i.ord, i.kind AS settle_kind, i.error_class AS end_error_class, i.evidence AS end_evidence
    ), ended AS (
      UPDATE ${s}.attempts a SET ended_at = ${now},
        outcome = CASE upd.state WHEN 'succeeded' THEN 'succeeded' WHEN 'failed' THEN 'failed'
          WHEN 'abandoned' THEN 'abandoned'
          ELSE (CASE WHEN upd.settle_kind IN ('release', 'throttle') THEN 'released' ELSE 'retried' END)
        END,
        error_class = upd.end_error_class, evidence = upd.end_evidence
      FROM upd WHERE a.job_id = upd.id AND a.token = upd.lease_token AND a.outcome = 'running'
    )
    ${writeReply(s, now)}`
}

/**
 * charge. Inputs: $1 ids, $2 call ids, $3 tokens, $4 amounts, $5 settled flags, $6 now. Outputs per item:
 * `found`, `cost_cents`, and for an item of a batch with a budget `refused` (`Batch.chargeVerdict`: nothing written;
 * `batch_id`, `batch_cost_cents` as the batch stood before the item, `budget_cents`) or `held` (run the item again).
 * Not fenced. `Protocol.chargeStep`: ON CONFLICT (job_id, call_id) makes the ledger row the arbiter: a new call id
 * inserts, a settlement of an unsettled row updates, anything else matches no row. The job's cost moves by exactly the
 * delta the ledger row recorded, in the same statement, under the job row's lock (re-evaluated on the newest version),
 * so concurrent charges add up. An item that writes nothing answers the cost as locked, not as the snapshot saw it: a
 * repeat that waited for the charge it repeats answers the spend that charge left.
 *
 * The batch's budget: once every job row is locked, the rows of their batches that have a budget are locked in id
 * order (`budgeted`; FOR UPDATE returns the newest version, so the batch's cost counts every charge committed before
 * it, reservations included), and `walk` takes each batch's items in item order, carrying the batch's cost from one
 * item to the next as the protocol applies them one after another: a reservation of a new call id that does not fit
 * (`Protocol.budgetFits`) is refused and moves nothing. Whether a call id is new is read from the statement's
 * snapshot, which a charge committed between the snapshot and the job row's lock makes stale: the job row as locked
 * then differs from the snapshot's (every write bumps `updated_at`), and every item of that batch is `held`, written
 * by none, and run again with a fresh snapshot. The job rows are locked before the batch rows, as the trigger of
 * migration 0011 locks them, so the two never deadlock.
 */
const chargeSql = (s: string): string => {
  const now = storeNow(6)
  const fits = (cost: string, amount: string, budget: string) =>
    `(${cost} < ${budget} AND ${cost} + ${amount} <= ${budget})`
  const refused = (cost: string) => `(x.reserves AND NOT ${fits(cost, "x.amount_cents", "b.budget_cents")})`
  const walked = (cost: string) => `${cost} + CASE WHEN ${refused(cost)} THEN 0 ELSE x.delta END`
  return `WITH RECURSIVE input AS (
      SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::float8[], $5::boolean[])
        WITH ORDINALITY AS i(job_id, call_id, token, amount_cents, settled, ord)
    ), ${lockedRows(s, "j.id, j.cost_cents, j.batch_id, j.updated_at")}, budgeted AS (
      SELECT b.id, b.cost_cents, b.budget_cents FROM ${s}.batches b
      WHERE b.id = ANY ((SELECT array_agg(l.batch_id) FROM locked l)::uuid[]) AND b.budget_cents IS NOT NULL
      ORDER BY b.id FOR UPDATE
    ), held AS (
      SELECT DISTINCT l.batch_id FROM locked l JOIN ${s}.jobs v ON v.id = l.id
      WHERE l.batch_id IN (SELECT id FROM budgeted) AND v.updated_at IS DISTINCT FROM l.updated_at
    ), steps AS (
      SELECT i.ord, i.batch_id, i.amount_cents,
        (p.call_id IS NULL AND NOT i.settled) AS reserves,
        CASE WHEN p.call_id IS NULL THEN i.amount_cents
          WHEN NOT p.settled AND i.settled THEN i.amount_cents - p.amount_cents ELSE 0 END AS delta,
        row_number() OVER (PARTITION BY i.batch_id ORDER BY i.ord) AS rk
      ${lockedInput} JOIN budgeted bb ON bb.id = i.batch_id
      LEFT JOIN ${s}.charges p ON p.job_id = i.job_id AND p.call_id = i.call_id
    ), walk AS (
      SELECT x.batch_id, x.rk, x.ord, b.budget_cents, b.cost_cents AS before_cents,
        ${refused("b.cost_cents")} AS refused, ${walked("b.cost_cents")} AS after_cents
      FROM steps x JOIN budgeted b ON b.id = x.batch_id WHERE x.rk = 1
      UNION ALL
      SELECT x.batch_id, x.rk, x.ord, b.budget_cents, b.after_cents,
        ${refused("b.after_cents")}, ${walked("b.after_cents")}
      FROM walk b JOIN steps x ON x.batch_id = b.batch_id AND x.rk = b.rk + 1
    ), skipped AS (
      SELECT w.ord FROM walk w WHERE w.refused OR w.batch_id IN (SELECT batch_id FROM held)
    ), c AS (
      INSERT INTO ${s}.charges AS c (job_id, call_id, token, amount_cents, settled, applied_delta_cents,
        created_at, updated_at)
      SELECT i.job_id, i.call_id, i.token, i.amount_cents, i.settled, i.amount_cents, ${now}, ${now}
      ${lockedInput} WHERE i.ord NOT IN (SELECT ord FROM skipped) ORDER BY i.ord
      ON CONFLICT (job_id, call_id) DO UPDATE SET amount_cents = EXCLUDED.amount_cents, settled = true,
        applied_delta_cents = EXCLUDED.amount_cents - c.amount_cents,
        updated_at = greatest(${now}, c.updated_at + interval '1 microsecond')
      WHERE c.settled = false AND EXCLUDED.settled = true
      RETURNING c.job_id, c.applied_delta_cents
    ), upd AS (
      UPDATE ${s}.jobs j SET cost_cents = j.cost_cents + c.applied_delta_cents, updated_at = ${bump("j", now)}
      FROM c WHERE j.id = c.job_id
      RETURNING j.id, j.cost_cents
    )
    SELECT i.ord, l.id IS NOT NULL AS found, coalesce(upd.cost_cents, l.cost_cents) AS cost_cents,
      ${ms(now)} AS now_ms, coalesce(w.batch_id IN (SELECT batch_id FROM held), false) AS held,
      coalesce(w.refused, false) AS refused, w.batch_id::text AS batch_id, w.before_cents AS batch_cost_cents,
      w.budget_cents
    FROM input i LEFT JOIN locked l ON l.id = i.job_id LEFT JOIN upd ON upd.id = i.job_id
      LEFT JOIN walk w ON w.ord = i.ord
    ORDER BY i.ord`
}

/**
 * cancel. Inputs: $1 ids, $2 tenants (NULL: any), $3 now. `Protocol.cancelTransition`: queued ->
 * abandoned(cancelled); running -> cancel requested. A running job whose cancel is already requested, and a
 * terminal job, are not written. Outputs per item: `applied` and the job (NULL columns when there is no such job
 * for the tenant).
 */
const cancelSql = (s: string): string => {
  const now = storeNow(3)
  return `WITH input AS (
      SELECT * FROM unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS i(job_id, tenant, ord)
    ), ${lockedRows(s)}, upd AS (
      UPDATE ${s}.jobs j SET
        state = CASE WHEN j.state = 'queued' THEN 'abandoned' ELSE j.state END,
        abandon_reason = CASE WHEN j.state = 'queued' THEN 'cancelled' ELSE j.abandon_reason END,
        cancel_requested_at = CASE WHEN j.state = 'running' THEN ${now} ELSE j.cancel_requested_at END,
        lease_owner = CASE WHEN j.state = 'queued' THEN NULL ELSE j.lease_owner END,
        lease_until = CASE WHEN j.state = 'queued' THEN NULL ELSE j.lease_until END,
        updated_at = ${bump("j", now)}
      ${lockedInput}
      WHERE j.id = i.job_id AND (i.tenant IS NULL OR j.tenant = i.tenant)
        AND (j.state = 'queued' OR (j.state = 'running' AND j.cancel_requested_at IS NULL))
      RETURNING j.*, i.ord
    )
    ${writeReply(s, now, { visible: "(i.tenant IS NULL OR j.tenant = i.tenant)" })}`
}

/**
 * replay. Inputs: $1 ids, $2 queue, $3 tenant, $4 error class, $5 type (filters, NULL: any), $6 now, $7 input hash
 * (a filter, NULL: any).
 * `Protocol.replayTransition` on each `Protocol.replayable` job: failed -> queued, due now, a fresh run
 * (attempts_base = attempts), no leftover cancel request; the transport's hiding and the outbox mark are cleared
 * so the job is delivered and relayed again. The UPDATE re-checks `state = 'failed'` on the newest row version,
 * so a job that left failed meanwhile is skipped. Outputs per item: `applied` and the job.
 */
const replaySql = (s: string): string => {
  const now = storeNow(6)
  return `WITH input AS (
      SELECT * FROM unnest($1::uuid[]) WITH ORDINALITY AS i(job_id, ord)
    ), ${lockedRows(s)}, upd AS (
      UPDATE ${s}.jobs j SET state = 'queued', run_after = ${now}, attempts_base = j.attempts, abandon_reason = NULL,
        cancel_requested_at = NULL, ${leaseCleared}, visible_at = NULL, published_at = NULL,
        updated_at = ${bump("j", now)}
      ${lockedInput}
      WHERE j.id = i.job_id AND j.state = 'failed'
        AND ($2::text IS NULL OR j.queue = $2) AND ($3::text IS NULL OR j.tenant = $3)
        AND ($4::text IS NULL OR j.error_class = $4) AND ($5::text IS NULL OR j.type = $5)
        AND ($7::text IS NULL OR j.input_hash = $7)
      RETURNING j.*, i.ord
    )
    ${writeReply(s, now)}`
}

/**
 * sweep. Inputs: $1 queue, $2 republish-after ms, $3 limit, $4 now. Outputs: a 'now' row, then rows of (kind,
 * job) in the order they were written: expired leases (requeued, expiredFailed or abandoned) and overdue queued
 * jobs (abandoned) by insertion order, then stale jobs least recently touched first. `$3` bounds the whole pass:
 * expired leases take what they need first, overdue queued jobs get what is left, stale jobs the rest. Every
 * candidate set is picked with FOR UPDATE SKIP LOCKED, so two sweepers split the work instead of queueing or
 * doing it twice. Expired leases (`lease_until < now`): `Protocol.sweepTransition` (abandoned when a cancel was
 * requested or the deadline passed, failed(lease_expired) with no attempt left, else requeued, due now) and the
 * attempt row ends `expired`. Queued jobs past their deadline: abandoned(deadline). Stale queued jobs
 * (`Protocol.isStale`: last touched, the later of updated_at and republished_at, more than $2 ms ago):
 * republished_at = now, which leaves updated_at alone. All candidate sets are read from one snapshot and never
 * share a row (running vs queued, past vs before the deadline), so no row is written twice and a job requeued by
 * this pass is never also stale.
 */
const sweepSql = (s: string): string => {
  const now = storeNow(4)
  const touched = (a: string) => `greatest(${a}.updated_at, ${a}.republished_at)`
  const cancelled = "j.cancel_requested_at IS NOT NULL"
  const overdue = `(j.deadline_at IS NOT NULL AND j.deadline_at <= ${now})`
  const exhausted = "j.attempts - j.attempts_base >= j.max_attempts"
  const fails = `(NOT ${cancelled} AND NOT ${overdue} AND ${exhausted})`
  const requeues = `(NOT ${cancelled} AND NOT ${overdue} AND NOT ${exhausted})`
  return `WITH expired AS (
      SELECT j.id FROM ${s}.lease_entries e JOIN ${s}.jobs j ON j.id = e.job_id
      WHERE e.lease_until < ${now} AND ($1::text IS NULL OR e.queue = $1)
        AND j.state = 'running' AND j.lease_until < ${now}
      ORDER BY j.seq LIMIT $3::int FOR UPDATE OF j SKIP LOCKED
    ), requeue AS (
      UPDATE ${s}.jobs j SET
        state = CASE WHEN ${requeues} THEN 'queued' WHEN ${fails} THEN 'failed' ELSE 'abandoned' END,
        abandon_reason = CASE WHEN ${cancelled} THEN 'cancelled' WHEN ${overdue} THEN 'deadline' ELSE NULL END,
        error_class = CASE WHEN ${fails} THEN 'lease_expired' ELSE j.error_class END,
        failed_at = CASE WHEN ${fails} THEN ${now} ELSE j.failed_at END,
        run_after = CASE WHEN ${requeues} THEN ${now} ELSE j.run_after END,
        visible_at = NULL, ${leaseCleared}, updated_at = ${bump("j", now)}
      FROM expired WHERE j.id = expired.id AND j.state = 'running' AND j.lease_until < ${now}
      RETURNING j.*
    ), ended AS (
      UPDATE ${s}.attempts a SET outcome = 'expired', ended_at = ${now}, error_class = 'lease_expired', evidence = NULL
      FROM requeue WHERE a.job_id = requeue.id AND a.token = requeue.lease_token AND a.outcome = 'running'
    ), overdue AS (
      SELECT j.id FROM ${s}.queued_entries e JOIN ${s}.jobs j ON j.id = e.job_id
      WHERE e.deadline_at IS NOT NULL AND e.deadline_at <= ${now} AND ($1::text IS NULL OR e.queue = $1)
        AND j.state = 'queued' AND j.deadline_at IS NOT NULL AND j.deadline_at <= ${now}
      ORDER BY j.seq LIMIT greatest(0, $3::int - (SELECT count(*) FROM requeue)) FOR UPDATE OF j SKIP LOCKED
    ), abandoned AS (
      UPDATE ${s}.jobs j SET state = 'abandoned', abandon_reason = 'deadline', ${leaseCleared},
        updated_at = ${bump("j", now)}
      FROM overdue WHERE j.id = overdue.id AND j.state = 'queued' AND j.deadline_at <= ${now}
      RETURNING j.*
    ), picked AS (
      SELECT j.id, ${touched("j")} AS touched FROM ${s}.queued_entries e JOIN ${s}.jobs j ON j.id = e.job_id
      WHERE e.run_after <= ${now} AND e.touched_at < ${now} - ${millis("$2::float8")}
        AND (e.deadline_at IS NULL OR e.deadline_at > ${now}) AND ($1::text IS NULL OR e.queue = $1)
        AND j.state = 'queued' AND j.run_after <= ${now}
        AND ${touched("j")} < ${now} - ${millis("$2::float8")}
        AND (j.deadline_at IS NULL OR j.deadline_at > ${now})
      ORDER BY e.touched_at, e.seq
      LIMIT greatest(0, $3::int - (SELECT count(*) FROM requeue) - (SELECT count(*) FROM abandoned))
      FOR UPDATE OF j SKIP LOCKED
    ), stale AS (
      UPDATE ${s}.jobs j SET republished_at = ${now}
      FROM picked WHERE j.id = picked.id AND j.state = 'queued'
      RETURNING j.*, picked.touched AS touched
    )
    SELECT CASE requeue.state WHEN 'queued' THEN 'requeued' WHEN 'failed' THEN 'expiredFailed' ELSE 'abandoned' END
        AS kind, 1 AS grp, NULL::timestamptz AS ord_touched, requeue.seq AS ord_seq, ${ms(now)} AS now_ms,
      ${jobColumns("requeue")}
    FROM requeue
    UNION ALL
    SELECT 'abandoned', 2, NULL, abandoned.seq, ${ms(now)}, ${jobColumns("abandoned")} FROM abandoned
    UNION ALL
    SELECT 'stale', 3, stale.touched, stale.seq, ${ms(now)}, ${jobColumns("stale")} FROM stale
    UNION ALL
    SELECT 'now', 0, NULL, NULL, ${ms(now)}, ${noJob}
    ORDER BY grp, ord_touched, ord_seq`
}

/**
 * The statements for one schema.
 *
 * @internal
 */
export const makeStatements = (schema: string) => {
  const s = quoteSchema(schema)
  const claimNextByLimit = new Map<number, string>()
  /** claimNext for a batch of `max` (`claimNextSql` at `claimNextLimit(max)`), made once per limit. */
  const claimNext = (max: number): string => {
    const limit = claimNextLimit(max)
    let text = claimNextByLimit.get(limit)
    if (text === undefined) {
      text = `/* slowcall:claimNext */ ${claimNextSql(s, limit)}`
      claimNextByLimit.set(limit, text)
    }
    return text
  }
  const claimNextFairByLimit = new Map<number, string>()
  /** claimNext with `fair` for a batch of `max` (`claimNextFairSql` at `claimNextLimit(max)`), made once per limit. */
  const claimNextFair = (max: number): string => {
    const limit = claimNextLimit(max)
    let text = claimNextFairByLimit.get(limit)
    if (text === undefined) {
      text = `/* slowcall:claimNextFair */ ${claimNextFairSql(s, limit)}`
      claimNextFairByLimit.set(limit, text)
    }
    return text
  }
  return { claimNext, claimNextFair, ...fixedStatements(s, schema) }
}

const fixedStatements = (s: string, schema: string) =>
  tagged({
    schema: s,
    submit: submitSql(s),
    claim: claimSql(s),
    heartbeat: heartbeatSql(s),
    settle: settleSql(s),
    charge: chargeSql(s),
    cancel: cancelSql(s),
    replay: replaySql(s),
    sweep: sweepSql(s),
    /**
     * The lock a fair claim of queue $1 takes first in its transaction (see `claimNextFairSql`): a transaction-scoped
     * advisory lock on (schema, queue), so fair claims of one queue run one at a time.
     */
    fairLock: `SELECT pg_advisory_xact_lock(hashtext('slowcall.fair ${schema}'), hashtext($1::text))`,
    /**
     * The rows of jobs $1 (uuid[]) locked, in id order, for the rest of the transaction: a cycle takes it first, so
     * that each of its statements (each with a snapshot of its own) reads those jobs as no other writer can change
     * them until it commits, and its parts act as one step.
     */
    lockJobs: `SELECT j.id FROM ${s}.jobs j WHERE j.id = ANY($1::uuid[]) ORDER BY j.id FOR UPDATE`,
    /** get. Inputs: $1 id, $2 tenant (NULL: any). */
    get: `SELECT ${jobColumns("j")} FROM ${s}.jobs j WHERE j.id = $1::uuid AND ($2::text IS NULL OR j.tenant = $2)`,
    /**
     * list, newest first. Inputs: $1 queue, $2 tenant, $3 state, $4 type, $5 error class, $6 limit (NULL: all).
     * Insertion order breaks ties of created_at.
     */
    listNewest: listing(s, "DESC"),
    /** list, oldest first. Inputs as `listNewest`. */
    listOldest: listing(s, "ASC"),
    /** attempts. Inputs: $1 id. Token order. */
    attempts: `SELECT a.job_id::text AS job_id, a.token, a.worker, ${ms("a.started_at")} AS started_at,
        ${ms("a.ended_at")} AS ended_at, a.outcome, a.error_class, a.evidence
      FROM ${s}.attempts a WHERE a.job_id = $1::uuid ORDER BY a.token`,
    /** charges. Inputs: $1 id. Insertion order. */
    charges: `SELECT c.job_id::text AS job_id, c.call_id, c.token, c.amount_cents, c.settled,
        ${ms("c.created_at")} AS created_at, ${ms("c.updated_at")} AS updated_at
      FROM ${s}.charges c WHERE c.job_id = $1::uuid ORDER BY c.seq`,
    /** dead letters. Inputs: $1 queue, $2 tenant, $3 error class, $4 type, $5 limit. Most recently updated first. */
    deadLetterJobs: `SELECT ${jobColumns("j")} FROM ${s}.finished_entries e JOIN ${s}.jobs j ON j.id = e.job_id
      WHERE e.state = 'failed' AND ($1::text IS NULL OR e.queue = $1)
        AND j.state = 'failed' AND ($2::text IS NULL OR j.tenant = $2)
        AND ($3::text IS NULL OR j.error_class = $3) AND ($4::text IS NULL OR j.type = $4)
      ORDER BY j.updated_at DESC, j.seq DESC LIMIT $5::int`,
    /**
     * dead-letter groups. Inputs: $1 queue, $2 tenant, $3 error class, $4 type. Largest count first, then largest
     * cost, then input hash, then the group whose first job came first. Costs are summed in insertion order. Per
     * group: when its most recent job became failed (a row without the mark, stored before it was kept, by its last
     * write) and its first 50 job ids (`Query.groupJobIdsLimit`) most recently failed first, the later inserted
     * first on equal times. The failed rows are found through `finished_entries` (migration 0015).
     */
    deadLetterGroups: `SELECT j.error_class, j.input_hash, count(*)::int AS count,
        sum(j.cost_cents ORDER BY j.seq)::float8 AS cost_cents,
        ${ms("max(coalesce(j.failed_at, j.updated_at))")} AS last_failed_at,
        (array_agg(j.id::text ORDER BY coalesce(j.failed_at, j.updated_at) DESC, j.seq DESC))[1:50] AS job_ids
      FROM ${s}.finished_entries e JOIN ${s}.jobs j ON j.id = e.job_id
      WHERE e.state = 'failed' AND ($1::text IS NULL OR e.queue = $1) AND ($3::text IS NULL OR e.error_class = $3)
        AND j.state = 'failed' AND ($2::text IS NULL OR j.tenant = $2)
        AND ($3::text IS NULL OR j.error_class = $3) AND ($4::text IS NULL OR j.type = $4)
      GROUP BY j.error_class, j.input_hash
      ORDER BY count(*) DESC, sum(j.cost_cents ORDER BY j.seq) DESC, j.input_hash COLLATE "C", min(j.seq)`,
    /** stats by state. Inputs: $1 queue, $2 tenant. */
    statsByState: `SELECT j.state, count(*)::int AS count FROM ${s}.jobs j
      WHERE ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2) GROUP BY j.state`,
    /** oldest due queued job per priority (due at store time). Inputs: $1 queue, $2 tenant, $3 now. */
    statsOldest: `SELECT e.priority, ${ms("min(e.run_after)")} AS oldest FROM ${s}.queued_entries e
      WHERE e.run_after <= ${storeNow(3)} AND ($1::text IS NULL OR e.queue = $1)
        AND ($2::text IS NULL OR e.tenant = $2)
      GROUP BY e.priority`,
    /**
     * cost by error class: the ledger rows of every attempt that ended with a class, summed under it (in job,
     * token, then ledger order), whatever the job did next; a class with such attempts and no rows sums to 0.
     * Inputs: $1 queue, $2 tenant.
     */
    statsCost: `SELECT a.error_class,
        coalesce(sum(c.amount_cents ORDER BY j.seq, a.token, c.seq), 0)::float8 AS cost_cents
      FROM ${s}.attempts a
      JOIN ${s}.jobs j ON j.id = a.job_id
      LEFT JOIN ${s}.charges c ON c.job_id = a.job_id AND c.token = a.token
      WHERE a.error_class IS NOT NULL AND ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2)
      GROUP BY a.error_class`,
    /** failures since $3 (jobs still failed). Inputs: $1 queue, $2 tenant, $3 failed-since ms. */
    statsFailed: `SELECT count(*)::int AS failed FROM ${s}.finished_entries e JOIN ${s}.jobs j ON j.id = e.job_id
      WHERE e.state = 'failed' AND e.failed_at >= ${ts("$3")} AND ($1::text IS NULL OR e.queue = $1)
        AND ($2::text IS NULL OR j.tenant = $2)`,
    now: `SELECT ${ms("now()")} AS now_ms`,
    /**
     * transport receive. Inputs: $1 queue, $2 max, $3 visibility ms, $4 now. Due queued jobs not hidden by an
     * earlier delivery, in priority order, picked with FOR UPDATE SKIP LOCKED so concurrent receivers take disjoint
     * batches; each is hidden for the visibility time and its receive count (the receipt) goes up.
     */
    receive: `WITH picked AS (
        SELECT j.id FROM ${s}.queued_entries e JOIN ${s}.jobs j ON j.id = e.job_id
        WHERE e.queue = $1 AND e.run_after <= ${storeNow(4)}
          AND j.state = 'queued' AND j.run_after <= ${storeNow(4)}
          AND (j.visible_at IS NULL OR j.visible_at <= ${storeNow(4)})
        ORDER BY e.priority DESC, e.run_after, e.seq LIMIT $2::int FOR UPDATE OF j SKIP LOCKED
      ), delivered AS (
        UPDATE ${s}.jobs j SET visible_at = ${storeNow(4)} + ${millis("$3::float8")},
          receive_count = j.receive_count + 1
        FROM picked WHERE j.id = picked.id
        RETURNING j.id, j.type, j.version, j.priority, j.receive_count, j.run_after, j.seq
      )
      SELECT d.id::text AS id, d.type, d.version, d.priority, d.receive_count FROM delivered d
      ORDER BY d.priority DESC, d.run_after, d.seq`,
    /**
     * transport publish. Inputs: $1 ids, $2 queue, $3 delays ms (one per id), $4 now. Each queued job of the queue
     * becomes visible after its delay, or later if it is hidden beyond that already (a delivery in flight, a defer):
     * publish never brings a hidden row forward. `greatest` ignores a NULL visible_at (never hidden, or un-hidden by
     * a Store transition to queued). One wake-up per queue (Postgres folds equal notifications of a transaction).
     */
    publish: `WITH input AS (
        SELECT * FROM unnest($1::uuid[], $3::float8[]) AS i(id, delay_ms)
      ), upd AS (
        UPDATE ${s}.jobs j
        SET visible_at = greatest(j.visible_at, ${storeNow(4)} + ${millis("i.delay_ms")})
        FROM input i WHERE j.id = i.id AND j.queue = $2 AND j.state = 'queued'
        RETURNING j.queue
      )
      SELECT pg_notify('slowcall_jobs', '${schema}:' || upd.queue) FROM upd`,
    /**
     * transport extend/defer. Inputs: $1 ids, $2 receive counts (the receipts), $3 hidden-for ms, $4 now (one
     * element of $1..$3 per item). A receipt that is not the row's latest, or a row no longer queued, is skipped.
     */
    hide: `UPDATE ${s}.jobs j SET visible_at = ${storeNow(4)} + ${millis("i.ms")}
      FROM unnest($1::uuid[], $2::int[], $3::float8[]) AS i(id, receive_count, ms)
      WHERE j.id = i.id AND j.receive_count = i.receive_count AND j.state = 'queued'`,
    /**
     * outbox pick. Inputs: $1 limit. Committed queued jobs not yet handed to the external transport, oldest
     * first, locked with SKIP LOCKED for the relay's transaction so two relays split the work.
     */
    outboxPick: `SELECT j.id::text AS id, j.queue, j.type, j.version, j.priority, j.tenant, j.trace_id, j.attempts,
        GREATEST(0, ${ms("j.run_after")} - ${ms("now()")}) AS delay_ms
      FROM ${s}.queued_entries e JOIN ${s}.jobs j ON j.id = e.job_id
      WHERE e.published_at IS NULL AND j.state = 'queued' AND j.published_at IS NULL
      ORDER BY e.created_at LIMIT $1::int FOR UPDATE OF j SKIP LOCKED`,
    /** outbox mark. Inputs: $1 ids. */
    outboxMark: `UPDATE ${s}.jobs SET published_at = now() WHERE id = ANY($1::uuid[])`,
    /**
     * purge. Inputs: $1 queue, $2 created-before ms, $3 states (finished ones only), $4 limit. The queue's oldest
     * finished jobs created strictly before the cutoff, at most $4, picked with FOR UPDATE SKIP LOCKED (a row
     * another transaction is writing is left for the next chunk) and deleted in the same statement; their attempts
     * and charges are deleted by the same statement (there are no foreign keys to cascade, migration 0014; a charge
     * racing the purge waits for the job row's lock and then finds no job), and their request keys are free again. Under READ COMMITTED a
     * picked row is re-checked after its lock, so a job that left its finished state (a replayed dead letter) stays.
     * Reads the purge order of `finished_entries` (migration 0015). The pick is the rule of `purgeTargets` in @slowcall/testing's StoreModel
     * (oldest first across the states asked for, insertion order breaking ties). Returns the deleted ids in that
     * order (a DELETE's RETURNING has none of its own).
     */
    purge: `WITH picked AS (
        SELECT j.id FROM ${s}.finished_entries e JOIN ${s}.jobs j ON j.id = e.job_id
        WHERE e.queue = $1 AND e.state = ANY($3::text[]) AND e.created_at < ${ts("$2")}
          AND j.state IN ('succeeded', 'failed', 'abandoned') AND j.state = ANY($3::text[])
          AND j.created_at < ${ts("$2")}
        ORDER BY e.created_at, e.seq LIMIT $4::int FOR UPDATE OF j SKIP LOCKED
      ), deleted AS (
        DELETE FROM ${s}.jobs j USING picked WHERE j.id = picked.id RETURNING j.id, j.created_at, j.seq
      ), attempts_deleted AS (
        DELETE FROM ${s}.attempts a USING deleted d WHERE a.job_id = d.id
      ), charges_deleted AS (
        DELETE FROM ${s}.charges c USING deleted d WHERE c.job_id = d.id
      )
      SELECT d.id::text AS id FROM deleted d ORDER BY d.created_at, d.seq`
  })

/**
 * Opens every statement with a `/* slowcall:<name> *\/` comment: visible in pg_stat_activity and server logs, and
 * lets a fault proxy recognise a statement on the wire.
 */
const tagged = <T extends { readonly schema: string }>(statements: T): T =>
  Object.fromEntries(
    Object.entries(statements).map(([name, text]) => [
      name,
      name === "schema" ? text : `/* slowcall:${name} */ ${text}`
    ])
  ) as T

/** @internal */
export type Statements = ReturnType<typeof makeStatements>
