/**
 * The Store on Postgres: a real server through node-postgres, or PGlite embedded in the process. Every protocol
 * step is one conditional SQL statement (see `internal/statements.ts`), so the row is the lock and the statement
 * is the transaction; store time is the server's `now()` unless a test passes `now`.
 *
 * @since 0.1.0
 */
import type { PGlite } from "@electric-sql/pglite"
import type { TransportError } from "@slowcall/core/Errors"
import { AlreadyTerminal, IdempotencyKeyReused, JobNotFound, LeaseLost, StoreError } from "@slowcall/core/Errors"
import { isTerminal, type Job, type JobId } from "@slowcall/core/Models"
import { Store, type SubmitOptions, type SubmitResult } from "@slowcall/core/Store"
import { type Message, Transport } from "@slowcall/core/Transport"
import { Config, type ConfigError, Context, Effect, Layer, Option, Runtime, type Scope } from "effect"
import {
  type Driver,
  fromSqlClient,
  makePgDriver,
  makePgliteDriver,
  type PgDriverOptions,
  type Queryable,
  type SqlClient
} from "./internal/driver.js"
import { toStoreError } from "./internal/errors.js"
import { isUuid, jsonParam, type Row, toAttempt, toCharge, toJob } from "./internal/rows.js"
import { makeStatements, type Statements } from "./internal/statements.js"
import { type MigrateResult, migrate } from "./PgMigrator.js"
import * as PgTransport from "./PgTransport.js"

export type { SqlClient } from "./internal/driver.js"

/**
 * What the relay publishes for one committed job, and how long the transport should hold it back (a job whose
 * `runAfter` lies in the future).
 *
 * @since 0.1.0
 * @category models
 */
export interface OutboxEntry {
  readonly queue: string
  readonly message: Message
  readonly delayMs: number
}

type StoreService = Store["Type"]

/**
 * The Postgres Store: every generic Store verb, plus what only a SQL backend can offer. Its generic verbs keep the
 * whole `Store` contract; the extras never weaken it.
 *
 * @since 0.1.0
 * @category services
 */
export interface PgStoreService extends StoreService {
  /** The schema holding the tables. */
  readonly schema: string
  /**
   * `submit` inside the caller's open transaction (a node-postgres client or a PGlite transaction): the job
   * commits or rolls back together with the caller's own writes. Same semantics as `submit`.
   */
  readonly submitInTransaction: (
    client: SqlClient,
    options: SubmitOptions
  ) => Effect.Effect<SubmitResult, IdempotencyKeyReused | StoreError>
  /**
   * One outbox pass: committed queued jobs not yet handed to the external transport are published through
   * `publish`, then marked, inside one transaction that holds their rows with SKIP LOCKED. A crash after publish
   * and before commit publishes them again: at least once, never lost. Returns how many were published.
   */
  readonly relayOutbox: <E>(options: {
    readonly publish: (entry: OutboxEntry) => Effect.Effect<void, E>
    readonly limit?: number | undefined
  }) => Effect.Effect<number, StoreError | E>
  /** Re-runs the migrations (a no-op on a current schema). */
  readonly migrate: Effect.Effect<MigrateResult, StoreError>
}

/**
 * The Postgres Store tag. Layers of this module provide it together with the generic `Store` (same instance).
 *
 * @since 0.1.0
 * @category services
 */
export class PgStore extends Context.Tag("@slowcall/adapter-postgres/PgStore")<PgStore, PgStoreService>() {}

const run = <A>(operation: string, thunk: () => Promise<A>): Effect.Effect<A, StoreError> =>
  Effect.tryPromise({ try: thunk, catch: (error) => toStoreError(operation, error) })

/** How often a statement whose miss contradicts its own snapshot is run again before giving up. */
const RACE_RETRIES = 8

const raceLost = (operation: string) =>
  new StoreError({ reason: "Conflict", operation, detail: "the row kept changing under concurrent writers" })

