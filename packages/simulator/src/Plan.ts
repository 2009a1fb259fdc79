/**
 * Plans: everything one simulated run does, as generated, shrinkable data (fast-check 4). A plan fixes the
 * workload, which fault kinds are on (swarm testing), the fault tape consumed at fault points, the model's
 * behaviour, scheduled process events, and at most one targeted scenario. The run seed drives `Random` and the
 * scheduler's interleaving picks, so a plan plus its seed replays exactly.
 *
 * @since 0.1.0
 */
import { defaultKeepAliveMs, keptLeaseMs, leaseFor } from "@slowcall/core/Lease"
import * as fc from "fast-check"
import { type BatchPlan, batchPlans } from "./BatchesPlan.js"
import * as LimitsPlan from "./LimitsPlan.js"
import { type SchedulePlan, schedulePlan } from "./SchedulesPlan.js"

/**
 * Fault kinds a plan may switch on (see SIMULATION.md's catalog).
 *
 * @since 0.1.0
 * @category models
 */
export const faultKinds = [
  "F1",
  "F2",
  "F3",
  "F4",
  "F5",
  "F6",
  "F7",
  "F8",
  "F10",
  "F11",
  "F12",
  "F13",
  "F14",
  "F15",
  "F16",
  "F17",
  "F18",
  "F19",
  "F20",
  "F21"
] as const

/**
 * @since 0.1.0
 * @category models
 */
export type FaultKind = (typeof faultKinds)[number]

/**
 * What each fault kind does, in a few words (the catalog of SIMULATION.md and the README's fault points). Reports
 * print a kind as its id and this name.
 *
 * @since 0.3.0
 * @category models
 */
export const faultNames: { readonly [K in FaultKind]: string } = {
  F1: "lease expiry mid-call",
  F2: "duplicate delivery",
  F3: "visibility expiry",
  F4: "stale receipt",
  F5: "store write fails",
  F6: "store write ambiguous",
  F7: "slow store call",
  F8: "crash between persist and ack",
  F10: "crash at another point",
  F11: "process pause",
  F12: "clock skew",
  F13: "slow model call",
  F14: "model error",
  F15: "one-way partition",
  F16: "redrive to a DLQ",
  F17: "submit retried",
  F18: "restart with lost memory",
  F19: "window inside a store write",
  F20: "late store reply",
  F21: "store outage as a call settles"
}

/**
 * A fault kind as reports print it: `F6 store write ambiguous`. An id outside the catalog prints alone.
 *
 * @since 0.3.0
 * @category combinators
 */
export const faultLabel = (kind: string): string => {
  const name = (faultNames as { readonly [kind: string]: string | undefined })[kind]
  return name === undefined ? kind : `${kind} ${name}`
}

/**
 * A process event scheduled at virtual time `at` (ms after the run starts) on worker slot `worker`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProcessEvent {
  readonly at: number
  readonly worker: number
  readonly what: "crash" | "pause" | "restart" | "shutdown"
  readonly ms: number
}

/**
 * Targeted scenarios that uniform random faults find slowly.
 *
 * @since 0.1.0
 * @category models
 */
export type Targeted =
  | { readonly _tag: "None" }
  | { readonly _tag: "PauseLeasePlusEpsilon"; readonly worker: number; readonly epsilonMs: number }
  | { readonly _tag: "LatencyLeaseMinusDelta"; readonly deltaMs: number }
  | { readonly _tag: "HeartbeatFailsK"; readonly worker: number; readonly k: number }
  /** The first claim of worker `worker` applies at once; its reply reaches the worker lease + `extraMs` later. */
  | { readonly _tag: "LateClaimReply"; readonly worker: number; readonly extraMs: number }
  /** Every store write of worker `worker` opens a window of `ms` between the store's read and its apply (F19). */
  | { readonly _tag: "WindowedWrites"; readonly worker: number; readonly ms: number }
  /**
   * A write that outlives its holder's lease (F19, long): the first outcome write (`settle`) of any worker whose job
   * could be claimed again once its lease ends waits in the store until the job has been claimed under a later token
   * and `extraMs` more have passed (0 to 100 ms, while the new holder most likely still runs; at most a lease and 10 s
   * in all), while its holder crashes (restarted 500 ms later),
   * pauses for a lease and 3 s, or sends heartbeats that all fail until the write lands (`fate`). A store that checks
   * the token only as the write arrives applies it then: a stale write.
   */
  | {
      readonly _tag: "StaleWindow"
      readonly extraMs: number
      readonly fate: "crash" | "pause" | "mute"
    }

