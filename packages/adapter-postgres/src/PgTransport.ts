/**
 * The Transport on the Store's own tables: no second system to run. A "message" is a queued, due job row; a
 * delivery hides that row from other receivers for the visibility time. Once a worker claims the job, the row is
 * no longer queued and the Store's lease is what keeps it from everyone else. So `extend` and `defer` are
 * single-row updates of the hiding time (cheap, never contended) that only matter while a job is still queued (a
 * worker skipping a type it cannot run defers it), and `ack` writes nothing: the row is the message, and a job that
 * is (again) queued must stay deliverable, so there is nothing to remove.
 *
 * Wake-ups: a trigger NOTIFYs when a job becomes queued (submit, retry, release, replay, sweep); receivers LISTEN
 * and also poll every `pollMs`, so a missed notification (a LISTEN connection lost during a restart) only delays
 * work. Receives select batches with FOR UPDATE SKIP LOCKED, so concurrent receivers never wait on each other.
 *
 * Publishing: there is one message per job (its row), so `publish` cannot add a second copy beside a hidden one.
 * It makes a visible row wait `delayMs` (a publish without a delay writes nothing: the row already is the message,
 * and the trigger already woke the receivers), and never makes a hidden row (a delivery in flight, a worker's `defer`)
 * visible earlier than it already is: a hidden row comes back by itself when its hiding ends, so nothing is lost,
 * and a sweeper republishing a waiting job cannot undo a worker's deferral. The Store's own transitions to queued
 * (retry, release, replay, requeue after an expired lease) clear the hiding, so a job that is queued again is
 * deliverable at once.
 *
 * Capabilities: `defer` yes; no `maxReceiveCount` (a job is never moved aside by the transport; the Store's
 * attempts and the sweeper decide its fate). Messages can only name jobs of this Store: publishing an id that is
 * not a queued job of that queue delivers nothing, because there is nothing to run.
 *
 * Time: visibility is store time (the server's clock, the one the Store's leases use). With `timeSource: "clock"`
 * every statement gets the `Clock`'s time as `now` instead, the way Store verbs take `now`, so a `TestClock` drives
 * visibility, delays and long polls without real sleeps.
 *
 * @since 0.1.0
 */
import { TransportError } from "@slowcall/core/Errors"
import type { JobId } from "@slowcall/core/Job"
import { type Delivery, Transport, type TransportCapabilities } from "@slowcall/core/Transport"
import { Clock, Context, Deferred, Effect, Layer, Ref, type Scope } from "effect"
import type { Driver } from "./internal/driver.js"
import { classify } from "./internal/errors.js"
import { isUuid, type Row } from "./internal/rows.js"
import { makeStatements } from "./internal/statements.js"
import { PgDriver } from "./PgDriver.js"

/**
 * The PgTransport tag (same instance as the generic `Transport` its layers provide).
 *
 * @since 0.1.0
 * @category services
 */
export class PgTransport extends Context.Tag("@slowcall/adapter-postgres/PgTransport")<
  PgTransport,
  Transport["Type"]
>() {}

/**
 * What PgTransport declares (see the module header): deliveries can be deferred, visibility follows the Store's
 * lease, an ack removes nothing, nothing is moved aside by receive count, receives honour priority, delays have no
 * limit, one receive carries at most 1000 messages (one statement, one round trip), and a worker claims straight
 * from the Store (`Store.claimNext`, one statement per batch) and waits for work with `awaitWork`.
 *
 * @since 0.1.0
 * @category models
 */
export const capabilities: TransportCapabilities = {
  defer: true,
  maxReceiveCount: null,
  ackRemoves: false,
  visibilityFollowsLease: true,
  maxBatch: 1000,
  maxDelayMs: null,
  priority: true,
  claimsFromStore: true
}

