/**
 * One simulated run: the real core Worker and Sweeper inside a simulated world (SimStore, SimTransport, SimModel,
 * virtual clocks), driven by a plan. Phases: workload with faults; heal (faults off, every process restarted, long
 * enough for every lease, backoff and attempt to play out); dead-letter replay; final reads.
 *
 * @since 0.1.0
 */
import { BatchStore } from "@slowcall/core/Batch"
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import { isTerminal, type Job, type JobId } from "@slowcall/core/Job"
import * as Limiter from "@slowcall/core/Limiter"
import * as Protocol from "@slowcall/core/Protocol"
import * as Query from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Transport from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import {
  Deferred,
  Effect,
  Either,
  Exit,
  Fiber,
  Logger,
  LogLevel,
  Option,
  Runtime,
  Schema,
  type Scope,
  type Supervisor
} from "effect"
import { BatchWorld } from "./Batches.js"
import { type Event, History, hashEvents } from "./History.js"
import * as Wakeups from "./internal/wakeups.js"
import { type Actor, actor, crash, epoch, Faults, Incarnation, ofIncarnation, skewOf } from "./internal/world.js"
import * as LimitsPlan from "./LimitsPlan.js"
import { ProviderLimits } from "./LimitsProvider.js"
import { watch } from "./OpCount.js"
import {
  attemptPolicy,
  defaultSweeper,
  type HandlerShape,
  has,
  heldLeaseMs,
  isNoRelay,
  oneCall,
  type Plan,
  worstCaseMs
} from "./Plan.js"
import * as Schedules from "./Schedules.js"
import { VirtualClock } from "./SimClock.js"
import * as SimLimiter from "./SimLimiter.js"
import * as SimModel from "./SimModel.js"
import * as SimRuntime from "./SimRuntime.js"
import * as SimStore from "./SimStore.js"
import * as SimTransport from "./SimTransport.js"

/**
 * What one run produced. Invariant: `hash` is a pure function of the plan (same plan, same events, same hash).
 *
 * @since 0.1.0
 * @category models
 */
export interface RunResult {
  readonly plan: Plan
  readonly outcome: "Done" | "Deadlock" | "StepLimit" | "Crashed"
  readonly defect: string | null
  readonly events: ReadonlyArray<Event>
  readonly hash: string
  readonly steps: number
  readonly endMs: number
}

const queue = "sim"
const healWindowMs = 120_000
/**
 * The heal window of a plan with provider limits: a fleet that declares more than the provider allows learns the
 * provider's limits only from its 429s, and each one pauses the resource and then admits one probe, so the same work
 * can take several times as long to drain. Still bounded: a job that never gets capacity fails I5.
 */
const limitedHealWindowMs = 5 * healWindowMs
/** With the relay off: later than any run lasts (fault phase, heal and replay windows), so it never fires. */
const noRelayRepublishAfterMs = 3_600_000
/** How long a worker claiming from the Store waits without a wake-up before it looks again. */
const wakeupPollMs = 500
/** Redrive after this many receives when F16 is on and the relay too. */
const relayMaxReceiveCount = 3

/** The simulated handler's schemas, built once: decoders are compiled per schema and reused across runs. */
const SimInput = Schema.Struct({ n: Schema.Number })
const SimResult = Schema.Struct({ token: Schema.Number, callId: Schema.String, cents: Schema.Number })

interface Slot {
  incarnation: Incarnation
  fiber: Fiber.RuntimeFiber<void, never> | null
  stop: Deferred.Deferred<void> | null
  starts: number
}

/**
 * Options of one run. `decorateStore` and `decorateTransport` wrap the world's store and transport before any
 * process sees them: a way for tests to plant a known bug without touching production code.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunPlanOptions {
  readonly decorateStore?: ((store: Store.Store["Type"]) => Store.Store["Type"]) | undefined
  readonly decorateTransport?: ((transport: Transport.Transport["Type"]) => Transport.Transport["Type"]) | undefined
  /**
   * Watches every fiber of the run and, with operation supervision switched on for the run, every Effect operation
   * they execute (how `npm run bench:sim -- --count-ops` counts them). Watching changes nothing the run does: the
   * same plan gives the same history with or without it.
   */
  readonly supervisor?: Supervisor.Supervisor<unknown> | undefined
}

