/**
 * One simulated run: the real core Worker, Sweeper and Client inside a simulated world (SimStore, SimTransport,
 * SimModel, virtual clocks), driven by a plan. Phases: workload with faults; heal (faults off, every process
 * restarted, long enough for every lease, backoff and attempt to play out); dead-letter replay; final reads.
 *
 * @since 0.1.0
 */
import * as Client from "@slowcall/core/Client"
import { StoreError } from "@slowcall/core/Errors"
import * as Handler from "@slowcall/core/Handler"
import { leaseFor } from "@slowcall/core/Lease"
import { isTerminal, type JobId } from "@slowcall/core/Models"
import * as Store from "@slowcall/core/Store"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Transport from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Deferred, Effect, Either, Exit, Fiber, Logger, LogLevel, Option, Runtime, Schema, type Scope } from "effect"
import { type Event, History, hashEvents, snap } from "./History.js"
import { actor, crash, Faults, Incarnation, ofIncarnation } from "./internal/world.js"
import { has, isNoRelay, type Plan } from "./Plan.js"
import { noSkew, type Skew, VirtualClock } from "./SimClock.js"
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

/** Virtual epoch of every run (so job ids look like real UUID v7s). */
const epoch = 1_767_225_600_000
const queue = "sim"
const healWindowMs = 120_000
/** How long a queued job waits before the sweeper republishes it, with the relay on. */
const republishAfterMs = 4_000
/** With the relay off: later than any run lasts (fault phase, heal and replay windows), so it never fires. */
const noRelayRepublishAfterMs = 3_600_000
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
}