const toTransportError = (operation: string, error: unknown): TransportError => {
  const kind = classify(error)
  const detail = error instanceof Error ? error.message.slice(0, 500) : String(error).slice(0, 500)
  switch (kind) {
    case "statement_timeout":
    case "connect_timeout":
    case "read_timeout":
      return new TransportError({ reason: "Timeout", operation, detail })
    case "server_shutdown":
    case "connection_exception":
    case "too_many_connections":
    case "socket":
    case "connection_lost":
      return new TransportError({ reason: "Connection", operation, detail })
    case "serialization":
    case "deadlock":
      return new TransportError({ reason: "Throttled", operation, detail })
    case "unique_violation":
    case "integrity_violation":
    case "unstorable_value":
    case "other":
      return new TransportError({ reason: "Unknown", operation, detail })
    default: {
      const exhaustive: never = kind
      return exhaustive
    }
  }
}

const receiptOf = (jobId: string, receiveCount: number): string => `${jobId}:${receiveCount}`

const parseReceipt = (receipt: string): { readonly jobId: string; readonly count: number } | undefined => {
  const at = receipt.lastIndexOf(":")
  const jobId = receipt.slice(0, at)
  const count = Number(receipt.slice(at + 1))
  return at > 0 && isUuid(jobId) && Number.isInteger(count) ? { jobId, count } : undefined
}