/** Everything the steps of a run share: the plan, the world's clock, history and services, and its processes. */
interface World {
  readonly plan: Plan
  readonly clock: VirtualClock
  readonly history: History
  readonly faults: Faults
  /** The world's store (decorated when a test asks) and its reads; every participant's proxy wraps `store`. */
  readonly store: Store.Store["Type"]
  readonly query: Query.Query["Type"]
  readonly peek: (jobId: JobId) => Job | undefined
  readonly peekCharges: (jobId: JobId) => ReadonlyArray<Protocol.ChargeRow>
  readonly transport: Transport.Transport["Type"]
  readonly model: SimModel.SimModel
  /** The fleet's Limiter (in store time), when the plan has limits; every participant's proxy wraps it. */
  readonly limiter: Limiter.Limiter["Type"] | undefined
  /** The lease the targeted scenarios aim at: the one a worker holds (`Plan.heldLeaseMs`), see `run`. */
  readonly lease: number
  readonly slots: Array<Slot>
  /** Acknowledged submits: job index -> job id. */
  readonly acknowledged: Map<number, JobId>
  /** The plan's batches (none for most plans): their submits, cancels and ground truth (`Batches.ts`). */
  readonly batches: BatchWorld
  /** The plan's schedule, run by every worker process (`Schedules.ts`); undefined when it has none. */
  readonly schedules: Schedules.ScheduleWorld | undefined
  /** The interleaving window (F19) the next write of the store opens: what it waits for; none when undefined. */
  window: Effect.Effect<void> | undefined
  readonly fork: <A, E>(effect: Effect.Effect<A, E>) => Fiber.RuntimeFiber<A, E>
}

const makeWorld: (plan: Plan, clock: VirtualClock, history: History, options: RunPlanOptions) => Effect.Effect<World> =
  Effect.fnUntraced(function* (plan: Plan, clock: VirtualClock, history: History, options: RunPlanOptions) {
    const runtime = yield* Effect.runtime<never>()
    // A window a proxy opened (F19) is taken by the next write the store applies: that proxy's own call, which it
    // makes at once after opening it. Without F19 the store has no window to consult.
    const interleave = () => {
      const window = world.window
      world.window = undefined
      return window
    }
    const windows = has(plan, "F19") || plan.targeted._tag === "WindowedWrites" || plan.targeted._tag === "StaleWindow"
    const {
      batches,
      peek,
      peekBatch,
      peekCharges,
      query,
      store: memory
    } = yield* Store.makeMemoryWith(windows ? { interleave } : {})
    const noRelay = isNoRelay(plan)
    // Without the relay, the redrive policy matches the attempt cap: a correct worker takes one receive per attempt.
    const memoryTransport = yield* Transport.makeMemory({
      ...(has(plan, "F16") ? { maxReceiveCount: noRelay ? plan.maxAttempts : relayMaxReceiveCount } : {}),
      // Long polls wake on the world clock's own timers: no sleeping fiber per waiting receive.
      timer: (ms, task) => clock.schedule(ms, task).cancel
    })
    // Workers that claim from the Store are woken by a transport of wake-ups only (see `internal/wakeups.ts`).
    const intakeTransport = plan.intake === "store" ? Wakeups.make(clock, wakeupPollMs) : memoryTransport
    // The first call's targeted latency is measured against the handler's worst case; the targeted pause, late claim
    // reply and stale window against the lease a worker holds (a plan saved without a keep-alive: the worst case).
    const worstCase = worstCaseMs(plan)
    const lease = plan.keepAliveMs === undefined ? worstCase : heldLeaseMs(plan)
    const limiter = plan.limits === undefined ? undefined : yield* defineLimits(plan.limits)
    const model = SimModel.make(
      {
        medianMs: plan.model.medianMs,
        tailAlpha: plan.model.tailAlpha,
        errorRate: has(plan, "F14") ? plan.model.errorRate : 0,
        priceCents: plan.model.priceCents,
        costSpread: plan.model.costSpread ?? 0,
        heavyTail: has(plan, "F13"),
        boundedMaxMs: Math.max(1, Math.floor(plan.callTimeoutMs * 0.8)),
        firstCallLatencyMs:
          plan.targeted._tag === "LatencyLeaseMinusDelta" ? Math.max(1, worstCase - plan.targeted.deltaMs) : undefined
      },
      history,
      clock,
      plan.limits === undefined ? undefined : new ProviderLimits(plan.limits, history, epoch)
    )
    const acknowledged = new Map<number, JobId>()
    const faults = new Faults(plan, history, clock, lease)
    // A targeted batch window (F19) is taken by the next write the store applies, as the proxies' windows are.
    const openWindow = (ms: number, who: string): boolean => {
      if (!faults.enabled || !has(plan, "F19") || world.window !== undefined) return false
      faults.note("F19", who, `window inside store.settle of a batch's second-to-last item (targeted)`)
      world.window = clock.sleepMillis(ms)
      return true
    }
    const batchWorld = new BatchWorld({
      plan,
      clock,
      history,
      peek,
      peekBatch,
      peekCharges,
      batches,
      query,
      acknowledged,
      openWindow
    })
    const world: World = {
      plan,
      clock,
      history,
      faults,
      store: batchWorld.observe(options.decorateStore === undefined ? memory : options.decorateStore(memory)),
      query,
      peek,
      peekCharges,
      transport: options.decorateTransport === undefined ? intakeTransport : options.decorateTransport(intakeTransport),
      model,
      limiter,
      lease,
      slots: [],
      acknowledged,
      batches: batchWorld,
      schedules: yield* Schedules.make(plan, clock, history),
      window: undefined,
      fork: Runtime.runFork(runtime)
    }
    return world
  })

