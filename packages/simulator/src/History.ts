/**
 * The recorded history of one simulated run: ground truth written by the world (store proxies, transport
 * proxies, the simulated model, the run's driver), never by the code under test. Events carry virtual time only
 * (no fiber ids, no wall-clock times), so the same plan always yields the same serialized history.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import type { AbandonReason, Job, JobState } from "@slowcall/core/Job"
import type { Outcome } from "@slowcall/core/Protocol"

/**
 * What the history keeps of a job record around a write.
 *
 * @since 0.1.0
 * @category models
 */
export interface Snap {
  readonly state: JobState
  readonly token: number
  readonly attempts: number
  readonly attemptsBase: number
  readonly maxAttempts: number
  readonly leaseOwner: string | null
  readonly leaseUntil: number | null
  readonly runAfter: number
  readonly updatedAt: number
  readonly costCents: number
  readonly budgetCents: number | null
  readonly abandonReason: AbandonReason | null
}

/**
 * The snapshot of a job record.
 *
 * @since 0.1.0
 * @category constructors
 */
export const snap = (job: Job): Snap => ({
  state: job.state,
  token: job.leaseToken,
  attempts: job.attempts,
  attemptsBase: job.attemptsBase,
  maxAttempts: job.maxAttempts,
  leaseOwner: job.leaseOwner,
  leaseUntil: job.leaseUntil,
  runAfter: job.runAfter,
  updatedAt: job.updatedAt,
  costCents: job.costCents,
  budgetCents: job.budgetCents,
  abandonReason: job.abandonReason
})

/**
 * Store verbs the proxies record, one event per item (a sweep: one event per job it wrote). A claim the store
 * selected itself (`claimNext`) is recorded as a `claim`.
 *
 * @since 0.1.0
 * @category models
 */
export type WriteOp = "submit" | "claim" | "heartbeat" | "charge" | "settle" | "cancel" | "replay" | "sweep"

/**
 * How a settle ended its attempt (`Protocol.Outcome`'s tag), recorded with the write.
 *
 * @since 0.2.0
 * @category models
 */
export type OutcomeTag = Outcome["_tag"]

/**
 * One event of a run. `t` is true virtual time in ms; `who` names a worker incarnation (`w1.2`: slot 1, second
 * start), `client`, `sweeper` or `operator`.
 *
 * @since 0.1.0
 * @category models
 */