/**
 * The simulated handler's shape: a chain of `steps` model calls per attempt; a call that fails with a retryable
 * error is tried again inside the attempt up to `retries` times (after an SDK-style backoff); a call that still
 * fails is replaced once by a call to a fallback model when `fallback` is set.
 *
 * @since 0.2.0
 * @category models
 */
export interface HandlerShape {
  readonly steps: number
  readonly retries: number
  readonly fallback: boolean
}

/**
 * The shape of plans saved before handlers had several calls: one call per attempt.
 *
 * @since 0.2.0
 * @category constructors
 */
export const oneCall: HandlerShape = { steps: 1, retries: 0, fallback: false }

/**
 * The attempt policy the simulated handler declares: its calls' timeout (one per step of the chain), in-attempt
 * retries and fallback.
 *
 * @since 0.9.0
 * @category combinators
 */
export const attemptPolicy = (plan: Pick<Plan, "callTimeoutMs" | "handler">) => {
  const shape = plan.handler ?? oneCall
  return {
    timeoutMs: plan.callTimeoutMs * shape.steps,
    retries: shape.retries,
    fallbacks: shape.fallback ? 1 : 0
  }
}

/**
 * The handler's worst case in a plan: the attempt's lease as the core sizes it (`Lease.leaseFor`).
 *
 * @since 0.9.0
 * @category combinators
 */
export const worstCaseMs = (plan: Pick<Plan, "callTimeoutMs" | "handler">): number => leaseFor(attemptPolicy(plan))

/**
 * The lease a plan's workers hold for each job (`Lease.keptLeaseMs`): the plan's keep-alive (the Worker's default
 * when the plan has none), or the handler's worst case when that is shorter.
 *
 * @since 0.9.0
 * @category combinators
 */
export const heldLeaseMs = (plan: Pick<Plan, "callTimeoutMs" | "handler" | "keepAliveMs">): number =>
  keptLeaseMs(worstCaseMs(plan), plan.keepAliveMs ?? defaultKeepAliveMs)

/**
 * How a plan's keep-alive is drawn, relative to the handler's worst case: the Worker's default (6 s, whatever the
 * worst case), a quarter or half of it (the lease is renewed many times in one attempt), the worst case itself (the
 * keep-alive ends with the attempt), or twice it (the worst case bounds the lease). Plans draw the first three twice
 * as often as the last two, and shrink toward the default.
 *
 * @since 0.9.0
 * @category models
 */
export const keepAliveShares = ["default", "quarter", "half", "worstCase", "twice"] as const

/**
 * The shares as plans draw them: the default, a quarter and half (the keep-alive regime: mostly a lease shorter than
 * the worst case, renewed and taken over mid-attempt) twice as often as once and twice the worst case (the lease a
 * worker held before keep-alives). Shrinks toward the default.
 */
const keepAliveDraws: ReadonlyArray<(typeof keepAliveShares)[number]> = [
  "default",
  "default",
  "quarter",
  "quarter",
  "half",
  "half",
  "worstCase",
  "twice"
]

/**
 * The keep-alive in ms a share gives for a plan's handler (at least 3 ms, the Worker's lower bound).
 *
 * @since 0.9.0
 * @category combinators
 */