/** The fleet's Limiter of a plan with limits: each resource defined as the plan declares it, before any worker runs. */
const defineLimits = (limits: LimitsPlan.LimitsPlan): Effect.Effect<Limiter.Limiter["Type"]> =>
  Effect.tap(Limiter.makeMemory, (limiter) =>
    Effect.orDie(
      limiter.define({
        items: limits.resources.map((resource, r) => ({
          resource: LimitsPlan.resourceId(r),
          limits: LimitsPlan.declaredLimits(limits, resource)
        }))
      })
    )
  )

/** How often a targeted stale window looks whether its job was claimed again. */
const staleWindowPollMs = 20

/**
 * The targeted window that outlives a lease (`StaleWindow`): the next write the store applies waits until `jobId` is
 * held under a token above `token`, then the plan's extra time (at most a lease and 10 s in all), while the
 * scenario's fate strikes the write's holder at once: a crash (restarted 500 ms later), a pause of a lease and 3 s,
 * or heartbeats that fail until the window closes.
 */
const openStaleWindow = (world: World, incarnation: Incarnation, jobId: JobId, token: number): void => {
  const { clock, faults, history, lease, plan } = world
  const scenario = plan.targeted
  if (scenario._tag !== "StaleWindow") return
  const end = clock.now + lease + 10_000
  const claimedAgain = () => (world.peek(jobId)?.leaseToken ?? 0) > token
  const unmute = Effect.sync(() => {
    faults.muted.delete(incarnation.slot)
  })
  const wait: Effect.Effect<void> = Effect.suspend(() => {
    if (claimedAgain()) return clock.sleepThen(Math.min(scenario.extraMs, Math.max(0, end - clock.now)), unmute)
    if (clock.now >= end) return unmute
    return clock.sleepThen(Math.min(staleWindowPollMs, end - clock.now), wait)
  })
  world.window = wait
  switch (scenario.fate) {
    case "crash":
      faults.note("F10", incarnation.id, "crash while its outcome write is in the store (targeted)")
      crashAndMaybeRestart(world, incarnation, 500)
      return
    case "pause": {
      const ms = lease + 3_000
      faults.note("F11", incarnation.id, "pause while its outcome write is in the store (targeted)")
      history.push({ k: "life", t: clock.now, who: incarnation.id, what: "pause", ms })
      incarnation.clock.pausedUntil = clock.now + ms
      return
    }
    case "mute":
      faults.muted.set(incarnation.slot, end)
      return
  }
}

/** The store and transport one participant sees: proxies that record its calls and inject its faults. */
const servicesOf = (world: World, who: Actor, submitter = false) => {
  const env = {
    actor: who,
    history: world.history,
    faults: world.faults,
    clock: world.clock,
    crash: (incarnation: Incarnation, restartAfterMs: number | null) =>
      crashAndMaybeRestart(world, incarnation, restartAfterMs),
    peek: world.peek,
    peekCharges: world.peekCharges,
    submitter,
    openWindow: (ms: number) => {
      world.window = world.clock.sleepMillis(ms)
    },
    openStaleWindow: (incarnation: Incarnation, jobId: JobId, token: number) =>
      openStaleWindow(world, incarnation, jobId, token),
    canBeOvertaken: (jobId: JobId, token: number) => {
      const job = world.peek(jobId)
      return (
        job !== undefined &&
        job.state === "running" &&
        job.leaseToken === token &&
        Protocol.settleReason(job, job.leaseUntil ?? world.clock.now, world.plan.model.priceCents) === undefined
      )
    }
  }
  const peekOwner = (jobId: string) => {
    const job = world.peek(jobId as JobId)
    return job === undefined ? null : { state: job.state, owner: job.leaseOwner }
  }
  return {
    store: SimStore.make(world.store, env),
    transport: SimTransport.make(world.transport, { ...env, peek: peekOwner }),
    limiter: world.limiter === undefined ? undefined : SimLimiter.make(world.limiter, env)
  }
}

/** `step`, `n` times in sequence (at least once); the last reply. */
const steps = Effect.fnUntraced(function* <A, E>(step: Effect.Effect<A, E>, n: number) {
  let reply = yield* step
  for (let i = 1; i < n; i++) reply = yield* step
  return reply
})

/** The handler's shape in a plan (plans saved before it existed make one call per attempt). */
const shapeOf = (plan: Plan): HandlerShape => plan.handler ?? oneCall

/** Backoff of the handler's in-attempt retry `n` (0-based), as a provider SDK would wait. */
const inAttemptBackoffMs = (n: number): number => 400 * 2 ** n

/** Errors the handler retries inside its attempt (the provider said try again). */
const retryableInAttempt = (error: unknown): boolean =>
  error instanceof SimModel.SimModelError && (error.status === 503 || error.status === 429)

