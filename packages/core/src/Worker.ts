/**
 * The Worker: claims jobs in the Store before any model call, a batch per call (from the deliveries of a Transport,
 * or straight from the Store when the transport's messages are the Store's own rows), runs each registered handler
 * under a kept lease, persists the outcome with fenced writes, and only then acks. One intake loop, one lease keeper
 * and one group-committed queue per store and transport verb serve every job the worker holds: a busy worker makes
 * one claim, one heartbeat, one settle and one charge call per round trip, not one per job.
 *
 * Guarantees it keeps (with any Store and Transport that pass the conformance suites):
 * - A model call happens only under a lease this worker claimed; a duplicate delivery costs one claim.
 * - A worker that lost its lease (taken over, or unable to renew before its local lease end) stops its handler and
 *   commits nothing; what it spent stays in the charge ledger.
 * - The actual cost of a model call that was made is settled before its attempt's outcome is written, the write
 *   retried until it lands whatever becomes of the lease (charges are not fenced): a store outage as a call returns
 *   delays the outcome, never drops the cost. Only the end of a closing worker's grace periods gives a settlement up
 *   (logged as an error with the call id and amount; the reservation stays).
 * - A claim whose reply was lost is recognised by its unique owner tag and adopted, never counted as someone else's.
 * - The lease it holds is a short keep-alive (`keepAliveMs`, default `Lease.defaultKeepAliveMs`, 6 s; the attempt's
 *   worst case when that is shorter), renewed by the batched heartbeats and kept (heartbeat and self-fencing
 *   watchdog) until the attempt's outcome is durable: a store outage shorter than the keep-alive at commit time costs
 *   retries, never a second model call. A worker that dies (or stops for longer than the keep-alive) loses its jobs
 *   to the next claim once the keep-alive ends; it can never commit under the old token.
 * - A message is acked only after the job's outcome is durable; a failed persist leaves the message to return. A
 *   result the Store refuses for good (a non-retryable `StoreError`) fails the job with that evidence instead of
 *   being retried forever.
 * - No model call starts after the job's deadline (store time); a deadline seen at a heartbeat stops the handler.
 *   Both end the job `abandoned(deadline)`.
 * - A model call that names a provider resource starts only once the fleet limiter granted it a permit (renewed with
 *   the job's heartbeats, released after the call with the provider's usage); one it tells to wait, or finds paused,
 *   never starts: the job goes back to `queued` until the wait ends (`Throttle`), its attempt not used and nothing
 *   charged. A 429 that says until when, or a spend cap, pauses the resource for every worker. Calls that name no
 *   resource never touch the limiter.
 * - A job whose handler names a resource is not claimed while the limiter's last view of that resource (forecast to
 *   now) shows no room for it: it keeps its place in the queue, and the claim's order decides who goes first once
 *   capacity returns. A worker none of whose handlers names a resource forecasts nothing.
 * - An unknown (type, version) is deferred, never claimed (`claimNext` is filtered to the handlers here): deploy skew
 *   loses nothing.
 * - A job waiting in the local queue (`prefetch`) holds a renewed lease, and is handed back, never run, once less
 *   than half of its lease lies ahead.
 * - Nothing is written under a token once the worker has learned its lease is lost, however long the write waited
 *   for its batch.
 * - Closing the scope stops claiming and starts no handler any more (a claim already sent lands, and its jobs are
 *   released at once, as are the waiting ones), lets running handlers finish for `shutdownGraceMs`, then interrupts
 *   the rest and releases their leases so another worker can claim them at once.
 *
 * Each attempt runs in a `slowcall.attempt` span (job id, type, version, token, trace id) when tracing is enabled
 * where the worker starts and a tracer other than Effect's built-in one (which exports nothing) is installed there;
 * the handler's log lines and the worker's own about an attempt carry `worker`, `jobId`, `token` and `traceId` when
 * the minimum log level there is not `None`. Each is decided once at start: what is off is not done for any job.
 *
 * @since 0.1.0
 */
