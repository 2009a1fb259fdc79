-- 0014_fewer_index_entries: fewer index entries per job, attempt rows closed as HOT updates, and no referential
-- checks on the path of every job.
--
-- What: drops the unique constraints on jobs.seq and charges.seq (with their indexes jobs_seq_key and
-- charges_seq_key), the partial index attempts_running (0007), and the foreign keys from attempts and charges to
-- jobs (attempts_job_id_fkey, charges_job_id_fkey); new pages of attempts are filled to half.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only. No row
-- is written: the data stays as it is.
--
-- Outputs: three indexes and two foreign keys fewer.
--
-- Why:
-- - Each seq is drawn from its table's own bigserial sequence and no statement writes one, so the values are unique
--   by construction; nothing looks a row up by seq alone (it only breaks ties in other indexes' orders). Its unique
--   index cost an entry per inserted row and per row version that is not a HOT update: three per job of a no-op run
--   (submit, claim, settle).
-- - attempts_running indexed a column that changes when every attempt ends (outcome), so no close of an attempt
--   could be a HOT update, and every attempt wrote two entries more (its insert, and its close into the primary
--   key). The one statement that looked running attempts up by job (a claim taking over a lapsed lease) now names
--   the attempt by its primary key, with the token the job held; claimNext no longer looks at all. A HOT update
--   also needs room for the new version on the row's own page, and a claim inserts attempt rows side by side that
--   are all closed soon after, so new pages of attempts keep half their space free (fillfactor 50; existing pages
--   are not rewritten). Measured with bench/pg-writes.mjs (5,000 no-op jobs): 4.5% of the closes were HOT on full
--   pages, 40% at fillfactor 70, 94% at 50. The price is an attempts table about twice its packed size.
-- - The foreign keys ran a referential check (a lookup of the job and a KEY SHARE lock on its row) for every attempt
--   row a claim inserts and every charge row, although those statements only insert rows of jobs they have just
--   locked themselves. Their ON DELETE CASCADE deleted the children of a purged job: purge, the one statement that
--   deletes jobs, now deletes the jobs' attempts and charges itself, in the same statement.

ALTER TABLE __SCHEMA__.jobs DROP CONSTRAINT jobs_seq_key;
ALTER TABLE __SCHEMA__.charges DROP CONSTRAINT charges_seq_key;
DROP INDEX __SCHEMA__.attempts_running;
ALTER TABLE __SCHEMA__.attempts SET (fillfactor = 50);
ALTER TABLE __SCHEMA__.attempts DROP CONSTRAINT attempts_job_id_fkey;
ALTER TABLE __SCHEMA__.charges DROP CONSTRAINT charges_job_id_fkey;