export type Event =
  | {
      readonly k: "submit"
      readonly t: number
      readonly key: string
      readonly hash: string
      readonly ok: boolean
      readonly jobId: string | null
      readonly created: boolean | null
      readonly error: string | null
    }
  | {
      readonly k: "write"
      readonly t: number
      /** When the caller issued the write (before any injected delay). */
      readonly start: number
      readonly op: WriteOp
      readonly who: string
      readonly jobId: string
      readonly token: number | null
      readonly ok: boolean
      /**
       * The item's result: the claim's tag, a settle's resulting state, a sweep's action (`requeued`, `expiredFailed`,
       * `abandoned`), `LeaseLost` for a fenced miss, or the error tag of a call that failed.
       */
      readonly res: string
      /** The outcome a settle asked for (null for every other verb). */
      readonly outcome: OutcomeTag | null
      readonly takeover: boolean
      readonly before: Snap | null
      readonly after: Snap | null
      /** Charge details. */
      readonly callId: string | null
      readonly amount: number | null
      readonly settled: boolean | null
      /** The committed result's claim token (a `Complete` settle only). */
      readonly resultToken: number | null
    }
  | {
      readonly k: "call"
      /** When the call started: its process was running (not paused) and sent the request. */
      readonly t: number
      /** When the handler asked for the call; before `t` only when its process was paused in between. */
      readonly asked: number
      readonly end: number
      readonly who: string
      readonly jobId: string
      readonly token: number
      readonly callId: string
      /** What the provider billed for this call (ground truth). */
      readonly cents: number
      /** `limited` / `quota`: refused by the provider's own limits or its spend cap (a `refusal` event beside it). */
      readonly outcome: "ok" | "retryable" | "permanent" | "rate_limited" | "timeout_billed" | "limited" | "quota"
      /** Spend and budget of the job in the store when the call started. */
      readonly spentAtStart: number
      readonly budget: number | null
      readonly attemptsAtStart: number
      readonly maxAttempts: number
    }
  | {
      /**
       * A billed call's answer reached its caller, naming what the provider billed (a reply, or an error that carries
       * the amount): from `t` on the caller knows what to settle. A call whose caller stopped waiting (its own
       * timeout, an interruption, a crash) has none.
       */
      readonly k: "reply"
      readonly t: number
      readonly who: string
      readonly jobId: string
      readonly callId: string
      readonly cents: number
    }
  | {
      /** The store refuses every call of every faulted process for `ms` from `t` (F21, an outage). */
      readonly k: "outage"
      readonly t: number
      readonly ms: number
    }
  | {
      readonly k: "msg"
      readonly t: number
      readonly op: "publish" | "receive" | "ack" | "extend" | "defer"
      readonly who: string
      readonly jobId: string
      readonly receipt: string | null
      readonly count: number | null
      /** The job at that moment (ack: what I9 checks). */
      readonly state: JobState | null
      readonly owner: string | null
    }
  | { readonly k: "fault"; readonly t: number; readonly id: string; readonly who: string; readonly point: string }
  | {
      /**
       * The answer of `who`'s store call at `point` reached it at `t`, `ms` after it was due (F20: a late reply; F15:
       * a lost reply's timeout): the fault acted on the process for that whole interval, as a pause does.
       */
      readonly k: "late"
      readonly t: number
      readonly who: string
      readonly point: string
      readonly ms: number
    }
  | {
      /** A fenced write's reply reached `who` saying its lease under `token` is lost (a `LeaseLost` item). */
      readonly k: "lost"
      readonly t: number
      readonly who: string
      readonly op: string
      readonly jobId: string
      readonly token: number
    }
  | {
      readonly k: "life"
      readonly t: number
      readonly who: string
      readonly what: "start" | "crash" | "pause" | "shutdown" | "heal"
      readonly ms: number | null
    }
  | {
      readonly k: "op"
      readonly t: number
      readonly what: "cancel" | "replay"
      readonly jobId: string
      readonly ok: boolean
      readonly before: JobState | null
    }
  | LimitEvent
  | {
      /** The provider refused a call on its own limits (`LimitsProvider.ts`): a 429 answered at `t`. */
      readonly k: "refusal"
      readonly t: number
      readonly resource: string
      readonly callId: string
      readonly reason: "concurrency" | "requests" | "inputTokens" | "outputTokens" | "quota"
    }
  | {
      /**
       * The provider was through with a call it admitted (`LimitsProvider.ts`): it answered, or its caller stopped
       * waiting. Its concurrency slot is free from `t` and its unused output tokens are back in the bucket.
       */
      readonly k: "through"
      readonly t: number
      readonly resource: string
      readonly callId: string
    }
  | { readonly k: "phase"; readonly t: number; readonly name: "heal" | "replay" | "final" }
  | { readonly k: "final"; readonly t: number; readonly jobId: string; readonly snap: Snap; readonly ledger: number }
  | BatchEvent
  | ScheduleEvent

/**
 * What the world records of batches (`Batches.ts`): items landing and acknowledged cancels (`batch`); the batch
 * record beside its items' records as the store holds them between two writes (`bstate`, recorded when it changed:
 * `counts` and `cost` are what the batch keeps, `actual` and `actualCost` what its items' records say, counts in the
 * order queued, running, succeeded, failed, abandoned); each claim of an item that granted a lease (`bclaim`, with
 * the items' spend at that moment); the spend of a batch with a budget whenever it changed (`bspend`); and at the end
 * (`bfinal`) how many jobs the store holds under each callback's key.
 *
 * @since 0.8.0
 * @category models
 */