export const keepAliveFor = (
  plan: Pick<Plan, "callTimeoutMs" | "handler">,
  share: (typeof keepAliveShares)[number]
): number => {
  const worst = worstCaseMs(plan)
  const ms =
    share === "default"
      ? defaultKeepAliveMs
      : share === "quarter"
        ? worst / 4
        : share === "half"
          ? worst / 2
          : share === "worstCase"
            ? worst
            : worst * 2
  return Math.max(3, Math.round(ms))
}

/**
 * The sweeper's settings in a plan.
 *
 * @since 0.2.0
 * @category models
 */
export interface SweeperSettings {
  readonly intervalMs: number
  /** How long a queued job waits before the relay republishes it (relay on). */
  readonly republishAfterMs: number
}

/**
 * The sweeper settings of plans saved before they were drawn per plan.
 *
 * @since 0.2.0
 * @category constructors
 */
export const defaultSweeper: SweeperSettings = { intervalMs: 2_000, republishAfterMs: 4_000 }

/**
 * One run's plan. Invariant: every field is plain JSON, so a plan can be saved to the corpus and replayed.
 *
 * @since 0.1.0
 * @category models
 */
export interface Plan {
  readonly seed: number
  readonly jobs: number
  readonly workers: number
  readonly concurrency: number
  readonly faults: ReadonlyArray<FaultKind>
  /** Per-mille chance that a fault point fires, read against the tape. */
  readonly faultRate: number
  /** Fault tape: one entry per fault point reached, in order; a point fires when `entry >= 1000 - faultRate`. */
  readonly tape: ReadonlyArray<number>
  /** The handler's call timeout; the lease is derived from it (and the handler's shape) by the core's lease sizing. */
  readonly callTimeoutMs: number
  /** The handler's calls per attempt; a plan saved without it makes one call (`oneCall`). */
  readonly handler?: HandlerShape | undefined
  /** The sweeper's interval and republish age; a plan saved without them uses `defaultSweeper`. */
  readonly sweeper?: SweeperSettings | undefined
  readonly model: {
    readonly medianMs: number
    /** Pareto shape of the latency tail (smaller = heavier). */
    readonly tailAlpha: number
    /** Per-mille of calls that fail (F14 on). */
    readonly errorRate: number
    /** What each call is estimated at (the handler's `estimateCents`), and what it is billed when `costSpread` is 0. */
    readonly priceCents: number
    /**
     * How far a call's billed amount strays from its estimate: each call is billed a whole number of cents drawn
     * from `priceCents - costSpread` to `priceCents + costSpread` (never below 0). A plan saved without it: 0, every
     * call billed exactly its estimate.
     */
    readonly costSpread?: number | undefined
  }
  readonly maxAttempts: number
  /** Per-job budgets in cents (null: none), cycled over the jobs. */
  readonly budgets: ReadonlyArray<number | null>
  /** Jobs submitted at these offsets (ms), cycled. */
  readonly submitAt: ReadonlyArray<number>
  /** Job indexes the operator cancels, and when. */
  readonly cancels: ReadonlyArray<{ readonly job: number; readonly at: number }>
  /** Job indexes resubmitted with the same key and the same input (idempotency), and one conflict. */
  readonly resubmits: ReadonlyArray<number>
  readonly events: ReadonlyArray<ProcessEvent>
  readonly skews: ReadonlyArray<{ readonly offsetMs: number; readonly driftPpm: number; readonly jumpMs: number }>
  readonly targeted: Targeted
  /** Length of the fault phase in virtual ms. */
  readonly faultPhaseMs: number
  /**
   * Whether the sweeper's outbox relay is on (it republishes queued jobs that have no message in flight). Off: a
   * "no-relay world" (see `noRelay`). A plan saved without this field has the relay on.
   */
  readonly relay?: boolean | undefined
  /** Jobs each worker claims ahead of a free slot (`WorkerOptions.prefetch`); a plan saved without it: 0. */
  readonly prefetch?: number | undefined
  /**
   * How workers take work: from the transport's deliveries (`"transport"`, the in-memory SQS-like transport), or
   * straight from the Store with `claimNext`, woken by a transport that carries only wake-ups (`"store"`, as on a
   * transport built on the Store's tables). A plan saved without it: `"transport"`.
   */
  readonly intake?: "transport" | "store" | undefined
  /**
   * Fleet limits: the provider resources the jobs use, the provider's own limits and what the fleet declares, the
   * tenants and their weights (`LimitsPlan.ts`). A plan saved without it names no resource.
   */
  readonly limits?: LimitsPlan.LimitsPlan | undefined
  /** Batches the application submits (see `BatchesPlan.ts`); a plan saved without them submits none. */
  readonly batches?: ReadonlyArray<BatchPlan> | undefined
  /** The schedule every worker process declares and runs (see `SchedulesPlan.ts`); a plan saved without it: none. */
  readonly schedule?: SchedulePlan | null | undefined
  /**
   * The keep-alive every worker process holds (`WorkerOptions.keepAliveMs`), drawn from `keepAliveShares` around the
   * handler's worst case; the targeted pause and late claim reply aim at the lease it gives (`heldLeaseMs`). A plan
   * saved without it runs the Worker's default and aims its targeted scenarios at the worst case, as it was saved.
   */
  readonly keepAliveMs?: number | undefined
}