import { Data, Effect, Fiber, FiberRef, HashSet, Layer, Option, type Runtime, type Scope, type Tracer } from "effect"
import * as Fairness from "./Fairness.js"
import * as Handler from "./Handler.js"
import * as Ids from "./Ids.js"
import * as Tracing from "./internal/tracing.js"
import * as WorkerAdmission from "./internal/worker/admission.js"
import { releaseWaiting } from "./internal/worker/attempt.js"
import type * as WorkerContext from "./internal/worker/context.js"
import * as Control from "./internal/worker/control.js"
import { type Env, withAttemptAnnotations } from "./internal/worker/env.js"
import * as Fibers from "./internal/worker/fibers.js"
import { intake } from "./internal/worker/intake.js"
import { makeKeeper } from "./internal/worker/lease.js"
import * as WorkerLimits from "./internal/worker/limits.js"
import { makeOutbox } from "./internal/worker/outbox.js"
import { makeWorkerStore } from "./internal/worker/ticks.js"
import * as Lease from "./Lease.js"
import { Limiter } from "./Limiter.js"
import { Store } from "./Store.js"
import { type AckItem, type DeferItem, type Delivery, Transport } from "./Transport.js"

/**
 * Worker configuration. Defaults: `concurrency` 1, `prefetch` 0, `keepAliveMs` 6 s, `receiveWaitMs` 1 s,
 * `shutdownGraceMs` 10 s, `unknownHandlerDelayMs` 30 s, `busyMarginMs` 250 ms, retry delays from each error class's
 * policy.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkerOptions<R> {
  readonly queue: string
  /**
   * Worker identity; generated when omitted. Each claim records `${id}/${tag}` as the lease owner, with a tag unique
   * to that claim, so the worker can tell its own lease from another process's even when ids are shared.
   */
  readonly id?: string | undefined
  readonly handlers: ReadonlyArray<Handler.Handler<any, any, R>>
  /** Jobs run at once. */
  readonly concurrency?: number | undefined
  /**
   * Jobs claimed ahead of a free slot, kept in the worker's local queue (default 0): claims then come in batches of
   * up to `concurrency + prefetch` jobs, one store call each. A waiting job holds its lease (the worker renews it)
   * and is handed back, never run, once less than half of its lease lies ahead; a closing worker releases every
   * waiting job at once. Worth it for short jobs at high rates; for slow calls it only keeps jobs from other workers.
   */
  readonly prefetch?: number | undefined
  /**
   * How long a job this worker holds may go unheard from before another worker may claim it (default
   * `Lease.defaultKeepAliveMs`, 6 s): the lease each claim and heartbeat asks for is this, or the handler's attempt
   * worst case (`Handler.leaseMs`) when that is shorter. Renewals go out every third of it, batched, so a shorter
   * keep-alive recovers a dead worker's jobs sooner and costs more heartbeat writes (3 / keepAlive per held job per
   * second). A process stopped for longer than this (a pause, a debugger, swapping) has its attempts fenced: they
   * commit nothing, and another worker may run the call again. A whole number of ms, at least 3, else `make` fails
   * with `InvalidWorkerOptions`.
   *
   * @since 0.9.0
   */
  readonly keepAliveMs?: number | undefined
  /** Longest wait of one receive call. */
  readonly receiveWaitMs?: number | undefined
  /** How long a closing worker lets running handlers finish before interrupting them. */
  readonly shutdownGraceMs?: number | undefined
  /** Overrides of the backoff base and cap of every error class (Retry-After handling stays per class). */
  readonly retry?: { readonly baseMs?: number | undefined; readonly capMs?: number | undefined } | undefined
  /** How long a delivery with no handler here stays hidden before another worker may see it. */
  readonly unknownHandlerDelayMs?: number | undefined
  /** Added to a live lease's end when hiding a delivery of a busy job. */
  readonly busyMarginMs?: number | undefined
  /** Pause after a failed receive. */
  readonly receiveErrorDelayMs?: number | undefined
  /** How long a delivery is hidden when its claim could not reach the Store. */
  readonly storeErrorDelayMs?: number | undefined
  /** Admission hooks before each claim and around each model call (fleet-wide limits). */
  readonly admission?: Admission<R> | undefined
  /**
   * Fair shares across tenants (opt-in per queue): every claim this worker makes is a fair claim
   * (`Store.claimNext` with `fair`, see `Fairness.ts`): the tenant with the least decayed service per weight
   * goes first, today's order within a tenant. Without it the claim order is the plain one. Only the
   * Store-selected intake (transports with `claimsFromStore`: Postgres, Redis) claims by order; a transport that
   * delivers messages (SQS, the in-memory transport) decides the order itself, and the worker warns at start. Options
   * that `Fairness.problem` rejects are a defect at start.
   */
  readonly fairness?: Fairness.FairOptions | undefined
  /**
   * The fleet limiter that admits model calls naming a provider resource (`CallOptions.resource`, or the handler's
   * `resource`). Defaults to the `Limiter` service in context (every adapter layer provides one next to its Store);
   * with neither, no call is limited. Calls that name no resource never touch it. See "Staying within provider
   * limits" in the docs.
   *
   * @since 0.4.0
   */
  readonly limiter?: Limiter["Type"] | undefined
  /**
   * How a job whose call must wait for its resource comes back (it goes back to `queued`, its attempt not used):
   * `recheckMs` (default 1 s) is the longest it waits for a concurrency permit or a half-open resource's probe,
   * which come back when a call ends; `pausedRecheckMs` (default 60 s) how often it asks again while the resource
   * is paused until an operator resumes it (a spend cap). A wait for a bucket's refill or a timed pause ends when the
   * limiter says it does.
   *
   * @since 0.4.0
   */
  readonly throttle?:
    | { readonly recheckMs?: number | undefined; readonly pausedRecheckMs?: number | undefined }
    | undefined
}