export type BatchEvent =
  | {
      readonly k: "batch"
      readonly t: number
      readonly batchId: string
      readonly what: "items" | "cancel"
      readonly jobIds: ReadonlyArray<string>
      readonly ok: boolean
    }
  | {
      readonly k: "bstate"
      readonly t: number
      readonly batchId: string
      readonly counts: ReadonlyArray<number>
      readonly actual: ReadonlyArray<number>
      readonly cost: number
      readonly actualCost: number
      readonly added: number
      readonly size: number
      readonly finished: boolean
      readonly onComplete: string | null
      readonly onSuccess: string | null
    }
  | {
      readonly k: "bclaim"
      readonly t: number
      readonly batchId: string
      readonly jobId: string
      readonly spent: number
      readonly budget: number | null
    }
  | {
      /**
       * A batch with a budget, whenever its spend changed between two writes the store applies: `spent` is its items'
       * ledgers (reservations included), `reserved` the same with each settled row counted at no more than its call's
       * estimate (what the calls were billed above their estimates left out: the spend the reservations committed).
       */
      readonly k: "bspend"
      readonly t: number
      readonly batchId: string
      readonly spent: number
      readonly reserved: number
      readonly budget: number
    }
  | {
      readonly k: "bfinal"
      readonly t: number
      readonly batchId: string
      readonly names: ReadonlyArray<"onComplete" | "onSuccess">
      readonly onCompleteJobs: number
      readonly onSuccessJobs: number
    }

/**
 * What the world records of schedules (`Schedules.ts`): each Scheduler's reads of its schedules (`sched` `list`, at
 * store time) and cursor moves (`sched` `advance`, from `from` to `to`, `ok` when it moved, with the store time of the
 * pass's read as `passNow`); at the end every job the store holds for a tick (`tjob`, by the tick in its input).
 *
 * @since 0.8.0
 * @category models
 */
export type ScheduleEvent =
  | {
      readonly k: "sched"
      readonly t: number
      readonly who: string
      readonly what: "list" | "advance"
      readonly passNow: number
      readonly from: number
      readonly to: number
      readonly ok: boolean
    }
  | {
      readonly k: "tjob"
      readonly t: number
      readonly tick: number
      readonly jobId: string
      readonly createdAt: number
    }

/**
 * One item of a fleet Limiter call as the store applied it (`SimLimiter.ts`), at store time `t`: the verb (`Acquire`,
 * `Release`, `Renew`, `Pause`, or an operator's `Resume`), what it named, and its result: the result's tag (or the
 * error tag of a call that failed), the permit's or the pause's end (`until`), and the live permits the Limiter
 * counted after it (`permits`).
 *
 * @since 0.4.0
 * @category models
 */
export interface LimitEvent {
  readonly k: "limit"
  readonly t: number
  readonly start: number
  readonly who: string
  readonly op: "Acquire" | "Release" | "Renew" | "Pause" | "Resume"
  readonly resource: string
  readonly callId: string | null
  readonly jobId: string | null
  readonly token: number | null
  readonly leaseMs: number | null
  /** A Release: whether the call reached the provider. A Pause: null. */
  readonly reached: boolean | null
  /** A Pause: its kind. */
  readonly kind: string | null
  readonly ok: boolean
  readonly res: string
  readonly until: number | null
  readonly permits: number | null
  /** Whether this application's reply was handed to the caller (not when lost, nor for the first of a repeated write). */
  readonly delivered: boolean
}

/**
 * An append-only event log. Invariant: events are appended in the order the run performed them.
 *
 * @since 0.1.0
 * @category models
 */
export class History {
  readonly events: Array<Event> = []
  /**
   * The job record each job was last recorded with (the `after` of its latest write): what a write that names its
   * jobs only afterwards (a sweep, a store-selected claim) was applied to. Every write reaches the store through a
   * recording proxy, so this is the record as the store held it before such a write.
   */
  readonly latest = new Map<string, Snap>()
  private readonly snaps = new Map<string, { readonly job: Job; readonly snap: Snap }>()
  push(event: Event): void {
    this.events.push(event)
    if (event.k === "write" && event.after !== null) this.latest.set(event.jobId, event.after)
  }
  /**
   * The snapshot of a job record, shared while the record is the same object: a store replaces a job's record on
   * every write and never changes one in place, so the record after one write is the record before the next, and
   * both events share one snapshot.
   */
  snapOf(job: Job): Snap {
    const cached = this.snaps.get(job.id)
    if (cached !== undefined && cached.job === job) return cached.snap
    const fresh = snap(job)
    this.snaps.set(job.id, { job, snap: fresh })
    return fresh
  }
}

