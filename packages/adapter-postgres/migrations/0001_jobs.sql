-- 0001_jobs: the job record, its attempt history and its charge ledger.
--
-- What: creates __SCHEMA__.jobs (the source of truth for every job), __SCHEMA__.attempts (one row per claim,
-- keyed by the fencing token), __SCHEMA__.charges (the cost ledger, one row per model call id), the indexes the
-- protocol statements rely on, and a trigger that wakes transport listeners when a job becomes queued.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name chosen by the caller (default
-- "slowcall"). The migrator runs this file inside one transaction that holds pg_advisory_xact_lock on the schema
-- and has already inserted this file's row into __SCHEMA__.migrations, so a second process running the migrator
-- at the same time waits, then sees the row and skips the file.
--
-- Outputs: the tables below. Every timestamp is timestamptz in store time; the adapter converts to epoch
-- milliseconds (with the microsecond fraction) at its boundary.
--
-- Why this locking strategy: every protocol step is one conditional statement on a single jobs row, so row
-- locks taken by UPDATE (re-checked against the newest row version under READ COMMITTED) are the only
-- serialisation needed; candidate selection (transport receive, sweeps) uses FOR UPDATE SKIP LOCKED so that
-- concurrent pollers never queue behind each other. The partial indexes keep those candidate scans proportional
-- to the number of due rows, not to the size of the history.

CREATE TABLE __SCHEMA__.jobs (
  id                  uuid PRIMARY KEY,
  -- Insertion order: the tie-break for equal timestamps in listings and sweeps.
  seq                 bigserial NOT NULL UNIQUE,
  queue               text NOT NULL,
  tenant              text,
  type                text NOT NULL,
  version             integer NOT NULL,
  request_key         text,
  input_hash          text NOT NULL,
  input               jsonb,
  input_ref           text,
  state               text NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'abandoned')),
  abandon_reason      text CHECK (abandon_reason IN ('deadline', 'budget', 'cancelled')),
  attempts            integer NOT NULL DEFAULT 0,
  attempts_base       integer NOT NULL DEFAULT 0,
  max_attempts        integer NOT NULL,
  lease_token         integer NOT NULL DEFAULT 0,
  lease_owner         text,
  lease_until         timestamptz,
  run_after           timestamptz NOT NULL,
  priority            integer NOT NULL DEFAULT 0,
  deadline_at         timestamptz,
  budget_cents        double precision,
  cost_cents          double precision NOT NULL DEFAULT 0,
  error_class         text,
  last_error          text,
  progress            double precision NOT NULL DEFAULT 0,
  result              jsonb,
  cancel_requested_at timestamptz,
  trace_id            text,
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL,
  -- When the job last became failed: the dead-letter arrival rate is counted from it.
  failed_at           timestamptz,
  -- Transport bookkeeping for PgTransport: a queued job is hidden from receivers until visible_at, and
  -- receive_count numbers its deliveries (the receipt). Neither is part of the job record.
  visible_at          timestamptz,
  receive_count       integer NOT NULL DEFAULT 0,
  -- Outbox bookkeeping: null until the relay has handed the queued job to an external transport.
  published_at        timestamptz,
  CONSTRAINT jobs_abandon_reason_iff_abandoned CHECK ((state = 'abandoned') = (abandon_reason IS NOT NULL)),
  CONSTRAINT jobs_attempts_nonnegative CHECK (attempts >= attempts_base AND attempts_base >= 0)
);

-- Idempotency: one job per (queue, tenant, request_key); a NULL tenant is one tenant, not many.
CREATE UNIQUE INDEX jobs_request_key ON __SCHEMA__.jobs (queue, tenant, request_key) NULLS NOT DISTINCT
  WHERE request_key IS NOT NULL;

-- The claim path: due queued jobs per queue in priority order (transport receive, outbox, stats).
CREATE INDEX jobs_queued ON __SCHEMA__.jobs (queue, priority DESC, run_after) WHERE state = 'queued';

-- Expired leases (sweep) and deadlines of live jobs (sweep).
CREATE INDEX jobs_running_lease ON __SCHEMA__.jobs (lease_until) WHERE state = 'running';
CREATE INDEX jobs_live_deadline ON __SCHEMA__.jobs (deadline_at)
  WHERE state IN ('queued', 'running') AND deadline_at IS NOT NULL;

-- Dead letters: grouped by error class and input hash, newest first, and their arrival rate.
CREATE INDEX jobs_dead_letters ON __SCHEMA__.jobs (queue, error_class, input_hash) WHERE state = 'failed';
CREATE INDEX jobs_failed_at ON __SCHEMA__.jobs (failed_at) WHERE failed_at IS NOT NULL;

-- Listing: newest first per queue.
CREATE INDEX jobs_queue_created ON __SCHEMA__.jobs (queue, created_at DESC);

-- Outbox: committed queued jobs that no external transport has been told about yet.
CREATE INDEX jobs_unpublished ON __SCHEMA__.jobs (created_at) WHERE state = 'queued' AND published_at IS NULL;

CREATE TABLE __SCHEMA__.attempts (
  job_id      uuid NOT NULL REFERENCES __SCHEMA__.jobs (id) ON DELETE CASCADE,
  token       integer NOT NULL,
  worker      text NOT NULL,
  started_at  timestamptz NOT NULL,
  ended_at    timestamptz,
  outcome     text NOT NULL CHECK (outcome IN
                ('running', 'succeeded', 'retried', 'failed', 'abandoned', 'released', 'expired', 'lease_lost')),
  error_class text,
  evidence    text,
  PRIMARY KEY (job_id, token)
);

CREATE TABLE __SCHEMA__.charges (
  seq                 bigserial UNIQUE,
  job_id              uuid NOT NULL REFERENCES __SCHEMA__.jobs (id) ON DELETE CASCADE,
  call_id             text NOT NULL,
  token               integer NOT NULL,
  amount_cents        double precision NOT NULL,
  settled             boolean NOT NULL,
  -- What the last accepted write to this row added to jobs.cost_cents (the amount on insert, the difference on
  -- settlement). The charge statement adds it to the job in the same statement, so cost_cents stays equal to the
  -- ledger's sum without re-reading the ledger under a stale snapshot.
  applied_delta_cents double precision NOT NULL,
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL,
  PRIMARY KEY (job_id, call_id)
);

-- Wake transport listeners when a job becomes queued (submit, retry, release, replay, sweep). The payload is
-- "<schema>:<queue>". A missed notification only delays work: receivers also poll.
CREATE FUNCTION __SCHEMA__.notify_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('slowcall_jobs', TG_TABLE_SCHEMA || ':' || NEW.queue);
  RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify_insert AFTER INSERT ON __SCHEMA__.jobs
  FOR EACH ROW WHEN (NEW.state = 'queued') EXECUTE FUNCTION __SCHEMA__.notify_queued();

CREATE TRIGGER jobs_notify_requeue AFTER UPDATE OF state ON __SCHEMA__.jobs
  FOR EACH ROW WHEN (NEW.state = 'queued' AND OLD.state <> 'queued') EXECUTE FUNCTION __SCHEMA__.notify_queued();
