-- 0013_purge_order: what `PgStore.purge` (and `serve --retention`) reads to find finished jobs to delete.
--
-- What: a partial index jobs_finished_created (queue, created_at, seq) over the jobs that have finished (succeeded,
-- failed, abandoned).
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: one index, kept by every write that moves a job into or out of a finished state.
--
-- Why: a purge deletes a queue's oldest finished jobs created before a cutoff, a chunk at a time. The queue's
-- (queue, created_at DESC) index would make each chunk walk past every live and every kept (e.g. failed) job older
-- than the cutoff; this one starts at the queue's oldest finished job and stops at the cutoff, so a chunk costs
-- about its own size whatever the table holds.

CREATE INDEX jobs_finished_created ON __SCHEMA__.jobs (queue, created_at, seq)
  WHERE state IN ('succeeded', 'failed', 'abandoned');
