-- 0012_schedules: the fleet's cron schedules (@slowcall/schedules, its PgScheduleStore).
--
-- What: creates __SCHEMA__.schedules, one row per schedule: its id, its definition as jsonb (the `Schedule` value of
-- @slowcall/schedules: cron, timezone, job template, overlap and catch-up policies, grace), whether it is paused,
-- its cursor (store-time epoch ms: every tick at or before it has been decided), the id of the job its newest made
-- tick submitted, and when it was created (store time, epoch ms).
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: one table; no change to the job tables. A tick's job is an ordinary row of __SCHEMA__.jobs, found again by
-- its request key (`schedule:<id>:<tick ISO>`), which is what makes one job per tick across the fleet.
--
-- Why times as float8 milliseconds: the cursor is compared with tick instants computed in JavaScript (whole
-- milliseconds) and with store time (microseconds); a double holds both exactly in the range of dates we accept.

CREATE TABLE __SCHEMA__.schedules (
  id          text PRIMARY KEY,
  definition  jsonb NOT NULL,
  paused      boolean NOT NULL DEFAULT false,
  cursor_ms   float8 NOT NULL,
  last_job_id text,
  created_ms  float8 NOT NULL
);
