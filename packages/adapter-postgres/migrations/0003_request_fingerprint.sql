-- 0003_request_fingerprint: the request fingerprint an idempotency key vouches for.
--
-- What: adds __SCHEMA__.jobs.fingerprint, the `Protocol.fingerprint` of the submit that created the job (type,
-- version, input hash and every option that changes what runs or what it may cost, as the caller gave them). A
-- submit whose request key is already taken compares its own fingerprint with this one (`Protocol.submitVerdict`):
-- equal, the existing job is returned; different, the key is reused and nothing is written.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: one nullable text column. Rows written before it keep NULL, and for them the input hash alone decides
-- (as it did before), so no backfill is needed and the ALTER takes no table rewrite.
--
-- Why a column of the job row: the verdict needs it exactly where the request key's holder is read, inside the
-- one submit statement that the unique index on (queue, tenant, request_key) arbitrates; no other statement reads
-- or writes it.

ALTER TABLE __SCHEMA__.jobs ADD COLUMN fingerprint text;
