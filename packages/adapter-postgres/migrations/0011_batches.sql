-- 0011_batches: batch records (`@slowcall/core/Batch`), and the trigger that keeps each one in the same write as
-- every transition of its items.
--
-- What: creates __SCHEMA__.batches (one row per batch: its key, counts per job state, cost, budget, deadline,
-- callbacks and times), adds jobs.batch_id (the batch an item belongs to; NULL for every other job) with an index
-- for listing a batch's items in insertion order, and an AFTER UPDATE trigger on jobs that, for a batch item whose
-- state or spend changed, applies `Batch.afterItemWrite` to its batch: the counts move from the old state to the new
-- one, the spend change joins the batch's cost, the batch's updated_at becomes the later of its value and the item's
-- updated_at, then `Batch.finish` (batch_finish below) sets finished_at and enqueues the callbacks when the batch has
-- become complete, or clears finished_at when it no longer is.
--
-- Inputs: __SCHEMA__ is replaced by the migrator with the quoted schema name. The migrator runs this file inside one
-- transaction that holds pg_advisory_xact_lock on the schema and has already inserted this file's row into
-- __SCHEMA__.migrations, so a concurrent migrator waits, then sees the row and skips the file. Forward-only.
--
-- Outputs: one table, one column, one index, two functions and one trigger. Jobs that belong to no batch pay one
-- evaluation of the trigger's WHEN clause per updated row, nothing else.
--
-- Why a trigger: every job verb (claim, claimNext, fair claims, settle, charge, cancel, replay, sweep) is one
-- statement; the trigger runs inside it, so the batch can never disagree with its items, whatever verb moved them.
-- Its UPDATE of the batch row takes that row's lock and, under READ COMMITTED, re-reads the newest version after a
-- concurrent writer commits: two workers that settle the last two items at the same moment are serialised on the
-- batch row, and only the second sees the batch complete, so the callbacks are enqueued once. Lock order is always
-- job rows first, then the batch row (the batch verbs of the adapter lock a batch's items before the batch), so the
-- two never deadlock. Times combine by max (the rule's own), so the item writes of one statement give the same
-- batch in whatever order the trigger meets them.

CREATE TABLE __SCHEMA__.batches (
  id                  uuid PRIMARY KEY,
  seq                 bigserial NOT NULL UNIQUE,
  request_key         text,
  tenant              text,
  fingerprint         text NOT NULL,
  size                integer NOT NULL,
  added               integer NOT NULL DEFAULT 0,
  queued              integer NOT NULL DEFAULT 0,
  running             integer NOT NULL DEFAULT 0,
  succeeded           integer NOT NULL DEFAULT 0,
  failed              integer NOT NULL DEFAULT 0,
  abandoned           integer NOT NULL DEFAULT 0,
  cost_cents          double precision NOT NULL DEFAULT 0,
  budget_cents        double precision,
  deadline_at         timestamptz,
  -- The callback jobs as `Batch.Callback` JSON (camelCase fields), enqueued at most once each.
  on_complete         jsonb,
  on_success          jsonb,
  on_complete_job_id  uuid,
  on_success_job_id   uuid,
  parent_job_id       uuid,
  cancel_requested_at timestamptz,
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL,
  finished_at         timestamptz,
  CONSTRAINT batches_added_within_size CHECK (added >= 0 AND added <= size)
);

-- Idempotency: one batch per (tenant, request_key); a NULL tenant is one tenant.
CREATE UNIQUE INDEX batches_request_key ON __SCHEMA__.batches (tenant, request_key) NULLS NOT DISTINCT
  WHERE request_key IS NOT NULL;

ALTER TABLE __SCHEMA__.jobs ADD COLUMN batch_id uuid;
CREATE INDEX jobs_batch ON __SCHEMA__.jobs (batch_id, seq) WHERE batch_id IS NOT NULL;

-- One callback job (`Batch.callbackItem`, `Protocol.newJob` at `at`), unless its request key names a job already.
CREATE FUNCTION __SCHEMA__.batch_enqueue(b __SCHEMA__.batches, kind text, cb jsonb, at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO __SCHEMA__.jobs (id, queue, tenant, type, version, request_key, input_hash, input, input_ref, state,
    max_attempts, run_after, priority, deadline_at, budget_cents, trace_id, created_at, updated_at, fingerprint)
  VALUES ((cb->>'id')::uuid, cb->>'queue', b.tenant, cb->>'type', (cb->>'version')::int,
    'batch:' || b.id::text || ':' || kind, cb->>'inputHash', NULLIF(cb->'input', 'null'::jsonb), cb->>'inputRef',
    'queued', (cb->>'maxAttempts')::int,
    at + greatest(0, coalesce((cb->>'delayMs')::float8, 0)) * interval '1 millisecond',
    coalesce((cb->>'priority')::int, 0), to_timestamp((cb->>'deadlineAt')::float8 / 1000),
    (cb->>'budgetCents')::float8, cb->>'traceId', at, at, cb->>'fingerprint')
  ON CONFLICT (queue, tenant, request_key) WHERE request_key IS NOT NULL DO NOTHING;
END
$$;

-- `Batch.finish` on the batch row as it is now, at `now`.
CREATE FUNCTION __SCHEMA__.batch_finish(b __SCHEMA__.batches, now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  complete boolean := b.added = b.size AND b.queued = 0 AND b.running = 0;
  at timestamptz := greatest(b.updated_at, now);
  on_complete_id uuid := b.on_complete_job_id;
  on_success_id uuid := b.on_success_job_id;
BEGIN
  IF complete = (b.finished_at IS NOT NULL) THEN
    RETURN;
  END IF;
  IF NOT complete THEN
    UPDATE __SCHEMA__.batches SET finished_at = NULL, updated_at = at WHERE id = b.id;
    RETURN;
  END IF;
  UPDATE __SCHEMA__.batches SET finished_at = at, updated_at = at,
    on_complete_job_id = CASE WHEN b.on_complete IS NOT NULL AND on_complete_id IS NULL
      THEN (b.on_complete->>'id')::uuid ELSE on_complete_id END,
    on_success_job_id = CASE WHEN b.on_success IS NOT NULL AND on_success_id IS NULL AND b.failed = 0
      AND b.abandoned = 0 THEN (b.on_success->>'id')::uuid ELSE on_success_id END
  WHERE id = b.id;
  IF b.on_complete IS NOT NULL AND on_complete_id IS NULL THEN
    PERFORM __SCHEMA__.batch_enqueue(b, 'onComplete', b.on_complete, at);
  END IF;
  IF b.on_success IS NOT NULL AND on_success_id IS NULL AND b.failed = 0 AND b.abandoned = 0 THEN
    PERFORM __SCHEMA__.batch_enqueue(b, 'onSuccess', b.on_success, at);
  END IF;
END
$$;

-- `Batch.afterItemWrite` for one item row.
CREATE FUNCTION __SCHEMA__.batch_item_written()
RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  b __SCHEMA__.batches;
BEGIN
  UPDATE __SCHEMA__.batches SET
    queued = queued + (NEW.state = 'queued')::int - (OLD.state = 'queued')::int,
    running = running + (NEW.state = 'running')::int - (OLD.state = 'running')::int,
    succeeded = succeeded + (NEW.state = 'succeeded')::int - (OLD.state = 'succeeded')::int,
    failed = failed + (NEW.state = 'failed')::int - (OLD.state = 'failed')::int,
    abandoned = abandoned + (NEW.state = 'abandoned')::int - (OLD.state = 'abandoned')::int,
    cost_cents = cost_cents + (NEW.cost_cents - OLD.cost_cents),
    updated_at = greatest(updated_at, NEW.updated_at)
  WHERE id = NEW.batch_id
  RETURNING * INTO b;
  IF FOUND THEN
    PERFORM __SCHEMA__.batch_finish(b, NEW.updated_at);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER jobs_batch_item_written AFTER UPDATE OF state, cost_cents ON __SCHEMA__.jobs
  FOR EACH ROW
  WHEN (NEW.batch_id IS NOT NULL AND (OLD.state IS DISTINCT FROM NEW.state OR OLD.cost_cents IS DISTINCT FROM NEW.cost_cents))
  EXECUTE FUNCTION __SCHEMA__.batch_item_written();