/**
 * The simulated job type: per attempt, a chain of `steps` model calls, each retried inside the attempt on a
 * retryable provider error and replaced once by a fallback call when the plan says so. The provider sees each
 * request with the job's store state at its start (ground truth for the checkers).
 */
const handlerFor = (world: World, incarnation: Incarnation, r: number | undefined) => {
  const { clock, faults, history, lease, model, plan } = world
  const shape = shapeOf(plan)
  /** The targeted scenario "pause = lease + epsilon": the first call of its worker freezes the process. */
  const onStart = () => {
    incarnation.calls++
    const t = plan.targeted
    if (
      faults.enabled &&
      t._tag === "PauseLeasePlusEpsilon" &&
      t.worker === incarnation.slot &&
      incarnation.calls === 1
    ) {
      faults.note("F11", incarnation.id, "pause = lease + epsilon (targeted)")
      history.push({ k: "life", t: clock.now, who: incarnation.id, what: "pause", ms: lease + t.epsilonMs })
      incarnation.clock.pausedUntil = clock.now + lease + t.epsilonMs
    }
  }
  return Handler.make({
    type: LimitsPlan.jobTypeOf(r),
    version: 1,
    ...(r === undefined ? {} : { resource: LimitsPlan.resourceId(r) }),
    input: SimInput,
    result: SimResult,
    estimateCents: plan.model.priceCents,
    attempt: attemptPolicy(plan),
    run: (_input, ctx) => {
      // Calls of this attempt in the order they were sent: the n-th matches the worker's n-th reservation.
      let sent = 0
      const limits = plan.limits
      // A job's calls use its handler's resource and reserve its tokens (the input as counted, `max_tokens` for the
      // output).
      const resource =
        limits === undefined || r === undefined
          ? undefined
          : { id: LimitsPlan.resourceId(r), inputTokens: limits.inputTokens, maxOutput: limits.maxOutput }
      const call = ctx.call({
        ...(resource === undefined
          ? {}
          : {
              tokens: { input: resource.inputTokens, maxOutput: resource.maxOutput },
              usage: (reply: SimModel.SimReply) => reply.usage
            }),
        estimateCents: plan.model.priceCents,
        run: Effect.suspend(() => {
          const job = world.peek(ctx.jobId)
          if (job === undefined) return Effect.die(new Error(`job ${ctx.jobId} vanished from the store`))
          return model.call({
            who: incarnation.id,
            jobId: ctx.jobId,
            token: ctx.token,
            callId: `${ctx.jobId}:${ctx.token}:${++sent}`,
            spentAtStart: job.costCents,
            budget: job.budgetCents,
            attemptsAtStart: job.attempts - job.attemptsBase,
            maxAttempts: job.maxAttempts,
            gate: incarnation.gate,
            // The handler's own request timeout, counted on its process's (possibly drifting) clock.
            timeoutMs: incarnation.clock.toWorldMs(plan.callTimeoutMs),
            onStart,
            resource
          })
        }),
        cost: (reply) => reply.cents,
        costOnError: (error) => (error instanceof SimModel.SimModelError ? error.billedCents : undefined)
      })
      const withRetries = (n: number): typeof call =>
        n >= shape.retries
          ? call
          : Effect.catchIf(call, retryableInAttempt, () =>
              Effect.zipRight(Effect.sleep(inAttemptBackoffMs(n)), withRetries(n + 1))
            )
      const step = shape.fallback
        ? Effect.catchIf(
            withRetries(0),
            (error) => error instanceof SimModel.SimModelError,
            () => call
          )
        : withRetries(0)
      return steps(step, shape.steps)
    }
  })
}

