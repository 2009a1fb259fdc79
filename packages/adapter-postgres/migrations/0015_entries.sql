-- 0015_entries: the orders the store picks from leave the job record, so claims, heartbeats and settlements are HOT
-- updates of jobs.
--
-- What: three tables of entries, one entry per job in the matching state, written by statement-level triggers on
-- jobs from the rows each statement changed (its transition tables):
-- - queued_entries: a queued job's claim order, fair order, deadline, last touch and outbox mark;
-- - lease_entries: a running job's lease end;
-- - finished_entries: a finished job's purge order, dead-letter group and failure time.
-- The nine indexes of jobs that named a column some transition changes (state in a predicate, lease_until,
-- updated_at, published_at, failed_at, deadline_at as keys) are dropped; each has its counterpart on an entry table.
-- New pages of jobs keep half their space free. Existing rows get their entries in this migration.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only. The
-- first CREATE TRIGGER locks jobs against writes (SHARE ROW EXCLUSIVE) until this transaction commits, after waiting
-- for the writes in progress; the backfill runs under that lock. So a job written by another process either was
-- committed before (no trigger fired, the backfill reads it) or waits and fires the triggers after the commit: never
-- neither, never both.
--
-- Outputs: three tables, three trigger functions and their triggers, nine indexes of jobs fewer.
--
-- Why: PostgreSQL updates a row without touching any index (a HOT update) only when no index of the table names a
-- changed column, in its key, an expression or a predicate, and when the row's page has room for the new version.
-- Every claim, heartbeat, charge and settlement changed a column one of the nine indexes named, so each wrote a new
-- entry into every index of jobs, the primary key's at a random place of a table that outgrows shared_buffers behind
-- a large backlog (W4 of the peer benchmark). With only columns that never change indexed on jobs, the record's
-- updates are HOT; an entry table pays an index entry only where a job enters its order (a submit, a claim, an
-- end), and a job leaving an order is a heap delete found through that order's key, which writes no index entry.
-- Counted with bench/pg-writes.mjs before and after (the benchmarks page, "Toward HOT job transitions").
--
-- Invariant: a job has exactly one entry, in the table of its state (queued, running, or one of the finished
-- three), none in the others, and the entry's columns equal the job's. test/entries.ts checks it after the migration
-- test, the sequential and concurrent properties, and scripts/property.ts. The store's statements only pick through
-- entries and then lock and re-check the job row, so an entry read from a snapshot that a concurrent transaction has
-- since moved is passed over as a changed row was before.

CREATE TABLE __SCHEMA__.queued_entries (
  job_id      uuid NOT NULL,
  queue       text NOT NULL,
  tenant      text,
  priority    integer NOT NULL,
  run_after   timestamptz NOT NULL,
  seq         bigint NOT NULL,
  deadline_at timestamptz,
  -- Protocol.isStale's last touch: the later of updated_at and republished_at.
  touched_at  timestamptz NOT NULL,
  created_at  timestamptz NOT NULL,
  published_at timestamptz
);
-- Protocol.claimNextOrder within a queue (claimNext, transport receive, the queued statistics).
CREATE INDEX queued_entries_claim_order ON __SCHEMA__.queued_entries (queue, priority DESC, run_after, seq);
-- The fair claim's order per tenant, and its loose scan over the tenants with queued jobs.
CREATE INDEX queued_entries_fair_order ON __SCHEMA__.queued_entries (queue, tenant, priority DESC, run_after, seq);
-- The sweep's overdue queued jobs.
CREATE INDEX queued_entries_deadline ON __SCHEMA__.queued_entries (deadline_at) WHERE deadline_at IS NOT NULL;
-- The sweep's stale jobs, least recently touched first.
CREATE INDEX queued_entries_touched ON __SCHEMA__.queued_entries (queue, touched_at, seq);
-- The outbox relay's unpublished jobs, oldest first.
CREATE INDEX queued_entries_unpublished ON __SCHEMA__.queued_entries (created_at) WHERE published_at IS NULL;

CREATE TABLE __SCHEMA__.lease_entries (
  job_id      uuid NOT NULL,
  queue       text NOT NULL,
  lease_until timestamptz NOT NULL,
  seq         bigint NOT NULL
);
-- Lapsed leases, for claimNext's takeover and the sweep. A claim gives every job it takes the same lease end, so the
-- key carries seq too: a job's entry is then found by its own key, not among every entry of its claim.
CREATE INDEX lease_entries_lease_until ON __SCHEMA__.lease_entries (lease_until, seq);

