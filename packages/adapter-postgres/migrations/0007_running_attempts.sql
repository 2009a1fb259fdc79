-- 0007_running_attempts: an index of the attempt rows still running, by job.
--
-- What: adds attempts_running (job_id) WHERE outcome = 'running': at most one row per job (the current token's
-- attempt), so it stays as small as the set of jobs being worked on, whatever the attempts table holds.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: one partial index; no table change.
--
-- Why: every claim ends the previous holder's running attempt (the `ended` step of the claim statement: a lapsed
-- lease taken over). Without an index on the running rows the planner read the whole attempts table for it, a cost
-- that grew with every job ever run (8 ms per claim at 30,000 attempt rows); with it, a claim looks up its own jobs.

CREATE INDEX attempts_running ON __SCHEMA__.attempts (job_id) WHERE outcome = 'running';