/** Start a new incarnation of the worker in `slot`: the real Worker, on its own clock, behind its own proxies. */
const startWorker: (world: World, slot: number) => Effect.Effect<void> = Effect.fnUntraced(function* (
  world: World,
  slot: number
) {
  const { clock, history, plan, slots } = world
  const n = (slots[slot]?.starts ?? 0) + 1
  const skew = skewOf(plan, slot)
  const incarnation = new Incarnation(slot, n, clock, skew)
  history.push({ k: "life", t: clock.now, who: incarnation.id, what: "start", ms: null })
  // A clock jump hits the process at one instant, like any injected fault: a forward jump can end its leases
  // early in its own eyes, and the checkers must know when.
  if (skew.jumpMs !== 0 && skew.jumpAt > clock.now) {
    clock.schedule(skew.jumpAt - clock.now, () => {
      if (!incarnation.dead) world.faults.note("F12", incarnation.id, `clock jump ${skew.jumpMs} ms`)
    })
  }
  const services = servicesOf(world, ofIncarnation(incarnation))
  const { limiter, store, transport } = services
  const limits = plan.limits
  const stop = yield* Deferred.make<void>()
  // The process's Scheduler beside its Worker, in the same scope, on the same clock (plans with a schedule only).
  const scheduler =
    world.schedules === undefined
      ? Effect.void
      : world.schedules.start(ofIncarnation(incarnation), services, world.query)
  const entry: Slot = { incarnation, fiber: null, stop, starts: n }
  slots[slot] = entry
  entry.fiber = yield* Effect.scoped(
    Effect.zipRight(
      Worker.make({
        queue,
        id: incarnation.id,
        handlers:
          limits === undefined
            ? [handlerFor(world, incarnation, undefined)]
            : limits.resources.map((_, r) => handlerFor(world, incarnation, r)),
        concurrency: plan.concurrency,
        prefetch: plan.prefetch ?? 0,
        ...(plan.keepAliveMs === undefined ? {} : { keepAliveMs: plan.keepAliveMs }),
        receiveWaitMs: 5_000,
        shutdownGraceMs: 2_000,
        retry: { baseMs: 200, capMs: 3_000 },
        unknownHandlerDelayMs: 1_000,
        busyMarginMs: 100,
        receiveErrorDelayMs: 500,
        storeErrorDelayMs: 500,
        ...(limiter === undefined
          ? {}
          : {
              limiter,
              // A job of a resource paused until resumed looks again every 2 s (runs last seconds, not minutes).
              throttle: { recheckMs: 1_000, pausedRecheckMs: 2_000 }
            }),
        ...(limits?.fair && plan.intake === "store" ? { fairness: { weights: LimitsPlan.weights(limits) } } : {})
      }).pipe(Effect.orDie),
      Effect.zipRight(scheduler, Deferred.await(stop))
    )
  ).pipe(
    Effect.provideService(Store.Store, store),
    Effect.provideService(Transport.Transport, transport),
    Effect.withClock(incarnation.clock),
    Effect.forkDaemon
  )
})

function crashAndMaybeRestart(world: World, incarnation: Incarnation, restartAfterMs: number | null): void {
  if (incarnation.dead) return
  crash(incarnation)
  world.history.push({ k: "life", t: world.clock.now, who: incarnation.id, what: "crash", ms: restartAfterMs })
  if (restartAfterMs !== null) {
    world.clock.schedule(restartAfterMs, () => {
      const slot = world.slots[incarnation.slot]
      if (slot !== undefined && slot.incarnation === incarnation) world.fork(startWorker(world, incarnation.slot))
    })
  }
}

/** Graceful shutdown of a live worker: close its scope (its leases are released) and wait for it, at most 10 s. */
const shutdownWorker: (world: World, slot: number) => Effect.Effect<void> = Effect.fnUntraced(function* (
  world: World,
  slot: number
) {
  const entry = world.slots[slot]
  if (entry === undefined || entry.incarnation.dead || entry.stop === null) return
  world.history.push({ k: "life", t: world.clock.now, who: entry.incarnation.id, what: "shutdown", ms: null })
  yield* Deferred.succeed(entry.stop, undefined)
  if (entry.fiber !== null) yield* exitedOrAfter(world, entry.fiber, 10_000)
  entry.stop = null
})

/** Waits until `fiber` has exited or `ms` of world time have passed, whichever comes first (no race of fibers). */
const exitedOrAfter = (world: World, fiber: Fiber.RuntimeFiber<unknown, unknown>, ms: number): Effect.Effect<void> =>
  world.clock.wakeOrAfter(ms, (wake) => {
    fiber.addObserver(wake)
    return () => fiber.removeObserver(wake)
  })

/** Sleep until `epoch + at` of true time (not at all when that has passed). */
const until = (world: World, at: number): Effect.Effect<void> => {
  const ms = epoch + at - world.clock.now
  return ms > 0 ? world.clock.sleepMillis(ms) : Effect.void
}

/**
 * The workload: each job submitted at its planned time (a submit that failed with a store error is tried again with
 * the same key, up to six times), then the planned idempotent resubmits and one conflicting resubmit.
 */
const workload = (world: World): Effect.Effect<void> =>
  runWorkload(world, servicesOf(world, actor("client", true), true))

/** Submit job `i` of the plan with `input` under `key`; its id once acknowledged. */
const submitJob = Effect.fnUntraced(function* (
  world: World,
  client: Client.ClientService,
  i: number,
  input: { n: number },
  key: string
) {
  const { clock, history, plan } = world
  const budget = plan.budgets[i % plan.budgets.length] ?? null
  const hash = `${key}:${JSON.stringify(input)}`
  for (let attempt = 0; attempt < 6; attempt++) {
    const result = yield* Effect.either(
      client.submit({
        queue,
        type: LimitsPlan.jobTypeOfJob(plan.limits, input.n),
        input,
        requestKey: key,
        ...(plan.limits === undefined ? {} : { tenant: LimitsPlan.tenantOfJob(plan.limits, i) }),
        maxAttempts: plan.maxAttempts,
        ...(budget === null ? {} : { budgetCents: budget })
      })
    )
    if (Either.isRight(result)) {
      const { created, job } = result.right
      history.push({ k: "submit", t: clock.now, key, hash, ok: true, jobId: job.id, created, error: null })
      return Option.some(job.id)
    }
    const tag = result.left._tag
    history.push({ k: "submit", t: clock.now, key, hash, ok: false, jobId: null, created: null, error: tag })
    if (tag !== "StoreError") return Option.none<JobId>()
    yield* clock.sleepMillis(300)
  }
  return Option.none<JobId>()
})