/**
 * A stable 64-bit hash of a history, as 16 hex characters: every field of every event in order (each event kind's
 * fields in a fixed order, numbers by their exact bits, nullable fields with a marker that tells null from a value),
 * so equal histories hash equal and any difference in any field changes the hash with overwhelming likelihood. Not a
 * cryptographic digest: it detects divergence between replays, cheaply (it runs once per simulated run, builds no
 * string of the history and mixes each distinct string's digest once it is known).
 *
 * @since 0.1.0
 * @category combinators
 */
export const hashEvents = (events: ReadonlyArray<Event>): string => {
  const hasher = new Hasher()
  hasher.int(events.length)
  for (const event of events) hashEvent(hasher, event)
  return hasher.digest()
}

/** Every field of one event, kind first; a new field of `Event` must be added here (the history tests check it). */
const hashEvent = (h: Hasher, e: Event): void => {
  h.str(e.k)
  h.num(e.t)
  switch (e.k) {
    case "submit":
      h.str(e.key)
      h.str(e.hash)
      h.bool(e.ok)
      h.strOrNull(e.jobId)
      h.boolOrNull(e.created)
      h.strOrNull(e.error)
      return
    case "write":
      h.num(e.start)
      h.str(e.op)
      h.str(e.who)
      h.str(e.jobId)
      h.numOrNull(e.token)
      h.bool(e.ok)
      h.str(e.res)
      h.strOrNull(e.outcome)
      h.bool(e.takeover)
      hashSnap(h, e.before)
      hashSnap(h, e.after)
      h.strOrNull(e.callId)
      h.numOrNull(e.amount)
      h.boolOrNull(e.settled)
      h.numOrNull(e.resultToken)
      return
    case "call":
      h.num(e.asked)
      h.num(e.end)
      h.str(e.who)
      h.str(e.jobId)
      h.num(e.token)
      h.str(e.callId)
      h.num(e.cents)
      h.str(e.outcome)
      h.num(e.spentAtStart)
      h.numOrNull(e.budget)
      h.num(e.attemptsAtStart)
      h.num(e.maxAttempts)
      return
    case "reply":
      h.str(e.who)
      h.str(e.jobId)
      h.str(e.callId)
      h.num(e.cents)
      return
    case "outage":
      h.num(e.ms)
      return
    case "late":
      h.str(e.who)
      h.str(e.point)
      h.num(e.ms)
      return
    case "msg":
      h.str(e.op)
      h.str(e.who)
      h.str(e.jobId)
      h.strOrNull(e.receipt)
      h.numOrNull(e.count)
      h.strOrNull(e.state)
      h.strOrNull(e.owner)
      return
    case "fault":
      h.str(e.id)
      h.str(e.who)
      h.str(e.point)
      return
    case "lost":
      h.str(e.who)
      h.str(e.op)
      h.str(e.jobId)
      h.num(e.token)
      return
    case "life":
      h.str(e.who)
      h.str(e.what)
      h.numOrNull(e.ms)
      return
    case "op":
      h.str(e.what)
      h.str(e.jobId)
      h.bool(e.ok)
      h.strOrNull(e.before)
      return
    case "limit":
      h.num(e.start)
      h.str(e.who)
      h.str(e.op)
      h.str(e.resource)
      h.strOrNull(e.callId)
      h.strOrNull(e.jobId)
      h.numOrNull(e.token)
      h.numOrNull(e.leaseMs)
      h.boolOrNull(e.reached)
      h.strOrNull(e.kind)
      h.bool(e.ok)
      h.str(e.res)
      h.numOrNull(e.until)
      h.numOrNull(e.permits)
      h.bool(e.delivered)
      return
    case "refusal":
      h.str(e.resource)
      h.str(e.callId)
      h.str(e.reason)
      return
    case "through":
      h.str(e.resource)
      h.str(e.callId)
      return
    case "phase":
      h.str(e.name)
      return
    case "final":
      h.str(e.jobId)
      hashSnap(h, e.snap)
      h.num(e.ledger)
      return
    case "batch":
      h.str(e.batchId)
      h.str(e.what)
      h.int(e.jobIds.length)
      for (const id of e.jobIds) h.str(id)
      h.bool(e.ok)
      return
    case "bstate":
      h.str(e.batchId)
      for (const n of e.counts) h.num(n)
      for (const n of e.actual) h.num(n)
      h.num(e.cost)
      h.num(e.actualCost)
      h.num(e.added)
      h.num(e.size)
      h.bool(e.finished)
      h.strOrNull(e.onComplete)
      h.strOrNull(e.onSuccess)
      return
    case "bclaim":
      h.str(e.batchId)
      h.str(e.jobId)
      h.num(e.spent)
      h.numOrNull(e.budget)
      return
    case "bspend":
      h.str(e.batchId)
      h.num(e.spent)
      h.num(e.reserved)
      h.num(e.budget)
      return
    case "bfinal":
      h.str(e.batchId)
      h.int(e.names.length)
      for (const name of e.names) h.str(name)
      h.num(e.onCompleteJobs)
      h.num(e.onSuccessJobs)
      return
    case "sched":
      h.str(e.who)
      h.str(e.what)
      h.num(e.passNow)
      h.num(e.from)
      h.num(e.to)
      h.bool(e.ok)
      return
    case "tjob":
      h.num(e.tick)
      h.str(e.jobId)
      h.num(e.createdAt)
      return
  }
}

