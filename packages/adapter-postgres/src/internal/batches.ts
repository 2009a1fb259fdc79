/**
 * The batch verbs (`Batch.BatchStore`) on Postgres. The item side of every batch rule is the trigger of migration
 * 0011 (each job verb's statement moves its items' batches); the verbs here are the batch side, each one transaction
 * that locks what it reads and decides with the rules of `@slowcall/core/Batch` and `Protocol` on the rows it holds:
 *
 * - `open`: insert unless the (tenant, request key) holds a batch (`Batch.openVerdict` on it); the unique index
 *   arbitrates two opens racing for one key (ON CONFLICT DO NOTHING waits for the winner, which is then read).
 * - `add`: the batch row locked (`FOR UPDATE`), `Batch.addVerdict`, then the new items (`Batch.itemOf`,
 *   `Protocol.newJob`: queued at the transaction's store time) and the batch's `added` and queued count
 *   (`Batch.appended`), in one transaction: a chunk lands whole or not at all.
 * - `cancel`, `replay`: the batch's item rows locked in id order, then the batch row (the trigger's order: items,
 *   then batch, so a verb and a worker never deadlock); `Batch.cancelVerdict` / `Protocol.replayable` on them; the
 *   job verbs' own statements over the items (their trigger moves the batch), then `batch_finish`.
 *
 * Store time is the transaction's `now()` (one instant for the whole verb), or the explicit `now` of a test.
 *
 * @internal
 */
import * as Batch from "@slowcall/core/Batch"
import { StoreError } from "@slowcall/core/Errors"
import type { Job, JobId } from "@slowcall/core/Job"
import * as Protocol from "@slowcall/core/Protocol"
import { Effect } from "effect"
import type { Driver, Queryable } from "./driver.js"
import { toStoreError } from "./errors.js"
import { jsonParam, micros, type Row, toJob } from "./rows.js"
import { jobColumns, type Statements } from "./statements.js"
import { makeProtocolStore } from "./store.js"

const ms = (expr: string): string => `(extract(epoch from ${expr}) * 1000)::float8`

const nullableMs = (value: unknown): number | null => (value === null || value === undefined ? null : micros(value))

const batchColumns = (a: string): string =>
  [
    `${a}.id::text AS id`,
    `${a}.request_key`,
    `${a}.tenant`,
    `${a}.fingerprint`,
    `${a}.size`,
    `${a}.added`,
    `${a}.queued`,
    `${a}.running`,
    `${a}.succeeded`,
    `${a}.failed`,
    `${a}.abandoned`,
    `${a}.cost_cents`,
    `${a}.budget_cents`,
    `${ms(`${a}.deadline_at`)} AS deadline_at`,
    `${a}.on_complete`,
    `${a}.on_success`,
    `${a}.on_complete_job_id::text AS on_complete_job_id`,
    `${a}.on_success_job_id::text AS on_success_job_id`,
    `${a}.parent_job_id::text AS parent_job_id`,
    `${ms(`${a}.cancel_requested_at`)} AS cancel_requested_at`,
    `${ms(`${a}.created_at`)} AS created_at`,
    `${ms(`${a}.updated_at`)} AS updated_at`,
    `${ms(`${a}.finished_at`)} AS finished_at`
  ].join(", ")

const toBatch = (row: Row): Batch.Batch => ({
  id: String(row.id) as Batch.BatchId,
  requestKey: row.request_key == null ? null : String(row.request_key),
  tenant: row.tenant == null ? null : String(row.tenant),
  fingerprint: String(row.fingerprint),
  size: Number(row.size),
  added: Number(row.added),
  counts: {
    queued: Number(row.queued),
    running: Number(row.running),
    succeeded: Number(row.succeeded),
    failed: Number(row.failed),
    abandoned: Number(row.abandoned)
  },
  costCents: Number(row.cost_cents),
  budgetCents: row.budget_cents == null ? null : Number(row.budget_cents),
  deadlineAt: nullableMs(row.deadline_at),
  onComplete: (row.on_complete ?? null) as Batch.Callback | null,
  onSuccess: (row.on_success ?? null) as Batch.Callback | null,
  onCompleteJobId: (row.on_complete_job_id ?? null) as JobId | null,
  onSuccessJobId: (row.on_success_job_id ?? null) as JobId | null,
  parentJobId: (row.parent_job_id ?? null) as JobId | null,
  cancelRequestedAt: nullableMs(row.cancel_requested_at),
  createdAt: micros(row.created_at),
  updatedAt: micros(row.updated_at),
  finishedAt: nullableMs(row.finished_at)
})