const runWorkload = Effect.fnUntraced(function* (world: World, services: ReturnType<typeof servicesOf>) {
  const { plan } = world
  // The real Client, over the client's faulty view of the store and transport.
  const client = yield* Client.make.pipe(
    Effect.provideService(Store.Store, services.store),
    Effect.provideService(Query.Query, world.query),
    Effect.provideService(Transport.Transport, services.transport)
  )
  const at = (i: number) => plan.submitAt[i % plan.submitAt.length] ?? 0
  const order = Array.from({ length: plan.jobs }, (_, i) => i).sort((a, b) => at(a) - at(b) || a - b)
  for (const i of order) {
    yield* until(world, at(i))
    const id = yield* submitJob(world, client, i, { n: i }, `job-${i}`)
    if (Option.isSome(id)) world.acknowledged.set(i, id.value)
  }
  // A resubmit acknowledges a job whose first submit never got a reply through.
  for (const i of plan.resubmits) {
    const id = yield* submitJob(world, client, i, { n: i }, `job-${i}`)
    if (Option.isSome(id) && !world.acknowledged.has(i)) world.acknowledged.set(i, id.value)
  }
  if (plan.resubmits.length > 0) {
    // A key whose every submit failed is still free: the conflicting input is then a job of its own, acknowledged.
    const i = plan.resubmits[0]!
    const id = yield* submitJob(world, client, i, { n: -1 }, `job-${i}`)
    if (Option.isSome(id) && !world.acknowledged.has(i)) world.acknowledged.set(i, id.value)
  }
})

/** The application's batches, through the real Client over the client's faulty view and the world's batch verbs. */
const batchWorkload = (world: World): Effect.Effect<void> => {
  if ((world.plan.batches ?? []).length === 0) return Effect.void
  const services = servicesOf(world, actor("client", true), true)
  return Effect.flatMap(
    Client.make.pipe(
      Effect.provideService(Store.Store, services.store),
      Effect.provideService(Query.Query, world.query),
      Effect.provideService(Transport.Transport, services.transport),
      Effect.provideService(BatchStore, world.batches.verbs())
    ),
    (client) => world.batches.workload(client, (at) => until(world, at))
  )
}

/** The operator: cancels planned jobs at planned times, whatever state they are in. */
const operator = (world: World): Effect.Effect<void> =>
  cancelAsPlanned(world, servicesOf(world, actor("operator", true)).store)

const cancelAsPlanned = Effect.fnUntraced(function* (world: World, store: Store.Store["Type"]) {
  const cancels = [...world.plan.cancels].sort((a, b) => a.at - b.at || a.job - b.job)
  for (const c of cancels) {
    yield* until(world, c.at)
    const jobId = world.acknowledged.get(c.job)
    if (jobId === undefined) continue
    const before = world.peek(jobId)?.state ?? null
    const result = yield* Effect.either(store.cancel({ items: [{ jobId }] }))
    const ok = Either.isRight(result) && result.right.results[0]?._tag === "Cancelled"
    world.history.push({ k: "op", t: world.clock.now, what: "cancel", jobId, ok, before })
  }
})

/**
 * The operator of a plan whose provider reaches a spend cap: once the cap is raised (at the plan's `until`), it
 * resumes every resource paused until resumed (a `quota_exhausted` pause), looking again every second for one that a
 * late 429 paused again, until the run ends.
 */
const resumeAfterSpendCap = Effect.fnUntraced(function* (world: World, limiter: Limiter.Limiter["Type"], at: number) {
  yield* until(world, at)
  for (;;) {
    const { resources } = yield* Effect.orDie(limiter.read({}))
    const paused = resources.filter((r) => r.pause !== null && r.pause.until === null)
    if (paused.length > 0) {
      yield* Effect.orDie(limiter.resume({ items: paused.map((r) => ({ resource: r.resource })) }))
    }
    yield* world.clock.sleepMillis(1_000)
  }
})