const submitOn = (
  q: Queryable,
  st: Statements,
  o: SubmitOptions
): Effect.Effect<SubmitResult, IdempotencyKeyReused | StoreError> =>
  Effect.gen(function* () {
    const params = [
      o.id,
      o.queue,
      o.tenant ?? null,
      o.type,
      o.version,
      o.requestKey ?? null,
      o.inputHash,
      jsonParam(o.input),
      o.inputRef ?? null,
      o.priority ?? 0,
      o.runAfter ?? null,
      o.deadlineAt ?? null,
      o.budgetCents ?? null,
      o.maxAttempts,
      o.traceId ?? null,
      o.now ?? null
    ]
    for (let i = 0; i < RACE_RETRIES; i++) {
      const rows = yield* run("submit", () => q.query<Row>(st.submit, params))
      const row = rows[0]
      if (row === undefined) continue
      const job = toJob(row)
      if (row.created === true) return { job, created: true }
      if (job.inputHash !== o.inputHash) {
        return yield* new IdempotencyKeyReused({ requestKey: o.requestKey ?? "", existingJobId: job.id })
      }
      return { job, created: false }
    }
    return yield* raceLost("submit")
  })

/**
 * A PgStore over a driver whose schema is already migrated.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (driver: Driver, options: { readonly schema?: string | undefined } = {}): PgStoreService => {
  const schema = options.schema ?? "slowcall"
  const st = makeStatements(schema)
  const q = <R = Row>(operation: string, text: string, params: ReadonlyArray<unknown>) =>
    run(operation, () => driver.query<R>(text, params))

  const fencedWrite = (
    operation: string,
    text: string,
    jobId: JobId,
    token: number,
    params: ReadonlyArray<unknown>
  ): Effect.Effect<Job, LeaseLost | StoreError> =>
    Effect.gen(function* () {
      const lost = (row: Row | undefined) =>
        new LeaseLost({
          jobId,
          token,
          currentToken: row === undefined ? null : Number(row.lease_token),
          state: row === undefined ? null : (row.state as Job["state"])
        })
      if (!isUuid(jobId)) return yield* lost(undefined)
      const rows = yield* q(operation, text, [jobId, token, ...params])
      const row = rows[0]
      if (row === undefined || row.applied !== true) return yield* lost(row)
      return toJob(row)
    })

  const impl = {
    submit: (o) => submitOn(driver, st, o),

    claim: (o) =>
      Effect.gen(function* () {
        if (!isUuid(o.jobId)) return yield* new JobNotFound({ jobId: o.jobId })
        const params = [o.jobId, o.now ?? null, o.owner, o.leaseMs, o.estimateCents ?? null]
        for (let i = 0; i < RACE_RETRIES; i++) {
          const rows = yield* q("claim", st.claim, params)
          const row = rows[0]
          if (row === undefined) return yield* new JobNotFound({ jobId: o.jobId })
          const job = toJob(row)
          if (row.applied === true) {
            return job.state === "running"
              ? ({ _tag: "Claimed", job, takeover: row.takeover === true } as const)
              : ({ _tag: "Settled", job } as const)
          }
          const now = Math.round(Number(row.now_ms) * 1000) / 1000
          if (isTerminal(job.state)) return { _tag: "Settled", job } as const
          if (job.state === "running" && job.leaseUntil !== null && job.leaseUntil >= now) {
            return { _tag: "Busy", job, until: job.leaseUntil } as const
          }
          if (job.state === "queued" && job.runAfter > now) return { _tag: "NotDue", job, until: job.runAfter } as const
        }
        return yield* raceLost("claim")
      }),

    heartbeat: (o) =>
      fencedWrite("heartbeat", st.heartbeat, o.jobId, o.token, [o.now ?? null, o.leaseMs, o.progress ?? null]).pipe(
        Effect.map((job) => ({ leaseUntil: job.leaseUntil ?? 0, cancelRequested: job.cancelRequestedAt !== null }))
      ),

    charge: (o) =>
      Effect.gen(function* () {
        if (!isUuid(o.jobId)) return yield* new JobNotFound({ jobId: o.jobId })
        const rows = yield* q("charge", st.charge, [
          o.jobId,
          o.callId,
          o.token,
          o.amountCents,
          o.settled,
          o.now ?? null
        ])
        const row = rows[0]
        if (row === undefined || row.found !== true) return yield* new JobNotFound({ jobId: o.jobId })
        return { costCents: Number(row.cost_cents) }
      }),

    complete: (o) => fencedWrite("complete", st.complete, o.jobId, o.token, [o.now ?? null, jsonParam(o.result)]),

    fail: (o) => fencedWrite("fail", st.fail, o.jobId, o.token, [o.now ?? null, o.errorClass, o.error]),

    retry: (o) => fencedWrite("retry", st.retry, o.jobId, o.token, [o.now ?? null, o.errorClass, o.error, o.runAfter]),

    abandon: (o) =>
      fencedWrite("abandon", st.abandon, o.jobId, o.token, [
        o.now ?? null,
        o.reason,
        o.errorClass ?? null,
        o.error ?? null
      ]),

    release: (o) => fencedWrite("release", st.release, o.jobId, o.token, [o.now ?? null]),

    cancel: (o) =>
      Effect.gen(function* () {
        if (!isUuid(o.jobId)) return yield* new JobNotFound({ jobId: o.jobId })
        for (let i = 0; i < RACE_RETRIES; i++) {
          const rows = yield* q("cancel", st.cancel, [o.jobId, o.tenant ?? null, o.now ?? null])
          const row = rows[0]
          if (row === undefined) return yield* new JobNotFound({ jobId: o.jobId })
          const job = toJob(row)
          if (row.applied === true) return job
          if (job.state === "running" && job.cancelRequestedAt !== null) return job
          if (job.state !== "queued" && job.state !== "running") {
            return yield* new AlreadyTerminal({ jobId: job.id, state: job.state })
          }
        }
        return yield* raceLost("cancel")
      }),

    get: (o) =>
      Effect.gen(function* () {
        if (!isUuid(o.jobId)) return yield* new JobNotFound({ jobId: o.jobId })
        const rows = yield* q("get", st.get, [o.jobId, o.tenant ?? null])
        const row = rows[0]
        if (row === undefined) return yield* new JobNotFound({ jobId: o.jobId })
        return toJob(row)
      }),

    list: (o) =>
      q("list", st.list, [o.queue ?? null, o.tenant ?? null, o.state ?? null, o.type ?? null, o.limit ?? 50]).pipe(
        Effect.map((rows) => rows.map(toJob))
      ),

    attempts: (o) =>
      isUuid(o.jobId)
        ? q("attempts", st.attempts, [o.jobId]).pipe(Effect.map((rows) => rows.map(toAttempt)))
        : Effect.succeed([]),

    charges: (o) =>
      isUuid(o.jobId)
        ? q("charges", st.charges, [o.jobId]).pipe(Effect.map((rows) => rows.map(toCharge)))
        : Effect.succeed([]),

    deadLetters: (o) => {
      const filters = [o.queue ?? null, o.tenant ?? null, o.errorClass ?? null, o.type ?? null]
      return Effect.all(
        {
          jobs: q("deadLetters", st.deadLetterJobs, [...filters, o.limit ?? 50]).pipe(
            Effect.map((rows) => rows.map(toJob))
          ),
          groups: q("deadLetters", st.deadLetterGroups, filters).pipe(
            Effect.map((rows) =>
              rows.map((row) => ({
                errorClass: (row.error_class ?? null) as Job["errorClass"],
                inputHash: String(row.input_hash),
                count: Number(row.count),
                costCents: Number(row.cost_cents)
              }))
            )
          )
        },
        { concurrency: 2 }
      )
    },

    replay: (o) =>
      Effect.gen(function* () {
        const targets = o.jobIds?.slice(0, o.limit ?? o.jobIds.length)
        const rows = yield* q<{ id: string }>("replay", st.replay, [
          targets === undefined ? null : JSON.stringify(targets.filter(isUuid)),
          o.queue ?? null,
          o.tenant ?? null,
          o.errorClass ?? null,
          o.type ?? null,
          targets === undefined ? (o.limit ?? null) : null,
          o.now ?? null
        ])
        if (targets === undefined) return { replayed: rows.map((row) => row.id as JobId), skipped: [] }
        // Each moved job counts as replayed at its first mention; a repeat found it queued already, so it is skipped.
        const done = new Set(rows.map((row) => row.id))
        const replayed: Array<JobId> = []
        const skipped: Array<JobId> = []
        for (const id of targets) {
          if (done.delete(id)) replayed.push(id)
          else skipped.push(id)
        }
        return { replayed, skipped }
      }),

    sweep: (o) =>
      q("sweep", st.sweep, [o.queue ?? null, o.republishAfterMs ?? 30_000, o.limit ?? 1000, o.now ?? null]).pipe(
        Effect.map((rows) => {
          const requeued: Array<JobId> = []
          const expiredFailed: Array<JobId> = []
          const abandoned: Array<JobId> = []
          const stale: Array<Job> = []
          for (const row of rows) {
            const id = String(row.job_id) as JobId
            if (row.kind === "requeued") requeued.push(id)
            else if (row.kind === "expiredFailed") expiredFailed.push(id)
            else if (row.kind === "abandoned") abandoned.push(id)
            else stale.push(toJob(row))
          }
          return { requeued, expiredFailed, abandoned, stale }
        })
      ),

    stats: (o) =>
      Effect.all(
        {
          byState: q("stats", st.statsByState, [o.queue ?? null, o.tenant ?? null]),
          oldest: q("stats", st.statsOldest, [o.queue ?? null, o.tenant ?? null]),
          cost: q("stats", st.statsCost, [o.queue ?? null, o.tenant ?? null, o.failedSince])
        },
        { concurrency: 3 }
      ).pipe(
        Effect.map(({ byState, cost, oldest }) => {
          const counts = { queued: 0, running: 0, succeeded: 0, failed: 0, abandoned: 0 }
          for (const row of byState) counts[row.state as keyof typeof counts] = Number(row.count)
          const oldestQueuedAt: Record<string, number> = {}
          for (const row of oldest) oldestQueuedAt[String(row.priority)] = Math.round(Number(row.oldest) * 1000) / 1000
          const costCentsByErrorClass: Record<string, number> = {}
          let failedInWindow = 0
          for (const row of cost) {
            failedInWindow += Number(row.failed)
            if (row.error_class !== null) {
              costCentsByErrorClass[String(row.error_class)] = Number(row.cost_cents)
            }
          }
          return { byState: counts, oldestQueuedAt, costCentsByErrorClass, failedInWindow }
        })
      ),

    now: q<{ now_ms: number }>("now", st.now, []).pipe(
      Effect.map((rows) => Math.round(Number(rows[0]?.now_ms) * 1000) / 1000)
    )
  } satisfies Store["Type"]

  return {
    ...impl,
    schema,
    submitInTransaction: (client, o) => submitOn(fromSqlClient(client), st, o),
    relayOutbox: <E>(relay: {
      readonly publish: (entry: OutboxEntry) => Effect.Effect<void, E>
      readonly limit?: number | undefined
    }) =>
      Effect.gen(function* () {
        const runtime = yield* Effect.runtime<never>()
        return yield* Effect.tryPromise({
          try: () =>
            driver.transaction(async (tx) => {
              const rows = await tx.query<Row>(st.outboxPick, [relay.limit ?? 100])
              for (const row of rows) {
                const entry: OutboxEntry = {
                  queue: String(row.queue),
                  delayMs: Math.max(0, Math.ceil(Number(row.delay_ms))),
                  message: {
                    jobId: String(row.id) as JobId,
                    type: String(row.type),
                    version: Number(row.version),
                    priority: Number(row.priority)
                  }
                }
                const outcome = await Runtime.runPromise(runtime)(Effect.either(relay.publish(entry)))
                if (outcome._tag === "Left") throw new RelayFailure(outcome.left)
              }
              if (rows.length > 0) await tx.query(st.outboxMark, [JSON.stringify(rows.map((row) => row.id))])
              return rows.length
            }),
          catch: (error): StoreError | E =>
            error instanceof RelayFailure ? (error.error as E) : toStoreError("relayOutbox", error)
        })
      }),
    migrate: migrate(driver, { schema })
  }
}

class RelayFailure {
  constructor(readonly error: unknown) {}
}

/**
 * Options shared by every layer. `schema` (default `slowcall`) names the schema that holds the tables;
 * `migrate` (default true) brings it up to date when the layer is built; `pollMs` is PgTransport's polling
 * fallback when no notification arrives.
 *
 * @since 0.1.0
 * @category models
 */
