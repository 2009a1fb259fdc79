-- 0005_claim_order: the index of queued jobs in the exact order claims take them.
--
-- What: replaces jobs_queued (queue, priority DESC, run_after) WHERE state = 'queued' with jobs_claim_order
-- (queue, priority DESC, run_after, seq) WHERE state = 'queued': every order claimNext and the transport's receive ask
-- for (highest priority, then earliest run_after, then insertion order).
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: one partial index in place of another; no table change.
--
-- Why: without `seq` in the index, jobs that share a run_after (a bulk submit's jobs share its transaction's now())
-- came out of the index unordered, so each claim sorted every due job of the queue to find the first N: a claim cost
-- that grew with the backlog (a 120,000-job queue took 150 ms per claim). In this order a claim reads N index
-- entries, whatever the backlog.

CREATE INDEX jobs_claim_order ON __SCHEMA__.jobs (queue, priority DESC, run_after, seq) WHERE state = 'queued';
DROP INDEX __SCHEMA__.jobs_queued;