/** Scheduled process events of the fault phase: crashes, pauses, restarts and rolling (graceful) restarts. */
const processes: (world: World) => Effect.Effect<void> = Effect.fnUntraced(function* (world: World) {
  const { clock, faults, history, plan, slots } = world
  const events = [...plan.events].sort((a, b) => a.at - b.at || a.worker - b.worker)
  for (const ev of events) {
    yield* until(world, ev.at)
    if (!faults.enabled) return
    const entry = slots[ev.worker]
    if (entry === undefined) continue
    switch (ev.what) {
      case "crash":
        if (has(plan, "F10") || has(plan, "F18")) {
          faults.note(has(plan, "F18") ? "F18" : "F10", entry.incarnation.id, "process crash (scheduled)")
          crashAndMaybeRestart(world, entry.incarnation, has(plan, "F18") ? ev.ms : null)
        }
        break
      case "pause":
        if (has(plan, "F11") && !entry.incarnation.dead) {
          faults.note("F11", entry.incarnation.id, "process pause (scheduled)")
          history.push({ k: "life", t: clock.now, who: entry.incarnation.id, what: "pause", ms: ev.ms })
          entry.incarnation.clock.pausedUntil = clock.now + ev.ms
        }
        break
      case "restart":
        if (entry.incarnation.dead) yield* startWorker(world, ev.worker)
        break
      case "shutdown":
        yield* shutdownWorker(world, ev.worker)
        yield* startWorker(world, ev.worker)
        break
    }
  }
})

/**
 * The planned schedule's outage (plans with faults only): at its time every live worker process is paused, or
 * crashed and restarted, for its length, so the schedule's ticks come due while no Scheduler runs.
 */
const scheduleOutage: (world: World) => Effect.Effect<void> = Effect.fnUntraced(function* (world: World) {
  const { clock, faults, history, plan, slots } = world
  const outage = plan.schedule?.outage
  if (outage === null || outage === undefined) return
  yield* until(world, outage.at)
  if (!faults.enabled) return
  for (const entry of slots) {
    if (entry.incarnation.dead) continue
    if (outage.kind === "pause") {
      faults.note("F11", entry.incarnation.id, "every process paused (schedule outage)")
      history.push({ k: "life", t: clock.now, who: entry.incarnation.id, what: "pause", ms: outage.ms })
      entry.incarnation.clock.pausedUntil = clock.now + outage.ms
    } else {
      faults.note("F18", entry.incarnation.id, "every process crashed (schedule outage)")
      crashAndMaybeRestart(world, entry.incarnation, outage.ms)
    }
  }
})

/** Wait (1 s steps) until every acknowledged job is terminal in the store, at most `limitMs`. */
const awaitTerminal: (world: World, limitMs: number) => Effect.Effect<void> = Effect.fnUntraced(function* (
  world: World,
  limitMs: number
) {
  const end = world.clock.now + limitMs
  while (world.clock.now < end && !allTerminal(world)) yield* world.clock.sleepMillis(1_000)
})

/** Every acknowledged job is terminal. The driver reads ground truth directly: the world's reads, not a participant's. */
const allTerminal = (world: World): boolean => {
  for (const jobId of world.acknowledged.values()) {
    const job = world.peek(jobId)
    if (job === undefined || !isTerminal(job.state)) return false
  }
  return true
}

/** The final record and charge-ledger sum of every acknowledged job, as the store holds them now. */
const finalReads: (world: World, phase: "heal" | "final") => Effect.Effect<void> = Effect.fnUntraced(function* (
  world: World,
  phase: "heal" | "final"
) {
  const { clock, history } = world
  history.push({ k: "phase", t: clock.now, name: phase })
  for (const jobId of world.acknowledged.values()) {
    const job = world.peek(jobId)
    const charges = yield* Effect.orDie(world.query.charges({ jobId }))
    if (job !== undefined) {
      const ledger = charges.reduce((sum, c) => sum + c.amountCents, 0)
      history.push({ k: "final", t: clock.now, jobId, snap: history.snapOf(job), ledger })
    }
  }
})

/**
 * Replay every acknowledged job that is a dead letter (the core's filtered replay: the Store's conditional write
 * skips anything not failed) and publish each replayed job, as an operator would.
 */
const replayDeadLetters: (world: World) => Effect.Effect<void> = Effect.fnUntraced(function* (world: World) {
  const { clock, history } = world
  history.push({ k: "phase", t: clock.now, name: "replay" })
  const { store, transport } = servicesOf(world, actor("operator", false))
  const targets = [...world.acknowledged.values()]
  const before = new Map<string, Job["state"]>()
  for (const jobId of targets) {
    const job = world.peek(jobId)
    if (job !== undefined) before.set(jobId, job.state)
  }
  const replayedJobs: Array<Job> = []
  const replayed = yield* Effect.either(
    Query.replay(store, world.query, { jobIds: targets }, (jobs) => Effect.sync(() => replayedJobs.push(...jobs)))
  )
  if (Either.isLeft(replayed)) return
  for (const job of replayedJobs) {
    history.push({
      k: "op",
      t: clock.now,
      what: "replay",
      jobId: job.id,
      ok: true,
      before: before.get(job.id) ?? null
    })
    yield* transport
      .publish({
        queue: job.queue,
        items: [{ message: { jobId: job.id, type: job.type, version: job.version, priority: job.priority } }]
      })
      .pipe(Effect.ignore)
  }
})

