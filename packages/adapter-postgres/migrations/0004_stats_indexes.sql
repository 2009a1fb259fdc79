-- 0004_stats_indexes: indexes for the spend window of `Query.stats` and for `Query.countQueued` per tenant.
--
-- What: charges_created_at lets the spend of a recent window read only that window's ledger rows;
-- jobs_queued_tenant lets a per-tenant count of queued jobs (the submit-time bound on a tenant's backlog) read only
-- that tenant's queued rows of the queue.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside
-- one transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: two indexes, no column and no data change.
--
-- Why plain CREATE INDEX (not CONCURRENTLY): migrations run in a transaction, where CONCURRENTLY is not allowed;
-- both indexes are small (one over the ledger's timestamps, one partial over queued rows only).

CREATE INDEX charges_created_at ON __SCHEMA__.charges (created_at);

CREATE INDEX jobs_queued_tenant ON __SCHEMA__.jobs (queue, tenant) WHERE state = 'queued';
