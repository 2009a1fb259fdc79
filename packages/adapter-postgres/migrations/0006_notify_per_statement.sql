-- 0006_notify_per_statement: one wake-up per submit statement and queue, not one trigger call per inserted job.
--
-- What: replaces the row-level trigger jobs_notify_insert with a statement-level one over the statement's new rows
-- (a transition table): it sends one NOTIFY per distinct queue the statement inserted queued jobs into. The payload
-- stays "<schema>:<queue>" on channel slowcall_jobs. The requeue trigger (retry, release, replay, sweep) stays a row
-- trigger: its WHEN clause keeps claims and settlements, the statements that change state most, from calling it.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: one function and one trigger in place of another trigger; no table change.
--
-- Why: a bulk submit of 1,000 jobs called the row trigger 1,000 times (Postgres folds the equal notifications of a
-- transaction, but each call still ran); the statement trigger runs once.

CREATE FUNCTION __SCHEMA__.notify_queued_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  q text;
BEGIN
  FOR q IN SELECT DISTINCT queue FROM inserted WHERE state = 'queued' LOOP
    PERFORM pg_notify('slowcall_jobs', TG_TABLE_SCHEMA || ':' || q);
  END LOOP;
  RETURN NULL;
END
$$;

DROP TRIGGER jobs_notify_insert ON __SCHEMA__.jobs;

CREATE TRIGGER jobs_notify_insert AFTER INSERT ON __SCHEMA__.jobs
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.notify_queued_inserted();
