/**
 * Shared pieces of a simulated world: worker incarnations and the fault injector that reads the plan's tape.
 *
 * @internal
 */
import { Effect } from "effect"
import type { History } from "../History.js"
import { type FaultKind, has, type Plan } from "../Plan.js"
import { noSkew, type Skew, type VirtualClock, WorkerClock } from "../SimClock.js"
import { stuck } from "./stuck.js"

/**
 * Virtual epoch of every run (so job ids look like real UUID v7s).
 *
 * @internal
 */
export const epoch = 1_767_225_600_000

/**
 * The clock skew (F12) of the worker in `slot`: the plan's offset, drift and jump, the jump at the middle of the
 * fault phase; none without F12. Every incarnation of a slot has it.
 *
 * @internal
 */
export const skewOf = (plan: Plan, slot: number): Skew => {
  const s = plan.skews[slot]
  return has(plan, "F12") && s !== undefined
    ? { offsetMs: s.offsetMs, driftPpm: s.driftPpm, jumpAt: epoch + plan.faultPhaseMs / 2, jumpMs: s.jumpMs }
    : noSkew
}

/**
 * How many ms a clock with `skew` falls behind true time from true instant `from` to true instant `to`: what a
 * duration measured on it between the two comes out short by (negative when it runs ahead). The offset cancels
 * out; the drift and a jump between the two do not.
 *
 * @internal
 */
export const lagBetween = (skew: Skew, from: number, to: number): number =>
  -((to - from) * skew.driftPpm) / 1_000_000 - (from < skew.jumpAt && skew.jumpAt <= to ? skew.jumpMs : 0)

/**
 * One start of a worker process. Its clock may be skewed; `gate` blocks while it is paused and forever once it
 * crashed, which is how a crash keeps every later write of the old process from reaching the world.
 *
 * @internal
 */
export class Incarnation {
  readonly clock: WorkerClock
  heartbeats = 0
  calls = 0
  constructor(
    readonly slot: number,
    readonly n: number,
    base: VirtualClock,
    skew: Skew
  ) {
    this.clock = new WorkerClock(base, skew)
  }
  get id(): string {
    return `w${this.slot}.${this.n}`
  }
  get dead(): boolean {
    return this.clock.isDead
  }
  get gate(): Effect.Effect<void> {
    return this.clock.gate
  }
}

/**
 * A participant of the world: a worker incarnation, or a process that never crashes or pauses (the client, the
 * sweeper, the operator, the run's driver). `faulted` says whether store faults are injected into its calls (the
 * driver's final reads and replays are never faulted); process faults need an incarnation.
 *
 * @internal
 */
export interface Actor {
  readonly id: string
  readonly gate: Effect.Effect<void>
  readonly incarnation: Incarnation | null
  readonly faulted: boolean
}

/** @internal */
export const actor = (id: string, faulted: boolean): Actor => ({ id, gate: Effect.void, incarnation: null, faulted })

/**
 * Runs `next` once the actor's gate lets it through: at once when the actor is never faulted or its
 * process is neither paused nor crashed, else after the gate (which never opens for a crashed process).
 *
 * @internal
 */
export const passGate =
  (actor: Actor) =>
  <A, E>(next: () => Effect.Effect<A, E>): Effect.Effect<A, E> =>
    actor.incarnation === null || actor.incarnation.clock.isOpen ? next() : Effect.flatMap(actor.gate, next)

/** @internal */
export const ofIncarnation = (incarnation: Incarnation): Actor => ({
  id: incarnation.id,
  gate: incarnation.gate,
  incarnation,
  faulted: true
})

/**
 * Reads the fault tape: one entry per fault point reached while faults are on. Invariant: the same plan and the
 * same schedule consume the same entries, so a fault fires at the same point on every replay.
 *
 * Worker processes read the tape from its start; the infrastructure (client, sweeper, operator) reads it from its end,
 * backwards, so its fault points do not use up the entries of the processes under test (shrinking the tape still
 * removes faults of both).
 *
 * @internal
 */
export class Faults {
  enabled = true
  private pos = 0
  private infraPos = 0
  /** Targeted heartbeat failures left, per worker slot. */
  heartbeatFailures = new Map<number, number>()
  /** Worker slots whose first claim still gets the targeted late reply. */
  readonly lateClaims = new Set<number>()
  /** How late the targeted claim reply arrives: the lease plus the plan's extra. */
  readonly lateClaimMs: number
  /** The worker slot whose every write opens a window (targeted), and the window's length. */
  readonly windowed: { readonly slot: number; readonly ms: number } | undefined
  /** The targeted window that outlives a lease, until a worker's outcome write has taken it. */
  staleWindow: Extract<Plan["targeted"], { readonly _tag: "StaleWindow" }> | undefined
  /** Per worker slot, the true time until which its heartbeats fail (a targeted stale window's "mute" fate). */
  readonly muted = new Map<number, number>()
  /** True time until which the store refuses every call of every faulted process (F21); 0: no outage. */
  outageUntil = 0
  constructor(
    readonly plan: Plan,
    readonly history: History,
    readonly clock: VirtualClock,
    leaseMs: number
  ) {
    const targeted = plan.targeted
    if (targeted._tag === "HeartbeatFailsK") heartbeatFailures(this, targeted.worker, targeted.k)
    if (targeted._tag === "LateClaimReply") this.lateClaims.add(targeted.worker)
    this.lateClaimMs = targeted._tag === "LateClaimReply" ? leaseMs + targeted.extraMs : 0
    this.windowed = targeted._tag === "WindowedWrites" ? { slot: targeted.worker, ms: targeted.ms } : undefined
    this.staleWindow = targeted._tag === "StaleWindow" ? targeted : undefined
  }

  /** Whether the store is in an outage (F21) right now. */
  get outage(): boolean {
    return this.enabled && this.clock.now < this.outageUntil
  }

  /** Which of `kinds` fires at this point, if any (one tape entry consumed, from the start or for `infra` the end). */
  roll(kinds: ReadonlyArray<FaultKind>, who: string, point: string, infra = false): FaultKind | undefined {
    if (!this.enabled) return undefined
    const on = kinds.filter((kind) => has(this.plan, kind))
    if (on.length === 0) return undefined
    const tape = this.plan.tape
    const entry = infra ? tape[tape.length - 1 - this.infraPos] : tape[this.pos]
    if (entry === undefined) return undefined
    if (infra) this.infraPos++
    else this.pos++
    if (entry < 1000 - this.plan.faultRate) return undefined
    const kind = on[entry % on.length]!
    this.note(kind, who, point)
    return kind
  }

  note(id: string, who: string, point: string): void {
    this.history.push({ k: "fault", t: this.clock.now, id, who, point })
  }
}

const heartbeatFailures = (faults: Faults, slot: number, k: number): void => {
  faults.heartbeatFailures.set(slot, k)
}

/** Crash an incarnation: no timer, reply or write of it reaches the world again. @internal */
export const crash = (incarnation: Incarnation): void => incarnation.clock.kill()

/** @internal */
export { stuck }
