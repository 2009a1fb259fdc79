-- A write-cost model for `node bench/pg-writes.mjs --schema-sql bench/pg-writes/record-only.sql`, not a schema to
-- ship: the lower bound of what the job record writes when its indexes hold only columns that never change.
--
-- Every index of jobs whose key, expression or predicate names a column a transition writes (state, lease_until,
-- run_after, updated_at, error_class, failed_at, published_at) is dropped, and new pages of jobs keep half their
-- space free so the new version of a row fits beside the old one (a HOT update needs both on one page). What stays:
-- jobs_pkey, jobs_queue_created, jobs_request_key and jobs_batch. Nothing replaces the dropped indexes, so the picks
-- read jobs in full: the run's statement and write counts hold, its timings do not.
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