/** A callback as stored: the spec's own fields, `undefined` ones left out. */
const callbackParam = (callback: Batch.Callback | null | undefined): string | null =>
  callback == null ? null : JSON.stringify(callback)

/** Store time of a verb: the explicit `now`, else the transaction's. */
const nowOf = async (tx: Queryable, now: number | undefined): Promise<number> => {
  if (now !== undefined) return now
  const rows = await tx.query<Row>(`SELECT ${ms("now()")} AS now_ms`)
  return micros(rows[0]?.now_ms)
}

const at = (n: number): string => `to_timestamp($${n}::float8 / 1000)`

/** An error the transaction throws to roll back, carried out as the verb's failure. */
class Refused {
  constructor(readonly error: StoreError) {}
}

/**
 * The batch verbs over `driver`, schema `s` (quoted), with the job statements `st`.
 *
 * @internal
 */
export const makeBatchStore = (driver: Driver, s: string, st: Statements): Batch.BatchStore["Type"] => {
  const transaction = <A>(operation: string, fn: (tx: Queryable) => Promise<A>) =>
    Effect.tryPromise({
      try: () => driver.transaction(fn),
      catch: (error) => (error instanceof Refused ? error.error : toStoreError(operation, error))
    })

  const selectBatch = `SELECT ${batchColumns("b")} FROM ${s}.batches b WHERE b.id = $1::uuid`

  const lockBatch = async (tx: Queryable, batchId: string): Promise<Batch.Batch | undefined> => {
    const rows = await tx.query<Row>(`${selectBatch} FOR UPDATE`, [batchId])
    return rows[0] === undefined ? undefined : toBatch(rows[0])
  }

  const readBatch = async (tx: Queryable, batchId: string): Promise<Batch.Batch> => {
    const rows = await tx.query<Row>(selectBatch, [batchId])
    return toBatch(rows[0]!)
  }

  /** The batch's items locked in id order, returned in insertion order; then the batch row locked. */
  const lockItems = async (tx: Queryable, batchId: string): Promise<ReadonlyArray<Job>> => {
    const rows = await tx.query<Row>(
      `WITH locked AS (SELECT j.* FROM ${s}.jobs j WHERE j.batch_id = $1::uuid ORDER BY j.id FOR UPDATE)
       SELECT ${jobColumns("locked")} FROM locked ORDER BY locked.seq`,
      [batchId]
    )
    return rows.map(toJob)
  }

  const visible = (batch: Batch.Batch | undefined, tenant: string | undefined): batch is Batch.Batch =>
    batch !== undefined && (tenant === undefined || batch.tenant === tenant)

  const isId = (value: string): boolean => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)

  /** Runs a job verb of the adapter inside the transaction `tx`. */
  const jobVerbs = (tx: Queryable) => makeProtocolStore(tx, st)

  return {
    open: (options) =>
      transaction("batchOpen", async (tx) => {
        const now = await nowOf(tx, options.now)
        const spec = options.spec
        const existing = async (): Promise<Batch.Batch | undefined> => {
          if (spec.requestKey == null) return undefined
          const rows = await tx.query<Row>(
            `SELECT ${batchColumns("b")} FROM ${s}.batches b
             WHERE b.request_key = $1 AND b.tenant IS NOT DISTINCT FROM $2::text`,
            [spec.requestKey, spec.tenant ?? null]
          )
          return rows[0] === undefined ? undefined : toBatch(rows[0])
        }
        const verdictOn = (batch: Batch.Batch): Batch.BatchReply<Batch.OpenResult> => ({
          now,
          result:
            Batch.openVerdict(batch, spec) === "Existing"
              ? { _tag: "Existing", batch }
              : { _tag: "KeyReused", requestKey: spec.requestKey!, existingBatchId: batch.id }
        })
        const before = await existing()
        if (before !== undefined) return verdictOn(before)
        const fresh = Batch.newBatch(spec, now)
        const rows = await tx.query<Row>(
          `INSERT INTO ${s}.batches (id, request_key, tenant, fingerprint, size, budget_cents, deadline_at, on_complete,
             on_success, parent_job_id, created_at, updated_at)
           VALUES ($1::uuid, $2, $3, $4, $5::int, $6::float8, ${at(7)}, $8::jsonb, $9::jsonb, $10::uuid, ${at(11)},
             ${at(11)})
           ON CONFLICT (tenant, request_key) WHERE request_key IS NOT NULL DO NOTHING
           RETURNING ${batchColumns(`${s}.batches`)}`,
          [
            fresh.id,
            fresh.requestKey,
            fresh.tenant,
            fresh.fingerprint,
            fresh.size,
            fresh.budgetCents,
            fresh.deadlineAt,
            callbackParam(fresh.onComplete),
            callbackParam(fresh.onSuccess),
            fresh.parentJobId,
            now
          ]
        )
        if (rows[0] !== undefined) return { now, result: { _tag: "Created", batch: toBatch(rows[0]) } }
        const winner = await existing()
        if (winner === undefined) throw new Error("a batch's request key was taken, and its holder cannot be read")
        return verdictOn(winner)
      }),

    add: (options) =>
      transaction("batchAdd", async (tx): Promise<Batch.BatchReply<Batch.AddResult>> => {
        const now = await nowOf(tx, options.now)
        const batch = isId(options.batchId) ? await lockBatch(tx, options.batchId) : undefined
        if (batch === undefined) return { now, result: { _tag: "NotFound", batchId: options.batchId } }
        const verdict = Batch.addVerdict(batch, options.offset, options.items.length)
        if (verdict._tag !== "Append") return { now, result: { _tag: verdict._tag, batch } }
        const items = options.items.slice(verdict.skip).map((item) => Batch.itemOf(batch, item))
        const ids = items.map((item) => item.id)
        const clash =
          new Set(ids).size !== ids.length
            ? ids.find((id, i) => ids.indexOf(id) !== i)
            : (await tx.query<Row>(`SELECT id::text AS id FROM ${s}.jobs WHERE id = ANY($1::uuid[]) LIMIT 1`, [ids]))[0]
                ?.id
        if (clash !== undefined) {
          throw new Refused(
            new StoreError({ reason: "Constraint", operation: "batchAdd", detail: `job id ${String(clash)} exists` })
          )
        }
        const inserted = await tx.query<Row>(
          `WITH input AS (
             SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[],
               $8::int[], $9::float8[], $10::float8[], $11::float8[], $12::int[], $13::text[], $14::text[])
             WITH ORDINALITY AS i(id, queue, type, version, input_hash, input, input_ref, priority, delay_ms,
               deadline_ms, budget_cents, max_attempts, trace_id, fingerprint, ord)
           ), ins AS (
             INSERT INTO ${s}.jobs (id, queue, tenant, type, version, request_key, input_hash, input, input_ref, state,
               max_attempts, run_after, priority, deadline_at, budget_cents, trace_id, created_at, updated_at,
               fingerprint, batch_id)
             SELECT i.id, i.queue, $15::text, i.type, i.version, NULL, i.input_hash, i.input::jsonb, i.input_ref,
               'queued', i.max_attempts, ${at(16)} + greatest(0, coalesce(i.delay_ms, 0)) * interval '1 millisecond',
               coalesce(i.priority, 0), to_timestamp(i.deadline_ms / 1000), i.budget_cents, i.trace_id, ${at(16)},
               ${at(16)}, i.fingerprint, $17::uuid
             FROM input i ORDER BY i.ord
             RETURNING *
           )
           SELECT ${jobColumns("ins")} FROM ins ORDER BY ins.seq`,
          [
            ids,
            items.map((i) => i.queue),
            items.map((i) => i.type),
            items.map((i) => i.version),
            items.map((i) => i.inputHash),
            items.map((i) => jsonParam(i.input)),
            items.map((i) => i.inputRef ?? null),
            items.map((i) => i.priority ?? null),
            items.map((i) => i.delayMs ?? null),
            items.map((i) => i.deadlineAt ?? null),
            items.map((i) => i.budgetCents ?? null),
            items.map((i) => i.maxAttempts),
            items.map((i) => i.traceId ?? null),
            items.map((i) => i.fingerprint ?? null),
            batch.tenant,
            now,
            batch.id
          ]
        )
        if (items.length > 0) {
          await tx.query(
            `UPDATE ${s}.batches SET added = added + $2::int, queued = queued + $2::int,
               updated_at = greatest(${at(3)}, updated_at + interval '1 microsecond')
             WHERE id = $1::uuid`,
            [batch.id, items.length, now]
          )
        }
        return { now, result: { _tag: "Added", batch: await readBatch(tx, batch.id), jobs: inserted.map(toJob) } }
      }),

    // One statement, outside a transaction: the row it reads is one consistent snapshot, and the answer costs one
    // round trip instead of three (BEGIN, the read, COMMIT).
    get: (options) =>
      Effect.map(
        Effect.tryPromise({
          try: () => (isId(options.batchId) ? driver.query<Row>(selectBatch, [options.batchId]) : Promise.resolve([])),
          catch: (error) => toStoreError("batchGet", error)
        }),
        (rows) => {
          const batch = rows[0] === undefined ? undefined : toBatch(rows[0])
          return visible(batch, options.tenant) ? batch : undefined
        }
      ),

    cancel: (options) =>
      transaction("batchCancel", async (tx): Promise<Batch.BatchReply<Batch.CancelBatchResult>> => {
        const now = await nowOf(tx, options.now)
        const notFound = { now, result: { _tag: "NotFound", batchId: options.batchId } } as const
        if (!isId(options.batchId)) return notFound
        const items = await lockItems(tx, options.batchId)
        const batch = await lockBatch(tx, options.batchId)
        if (!visible(batch, options.tenant)) return notFound
        const verdict = Batch.cancelVerdict(batch)
        if (verdict !== "Cancel") return { now, result: { _tag: verdict, batch } }
        await tx.query(
          `UPDATE ${s}.batches SET size = added, cancel_requested_at = ${at(2)},
             updated_at = greatest(${at(2)}, updated_at + interval '1 microsecond')
           WHERE id = $1::uuid`,
          [batch.id, now]
        )
        const targets = items.filter((job) => {
          const itemVerdict = Protocol.cancelVerdict(job)
          return itemVerdict === "Abandon" || itemVerdict === "Request"
        })
        const jobs: Array<Job> = []
        // One item at a time, in the order they landed, as the rule applies them.
        for (const job of targets) {
          const reply = await Effect.runPromise(jobVerbs(tx).cancel({ items: [{ jobId: job.id }], now }))
          const result = reply.results[0]
          if (result?._tag === "Cancelled") jobs.push(result.job)
        }
        await tx.query(`SELECT ${s}.batch_finish(b, ${at(2)}) FROM ${s}.batches b WHERE b.id = $1::uuid`, [
          batch.id,
          now
        ])
        return { now, result: { _tag: "Cancelled", batch: await readBatch(tx, batch.id), jobs } }
      }),

    replay: (options) =>
      transaction("batchReplay", async (tx): Promise<Batch.BatchReply<Batch.ReplayBatchResult>> => {
        const now = await nowOf(tx, options.now)
        const notFound = { now, result: { _tag: "NotFound", batchId: options.batchId } } as const
        if (!isId(options.batchId)) return notFound
        const items = await lockItems(tx, options.batchId)
        const batch = await lockBatch(tx, options.batchId)
        if (!visible(batch, options.tenant)) return notFound
        const jobs: Array<Job> = []
        for (const job of items.filter((item) => Protocol.replayable(item))) {
          const reply = await Effect.runPromise(jobVerbs(tx).replay({ items: [{ jobId: job.id }], now }))
          const result = reply.results[0]
          if (result?._tag === "Replayed") jobs.push(result.job)
        }
        return { now, result: { _tag: "Replayed", batch: await readBatch(tx, batch.id), jobs } }
      }),

    jobs: (options) =>
      Effect.map(
        transaction("batchJobs", async (tx) => {
          if (!isId(options.batchId)) return []
          if (options.after !== undefined && !isId(options.after)) return []
          return tx.query<Row>(
            `SELECT ${jobColumns("j")} FROM ${s}.jobs j JOIN ${s}.batches b ON b.id = j.batch_id
             WHERE j.batch_id = $1::uuid AND ($2::text IS NULL OR b.tenant IS NOT DISTINCT FROM $2::text)
               AND ($3::text IS NULL OR j.state = $3::text)
               AND ($4::uuid IS NULL OR j.seq > (SELECT a.seq FROM ${s}.jobs a WHERE a.id = $4::uuid
                 AND a.batch_id = $1::uuid))
             ORDER BY j.seq LIMIT $5::int`,
            [
              options.batchId,
              options.tenant ?? null,
              options.state ?? null,
              options.after ?? null,
              options.limit ?? Protocol.defaults.listLimit
            ]
          )
        }),
        (rows) => rows.map(toJob)
      )
  }
}