CREATE TABLE __SCHEMA__.finished_entries (
  job_id      uuid NOT NULL,
  queue       text NOT NULL,
  state       text NOT NULL,
  created_at  timestamptz NOT NULL,
  seq         bigint NOT NULL,
  error_class text,
  input_hash  text NOT NULL,
  failed_at   timestamptz
);
-- Purge: a queue's oldest finished jobs.
CREATE INDEX finished_entries_created ON __SCHEMA__.finished_entries (queue, created_at, seq);
-- Dead letters and their groups.
CREATE INDEX finished_entries_dead_letters ON __SCHEMA__.finished_entries (queue, error_class, input_hash)
  WHERE state = 'failed';
-- Failures since a time (Query.stats).
CREATE INDEX finished_entries_failed_at ON __SCHEMA__.finished_entries (failed_at) WHERE state = 'failed';

-- How the functions find entries: one statement per row, by the entry's full key, with sequential scans priced out
-- (SET enable_seqscan = off, for the functions' own statements only). A session plans a function's statements once
-- and keeps the plans. Set-based deletes (entries USING the changed rows) were planned while an entry table was empty
-- (a fresh schema, or one ANALYZEd empty) as scans of the whole table, and kept that plan once it held thousands of
-- entries: a settlement of 512 jobs then compared every entry with every changed row. A delete by full key has no
-- such plan but the index lookup. The changed rows themselves come from joining the statement's old and new rows, a
-- join of two in-memory sets that is hashed whatever their sizes (SET enable_nestloop = off).

-- Entries of new job rows (a submit, a batch's items, a batch's follow-up job): a new job is queued, but the rule is
-- the same as for any row, by its state.
CREATE FUNCTION __SCHEMA__.jobs_entries_inserted()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO __SCHEMA__.queued_entries (job_id, queue, tenant, priority, run_after, seq, deadline_at, touched_at,
    created_at, published_at)
  SELECT n.id, n.queue, n.tenant, n.priority, n.run_after, n.seq, n.deadline_at,
    greatest(n.updated_at, n.republished_at), n.created_at, n.published_at
  FROM new_jobs n WHERE n.state = 'queued';
  INSERT INTO __SCHEMA__.lease_entries (job_id, queue, lease_until, seq)
  SELECT n.id, n.queue, n.lease_until, n.seq FROM new_jobs n WHERE n.state = 'running';
  INSERT INTO __SCHEMA__.finished_entries (job_id, queue, state, created_at, seq, error_class, input_hash, failed_at)
  SELECT n.id, n.queue, n.state, n.created_at, n.seq, n.error_class, n.input_hash, n.failed_at
  FROM new_jobs n WHERE n.state IN ('succeeded', 'failed', 'abandoned');
  RETURN NULL;
END
$$;

-- Entries of updated rows: a row whose entry changed (its state, or a column its entry copies) loses the old entry,
-- found by the old values' key, and gets the new one. A row whose entry did not change is not touched.
CREATE FUNCTION __SCHEMA__.jobs_entries_updated()
RETURNS trigger LANGUAGE plpgsql SET enable_seqscan = off SET enable_nestloop = off AS $$
DECLARE
  c record;
BEGIN
  FOR c IN
    SELECT o.id, o.state AS old_state, o.queue AS old_queue, o.priority AS old_priority, o.run_after AS old_run_after,
      o.seq AS old_seq, o.lease_until AS old_lease_until, o.created_at AS old_created_at,
      n.state, n.queue, n.tenant, n.priority, n.run_after, n.seq, n.deadline_at,
      greatest(n.updated_at, n.republished_at) AS touched_at, n.created_at, n.published_at, n.lease_until,
      n.error_class, n.input_hash, n.failed_at
    FROM old_jobs o JOIN new_jobs n ON n.id = o.id
    WHERE o.state IS DISTINCT FROM n.state
      OR (o.state = 'queued' AND (o.queue, o.tenant, o.priority, o.run_after, o.seq, o.deadline_at,
          greatest(o.updated_at, o.republished_at), o.created_at, o.published_at)
        IS DISTINCT FROM (n.queue, n.tenant, n.priority, n.run_after, n.seq, n.deadline_at,
          greatest(n.updated_at, n.republished_at), n.created_at, n.published_at))
      OR (o.state = 'running' AND (o.queue, o.lease_until, o.seq) IS DISTINCT FROM (n.queue, n.lease_until, n.seq))
      OR (o.state IN ('succeeded', 'failed', 'abandoned')
        AND (o.queue, o.created_at, o.seq, o.error_class, o.input_hash, o.failed_at)
        IS DISTINCT FROM (n.queue, n.created_at, n.seq, n.error_class, n.input_hash, n.failed_at))
  LOOP
    IF c.old_state = 'queued' THEN
      DELETE FROM __SCHEMA__.queued_entries e WHERE e.queue = c.old_queue AND e.priority = c.old_priority
        AND e.run_after = c.old_run_after AND e.seq = c.old_seq AND e.job_id = c.id;
    ELSIF c.old_state = 'running' THEN
      DELETE FROM __SCHEMA__.lease_entries e WHERE e.lease_until = c.old_lease_until AND e.seq = c.old_seq
        AND e.job_id = c.id;
    ELSE
      DELETE FROM __SCHEMA__.finished_entries e WHERE e.queue = c.old_queue AND e.created_at = c.old_created_at
        AND e.seq = c.old_seq AND e.job_id = c.id;
    END IF;
    IF c.state = 'queued' THEN
      INSERT INTO __SCHEMA__.queued_entries (job_id, queue, tenant, priority, run_after, seq, deadline_at, touched_at,
        created_at, published_at)
      VALUES (c.id, c.queue, c.tenant, c.priority, c.run_after, c.seq, c.deadline_at, c.touched_at, c.created_at,
        c.published_at);
    ELSIF c.state = 'running' THEN
      INSERT INTO __SCHEMA__.lease_entries (job_id, queue, lease_until, seq) VALUES (c.id, c.queue, c.lease_until, c.seq);
    ELSE
      INSERT INTO __SCHEMA__.finished_entries (job_id, queue, state, created_at, seq, error_class, input_hash, failed_at)
      VALUES (c.id, c.queue, c.state, c.created_at, c.seq, c.error_class, c.input_hash, c.failed_at);
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

-- Entries of deleted rows (purge deletes finished jobs; any other delete is covered the same way), as an update
-- removes them.
CREATE FUNCTION __SCHEMA__.jobs_entries_deleted()
RETURNS trigger LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  o record;
BEGIN
  FOR o IN SELECT * FROM old_jobs LOOP
    IF o.state = 'queued' THEN
      DELETE FROM __SCHEMA__.queued_entries e WHERE e.queue = o.queue AND e.priority = o.priority
        AND e.run_after = o.run_after AND e.seq = o.seq AND e.job_id = o.id;
    ELSIF o.state = 'running' THEN
      DELETE FROM __SCHEMA__.lease_entries e WHERE e.lease_until = o.lease_until AND e.seq = o.seq AND e.job_id = o.id;
    ELSE
      DELETE FROM __SCHEMA__.finished_entries e WHERE e.queue = o.queue AND e.created_at = o.created_at
        AND e.seq = o.seq AND e.job_id = o.id;
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

CREATE TRIGGER jobs_entries_inserted AFTER INSERT ON __SCHEMA__.jobs
  REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.jobs_entries_inserted();
CREATE TRIGGER jobs_entries_updated AFTER UPDATE ON __SCHEMA__.jobs
  REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs FOR EACH STATEMENT
  EXECUTE FUNCTION __SCHEMA__.jobs_entries_updated();
CREATE TRIGGER jobs_entries_deleted AFTER DELETE ON __SCHEMA__.jobs
  REFERENCING OLD TABLE AS old_jobs FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.jobs_entries_deleted();

-- The rows already there. CREATE TRIGGER above already holds this lock; taking it again states what the backfill
-- relies on.
LOCK TABLE __SCHEMA__.jobs IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO __SCHEMA__.queued_entries (job_id, queue, tenant, priority, run_after, seq, deadline_at, touched_at,
  created_at, published_at)
SELECT j.id, j.queue, j.tenant, j.priority, j.run_after, j.seq, j.deadline_at, greatest(j.updated_at, j.republished_at),
  j.created_at, j.published_at
FROM __SCHEMA__.jobs j WHERE j.state = 'queued';
INSERT INTO __SCHEMA__.lease_entries (job_id, queue, lease_until, seq)
SELECT j.id, j.queue, j.lease_until, j.seq FROM __SCHEMA__.jobs j WHERE j.state = 'running';
INSERT INTO __SCHEMA__.finished_entries (job_id, queue, state, created_at, seq, error_class, input_hash, failed_at)
SELECT j.id, j.queue, j.state, j.created_at, j.seq, j.error_class, j.input_hash, j.failed_at
FROM __SCHEMA__.jobs j WHERE j.state IN ('succeeded', 'failed', 'abandoned');

DROP INDEX __SCHEMA__.jobs_running_lease;
DROP INDEX __SCHEMA__.jobs_live_deadline;
DROP INDEX __SCHEMA__.jobs_dead_letters;
DROP INDEX __SCHEMA__.jobs_failed_at;
DROP INDEX __SCHEMA__.jobs_unpublished;
DROP INDEX __SCHEMA__.jobs_queued_last_touched;
DROP INDEX __SCHEMA__.jobs_claim_order;
DROP INDEX __SCHEMA__.jobs_fair_order;
DROP INDEX __SCHEMA__.jobs_finished_created;
ALTER TABLE __SCHEMA__.jobs SET (fillfactor = 50);
