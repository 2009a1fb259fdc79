-- A write-cost model for `node bench/pg-writes.mjs --schema-sql bench/pg-writes/run-entries.sql`, not a schema to
-- ship: the job record with only unchanging columns indexed (as record-only.sql), and two append-only tables of
-- entries without a primary key, found only through their one ordering index.
--
-- - `run_entries`: one entry per job while it is queued, keyed in claim order. A job that leaves queued has its
--   entry deleted through that key (a delete writes no index entry); one that becomes queued again gets a new one.
-- - `lease_entries`: one entry per lease granted or extended (claim, heartbeat), keyed by (queue, lease end). Nothing
--   deletes an entry when the lease is settled: an entry whose job no longer holds that lease is garbage that the
--   lapsed-lease pick meets once its time has passed and deletes then (not counted here: in a run shorter than the
--   keep-alive no lease lapses; it is one heap delete per lease, with no index entry).
--
-- Here triggers write the entries, so the statements run unchanged and still pick from jobs (read in full): the run's
-- write counts are those of the design, its timings meaningless. A shipped schema would pick from the entries and
-- delete the claimed ones by their row address in the claim statement itself.
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

CREATE TABLE __SCHEMA__.run_entries (
  queue     text NOT NULL,
  priority  integer NOT NULL,
  run_after timestamptz NOT NULL,
  seq       bigint NOT NULL,
  job_id    uuid NOT NULL
);
CREATE INDEX run_entries_claim_order ON __SCHEMA__.run_entries (queue, priority DESC, run_after, seq);

CREATE TABLE __SCHEMA__.lease_entries (
  queue       text NOT NULL,
  lease_until timestamptz NOT NULL,
  job_id      uuid NOT NULL,
  token       integer NOT NULL
);
CREATE INDEX lease_entries_lapsed ON __SCHEMA__.lease_entries (queue, lease_until);

CREATE FUNCTION __SCHEMA__.entries_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO __SCHEMA__.run_entries SELECT n.queue, n.priority, n.run_after, n.seq, n.id
  FROM inserted n WHERE n.state = 'queued';
  RETURN NULL;
END $$;

CREATE FUNCTION __SCHEMA__.entries_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Left queued, or queued with a new place in the order: the old entry goes, found by its key.
  DELETE FROM __SCHEMA__.run_entries e USING before b JOIN written n ON n.id = b.id
  WHERE b.state = 'queued' AND (n.state <> 'queued' OR n.run_after <> b.run_after)
    AND e.queue = b.queue AND e.priority = b.priority AND e.run_after = b.run_after AND e.seq = b.seq;
  INSERT INTO __SCHEMA__.run_entries SELECT n.queue, n.priority, n.run_after, n.seq, n.id
  FROM before b JOIN written n ON n.id = b.id
  WHERE n.state = 'queued' AND (b.state <> 'queued' OR n.run_after <> b.run_after);
  -- A lease granted or moved: a new entry; the old one is left to lapse.
  INSERT INTO __SCHEMA__.lease_entries SELECT n.queue, n.lease_until, n.id, n.lease_token
  FROM before b JOIN written n ON n.id = b.id
  WHERE n.state = 'running' AND n.lease_until IS DISTINCT FROM b.lease_until;
  RETURN NULL;
END $$;

CREATE TRIGGER entries_inserted AFTER INSERT ON __SCHEMA__.jobs REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.entries_inserted();
CREATE TRIGGER entries_updated AFTER UPDATE ON __SCHEMA__.jobs REFERENCING OLD TABLE AS before NEW TABLE AS written
  FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.entries_updated();