/**
 * What shapes the generated plans.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanOptions {
  readonly jobs: number
  readonly workers: number
  /** Fault kinds allowed; each plan switches on a random subset (swarm). Empty: fault-free runs. */
  readonly faults: ReadonlyArray<FaultKind>
  /** Switch every allowed kind on in every plan (no swarm subset). */
  readonly allFaults?: boolean | undefined
}

const tapeEntry = fc.integer({ min: 0, max: 999 })

/**
 * Fault kinds under which a correct worker never needs the sweeper's relay: none of them loses a message, skews a
 * clock or costs a receive beyond the one each attempt's claim takes. Redrive (F16) is on in every no-relay world.
 *
 * @since 0.1.0
 * @category models
 */
export const noRelayFaults: ReadonlyArray<FaultKind> = ["F13", "F14", "F16"]

/**
 * Whether a plan runs without the sweeper's relay.
 *
 * @since 0.1.0
 * @category combinators
 */
export const isNoRelay = (plan: Plan): boolean => plan.relay === false

/**
 * Turn a plan into a no-relay world. Invariant: a correct worker makes at most `maxAttempts` receives of a job's
 * message while the job is not terminal, so a redrive policy of `maxReceiveCount = maxAttempts` never dead-letters a
 * message a correct worker still needs, and no job depends on the relay. To keep that true the world has only
 * the fault kinds of `noRelayFaults` (redrive and model errors always on when allowed, the heavy tail when the
 * swarm picked it), no targeted scenario and no scheduled process events (a graceful shutdown hands a job back,
 * which costs a receive), and no outage of a planned schedule. A worker that lets its message return while it still works (visibility not extended)
 * spends receives faster than attempts: its message is dead-lettered while the job still has attempts left, and
 * with no relay the job is never delivered again (I5). The handler makes one call per attempt: its lease is then
 * sized for that call alone, and an attempt slowed by the latency tail outlasts a quarter of it often enough for
 * such a worker to be seen within a small budget. It names no provider resource: a throttled job takes a receive
 * without an attempt.
 *
 * @since 0.1.0
 * @category combinators
 */
export const noRelay = ({ limits: _limits, ...plan }: Plan, allowed: ReadonlyArray<FaultKind>): Plan => ({
  ...plan,
  relay: false,
  handler: oneCall,
  faults: faultKinds.filter(
    (kind) =>
      allowed.includes(kind) && (kind === "F16" || kind === "F14" || (kind === "F13" && plan.faults.includes(kind)))
  ),
  targeted: { _tag: "None" },
  events: [],
  // An outage of every process is a crash or a pause of each: none in a no-relay world (see above).
  ...(plan.schedule === null || plan.schedule === undefined ? {} : { schedule: { ...plan.schedule, outage: null } })
})