/**
 * A running worker. `inFlight` counts the jobs it holds a lease on: waiting in its local queue, running, or having
 * their outcome written.
 *
 * @since 0.1.0
 * @category models
 */
export interface Worker {
  readonly id: string
  readonly inFlight: Effect.Effect<number>
}

/**
 * A worker option that cannot work (`option` names it, `reason` says why). The worker does not start and nothing is
 * written.
 *
 * @since 0.9.0
 * @category errors
 */
export class InvalidWorkerOptions extends Data.TaggedError("InvalidWorkerOptions")<{
  readonly option: string
  readonly reason: string
}> {
  override get message() {
    return `worker option ${this.option}: ${this.reason}`
  }
}

/**
 * Hooks that admit work before it starts, for fleet-wide concurrency and rate limits. `beforeClaim` runs before a
 * delivery is claimed (`Defer` hides the delivery for `delayMs` without claiming: nothing is written); `aroundCall`
 * wraps each model call (it may wait for a permit before running the call, and must run it at most once). Without
 * hooks a worker admits everything and pays nothing for it, except what its fleet limiter's forecast holds back
 * (deliveries of a handler's resource without room are deferred before this hook is asked).
 *
 * @since 0.2.0
 * @category models
 */
export interface Admission<R = never> {
  readonly beforeClaim?:
    | ((
        delivery: Delivery
      ) => Effect.Effect<{ readonly _tag: "Admit" } | { readonly _tag: "Defer"; readonly delayMs: number }, never, R>)
    | undefined
  readonly aroundCall?: WorkerContext.AroundCall | undefined
}

/**
 * Graceful shutdown: stop claiming, hand every waiting job back, let running handlers finish for `shutdownGraceMs`,
 * then stop the rest (their leases are released) and wait for their outcomes, then for the last acks and defers.
 * Finalizers run uninterruptibly; the waits must be interruptible or their timeouts could never cut them short. An
 * idle worker has nothing to wait for: no timer, no race.
 */
const shutdown = <R>(env: Env<R>, loop: Fiber.RuntimeFiber<never, never>) =>
  shutdownSteps(env, loop).pipe(Effect.annotateLogs({ worker: env.owner }))

/** Waits until the worker's attempt fibers are gone, at most `ms`: `None` when the time ran out. */
const drain = <R>(env: Env<R>, ms: number) =>
  Effect.suspend(() =>
    env.fibers.size() === 0
      ? Effect.succeedSome(undefined)
      : Effect.timeoutOption(Effect.interruptible(env.fibers.awaitEmpty), ms)
  )

