-- A write-cost model for `node bench/pg-writes.mjs --schema-sql bench/pg-writes/run-queue-partial.sql`, not a schema to
-- ship: a narrow run-queue table `runs` beside the job record, indexed by state as
-- jobs is today: a claim moves the runs row (not HOT), the end of the job deletes it.
--
-- The record keeps only indexes on columns that never change (as record-only.sql) on half-empty pages. `runs` holds
-- one row per live job (queued or running: job id, queue, tenant, state, priority, run_after, seq, lease end,
-- deadline, when it last became queued, the outbox mark) and carries the indexes the picks need. Here triggers keep
-- it in step with jobs, so the statements run unchanged: they still pick from jobs (read in full), which makes the
-- run's write counts those of the design, and its timings meaningless. A shipped schema would write `runs` from the
-- statements themselves, claim and fence on its row, and pick from its indexes.
DROP INDEX __SCHEMA__.jobs_claim_order;
DROP INDEX __SCHEMA__.jobs_fair_order;
DROP INDEX __SCHEMA__.jobs_queued_last_touched;
DROP INDEX __SCHEMA__.jobs_running_lease;
DROP INDEX __SCHEMA__.jobs_live_deadline;
DROP INDEX __SCHEMA__.jobs_unpublished;
DROP INDEX __SCHEMA__.jobs_dead_letters;
DROP INDEX __SCHEMA__.jobs_failed_at;
DROP INDEX __SCHEMA__.jobs_finished_created;
ALTER TABLE __SCHEMA__.jobs SET (fillfactor = 50);

CREATE TABLE __SCHEMA__.runs (
  job_id      uuid PRIMARY KEY,
  queue       text NOT NULL,
  tenant      text,
  state       text NOT NULL,
  priority    integer NOT NULL,
  run_after   timestamptz NOT NULL,
  seq         bigint NOT NULL,
  lease_until timestamptz,
  deadline_at timestamptz,
  queued_at   timestamptz NOT NULL,
  published_at timestamptz
) WITH (fillfactor = 100);

-- Picks by state, as jobs has them today: a claim moves the row out of the queued indexes (not HOT on runs).
CREATE INDEX runs_claim_order ON __SCHEMA__.runs (queue, priority DESC, run_after, seq) WHERE state = 'queued';
CREATE INDEX runs_fair_order ON __SCHEMA__.runs (queue, tenant, priority DESC, run_after, seq) WHERE state = 'queued';
CREATE INDEX runs_lapsed ON __SCHEMA__.runs (queue, lease_until) WHERE state = 'running';
CREATE INDEX runs_deadline ON __SCHEMA__.runs (deadline_at) WHERE deadline_at IS NOT NULL;
CREATE INDEX runs_last_queued ON __SCHEMA__.runs (queue, queued_at, seq) WHERE state = 'queued';
CREATE INDEX runs_unpublished ON __SCHEMA__.runs (seq) WHERE state = 'queued' AND published_at IS NULL;

-- A job enters runs when it is inserted live, follows every write while it stays live, and leaves when it ends.
CREATE FUNCTION __SCHEMA__.runs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO __SCHEMA__.runs
  SELECT n.id, n.queue, n.tenant, n.state, n.priority, n.run_after, n.seq, n.lease_until, n.deadline_at,
    greatest(n.updated_at, n.republished_at), n.published_at
  FROM inserted n WHERE n.state IN ('queued', 'running');
  RETURN NULL;
END $$;

CREATE FUNCTION __SCHEMA__.runs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM __SCHEMA__.runs r USING written n WHERE r.job_id = n.id AND n.state NOT IN ('queued', 'running');
  -- queued_at moves only when the job becomes queued again, so a claim leaves it alone.
  UPDATE __SCHEMA__.runs r SET state = n.state, run_after = n.run_after, lease_until = n.lease_until,
    queued_at = CASE WHEN n.state = 'queued' AND r.state <> 'queued'
      THEN greatest(n.updated_at, n.republished_at) ELSE r.queued_at END,
    published_at = n.published_at
  FROM written n WHERE r.job_id = n.id AND n.state IN ('queued', 'running')
    AND (r.state, r.run_after, r.lease_until, r.published_at)
      IS DISTINCT FROM (n.state, n.run_after, n.lease_until, n.published_at);
  INSERT INTO __SCHEMA__.runs
  SELECT n.id, n.queue, n.tenant, n.state, n.priority, n.run_after, n.seq, n.lease_until, n.deadline_at,
    greatest(n.updated_at, n.republished_at), n.published_at
  FROM written n WHERE n.state IN ('queued', 'running')
    AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.runs r WHERE r.job_id = n.id);
  RETURN NULL;
END $$;

CREATE TRIGGER runs_inserted AFTER INSERT ON __SCHEMA__.jobs REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.runs_inserted();
CREATE TRIGGER runs_updated AFTER UPDATE ON __SCHEMA__.jobs REFERENCING NEW TABLE AS written
  FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.runs_updated();