/**
 * The plan generator. Invariant: every generated plan is valid for `run`, and shrinking moves toward fewer
 * faults, fewer events and a shorter tape.
 *
 * @since 0.1.0
 * @category constructors
 */
export const arbitrary = (options: PlanOptions): fc.Arbitrary<Plan> => {
  const { jobs, workers } = options
  const allowed = [...options.faults]
  const faults: fc.Arbitrary<ReadonlyArray<FaultKind>> =
    allowed.length === 0
      ? fc.constant([])
      : options.allFaults === true
        ? fc.constant(allowed)
        : fc.subarray(allowed, { minLength: 1 })
  const event = fc.record({
    at: fc.integer({ min: 0, max: 20_000 }),
    worker: fc.integer({ min: 0, max: Math.max(0, workers - 1) }),
    what: fc.constantFrom<ProcessEvent["what"]>("crash", "pause", "restart", "shutdown"),
    ms: fc.integer({ min: 100, max: 8_000 })
  })
  const targetedScenario: fc.Arbitrary<Targeted> = fc.oneof(
    { weight: 4, arbitrary: fc.constant<Targeted>({ _tag: "None" }) },
    fc.record({
      _tag: fc.constant("PauseLeasePlusEpsilon" as const),
      worker: fc.integer({ min: 0, max: Math.max(0, workers - 1) }),
      epsilonMs: fc.integer({ min: 1, max: 500 })
    }),
    fc.record({ _tag: fc.constant("LatencyLeaseMinusDelta" as const), deltaMs: fc.integer({ min: 1, max: 400 }) }),
    fc.record({
      _tag: fc.constant("HeartbeatFailsK" as const),
      worker: fc.integer({ min: 0, max: Math.max(0, workers - 1) }),
      k: fc.integer({ min: 1, max: 4 })
    }),
    fc.record({
      _tag: fc.constant("LateClaimReply" as const),
      worker: fc.integer({ min: 0, max: Math.max(0, workers - 1) }),
      extraMs: fc.integer({ min: 1, max: 500 })
    }),
    fc.record({
      _tag: fc.constant("WindowedWrites" as const),
      worker: fc.integer({ min: 0, max: Math.max(0, workers - 1) }),
      ms: fc.integer({ min: 100, max: 1_500 })
    }),
    fc.record({
      _tag: fc.constant("StaleWindow" as const),
      extraMs: fc.integer({ min: 0, max: 100 }),
      fate: fc.constantFrom<"crash" | "pause" | "mute">("crash", "pause", "mute")
    })
  )
  // Targeted scenarios are faults too: fault-free plans get none.
  const targeted = allowed.length === 0 ? fc.constant<Targeted>({ _tag: "None" }) : targetedScenario
  // One plan in five (when the swarm may pick redrive) runs without the sweeper's relay: see `noRelay`.
  const relay: fc.Arbitrary<boolean> =
    allowed.includes("F16") && options.allFaults !== true
      ? fc.oneof({ weight: 4, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) })
      : fc.constant(true)
  const plan: fc.Arbitrary<Plan> = fc.record({
    seed: fc.integer({ min: 0, max: 0x7fffffff }),
    jobs: fc.constant(jobs),
    workers: fc.constant(workers),
    concurrency: fc.integer({ min: 1, max: 3 }),
    faults,
    faultRate: fc.integer({ min: 20, max: 250 }),
    tape: fc.array(tapeEntry, { minLength: 40, maxLength: 300, size: "max" }),
    callTimeoutMs: fc.integer({ min: 1_000, max: 6_000 }),
    // Shrinks toward one call per attempt, no retries, no fallback.
    handler: fc.record({
      steps: fc.integer({ min: 1, max: 3 }),
      retries: fc.integer({ min: 0, max: 2 }),
      fallback: fc.boolean()
    }),
    // Leases (2 to 7 s and more) reach past the republish age, and the sweep interval varies around them.
    sweeper: fc.record({
      intervalMs: fc.integer({ min: 500, max: 4_000 }),
      republishAfterMs: fc.integer({ min: 1_000, max: 8_000 })
    }),
    model: fc.record({
      medianMs: fc.integer({ min: 50, max: 800 }),
      tailAlpha: fc.double({ min: 1.1, max: 3, noNaN: true }),
      errorRate: fc.integer({ min: 0, max: 300 }),
      priceCents: fc.integer({ min: 1, max: 5 }),
      // Shrinks toward calls billed exactly their estimate.
      costSpread: fc.integer({ min: 0, max: 6 })
    }),
    maxAttempts: fc.integer({ min: 1, max: 5 }),
    budgets: fc.array(fc.option(fc.integer({ min: 0, max: 20 }), { nil: null, freq: 2 }), {
      minLength: 1,
      maxLength: 4
    }),
    submitAt: fc.array(fc.integer({ min: 0, max: 10_000 }), { minLength: 1, maxLength: 6 }),
    cancels: fc.array(fc.record({ job: fc.nat({ max: jobs - 1 }), at: fc.integer({ min: 0, max: 15_000 }) }), {
      maxLength: 3
    }),
    resubmits: fc.array(fc.nat({ max: jobs - 1 }), { maxLength: 3 }),
    events: fc.array(event, { maxLength: 6 }),
    skews: fc.array(
      fc.record({
        offsetMs: fc.integer({ min: -5_000, max: 5_000 }),
        driftPpm: fc.integer({ min: -50_000, max: 50_000 }),
        jumpMs: fc.integer({ min: -3_000, max: 3_000 })
      }),
      { minLength: workers, maxLength: workers }
    ),
    targeted,
    faultPhaseMs: fc.integer({ min: 10_000, max: 30_000 }),
    relay,
    // Both shrink toward the old behaviour: no local queue, deliveries from the transport.
    prefetch: fc.integer({ min: 0, max: 3 }),
    intake: fc.oneof(
      { weight: 3, arbitrary: fc.constant("transport" as const) },
      { weight: 1, arbitrary: fc.constant("store" as const) }
    ),
    // Drawn last, so every field above draws as it did before batches and schedules existed; about one plan in four
    // gets each, and both shrink toward none.
    batches: fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: batchPlans }),
    schedule: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: schedulePlan })
  })
  // A no-relay world is about messages (redrive, one receive per attempt): its workers take deliveries.
  const drawn = plan.map((p) => (p.relay === false ? { ...noRelay(p, allowed), intake: "transport" as const } : p))
  // Limits are drawn after everything else, so every other field is what the seed drew before they existed. A
  // no-relay world has none: a throttled job takes a receive without an attempt, which its redrive policy forbids.
  // The keep-alive is drawn after the limits, for the same reason.
  return fc
    .tuple(drawn, LimitsPlan.arbitrary, fc.constantFrom<(typeof keepAliveShares)[number]>(...keepAliveDraws))
    .map(([p, limits, share]) => {
      const withLimits = limits === null || p.relay === false ? p : { ...p, limits }
      return { ...withLimits, keepAliveMs: keepAliveFor(p, share) }
    })
}

/**
 * The most one call of a plan is billed: its estimate plus the plan's spread.
 *
 * @since 0.2.0
 * @category combinators
 */
export const maxCallCents = (plan: Plan): number => plan.model.priceCents + (plan.model.costSpread ?? 0)

/**
 * Whether a fault kind is on in a plan.
 *
 * @since 0.1.0
 * @category combinators
 */
export const has = (plan: Plan, kind: FaultKind): boolean => plan.faults.includes(kind)