// Generators at module level, never per worker or per call: why in scripts/check-generators.mjs.
const shutdownSteps = Effect.fnUntraced(function* <R>(env: Env<R>, loop: Fiber.RuntimeFiber<never, never>) {
  yield* Effect.sync(() => {
    env.closing = true
    // A claim still queued for a tick is never sent.
    env.writes.stopClaims()
  })
  // Waits until a claim in flight has landed and its jobs are held, so the release below sees them.
  yield* Fiber.interrupt(loop)
  yield* releaseWaiting(env)
  if (Option.isNone(yield* drain(env, env.shutdownGraceMs))) {
    for (const held of env.running) yield* Control.stop(held.control, "shutdown")
    yield* drain(env, Math.max(1_000, env.shutdownGraceMs))
  }
  if (!env.acks.idle() || !env.defers.idle()) {
    yield* Effect.timeoutOption(
      Effect.interruptible(Effect.all([env.acks.drained, env.defers.drained], { discard: true })),
      1_000
    )
  }
  // Whatever still runs after the grace periods is stopped here (its lease lapses; the message returns): a handler
  // at once, an outcome write or a call's settlement once its write in flight is answered (neither retries more).
  env.abandoning = true
  yield* env.fibers.interruptAll
})

/**
 * Start a worker in the current scope. It runs until the scope closes, then shuts down gracefully. Options that
 * cannot work fail with `InvalidWorkerOptions` before anything starts.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <R = never>(
  options: WorkerOptions<R>
): Effect.Effect<Worker, InvalidWorkerOptions, Store | Transport | Scope.Scope | R> => start(options)

const start = Effect.fnUntraced(function* <R>(options: WorkerOptions<R>) {
  const keepAliveMs = options.keepAliveMs ?? Lease.defaultKeepAliveMs
  const keepAliveProblem = Lease.keepAliveProblem(keepAliveMs)
  if (keepAliveProblem !== undefined) {
    return yield* new InvalidWorkerOptions({ option: "keepAliveMs", reason: keepAliveProblem })
  }
  const registry = Handler.registry(options.handlers)
  const fairness = options.fairness
  const fairProblem = fairness === undefined ? undefined : Fairness.problem(fairness)
  if (fairProblem !== undefined) throw new Error(`worker fairness: ${fairProblem}`)
  const store = yield* Store
  const transport = yield* Transport
  const limiter = options.limiter ?? Option.getOrUndefined(yield* Effect.serviceOption(Limiter))
  const maxBatch = Math.max(1, Math.min(1_000, transport.capabilities.maxBatch))
  if (fairness !== undefined && !transport.capabilities.claimsFromStore) {
    yield* Effect.logWarning("fairness has no effect: this transport delivers jobs in its own order")
  }
  const tracer = yield* Tracing.activeTracer
  // Read once where the worker starts: with logging off (minimum level None) no log line can carry the per-job
  // annotations, so none are added; with tracing off no attempt span is made.
  const logging = (yield* FiberRef.get(FiberRef.currentMinimumLogLevel))._tag !== "None"
  // Every fiber of the worker logs through loggers that add the annotations of the attempt a line is written for.
  const annotated = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    logging
      ? Effect.locallyWith(effect, FiberRef.currentLoggers, (loggers) => HashSet.map(loggers, withAttemptAnnotations))
      : effect
  // The worker's runtime, read once: the helper loops and the attempts start in it. The helpers start on first need;
  // they outlive the intake and the shutdown that needs them (their stop is the scope's first finalizer, so it runs
  // last).
  const runtime = yield* annotated(Effect.runtime<R>())
  const helpers = Fibers.makeHelpers(runtime)
  yield* Effect.addFinalizer(() => helpers.stop)
  const rechecks = {
    recheckMs: Math.max(1, options.throttle?.recheckMs ?? WorkerLimits.defaults.recheckMs),
    pausedRecheckMs: Math.max(1, options.throttle?.pausedRecheckMs ?? WorkerLimits.defaults.pausedRecheckMs)
  }
  // Only a worker with a limiter and a handler that names a resource forecasts capacity before its claims.
  const gate = limiter === undefined ? undefined : WorkerAdmission.make({ handlers: registry.all, ...rechecks })
  const limits =
    limiter === undefined
      ? undefined
      : WorkerLimits.make({
          limiter,
          maxBatch,
          start: helpers.start,
          ...rechecks,
          learn: gate?.learn,
          learnStates: gate?.learnStates
        })
  // The owner tag first, then the instance: both are drawn from the worker's Random, in this order.
  const owner = options.id ?? (yield* Ids.makeId("worker"))
  const instance = yield* Ids.makeId("i")
  const env = envOf(options, {
    store,
    transport,
    registry,
    owner,
    instance,
    keepAliveMs,
    maxBatch,
    logging,
    tracer,
    runtime,
    helpers,
    limits,
    gate
  })
  const loop = yield* annotated(Effect.forkScoped(intake(env)))
  yield* Effect.addFinalizer(() => shutdown(env, loop))
  return { id: env.owner, inFlight: Effect.sync(() => env.keeper.size()) }
})

/** What `envOf` takes besides the options: the services and parts `start` read or made, in its order. */
interface Parts<R> {
  readonly store: Store["Type"]
  readonly transport: Transport["Type"]
  readonly registry: Handler.Registry<R>
  readonly owner: string
  readonly instance: string
  readonly keepAliveMs: number
  readonly maxBatch: number
  readonly logging: boolean
  readonly tracer: Tracer.Tracer | undefined
  readonly runtime: Runtime.Runtime<R>
  readonly helpers: Fibers.Helpers
  readonly limits: WorkerLimits.WorkerLimits | undefined
  readonly gate: WorkerAdmission.WorkerAdmission | undefined
}

