-- 0008_limits: the Limiter's resources, the provider limits every worker of the fleet keeps.
--
-- What: creates __SCHEMA__.limits, one row per resource (`openai:gpt-4.1:key-a`): its id, its whole stored state as
-- jsonb (the shape of `Limits.LimitState` in @slowcall/core: the limits, each bucket's level and the time it was
-- written, the permits, the pause, whether it is half-open, the counters) and the store time of its last write.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: one table; no change to the job tables.
--
-- Why one row with a jsonb state: the rules run in TypeScript (`Limits.applyItem`, the same functions the memory
-- Limiter and the model-based property use) on the whole state of a resource, under the row's lock. One row is one
-- lock, one read and one write per resource per call. Permits are few per resource (the live ones, and lapsed ones
-- not yet released, kept an hour so a late release corrects the buckets once) and are always needed together with
-- the buckets; a permits table would add statements and a second lock target per call and serve no query better.
-- jsonb keeps every number exactly as JavaScript wrote it (numeric), so a level read back is the same double.
--
-- Why this locking strategy: a Limiter call runs in one transaction. Its first statement is an INSERT ... SELECT
-- over the resources the call names, in sorted order, with ON CONFLICT DO UPDATE: it creates the rows that are
-- missing and locks every one, always in the same order, so two calls over overlapping resources wait for each
-- other instead of deadlocking. The rules run; one UPDATE writes the new states back; COMMIT releases the locks.
-- Under READ COMMITTED the locking INSERT returns the newest committed state of each row. Reads take no lock.

CREATE TABLE __SCHEMA__.limits (
  resource   text PRIMARY KEY,
  state      jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
