/**
 * Every statement PgStore and PgTransport run, built once per schema. Each protocol step is ONE statement, so it is
 * atomic without an explicit transaction and works unchanged inside a caller's transaction.
 *
 * Conventions shared by all statements:
 * - Store time is `coalesce(to_timestamp($now / 1000), now())`: the server's clock, or the test override.
 * - Timestamps leave as epoch milliseconds (`extract(epoch ...) * 1000`, microsecond fraction kept).
 * - `updated_at = greatest(now, updated_at + 1 microsecond)` on every accepted write: strictly monotonic per job.
 * - Conditional writes are plain `UPDATE ... WHERE <condition>` on one row. Under READ COMMITTED, an UPDATE that
 *   meets a row changed by a concurrent transaction waits for it, then re-checks the WHERE clause and re-evaluates
 *   SET against the newest version. That is the whole locking strategy: no explicit lock, no isolation upgrade.
 * - A write that matched nothing returns the row as the statement's snapshot saw it, so the caller can tell why
 *   (LeaseLost with the current token, Busy, NotDue, Settled). When that snapshot contradicts the miss (a
 *   concurrent write won the row in between), the caller runs the statement again.
 *
 * @internal
 */

/** Epoch milliseconds of a timestamptz expression. */
const ms = (expr: string): string => `(extract(epoch from ${expr}) * 1000)::float8`

/** Store time: the test override in parameter `$n`, else the server's `now()`. */
const storeNow = (n: number): string => `coalesce(to_timestamp($${n}::float8 / 1000), now())`

const ts = (n: number): string => `to_timestamp($${n}::float8 / 1000)`

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

/** The job record's columns, converted for the boundary. */
export const jobColumns = (a: string): string => jobColumnList(a).join(", ")

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

/** The settled-or-run verdict of a claim on row `j`, in the contract's order. Parameter 5 is the estimate. */
const claimVerdict = (s: string, now: string): string => `(CASE
    WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
    WHEN j.deadline_at IS NOT NULL AND j.deadline_at <= ${now} THEN 'deadline'
    WHEN j.attempts - j.attempts_base >= j.max_attempts THEN 'exhausted'
    WHEN j.budget_cents IS NOT NULL AND (
      j.cost_cents >= j.budget_cents OR
      j.cost_cents + coalesce($5::float8, (
        SELECT max(spent.total) FROM (
          SELECT sum(c.amount_cents) AS total FROM ${s}.charges c WHERE c.job_id = j.id GROUP BY c.token
        ) spent
      ), 0) > j.budget_cents
    ) THEN 'budget'
    ELSE 'claim'
  END)`

/** A fenced single-row update plus the attempt row it ends, falling back to the current row on a miss. */
const fenced = (
  s: string,
  sets: string,
  attempt: { readonly outcome: string; readonly errorClass: string; readonly evidence: string } | null
): string => {
  const now = storeNow(3)
  const att =
    attempt === null
      ? ""
      : `, att AS (
    UPDATE ${s}.attempts a SET ended_at = ${now}, outcome = ${attempt.outcome},
      error_class = ${attempt.errorClass}, evidence = ${attempt.evidence}
    FROM upd WHERE a.job_id = upd.id AND a.token = upd.lease_token
  )`
  return `WITH upd AS (
    UPDATE ${s}.jobs j SET ${sets}, updated_at = ${bump("j", now)}
    WHERE j.id = $1::uuid AND j.state = 'running' AND j.lease_token = $2::int
    RETURNING j.*
  )${att}
  SELECT true AS applied, ${jobColumns("upd")} FROM upd
  UNION ALL
  SELECT false AS applied, ${jobColumns("j")} FROM ${s}.jobs j
  WHERE j.id = $1::uuid AND NOT EXISTS (SELECT 1 FROM upd)`
}

const leaseCleared = "lease_owner = NULL, lease_until = NULL"

/**
 * The statements for one schema.
 *
 * @internal
 */