export interface LayerOptions {
  readonly schema?: string | undefined
  readonly migrate?: boolean | undefined
  readonly pollMs?: number | undefined
}

/**
 * A Store, PgStore, Transport and PgTransport over an already acquired driver (closed when the scope ends).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromDriver = (
  acquire: Effect.Effect<Driver, StoreError, Scope.Scope>,
  options: LayerOptions = {}
): Layer.Layer<PgStore | Store | PgTransport.PgTransport | Transport, StoreError> =>
  Layer.scopedContext(
    Effect.gen(function* () {
      const driver = yield* acquire
      if (options.migrate !== false) yield* migrate(driver, { schema: options.schema })
      const store = make(driver, { schema: options.schema })
      const transport = yield* PgTransport.make(driver, { schema: options.schema, pollMs: options.pollMs })
      return Context.make(PgStore, store).pipe(
        Context.add(Store, store),
        Context.add(PgTransport.PgTransport, transport),
        Context.add(Transport, transport)
      )
    })
  )

/**
 * Acquires a node-postgres driver for the scope: the pool is ended when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const acquirePgDriver = (options: PgDriverOptions): Effect.Effect<Driver, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => makePgDriver(options)),
    (driver) => Effect.promise(() => driver.close())
  )

/**
 * Acquires a PGlite driver for the scope: in memory without `dataDir`, on disk with it. Closed with the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const acquirePgliteDriver = (options: {
  readonly dataDir?: string | undefined
  readonly db?: PGlite | undefined
}): Effect.Effect<Driver, StoreError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => makePgliteDriver(options),
      catch: (error) => toStoreError("open", error)
    }),
    (driver) => Effect.promise(() => driver.close())
  )

/**
 * A real Postgres server through a node-postgres Pool. Give a `connectionString` (or an existing `pool`, which
 * stays the caller's to end); `queryTimeoutMs` (default 30 s) bounds every statement so a dead network fails
 * instead of hanging.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: LayerOptions & PgDriverOptions
): Layer.Layer<PgStore | Store | PgTransport.PgTransport | Transport, StoreError> =>
  layerFromDriver(acquirePgDriver(options), options)

/**
 * `layer` configured from `DATABASE_URL` (and `SLOWCALL_SCHEMA`, default `slowcall`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options: Omit<LayerOptions & PgDriverOptions, "connectionString" | "schema"> = {}
): Layer.Layer<PgStore | Store | PgTransport.PgTransport | Transport, StoreError | ConfigError.ConfigError> =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const connectionString = yield* Config.string("DATABASE_URL")
      const schema = yield* Config.option(Config.string("SLOWCALL_SCHEMA"))
      return layer({ ...options, connectionString, schema: Option.getOrElse(schema, () => "slowcall") })
    })
  )

/**
 * Embedded Postgres (PGlite) in this process: zero setup. With `dataDir` the database persists on disk (a fresh
 * directory takes a few seconds to initialise, reopening is fast); without it the database lives in memory. Pass
 * `db` to share a PGlite instance the application already uses (it stays the caller's to close), e.g. to enqueue
 * jobs inside its own transactions.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPglite = (
  options: LayerOptions & { readonly dataDir?: string | undefined; readonly db?: PGlite | undefined } = {}
): Layer.Layer<PgStore | Store | PgTransport.PgTransport | Transport, StoreError> =>
  layerFromDriver(acquirePgliteDriver(options), options)

/**
 * `submit` inside the caller's open transaction, for a schema given explicitly: usable without any layer, e.g.
 * in code that already holds a node-postgres client inside BEGIN. The job is visible to workers only once that
 * transaction commits, and disappears with it on rollback.
 *
 * @since 0.1.0
 * @category combinators
 */