const program = (
  plan: Plan,
  clock: VirtualClock,
  history: History,
  options: RunPlanOptions
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const fork = Runtime.runFork(runtime)
    const faults = new Faults(plan, history, clock)
    const { store: memory, peek } = yield* Store.makeMemoryInspectable
    const baseStore = options.decorateStore === undefined ? memory : options.decorateStore(memory)
    const noRelay = isNoRelay(plan)
    // Without the relay, the redrive policy matches the attempt cap: a correct worker takes one receive per attempt.
    const memoryTransport = yield* Transport.makeMemory({
      ...(has(plan, "F16") ? { maxReceiveCount: noRelay ? plan.maxAttempts : relayMaxReceiveCount } : {}),
      // Long polls wake on the world clock's own timers: no sleeping fiber per waiting receive.
      timer: (ms, task) => clock.schedule(ms, task).cancel
    })
    const baseTransport =
      options.decorateTransport === undefined ? memoryTransport : options.decorateTransport(memoryTransport)
    const heavyTail = has(plan, "F13")
    const lease = leaseFor({ timeoutMs: plan.callTimeoutMs })
    const model = SimModel.make(
      {
        medianMs: plan.model.medianMs,
        tailAlpha: plan.model.tailAlpha,
        errorRate: has(plan, "F14") ? plan.model.errorRate : 0,
        priceCents: plan.model.priceCents,
        heavyTail,
        boundedMaxMs: Math.max(1, Math.floor(plan.callTimeoutMs * 0.8)),
        firstCallLatencyMs:
          plan.targeted._tag === "LatencyLeaseMinusDelta" ? Math.max(1, lease - plan.targeted.deltaMs) : undefined
      },
      history,
      clock
    )
    const peekOwner = (jobId: string) => {
      const job = peek(jobId as JobId)
      return job === undefined ? null : { state: job.state, owner: job.leaseOwner }
    }
    const slots: Array<Slot> = []

    const skewOf = (slot: number): Skew => {
      const s = plan.skews[slot]
      return has(plan, "F12") && s !== undefined
        ? { offsetMs: s.offsetMs, driftPpm: s.driftPpm, jumpAt: epoch + plan.faultPhaseMs / 2, jumpMs: s.jumpMs }
        : noSkew
    }

    const handlerFor = (incarnation: Incarnation) =>
      Handler.make({
        type: "sim.generate",
        version: 1,
        input: SimInput,
        result: SimResult,
        estimateCents: plan.model.priceCents,
        attempt: { timeoutMs: plan.callTimeoutMs },
        run: (_input, ctx) =>
          ctx.call({
            estimateCents: plan.model.priceCents,
            // The provider sees the job as the store holds it when the call starts (ground truth for the checkers).
            run: Effect.suspend(() => {
              const job = peek(ctx.jobId)
              if (job === undefined) return Effect.die(new Error(`job ${ctx.jobId} vanished from the store`))
              return model.call({
                who: incarnation.id,
                jobId: ctx.jobId,
                token: ctx.token,
                callId: `${ctx.jobId}:${ctx.token}:1`,
                spentAtStart: job.costCents,
                budget: job.budgetCents,
                attemptsAtStart: job.attempts - job.attemptsBase,
                maxAttempts: job.maxAttempts,
                gate: incarnation.gate,
                // The handler's own request timeout, counted on its process's (possibly drifting) clock.
                timeoutMs: incarnation.clock.toWorldMs(plan.callTimeoutMs),
                onStart: () => {
                  incarnation.calls++
                  const t = plan.targeted
                  if (
                    faults.enabled &&
                    t._tag === "PauseLeasePlusEpsilon" &&
                    t.worker === incarnation.slot &&
                    incarnation.calls === 1
                  ) {
                    faults.note("F11", incarnation.id, "pause = lease + epsilon (targeted)")
                    history.push({
                      k: "life",
                      t: clock.now,
                      who: incarnation.id,
                      what: "pause",
                      ms: lease + t.epsilonMs
                    })
                    incarnation.clock.pausedUntil = clock.now + lease + t.epsilonMs
                  }
                }
              })
            }),
            cost: (reply) => reply.cents,
            costOnError: (error) => (error instanceof SimModel.SimModelError ? error.billedCents : undefined)
          })
      })

    const start = (slot: number): Effect.Effect<void> =>
      Effect.gen(function* () {
        const previous = slots[slot]
        const n = (previous?.starts ?? 0) + 1
        const incarnation = new Incarnation(slot, n, clock, skewOf(slot))
        history.push({ k: "life", t: clock.now, who: incarnation.id, what: "start", ms: null })
        const who = ofIncarnation(incarnation)
        const env = { actor: who, history, faults, clock, crash: crashAndMaybeRestart, peek }
        const store = SimStore.make(baseStore, env)
        const transport = SimTransport.make(baseTransport, { ...env, peek: peekOwner })
        const stop = yield* Deferred.make<void>()
        const entry: Slot = { incarnation, fiber: null, stop, starts: n }
        slots[slot] = entry
        entry.fiber = yield* Effect.scoped(
          Effect.zipRight(
            Worker.make({
              queue,
              id: incarnation.id,
              handlers: [handlerFor(incarnation)],
              concurrency: plan.concurrency,
              receiveWaitMs: 5_000,
              shutdownGraceMs: 2_000,
              retry: { baseMs: 200, capMs: 3_000 },
              unknownHandlerDelayMs: 1_000,
              busyMarginMs: 100,
              receiveErrorDelayMs: 500,
              storeErrorDelayMs: 500
            }),
            Deferred.await(stop)
          )
        ).pipe(
          Effect.provideService(Store.Store, store),
          Effect.provideService(Transport.Transport, transport),
          Effect.withClock(incarnation.clock),
          Effect.forkDaemon
        )
      })

    function crashAndMaybeRestart(incarnation: Incarnation, restartAfterMs: number | null): void {
      if (incarnation.dead) return
      crash(incarnation)
      history.push({ k: "life", t: clock.now, who: incarnation.id, what: "crash", ms: restartAfterMs })
      if (restartAfterMs !== null) {
        clock.schedule(restartAfterMs, () => {
          const slot = slots[incarnation.slot]
          if (slot !== undefined && slot.incarnation === incarnation) fork(start(incarnation.slot))
        })
      }
    }

    const shutdown = (slot: number): Effect.Effect<void> =>
      Effect.gen(function* () {
        const entry = slots[slot]
        if (entry === undefined || entry.incarnation.dead || entry.stop === null) return
        history.push({ k: "life", t: clock.now, who: entry.incarnation.id, what: "shutdown", ms: null })
        yield* Deferred.succeed(entry.stop, undefined)
        if (entry.fiber !== null) yield* Effect.timeoutOption(Fiber.await(entry.fiber), 10_000)
        entry.stop = null
      })

    // Infrastructure: the sweeper (never faulted) and the client.
    const sweeperActor = actor("sweeper")
    const sweeperEnv = { actor: sweeperActor, history, faults, clock, crash: crashAndMaybeRestart, peek }
    yield* Sweeper.make({
      queue,
      intervalMs: 2_000,
      republishAfterMs: noRelay ? noRelayRepublishAfterMs : republishAfterMs
    }).pipe(
      Effect.orDie,
      Effect.provideService(Store.Store, SimStore.make(baseStore, sweeperEnv)),
      Effect.provideService(Transport.Transport, SimTransport.make(baseTransport, { ...sweeperEnv, peek: peekOwner }))
    )
    const clientActor = actor("client")
    const clientEnv = { actor: clientActor, history, faults, clock, crash: crashAndMaybeRestart, peek }
    const clientStoreBase = SimStore.make(baseStore, clientEnv)
    const clientStore: Store.Store["Type"] = {
      ...clientStoreBase,
      // The fault is rolled when the call runs, once per try (a retried submit rolls again).
      submit: (options) =>
        Effect.suspend(() =>
          faults.roll(["F17"], "client", "store.submit") === "F17"
            ? Effect.zipRight(
                baseStore.submit(options),
                new StoreError(
                  { reason: "Timeout", operation: "submit", detail: "injected: reply lost" },
                  { disableValidation: true }
                )
              )
            : baseStore.submit(options)
        )
    }
    const client = yield* Client.make.pipe(
      Effect.orDie,
      Effect.provideService(Store.Store, clientStore),
      Effect.provideService(Transport.Transport, SimTransport.make(baseTransport, { ...clientEnv, peek: peekOwner }))
    )

    for (let slot = 0; slot < plan.workers; slot++) yield* start(slot)

    const acknowledged = new Map<number, JobId>()
    const submitJob = (i: number, input: { n: number }, key: string) =>
      Effect.gen(function* () {
        for (let attempt = 0; attempt < 6; attempt++) {
          const budget = plan.budgets[i % plan.budgets.length] ?? null
          const result = yield* Effect.either(
            client.submit({
              queue,
              type: "sim.generate",
              input,
              requestKey: key,
              maxAttempts: plan.maxAttempts,
              ...(budget === null ? {} : { budgetCents: budget })
            })
          )
          const hash = `${key}:${JSON.stringify(input)}`
          if (Either.isRight(result)) {
            history.push({
              k: "submit",
              t: clock.now,
              key,
              hash,
              ok: true,
              jobId: result.right.job.id,
              created: result.right.created,
              error: null
            })
            return Option.some(result.right.job.id)
          }
          const tag = result.left._tag
          history.push({ k: "submit", t: clock.now, key, hash, ok: false, jobId: null, created: null, error: tag })
          if (tag !== "StoreError") return Option.none<JobId>()
          yield* clock.sleepMillis(300)
        }
        return Option.none<JobId>()
      })

    const workload = Effect.gen(function* () {
      const order = Array.from({ length: plan.jobs }, (_, i) => i).sort(
        (a, b) =>
          (plan.submitAt[a % plan.submitAt.length] ?? 0) - (plan.submitAt[b % plan.submitAt.length] ?? 0) || a - b
      )
      for (const i of order) {
        const at = epoch + (plan.submitAt[i % plan.submitAt.length] ?? 0)
        if (at > clock.now) yield* clock.sleepMillis(at - clock.now)
        const id = yield* submitJob(i, { n: i }, `job-${i}`)
        if (Option.isSome(id)) acknowledged.set(i, id.value)
      }
      for (const i of plan.resubmits) yield* submitJob(i, { n: i }, `job-${i}`)
      if (plan.resubmits.length > 0) yield* submitJob(plan.resubmits[0]!, { n: -1 }, `job-${plan.resubmits[0]}`)
    })

    const operator = Effect.gen(function* () {
      const cancels = [...plan.cancels].sort((a, b) => a.at - b.at || a.job - b.job)
      for (const c of cancels) {
        const at = epoch + c.at
        if (at > clock.now) yield* clock.sleepMillis(at - clock.now)
        const jobId = acknowledged.get(c.job)
        if (jobId === undefined) continue
        const before = yield* Effect.option(baseStore.get({ jobId }))
        const result = yield* Effect.either(baseStore.cancel({ jobId }))
        history.push({
          k: "op",
          t: clock.now,
          what: "cancel",
          jobId,
          ok: Either.isRight(result),
          before: Option.isSome(before) ? before.value.state : null
        })
      }
    })

    const processes = Effect.gen(function* () {
      const events = [...plan.events].sort((a, b) => a.at - b.at || a.worker - b.worker)
      for (const ev of events) {
        const at = epoch + ev.at
        if (at > clock.now) yield* clock.sleepMillis(at - clock.now)
        if (!faults.enabled) return
        const entry = slots[ev.worker]
        if (entry === undefined) continue
        switch (ev.what) {
          case "crash":
            if (has(plan, "F10") || has(plan, "F18")) {
              faults.note(has(plan, "F18") ? "F18" : "F10", entry.incarnation.id, "process crash (scheduled)")
              crashAndMaybeRestart(entry.incarnation, has(plan, "F18") ? ev.ms : null)
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
            if (entry.incarnation.dead) yield* start(ev.worker)
            break
          case "shutdown":
            yield* shutdown(ev.worker)
            yield* start(ev.worker)
            break
        }
      }
    })

    const background = yield* Effect.forkScoped(Effect.all([workload, operator, processes], { concurrency: 3 }))

    // The driver reads ground truth directly: these reads are the world's, not a participant's.
    const allTerminal = (): boolean => {
      for (const jobId of acknowledged.values()) {
        const job = peek(jobId)
        if (job === undefined || !isTerminal(job.state)) return false
      }
      return true
    }
    const awaitTerminal = (limitMs: number) =>
      Effect.gen(function* () {
        const until = clock.now + limitMs
        while (clock.now < until && !allTerminal()) yield* clock.sleepMillis(1_000)
      })
    const finalReads = (phase: "heal" | "final") =>
      Effect.gen(function* () {
        history.push({ k: "phase", t: clock.now, name: phase })
        for (const jobId of acknowledged.values()) {
          const job = peek(jobId)
          const charges = yield* baseStore.charges({ jobId })
          if (job !== undefined) {
            history.push({
              k: "final",
              t: clock.now,
              jobId,
              snap: snap(job),
              ledger: charges.reduce((sum, c) => sum + c.amountCents, 0)
            })
          }
        }
      })

    // Phase 1: workload and faults.
    yield* clock.sleepMillis(plan.faultPhaseMs)
    yield* Fiber.await(background)
    // Phase 2: heal. Faults off, paused processes resumed, crashed ones restarted.
    faults.enabled = false
    history.push({ k: "life", t: clock.now, who: "world", what: "heal", ms: null })
    for (let slot = 0; slot < plan.workers; slot++) {
      const entry = slots[slot]!
      entry.incarnation.clock.pausedUntil = 0
      if (entry.incarnation.dead || entry.stop === null) yield* start(slot)
    }
    yield* awaitTerminal(healWindowMs)
    yield* finalReads("heal")
    // Phase 3: replay every dead letter; none may re-run a succeeded job.
    history.push({ k: "phase", t: clock.now, name: "replay" })
    const failed = [...acknowledged.values()]
    const before = new Map<string, string>()
    for (const jobId of failed) {
      const job = peek(jobId)
      if (job !== undefined) before.set(jobId, job.state)
    }
    const replayed = yield* Effect.either(client.replay({ jobIds: failed }))
    if (Either.isRight(replayed)) {
      for (const jobId of replayed.right.replayed) {
        history.push({
          k: "op",
          t: clock.now,
          what: "replay",
          jobId,
          ok: true,
          before: (before.get(jobId) as never) ?? null
        })
      }
    }
    yield* awaitTerminal(healWindowMs)
    // Phase 4: graceful shutdown and final reads.
    for (let slot = 0; slot < plan.workers; slot++) yield* shutdown(slot)
    yield* finalReads("final")
  }).pipe(Effect.orDie)

/**
 * Run one plan to completion on virtual time and return its recorded history.
 *
 * @since 0.1.0
 * @category constructors
 */
export const runPlan = (plan: Plan, options: RunPlanOptions = {}): RunResult => {
  const clock = new VirtualClock(epoch)
  const history = new History()
  const effect = Effect.scoped(program(plan, clock, history, options)).pipe(
    Logger.withMinimumLogLevel(LogLevel.None),
    Effect.withTracerEnabled(false)
  )
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
