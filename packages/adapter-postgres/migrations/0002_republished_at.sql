-- 0002_republished_at: when a sweep last handed a queued job out for republishing.
--
-- What: adds __SCHEMA__.jobs.republished_at. The sweep sets it on every job it returns in `stale` and selects
-- stale jobs by the later of updated_at and republished_at, so a job already republished is not returned again
-- until another republish interval has passed; before this column every sweep returned the same waiting jobs.
-- Also an index on that "last touched" time for the stale scan.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: one nullable timestamptz column (NULL: never republished; existing rows need no backfill, since
-- greatest() ignores NULL) and one partial index.
--
-- Why: the mark is bookkeeping of the sweeper, not part of the job record, so it has its own column and writing
-- it never moves updated_at (polling clients and ETags see no change). The sweep picks stale rows with
-- FOR UPDATE SKIP LOCKED, so two sweepers split the backlog instead of both republishing it; the index keeps that
-- scan ordered by last touch without sorting every queued row.

ALTER TABLE __SCHEMA__.jobs ADD COLUMN republished_at timestamptz;

CREATE INDEX jobs_queued_last_touched ON __SCHEMA__.jobs (queue, (greatest(updated_at, republished_at)), seq)
  WHERE state = 'queued';