export const submitInTransaction = (
  client: SqlClient,
  options: SubmitOptions & { readonly schema?: string | undefined }
): Effect.Effect<SubmitResult, IdempotencyKeyReused | StoreError> =>
  submitOn(fromSqlClient(client), makeStatements(options.schema ?? "slowcall"), options)

/**
 * The outbox relay as a loop: one pass every `intervalMs` (default 1 s) until interrupted. Failures of a pass are
 * retried on the next one (at least once); the sweeper's `stale` list remains the safety net for anything a
 * transport lost after accepting it.
 *
 * @since 0.1.0
 * @category combinators
 */
export const runOutboxRelay = (options: {
  readonly transport: Transport["Type"]
  readonly intervalMs?: number | undefined
  readonly limit?: number | undefined
}): Effect.Effect<never, never, PgStore> =>
  Effect.gen(function* () {
    const store = yield* PgStore
    const pass = store.relayOutbox({
      limit: options.limit,
      publish: (entry: OutboxEntry) =>
        options.transport.publish({ queue: entry.queue, message: entry.message, delayMs: entry.delayMs })
    })
    return yield* pass.pipe(
      Effect.catchAll((error: StoreError | TransportError) => Effect.logWarning("outbox relay pass failed", error)),
      Effect.zipRight(Effect.sleep(options.intervalMs ?? 1000)),
      Effect.forever
    )
  })