const hashSnap = (h: Hasher, snap: Snap | null): void => {
  h.int(snap === null ? 0x4c : 0x4f)
  if (snap === null) return
  h.str(snap.state)
  h.num(snap.token)
  h.num(snap.attempts)
  h.num(snap.attemptsBase)
  h.num(snap.maxAttempts)
  h.strOrNull(snap.leaseOwner)
  h.numOrNull(snap.leaseUntil)
  h.num(snap.runAfter)
  h.num(snap.updatedAt)
  h.num(snap.costCents)
  h.numOrNull(snap.budgetCents)
  h.strOrNull(snap.abandonReason)
}

const float = new Float64Array(1)
const floatBits = new Int32Array(float.buffer)

/** Two 32-bit multiply-xor lanes with different constants, mixed at the end (murmur3's finaliser). */
class Hasher {
  private a = 0x811c9dc5 | 0
  private b = 0x3c6ef372 | 0
  /** Each distinct string's own two-lane digest (length and characters), mixed in place of its characters. */
  private readonly strings = new Map<string, readonly [number, number]>()

  int(n: number): void {
    this.a = Math.imul(this.a ^ n, 0x01000193)
    this.b = Math.imul(this.b ^ n, 0x5bd1e995)
    this.b ^= this.b >>> 13
  }

  num(value: number): void {
    float[0] = value
    this.int(floatBits[0]!)
    this.int(floatBits[1]!)
  }

  str(text: string): void {
    let code = this.strings.get(text)
    if (code === undefined) {
      const lane = new Hasher()
      lane.int(text.length)
      for (let i = 0; i < text.length; i++) lane.int(text.charCodeAt(i))
      code = [lane.a, lane.b]
      this.strings.set(text, code)
    }
    this.int(code[0])
    this.int(code[1])
  }

  bool(value: boolean): void {
    this.int(value ? 0x54 : 0x46)
  }

  // A nullable field mixes a marker first: null and every value are told apart whatever follows.
  numOrNull(value: number | null): void {
    this.int(value === null ? 0x4c : 0x4e)
    if (value !== null) this.num(value)
  }

  strOrNull(value: string | null): void {
    this.int(value === null ? 0x4c : 0x53)
    if (value !== null) this.str(value)
  }

  boolOrNull(value: boolean | null): void {
    this.int(value === null ? 0x4c : 0x42)
    if (value !== null) this.bool(value)
  }

  digest(): string {
    const hex = (lane: number) => (fmix(lane) >>> 0).toString(16).padStart(8, "0")
    return hex(this.a ^ this.b) + hex(this.b)
  }
}

const fmix = (h0: number): number => {
  let h = h0
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  return h ^ (h >>> 16)
}

/**
 * Folds per-run hashes into the hash of a run set.
 *
 * @since 0.1.0
 * @category combinators
 */
export const hashAll = (hashes: ReadonlyArray<string>): string =>
  createHash("sha256").update(hashes.join("\n")).digest("hex").slice(0, 16)