/**
 * Options of `make`. `pollMs` (default 500) bounds how long a waiting receive goes without looking when no
 * notification arrives. `timeSource` (default `"server"`) says whose clock hides and reveals messages: the server's,
 * shared with the Store's leases, or (`"clock"`) the `Clock` of the calling fiber, passed to every statement as
 * `now`, for tests that move time with `TestClock`.
 *
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions {
  readonly schema?: string | undefined
  readonly pollMs?: number | undefined
  readonly timeSource?: "server" | "clock" | undefined
}

/**
 * A PgTransport over a migrated schema. Subscribes to notifications for the scope's lifetime. Every visibility
 * decision of one statement reads one instant: the server's `now()`, or the `Clock` under `timeSource: "clock"`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (driver: Driver, options: MakeOptions = {}): Effect.Effect<Transport["Type"], never, Scope.Scope> =>
  Effect.gen(function* () {
    const schema = options.schema ?? "slowcall"
    const st = makeStatements(schema)
    const pollMs = options.pollMs ?? 500
    // `now` for the statements: null lets the server use its own clock.
    const statementNow: Effect.Effect<number | null> =
      options.timeSource === "clock" ? Clock.currentTimeMillis : Effect.succeed(null)
    const wake = yield* Ref.make(yield* Deferred.make<void>())
    // Set by every wake-up, cleared by the `awaitWork` it ends: a notification that lands while no one waits (between
    // a worker's claim and its next wait) still ends that next wait at once.
    let signalled = false
    const signal = Effect.flatMap(Deferred.make<void>(), (next) =>
      Ref.getAndSet(wake, next).pipe(
        Effect.flatMap((current) => {
          signalled = true
          return Deferred.succeed(current, undefined)
        })
      )
    )
    const runtime = yield* Effect.runtime<never>()
    const prefix = `${schema}:`
    yield* Effect.acquireRelease(
      Effect.promise(() =>
        driver
          .listen("slowcall_jobs", (payload) => {
            if (payload.startsWith(prefix)) Effect.runFork(signal.pipe(Effect.provide(runtime)))
          })
          .catch(() => async () => {})
      ),
      (unlisten) => Effect.promise(() => unlisten())
    )

    const q = (operation: string, text: string, params: ReadonlyArray<unknown>) =>
      Effect.tryPromise({
        try: () => driver.query<Row>(text, params),
        catch: (error) => toTransportError(operation, error)
      })

    /** One statement hiding every item with a current receipt for its `ms`; foreign receipts are skipped. */
    const hide = (operation: string, items: ReadonlyArray<{ readonly delivery: Delivery; readonly ms: number }>) => {
      const ids: Array<string> = []
      const counts: Array<number> = []
      const hiddenMs: Array<number> = []
      for (const { delivery, ms } of items) {
        const parsed = parseReceipt(delivery.receipt)
        if (parsed === undefined) continue
        ids.push(parsed.jobId)
        counts.push(parsed.count)
        hiddenMs.push(Math.max(0, ms))
      }
      if (ids.length === 0) return Effect.void
      return Effect.flatMap(statementNow, (now) => Effect.asVoid(q(operation, st.hide, [ids, counts, hiddenMs, now])))
    }

    const receiveOnce = (queue: string, max: number, visibilityMs: number, now: number) =>
      q("receive", st.receive, [queue, max, visibilityMs, options.timeSource === "clock" ? now : null]).pipe(
        Effect.map((rows) =>
          rows.map(
            (row): Delivery => ({
              jobId: String(row.id) as JobId,
              type: String(row.type),
              version: Number(row.version),
              priority: Number(row.priority),
              queue,
              receipt: receiptOf(String(row.id), Number(row.receive_count)),
              receiveCount: Number(row.receive_count)
            })
          )
        )
      )

    const transport: Transport["Type"] = {
      // Without a delay a publish could only make the row visible now, which it already is unless hidden (and a
      // publish never shortens a hiding); the trigger has already sent the wake-up for every transition to
      // queued. So only delayed items are written: a submit costs one commit, not two.
      publish: ({ items, queue }) => {
        const ids: Array<string> = []
        const delays: Array<number> = []
        for (const { delayMs, message } of items) {
          if (!isUuid(message.jobId) || delayMs === undefined || delayMs <= 0) continue
          ids.push(message.jobId)
          delays.push(delayMs)
        }
        if (ids.length === 0) return Effect.void
        return Effect.flatMap(statementNow, (now) => Effect.asVoid(q("publish", st.publish, [ids, queue, delays, now])))
      },
      receive: ({ max, queue, visibilityMs, waitMs }) =>
        Effect.gen(function* () {
          const deadline = (yield* Clock.currentTimeMillis) + waitMs
          while (true) {
            const waiter = yield* Ref.get(wake)
            const askedAt = yield* Clock.currentTimeMillis
            const batch = yield* receiveOnce(
              queue,
              Math.min(capabilities.maxBatch, Math.max(1, max)),
              visibilityMs,
              askedAt
            )
            if (batch.length > 0 || askedAt >= deadline) return batch
            // The next look is due `pollMs` after this one began (or at the deadline), however long the query took:
            // when the clock passed that point during the query, look again at once instead of waiting on.
            const wait = Math.min(askedAt + pollMs, deadline) - (yield* Clock.currentTimeMillis)
            if (wait > 0) yield* Deferred.await(waiter).pipe(Effect.timeout(wait), Effect.ignore)
          }
        }),
      extend: ({ items }) =>
        hide(
          "extend",
          items.map((item) => ({ delivery: item.delivery, ms: item.visibilityMs }))
        ),
      defer: ({ items }) =>
        hide(
          "defer",
          items.map((item) => ({ delivery: item.delivery, ms: item.delayMs }))
        ),
      ack: () => Effect.void,
      // A notification for the schema ends the wait early; otherwise it ends after `pollMs` (or `waitMs`), so a lost
      // notification only delays work.
      awaitWork: ({ waitMs }) =>
        Effect.suspend(() => {
          if (signalled) {
            signalled = false
            return Effect.void
          }
          return Effect.flatMap(Ref.get(wake), (waiter) =>
            Deferred.await(waiter).pipe(
              Effect.timeout(Math.max(0, Math.min(waitMs, pollMs))),
              Effect.ignore,
              Effect.ensuring(
                Effect.sync(() => {
                  signalled = false
                })
              )
            )
          )
        }),
      capabilities
    }
    return transport
  })

/**
 * PgTransport and the generic `Transport` (same instance) over the shared `PgDriver`, listening for wake-ups for the
 * layer's lifetime. The schema must be migrated (`PgStore.layerFromDriver` does it).
 *
 * @since 0.2.0
 * @category layers
 */
export const layerFromDriver = (options: MakeOptions = {}): Layer.Layer<PgTransport | Transport, never, PgDriver> =>
  Layer.scopedContext(
    Effect.gen(function* () {
      const transport = yield* make(yield* PgDriver, options)
      return Context.make(PgTransport, transport).pipe(Context.add(Transport, transport))
    })
  )
