-- 0010_fair_claims: what fair claims (`Store.claimNext` with `fair`, `@slowcall/core/Fairness`) read and write.
--
-- What: replaces jobs_queued_tenant (queue, tenant) WHERE state = 'queued' with jobs_fair_order
-- (queue, tenant, priority DESC, run_after, seq) WHERE state = 'queued', and creates __SCHEMA__.fair_service, the
-- attained service of each (queue, tenant) that fair claims have picked for: a value and the store time it was
-- last written at (it decays from there, see Fairness.decayed). Jobs with no tenant are one tenant (NULL), so the
-- key is unique with NULLS NOT DISTINCT.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: one partial index in place of another (same partial condition, same leading columns: the per-tenant
-- count of queued jobs reads it as it read the old one), one new table. Nothing is written to either by claims
-- that are not fair; the index is kept by every write to jobs, as the one it replaces was.
--
-- Why: a fair claim needs, per tenant with queued jobs, that tenant's first due jobs in claim order. With tenant
-- second in the index, the tenants of a queue are found by a loose index scan (one descent per tenant) and each
-- tenant's head jobs are read in order from its own range, so a claim costs about (tenants x (log backlog + batch))
-- whatever the backlog, instead of sorting every due job of the queue.

CREATE INDEX jobs_fair_order ON __SCHEMA__.jobs (queue, tenant, priority DESC, run_after, seq) WHERE state = 'queued';
DROP INDEX __SCHEMA__.jobs_queued_tenant;

CREATE TABLE __SCHEMA__.fair_service (
  queue   text NOT NULL,
  tenant  text,
  service double precision NOT NULL,
  at      timestamptz NOT NULL
);

CREATE UNIQUE INDEX fair_service_key ON __SCHEMA__.fair_service (queue, tenant) NULLS NOT DISTINCT;