const program: (
  plan: Plan,
  clock: VirtualClock,
  history: History,
  options: RunPlanOptions
) => Effect.Effect<void, never, Scope.Scope> = Effect.fnUntraced(function* (
  plan: Plan,
  clock: VirtualClock,
  history: History,
  options: RunPlanOptions
) {
  const world = yield* makeWorld(plan, clock, history, options)
  // Infrastructure: the sweeper (store faults only, never a crash).
  const sweeper = servicesOf(world, actor("sweeper", true))
  const sweeping = plan.sweeper ?? defaultSweeper
  yield* Sweeper.make({
    queue,
    intervalMs: sweeping.intervalMs,
    republishAfterMs: isNoRelay(plan) ? noRelayRepublishAfterMs : sweeping.republishAfterMs
  }).pipe(
    Effect.provideService(Store.Store, sweeper.store),
    Effect.provideService(Transport.Transport, sweeper.transport)
  )
  for (let slot = 0; slot < plan.workers; slot++) yield* startWorker(world, slot)
  const tasks = [
    workload(world),
    operator(world),
    processes(world),
    // Plans without batches run the three fibers they always ran (the same interleavings, the same histories).
    ...((plan.batches ?? []).length === 0
      ? []
      : [batchWorkload(world), world.batches.operator((at) => until(world, at))]),
    ...(plan.schedule?.outage !== null && plan.schedule?.outage !== undefined && plan.faults.length > 0
      ? [scheduleOutage(world)]
      : [])
  ]
  const background = yield* Effect.forkScoped(Effect.all(tasks, { concurrency: tasks.length }))
  const spendCap = plan.limits?.spendCap
  const limiter = servicesOf(world, actor("operator", false)).limiter
  if (spendCap != null && limiter !== undefined) {
    yield* Effect.forkScoped(resumeAfterSpendCap(world, limiter, spendCap.until))
  }

  // Phase 1: workload and faults.
  yield* clock.sleepMillis(plan.faultPhaseMs)
  yield* Fiber.await(background)
  // Phase 2: heal. Faults off, paused processes resumed, crashed ones restarted.
  world.faults.enabled = false
  history.push({ k: "life", t: clock.now, who: "world", what: "heal", ms: null })
  for (let slot = 0; slot < plan.workers; slot++) {
    const entry = world.slots[slot]!
    entry.incarnation.clock.pausedUntil = 0
    if (entry.incarnation.dead || entry.stop === null) yield* startWorker(world, slot)
  }
  yield* awaitTerminal(world, plan.limits == null ? healWindowMs : limitedHealWindowMs)
  yield* finalReads(world, "heal")
  // Phase 3: replay every dead letter; none may re-run a succeeded job.
  yield* replayDeadLetters(world)
  yield* awaitTerminal(world, healWindowMs)
  // Phase 4: graceful shutdown and final reads.
  for (let slot = 0; slot < plan.workers; slot++) yield* shutdownWorker(world, slot)
  yield* finalReads(world, "final")
  yield* world.batches.finalReads()
  if (world.schedules !== undefined) yield* world.schedules.finalReads(world.query)
})

/**
 * Run one plan to completion on virtual time and return its recorded history.
 *
 * Errors made during a run capture no stack trace: nothing a run records reads one, and capturing them cost 3% to 5%
 * of a run's instructions (every injected store failure, fenced write and handler error is an `Error`). A run
 * that crashed is run once more with stack traces on, so its `defect` reads as usual; the replay's history must be
 * the same (it is the same plan), else the first result is kept.
 *
 * @since 0.1.0
 * @category constructors
 */
export const runPlan = (plan: Plan, options: RunPlanOptions = {}): RunResult => {
  const limit = Error.stackTraceLimit
  let result: RunResult
  try {
    Error.stackTraceLimit = 0
    result = runOnce(plan, options)
  } finally {
    Error.stackTraceLimit = limit
  }
  if (result.defect === null || limit === 0) return result
  const traced = runOnce(plan, options)
  return traced.hash === result.hash ? traced : result
}

const runOnce = (plan: Plan, options: RunPlanOptions): RunResult => {
  const clock = new VirtualClock(epoch)
  const history = new History()
  const scoped = Effect.scoped(program(plan, clock, history, options))
  const watched = options.supervisor === undefined ? scoped : watch(scoped, options.supervisor)
  const effect = watched.pipe(Logger.withMinimumLogLevel(LogLevel.None), Effect.withTracerEnabled(false))
  const outcome = SimRuntime.run(effect, { seed: plan.seed, clock, opsBeforeYield: Number.MAX_SAFE_INTEGER })
  const defect =
    outcome._tag === "Done" && Exit.isFailure(outcome.exit) ? String(outcome.exit.cause).slice(0, 500) : null
  return {
    plan,
    outcome: defect !== null ? "Crashed" : outcome._tag,
    defect,
    events: history.events,
    hash: hashEvents(history.events),
    steps: outcome.steps,
    endMs: outcome.now - epoch
  }
}