/** A worker's shared state (`Env`): its options with their defaults, its services and the parts made for it. */
const envOf = <R>(options: WorkerOptions<R>, parts: Parts<R>): Env<R> => {
  const { helpers, keepAliveMs, maxBatch, registry, store, tracer, transport } = parts
  const logFailure = (what: string) => (cause: unknown, items: ReadonlyArray<{ readonly delivery: Delivery }>) =>
    Effect.logWarning(`${what} failed; the messages will return`, cause).pipe(
      Effect.annotateLogs({ deliveries: items.length })
    )
  return {
    store,
    transport,
    registry,
    runnable: registry.all.map((handler) => ({ type: handler.type, version: handler.version })),
    owner: parts.owner,
    // Claim owner tags: unique per worker instance (random) and per claim call (counter).
    instance: parts.instance,
    queue: options.queue,
    concurrency: Math.max(1, Math.floor(options.concurrency ?? 1)),
    prefetch: Math.max(0, Math.floor(options.prefetch ?? 0)),
    receiveWaitMs: options.receiveWaitMs ?? 1_000,
    shutdownGraceMs: options.shutdownGraceMs ?? 10_000,
    unknownHandlerDelayMs: options.unknownHandlerDelayMs ?? 30_000,
    busyMarginMs: options.busyMarginMs ?? 250,
    receiveErrorDelayMs: options.receiveErrorDelayMs ?? 1_000,
    storeErrorDelayMs: options.storeErrorDelayMs ?? 1_000,
    keepAliveMs,
    visibilityMs: Lease.keptLeaseMs(registry.maxLeaseMs, keepAliveMs),
    maxDelayMs: transport.capabilities.maxDelayMs ?? Number.POSITIVE_INFINITY,
    maxBatch,
    retry: options.retry,
    admission: options.admission,
    fair: options.fairness,
    logging: parts.logging,
    // Effect's built-in tracer exports nothing: an attempt span made for it would reach no one, so none is made. A
    // tracer installed in its place (OpenTelemetry, a test's) gets one span per attempt.
    tracer,
    keeper: makeKeeper({ store, transport, tracer, start: helpers.start, renewPermits: parts.limits?.renew }),
    limits: parts.limits,
    gate: parts.gate,
    writes: makeWorkerStore(store, maxBatch, helpers.run),
    acks: makeOutbox<AckItem, unknown>({
      send: (items) => transport.ack({ items }),
      maxBatch,
      onFailure: logFailure("ack"),
      start: helpers.start
    }),
    defers: makeOutbox<DeferItem, unknown>({
      send: (items) => transport.defer({ items }),
      maxBatch,
      onFailure: logFailure("defer"),
      start: helpers.start
    }),
    // Each attempt with the worker's services, loggers and scheduler, and nothing of the fiber that dispatched it.
    fibers: Fibers.make(parts.runtime),
    waiting: [],
    running: new Set(),
    busy: 0,
    closing: false,
    abandoning: false,
    claims: 0,
    intakeWaiter: undefined
  }
}

/**
 * A layer that runs a worker for the lifetime of the layer's scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <R = never>(
  options: WorkerOptions<R>
): Layer.Layer<never, InvalidWorkerOptions, Store | Transport | R> => Layer.scopedDiscard(make(options))