export const makeStatements = (schema: string) => {
  const s = quoteSchema(schema)
  return tagged({
    schema: s,
    /**
     * submit. Inputs: $1 id, $2 queue, $3 tenant, $4 type, $5 version, $6 request_key, $7 input_hash, $8 input
     * (JSON text), $9 input_ref, $10 priority, $11 run_after ms, $12 deadline ms, $13 budget, $14 max_attempts,
     * $15 trace_id, $16 now. Outputs: `created` and the job (new, or the one holding the key). Locking: the unique
     * index on (queue, tenant, request_key) NULLS NOT DISTINCT arbitrates concurrent submits; ON CONFLICT DO
     * NOTHING waits for the winner. A miss with no visible holder means the winner committed after our snapshot.
     */
    submit: `WITH ins AS (
      INSERT INTO ${s}.jobs (id, queue, tenant, type, version, request_key, input_hash, input, input_ref, state,
        max_attempts, run_after, priority, deadline_at, budget_cents, trace_id, created_at, updated_at)
      VALUES ($1::uuid, $2, $3, $4, $5::int, $6, $7, $8::jsonb, $9, 'queued', $14::int,
        coalesce(${ts(11)}, ${storeNow(16)}), coalesce($10::int, 0), ${ts(12)}, $13::float8, $15,
        ${storeNow(16)}, ${storeNow(16)})
      ON CONFLICT (queue, tenant, request_key) WHERE request_key IS NOT NULL DO NOTHING
      RETURNING *
    )
    SELECT true AS created, ${jobColumns("ins")} FROM ins
    UNION ALL
    SELECT false AS created, ${jobColumns("j")} FROM ${s}.jobs j
    WHERE NOT EXISTS (SELECT 1 FROM ins) AND $6::text IS NOT NULL
      AND j.queue = $2 AND j.tenant IS NOT DISTINCT FROM $3::text AND j.request_key = $6`,
    /**
     * claim. Inputs: $1 id, $2 now, $3 owner, $4 lease ms, $5 estimate. Outputs: `applied`, `takeover`, `now_ms`
     * and the job (after the write, or as it stood when nothing was claimable). One UPDATE whose WHERE is the
     * claimable condition; the SET picks between running the job and settling it (cancelled, deadline, attempts
     * exhausted, budget). Sibling statements end the previous holder's attempt (`expired`) and append the new one.
     */
    claim: (() => {
      const now = storeNow(2)
      const v = claimVerdict(s, now)
      return `WITH upd AS (
        UPDATE ${s}.jobs j SET
          state = CASE ${v} WHEN 'claim' THEN 'running' WHEN 'exhausted' THEN 'failed' ELSE 'abandoned' END,
          abandon_reason = CASE ${v} WHEN 'cancelled' THEN 'cancelled' WHEN 'deadline' THEN 'deadline'
            WHEN 'budget' THEN 'budget' ELSE NULL END,
          error_class = CASE WHEN ${v} = 'exhausted' AND j.state = 'running' THEN 'lease_expired' ELSE j.error_class END,
          failed_at = CASE WHEN ${v} = 'exhausted' THEN ${now} ELSE j.failed_at END,
          attempts = CASE WHEN ${v} = 'claim' THEN j.attempts + 1 ELSE j.attempts END,
          lease_token = CASE WHEN ${v} = 'claim' THEN j.lease_token + 1 ELSE j.lease_token END,
          lease_owner = CASE WHEN ${v} = 'claim' THEN $3 ELSE NULL END,
          lease_until = CASE WHEN ${v} = 'claim' THEN ${now} + $4::float8 * interval '1 millisecond' ELSE NULL END,
          cancel_requested_at = CASE WHEN ${v} = 'claim' THEN NULL ELSE j.cancel_requested_at END,
          updated_at = ${bump("j", now)}
        WHERE j.id = $1::uuid AND (
          (j.state = 'queued' AND j.run_after <= ${now}) OR (j.state = 'running' AND j.lease_until < ${now})
        )
        RETURNING j.*
      ), ended AS (
        UPDATE ${s}.attempts a SET outcome = 'expired', ended_at = ${now}, error_class = 'lease_expired'
        FROM upd WHERE a.job_id = upd.id AND a.outcome = 'running'
        RETURNING a.job_id
      ), att AS (
        INSERT INTO ${s}.attempts (job_id, token, worker, started_at, outcome)
        SELECT upd.id, upd.lease_token, $3, ${now}, 'running' FROM upd WHERE upd.state = 'running'
      )
      SELECT true AS applied, EXISTS (SELECT 1 FROM ended) AS takeover, ${ms(now)} AS now_ms, ${jobColumns("upd")}
      FROM upd
      UNION ALL
      SELECT false AS applied, false AS takeover, ${ms(now)} AS now_ms, ${jobColumns("j")} FROM ${s}.jobs j
      WHERE j.id = $1::uuid AND NOT EXISTS (SELECT 1 FROM upd)`
    })(),
    /** heartbeat. Inputs: $1 id, $2 token, $3 now, $4 lease ms, $5 progress. Fenced; extends the lease. */
    heartbeat: fenced(
      s,
      `lease_until = ${storeNow(3)} + $4::float8 * interval '1 millisecond', progress = coalesce($5::float8, j.progress)`,
      null
    ),
    /** complete. Inputs: $1 id, $2 token, $3 now, $4 result (JSON text). Fenced; running -> succeeded. */
    complete: fenced(
      s,
      `state = 'succeeded', result = $4::jsonb, progress = 1, ${leaseCleared}, error_class = NULL, last_error = NULL`,
      { outcome: "'succeeded'", errorClass: "NULL", evidence: "NULL" }
    ),
    /** fail. Inputs: $1 id, $2 token, $3 now, $4 error class, $5 evidence. Fenced; running -> failed. */
    fail: fenced(
      s,
      `state = 'failed', error_class = $4, last_error = $5, failed_at = ${storeNow(3)}, ${leaseCleared}`,
      { outcome: "'failed'", errorClass: "$4", evidence: "$5" }
    ),
    /** retry. Inputs: $1 id, $2 token, $3 now, $4 error class, $5 evidence, $6 run_after ms. Fenced. */
    retry: fenced(
      s,
      `state = 'queued', error_class = $4, last_error = $5, run_after = ${ts(6)}, visible_at = NULL, ${leaseCleared}`,
      { outcome: "'retried'", errorClass: "$4", evidence: "$5" }
    ),
    /** abandon. Inputs: $1 id, $2 token, $3 now, $4 reason, $5 error class, $6 evidence. Fenced. */
    abandon: fenced(
      s,
      `state = 'abandoned', abandon_reason = $4, error_class = coalesce($5, j.error_class),
       last_error = coalesce($6, j.last_error), ${leaseCleared}`,
      { outcome: "'abandoned'", errorClass: "$5", evidence: "$6" }
    ),
    /** release. Inputs: $1 id, $2 token, $3 now. Fenced; hands the attempt back (attempts_base + 1). */
    release: fenced(
      s,
      `state = 'queued', run_after = ${storeNow(3)}, attempts_base = j.attempts_base + 1, visible_at = NULL,
       ${leaseCleared}`,
      { outcome: "'released'", errorClass: "NULL", evidence: "NULL" }
    ),
    /**
     * charge. Inputs: $1 id, $2 call id, $3 token, $4 amount, $5 settled, $6 now. Outputs: `found`, `cost_cents`.
     * Not fenced. ON CONFLICT (job_id, call_id) makes the ledger row the arbiter: a new call id inserts, a
     * settlement of an unsettled row updates, anything else matches no row. The job's cost moves by exactly the
     * delta the ledger row recorded, in the same statement, under the job row's lock.
     */
    charge: (() => {
      const now = storeNow(6)
      return `WITH target AS (
        SELECT id FROM ${s}.jobs WHERE id = $1::uuid
      ), c AS (
        INSERT INTO ${s}.charges AS c (job_id, call_id, token, amount_cents, settled, applied_delta_cents,
          created_at, updated_at)
        SELECT target.id, $2, $3::int, $4::float8, $5::boolean, $4::float8, ${now}, ${now} FROM target
        ON CONFLICT (job_id, call_id) DO UPDATE SET amount_cents = EXCLUDED.amount_cents, settled = true,
          applied_delta_cents = EXCLUDED.amount_cents - c.amount_cents,
          updated_at = greatest(${now}, c.updated_at + interval '1 microsecond')
        WHERE c.settled = false AND EXCLUDED.settled = true
        RETURNING c.applied_delta_cents
      ), upd AS (
        UPDATE ${s}.jobs j SET cost_cents = j.cost_cents + c.applied_delta_cents, updated_at = ${bump("j", now)}
        FROM c WHERE j.id = $1::uuid
        RETURNING j.cost_cents
      )
      SELECT EXISTS (SELECT 1 FROM target) AS found,
        coalesce((SELECT cost_cents FROM upd), (SELECT cost_cents FROM ${s}.jobs WHERE id = $1::uuid)) AS cost_cents`
    })(),
    /**
     * cancel. Inputs: $1 id, $2 tenant, $3 now. queued -> abandoned(cancelled); running -> cancel requested. A
     * running job whose cancel is already requested is left as it is (no write). Outputs: `applied` and the job; a
     * miss returns the row (terminal, or already requested) or nothing (unknown, or another tenant's).
     */
    cancel: (() => {
      const now = storeNow(3)
      return `WITH upd AS (
        UPDATE ${s}.jobs j SET
          state = CASE WHEN j.state = 'queued' THEN 'abandoned' ELSE j.state END,
          abandon_reason = CASE WHEN j.state = 'queued' THEN 'cancelled' ELSE j.abandon_reason END,
          cancel_requested_at = CASE WHEN j.state = 'running' THEN coalesce(j.cancel_requested_at, ${now})
            ELSE j.cancel_requested_at END,
          updated_at = ${bump("j", now)}
        WHERE j.id = $1::uuid AND ($2::text IS NULL OR j.tenant = $2)
          AND (j.state = 'queued' OR (j.state = 'running' AND j.cancel_requested_at IS NULL))
        RETURNING j.*
      )
      SELECT true AS applied, ${jobColumns("upd")} FROM upd
      UNION ALL
      SELECT false AS applied, ${jobColumns("j")} FROM ${s}.jobs j
      WHERE j.id = $1::uuid AND ($2::text IS NULL OR j.tenant = $2) AND NOT EXISTS (SELECT 1 FROM upd)`
    })(),
    /** get. Inputs: $1 id, $2 tenant. */
    get: `SELECT ${jobColumns("j")} FROM ${s}.jobs j WHERE j.id = $1::uuid AND ($2::text IS NULL OR j.tenant = $2)`,
    /** list. Inputs: $1 queue, $2 tenant, $3 state, $4 type, $5 limit. Newest first. */
    list: `SELECT ${jobColumns("j")} FROM ${s}.jobs j
      WHERE ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2)
        AND ($3::text IS NULL OR j.state = $3) AND ($4::text IS NULL OR j.type = $4)
      ORDER BY j.created_at DESC, j.seq DESC LIMIT $5::int`,
    /** attempts. Inputs: $1 id. Token order. */
    attempts: `SELECT a.job_id::text AS job_id, a.token, a.worker, ${ms("a.started_at")} AS started_at,
        ${ms("a.ended_at")} AS ended_at, a.outcome, a.error_class, a.evidence
      FROM ${s}.attempts a WHERE a.job_id = $1::uuid ORDER BY a.token`,
    /** charges. Inputs: $1 id. Insertion order. */
    charges: `SELECT c.job_id::text AS job_id, c.call_id, c.token, c.amount_cents, c.settled,
        ${ms("c.created_at")} AS created_at, ${ms("c.updated_at")} AS updated_at
      FROM ${s}.charges c WHERE c.job_id = $1::uuid ORDER BY c.seq`,
    /** dead letters. Inputs: $1 queue, $2 tenant, $3 error class, $4 type, $5 limit. Newest first. */
    deadLetterJobs: `SELECT ${jobColumns("j")} FROM ${s}.jobs j
      WHERE j.state = 'failed' AND ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2)
        AND ($3::text IS NULL OR j.error_class = $3) AND ($4::text IS NULL OR j.type = $4)
      ORDER BY j.updated_at DESC, j.seq DESC LIMIT $5::int`,
    /** dead-letter groups. Inputs: $1 queue, $2 tenant, $3 error class, $4 type. Largest count first. */
    deadLetterGroups: `SELECT j.error_class, j.input_hash, count(*)::int AS count, sum(j.cost_cents)::float8 AS cost_cents
      FROM ${s}.jobs j
      WHERE j.state = 'failed' AND ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2)
        AND ($3::text IS NULL OR j.error_class = $3) AND ($4::text IS NULL OR j.type = $4)
      GROUP BY j.error_class, j.input_hash
      ORDER BY count(*) DESC, sum(j.cost_cents) DESC, j.input_hash, j.error_class NULLS LAST`,
    /**
     * replay. Inputs: $1 ids (JSON array text, or NULL: every failed job), $2 queue, $3 tenant, $4 error class,
     * $5 type, $6 limit (NULL: no limit), $7 now. Filters apply to explicit ids too. failed -> queued, due now, a
     * fresh run (attempts_base = attempts) with no leftover cancel request. The UPDATE re-checks `state = 'failed'`
     * on the newest row version, so a job that left failed meanwhile is skipped. Outputs: the ids replayed (each
     * once, however often it was named).
     */
    replay: (() => {
      const now = storeNow(7)
      return `WITH targets AS (
        SELECT j.id FROM ${s}.jobs j
        WHERE j.state = 'failed'
          AND ($1::jsonb IS NULL OR j.id IN (SELECT x::uuid FROM jsonb_array_elements_text($1::jsonb) x))
          AND ($2::text IS NULL OR j.queue = $2) AND ($3::text IS NULL OR j.tenant = $3)
          AND ($4::text IS NULL OR j.error_class = $4) AND ($5::text IS NULL OR j.type = $5)
        ORDER BY j.seq LIMIT $6::int
      ), upd AS (
        UPDATE ${s}.jobs j SET state = 'queued', run_after = ${now}, attempts_base = j.attempts, ${leaseCleared},
          cancel_requested_at = NULL, visible_at = NULL, published_at = NULL, updated_at = ${bump("j", now)}
        FROM targets WHERE j.id = targets.id AND j.state = 'failed'
        RETURNING j.id, j.seq
      )
      SELECT upd.id::text AS id FROM upd ORDER BY upd.seq`
    })(),
    /**
     * sweep. Inputs: $1 queue, $2 republish-after ms, $3 limit, $4 now. Outputs: rows of (kind, job), requeued and
     * abandoned first in the order they were written, then stale jobs least recently touched first. `$3` bounds the
     * whole pass: expired leases take what they need first, overdue queued jobs get what is left, stale jobs the
     * rest. Every candidate set is picked with FOR UPDATE SKIP LOCKED, so two sweepers split the work instead of
     * queueing or doing it twice. Expired leases: one UPDATE settles or requeues each and ends its attempt row
     * `expired`. Queued jobs past their deadline: abandoned. Stale queued jobs (last touched, the later of
     * updated_at and republished_at, at least $2 ms ago): republished_at = now, which leaves updated_at alone.
     * The three sets never share a row (running vs queued, past vs before the deadline), so no row is written twice.
     */
    sweep: (() => {
      const now = storeNow(4)
      const touched = (a: string) => `greatest(${a}.updated_at, ${a}.republished_at)`
      const noJob = jobColumnList("j")
        .map(() => "NULL")
        .join(", ")
      return `WITH expired AS (
        SELECT j.id FROM ${s}.jobs j
        WHERE j.state = 'running' AND j.lease_until < ${now} AND ($1::text IS NULL OR j.queue = $1)
        ORDER BY j.seq LIMIT $3::int FOR UPDATE SKIP LOCKED
      ), requeue AS (
        UPDATE ${s}.jobs j SET
          state = CASE
            WHEN j.cancel_requested_at IS NOT NULL THEN 'abandoned'
            WHEN j.deadline_at IS NOT NULL AND j.deadline_at <= ${now} THEN 'abandoned'
            WHEN j.attempts - j.attempts_base >= j.max_attempts THEN 'failed'
            ELSE 'queued' END,
          abandon_reason = CASE
            WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
            WHEN j.deadline_at IS NOT NULL AND j.deadline_at <= ${now} THEN 'deadline'
            ELSE NULL END,
          error_class = CASE
            WHEN j.cancel_requested_at IS NULL AND NOT (j.deadline_at IS NOT NULL AND j.deadline_at <= ${now})
              AND j.attempts - j.attempts_base >= j.max_attempts THEN 'lease_expired'
            ELSE j.error_class END,
          failed_at = CASE
            WHEN j.cancel_requested_at IS NULL AND NOT (j.deadline_at IS NOT NULL AND j.deadline_at <= ${now})
              AND j.attempts - j.attempts_base >= j.max_attempts THEN ${now}
            ELSE j.failed_at END,
          run_after = CASE
            WHEN j.cancel_requested_at IS NULL AND NOT (j.deadline_at IS NOT NULL AND j.deadline_at <= ${now})
              AND j.attempts - j.attempts_base < j.max_attempts THEN ${now}
            ELSE j.run_after END,
          visible_at = NULL, ${leaseCleared}, updated_at = ${bump("j", now)}
        FROM expired WHERE j.id = expired.id AND j.state = 'running' AND j.lease_until < ${now}
        RETURNING j.id, j.state, j.lease_token, j.seq
      ), ended AS (
        UPDATE ${s}.attempts a SET outcome = 'expired', ended_at = ${now}, error_class = 'lease_expired'
        FROM requeue WHERE a.job_id = requeue.id AND a.token = requeue.lease_token AND a.outcome = 'running'
      ), overdue AS (
        SELECT j.id FROM ${s}.jobs j
        WHERE j.state = 'queued' AND j.deadline_at IS NOT NULL AND j.deadline_at <= ${now}
          AND ($1::text IS NULL OR j.queue = $1)
        ORDER BY j.seq LIMIT greatest(0, $3::int - (SELECT count(*) FROM requeue)) FOR UPDATE SKIP LOCKED
      ), abandoned AS (
        UPDATE ${s}.jobs j SET state = 'abandoned', abandon_reason = 'deadline', updated_at = ${bump("j", now)}
        FROM overdue WHERE j.id = overdue.id AND j.state = 'queued' AND j.deadline_at <= ${now}
        RETURNING j.id, j.seq
      ), picked AS (
        SELECT j.id, ${touched("j")} AS touched, j.seq FROM ${s}.jobs j
        WHERE j.state = 'queued' AND j.run_after <= ${now}
          AND ${touched("j")} <= ${now} - $2::float8 * interval '1 millisecond'
          AND (j.deadline_at IS NULL OR j.deadline_at > ${now})
          AND ($1::text IS NULL OR j.queue = $1)
        ORDER BY ${touched("j")}, j.seq
        LIMIT greatest(0, $3::int - (SELECT count(*) FROM requeue) - (SELECT count(*) FROM abandoned))
        FOR UPDATE SKIP LOCKED
      ), stale AS (
        UPDATE ${s}.jobs j SET republished_at = ${now}
        FROM picked WHERE j.id = picked.id AND j.state = 'queued'
        RETURNING j.*, picked.touched AS touched
      )
      SELECT CASE requeue.state WHEN 'queued' THEN 'requeued' WHEN 'failed' THEN 'expiredFailed' ELSE 'abandoned' END
        AS kind, requeue.id::text AS job_id, 1 AS grp, NULL::timestamptz AS ord_touched, requeue.seq AS ord_seq,
        NULL::text AS id, NULL::text AS queue, NULL::text AS tenant,
        NULL::text AS type, NULL::int AS version, NULL::text AS request_key, NULL::text AS input_hash,
        NULL::jsonb AS input, NULL::text AS input_ref, NULL::text AS state, NULL::text AS abandon_reason,
        NULL::int AS attempts, NULL::int AS attempts_base, NULL::int AS max_attempts, NULL::int AS lease_token,
        NULL::text AS lease_owner, NULL::float8 AS lease_until, NULL::float8 AS run_after, NULL::int AS priority,
        NULL::float8 AS deadline_at, NULL::float8 AS budget_cents, NULL::float8 AS cost_cents,
        NULL::text AS error_class, NULL::text AS last_error, NULL::float8 AS progress, NULL::jsonb AS result,
        NULL::float8 AS cancel_requested_at, NULL::text AS trace_id, NULL::float8 AS created_at,
        NULL::float8 AS updated_at
      FROM requeue
      UNION ALL
      SELECT 'abandoned', abandoned.id::text, 2, NULL, abandoned.seq, ${noJob} FROM abandoned
      UNION ALL
      SELECT 'stale', stale.id::text, 3, stale.touched, stale.seq, ${jobColumns("stale")} FROM stale
      ORDER BY grp, ord_touched, ord_seq`
    })(),
    /** stats by state. Inputs: $1 queue, $2 tenant. */
    statsByState: `SELECT j.state, count(*)::int AS count FROM ${s}.jobs j
      WHERE ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2) GROUP BY j.state`,
    /** oldest due queued job per priority. Inputs: $1 queue, $2 tenant. */
    statsOldest: `SELECT j.priority, ${ms("min(j.run_after)")} AS oldest FROM ${s}.jobs j
      WHERE j.state = 'queued' AND j.run_after <= now() AND ($1::text IS NULL OR j.queue = $1)
        AND ($2::text IS NULL OR j.tenant = $2)
      GROUP BY j.priority`,
    /** cost by error class and the failure count since $3. Inputs: $1 queue, $2 tenant, $3 failed-since ms. */
    statsCost: `SELECT j.error_class, sum(j.cost_cents)::float8 AS cost_cents,
        count(*) FILTER (WHERE j.state = 'failed' AND j.failed_at >= ${ts(3)})::int AS failed
      FROM ${s}.jobs j
      WHERE ($1::text IS NULL OR j.queue = $1) AND ($2::text IS NULL OR j.tenant = $2)
      GROUP BY j.error_class`,
    now: `SELECT ${ms("now()")} AS now_ms`,
    /**
     * transport receive. Inputs: $1 queue, $2 max, $3 visibility ms, $4 now. Due queued jobs not hidden by an
     * earlier delivery, in priority order, picked with FOR UPDATE SKIP LOCKED so concurrent receivers take disjoint
     * batches; each is hidden for the visibility time and its receive count (the receipt) goes up.
     */
    receive: `WITH picked AS (
        SELECT j.id FROM ${s}.jobs j
        WHERE j.queue = $1 AND j.state = 'queued' AND j.run_after <= ${storeNow(4)}
          AND (j.visible_at IS NULL OR j.visible_at <= ${storeNow(4)})
        ORDER BY j.priority DESC, j.run_after, j.seq LIMIT $2::int FOR UPDATE SKIP LOCKED
      ), delivered AS (
        UPDATE ${s}.jobs j SET visible_at = ${storeNow(4)} + $3::float8 * interval '1 millisecond',
          receive_count = j.receive_count + 1
        FROM picked WHERE j.id = picked.id
        RETURNING j.id, j.type, j.version, j.priority, j.receive_count, j.run_after, j.seq
      )
      SELECT d.id::text AS id, d.type, d.version, d.priority, d.receive_count FROM delivered d
      ORDER BY d.priority DESC, d.run_after, d.seq`,
    /**
     * transport publish. Inputs: $1 id, $2 queue, $3 delay ms, $4 now. A queued job becomes visible after the
     * delay, or later if it is hidden beyond that already (a delivery in flight, a defer): publish never brings a
     * hidden row forward. `greatest` ignores a NULL visible_at (never hidden, or un-hidden by a Store transition to
     * queued).
     */
    publish: `WITH upd AS (
        UPDATE ${s}.jobs j
        SET visible_at = greatest(j.visible_at, ${storeNow(4)} + $3::float8 * interval '1 millisecond')
        WHERE j.id = $1::uuid AND j.queue = $2 AND j.state = 'queued'
        RETURNING j.queue
      )
      SELECT pg_notify('slowcall_jobs', '${schema}:' || upd.queue) FROM upd`,
    /** transport extend/defer. Inputs: $1 id, $2 receive count (the receipt), $3 hidden-for ms, $4 now. */
    hide: `UPDATE ${s}.jobs j SET visible_at = ${storeNow(4)} + $3::float8 * interval '1 millisecond'
      WHERE j.id = $1::uuid AND j.receive_count = $2::int AND j.state = 'queued'`,
    /**
     * outbox pick. Inputs: $1 limit. Committed queued jobs not yet handed to the external transport, oldest
     * first, locked with SKIP LOCKED for the relay's transaction so two relays split the work.
     */
    outboxPick: `SELECT j.id::text AS id, j.queue, j.type, j.version, j.priority,
        GREATEST(0, ${ms("j.run_after")} - ${ms("now()")}) AS delay_ms
      FROM ${s}.jobs j WHERE j.state = 'queued' AND j.published_at IS NULL
      ORDER BY j.created_at LIMIT $1::int FOR UPDATE SKIP LOCKED`,
    /** outbox mark. Inputs: $1 ids (JSON array text). */
    outboxMark: `UPDATE ${s}.jobs SET published_at = now()
      WHERE id IN (SELECT x::uuid FROM jsonb_array_elements_text($1::jsonb) x)`
  })
}

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
