/**
 * The checkers: pure functions over one run's recorded history. They never look at the code under test, only at
 * what the world recorded (store writes with the record before and after, provider billing and the replies that
 * carried a billed amount, deliveries and acks, injected faults). Each violation names its invariant (I1-I12, I30-I35,
 * submit, replay, liveness) and carries a minimal witness: the few events that prove it.
 *
 * @since 0.1.0
 */
import { isLegal } from "@slowcall/core/StateMachine"
import * as BatchesCheck from "./BatchesCheck.js"
import type { Event, Snap } from "./History.js"
import { lagBetween, skewOf } from "./internal/world.js"
import { checkLimits } from "./LimitsCheckers.js"
import { has, maxCallCents, oneCall, type Plan } from "./Plan.js"
import * as SchedulesCheck from "./SchedulesCheck.js"

/**
 * One broken invariant in one run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Violation {
  readonly invariant: string
  readonly jobId: string | null
  readonly message: string
  readonly witness: ReadonlyArray<Event>
}

/**
 * The "sometimes" counters: each must be above zero over a run set, or the run set did not exercise what it
 * claims to.
 *
 * @since 0.1.0
 * @category models
 */
export interface Coverage {
  fencedWriteRejected: number
  leaseExpiredMidCall: number
  duplicateDelivery: number
  ambiguousWrite: number
  crashAfterPersist: number
  redeliveryOfTerminal: number
  budgetExhausted: number
  cancelRunning: number
  /**
   * A billed call's settlement was refused at least once and landed more than 350 ms after its amount reached the
   * worker: later than the three short retries (50, 100 and 200 ms) a store write gets.
   */
  lateSettlement: number
  /**
   * A fenced write sent while its token's lease was live in the store that reached the record only after the job was
   * claimed under a later token (it waited in the store past its holder's lease).
   */
  writeOutlivedLease: number
  /** A model call the fleet Limiter told to wait for capacity, or found its resource paused. */
  limiterWait: number
  /** A resource paused for the fleet (a 429, a spend cap). */
  resourcePaused: number
}

/**
 * Jepsen-style totals of a run (or, summed, of a run set).
 *
 * @since 0.1.0
 * @category models
 */
export interface Totals {
  submitted: number
  acknowledged: number
  terminal: number
  lost: number
  duplicateGenerations: { excused: number; unexcused: number }
  staleWrites: number
  billedCents: number
  ledgerCents: number
}

/**
 * The verdict on one run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Verdict {
  readonly violations: ReadonlyArray<Violation>
  readonly totals: Totals
  readonly coverage: Coverage
  /** Injected faults that actually fired, by fault id. */
  readonly faultsFired: Readonly<Record<string, number>>
}

/**
 * Empty coverage counters.
 *
 * @since 0.1.0
 * @category constructors
 */
export const emptyCoverage = (): Coverage => ({
  fencedWriteRejected: 0,
  leaseExpiredMidCall: 0,
  duplicateDelivery: 0,
  ambiguousWrite: 0,
  crashAfterPersist: 0,
  redeliveryOfTerminal: 0,
  budgetExhausted: 0,
  cancelRunning: 0,
  lateSettlement: 0,
  writeOutlivedLease: 0,
  limiterWait: 0,
  resourcePaused: 0
})

/**
 * Zero totals.
 *
 * @since 0.1.0
 * @category constructors
 */
export const emptyTotals = (): Totals => ({
  submitted: 0,
  acknowledged: 0,
  terminal: 0,
  lost: 0,
  duplicateGenerations: { excused: 0, unexcused: 0 },
  staleWrites: 0,
  billedCents: 0,
  ledgerCents: 0
})

type Write = Extract<Event, { k: "write" }>
type Call = Extract<Event, { k: "call" }>
type Reply = Extract<Event, { k: "reply" }>

/** The three short retries of a store write (50, 100 and 200 ms) are over this long after the first try. */
const shortRetriesMs = 350

/** Writes the Store fences by token: they may apply only to a job running under exactly that token. */
const fencedOps = new Set(["heartbeat", "settle"])
const terminalStates = new Set(["succeeded", "failed", "abandoned"])
const absorbing = new Set(["succeeded", "abandoned"])

/**
 * How far apart two store times may be and still count as one: epoch milliseconds near 1.8e12 carry about a quarter
 * of a microsecond of float precision, less than the store's microsecond step.
 */
const timeSlack = 0.0005

/** The most a store's step past the previous `updatedAt` adds: up to the next whole microsecond after it, plus one. */
const microStep = 0.0015

const changed = (before: Snap, after: Snap): boolean =>
  before.state !== after.state ||
  before.token !== after.token ||
  before.leaseUntil !== after.leaseUntil ||
  before.costCents !== after.costCents ||
  before.runAfter !== after.runAfter

/**
 * Check every invariant on one run's history. `outcome` is how the run loop ended (a deadlock or step-limit is a
 * liveness failure).
 *
 * @since 0.1.0
 * @category combinators
 */
export const check = (events: ReadonlyArray<Event>, plan: Plan, outcome: string, defect: string | null): Verdict => {
  const violations: Array<Violation> = []
  const coverage = emptyCoverage()
  const totals = emptyTotals()
  const faultsFired: Record<string, number> = {}
  const violate = (invariant: string, jobId: string | null, message: string, witness: ReadonlyArray<Event>) => {
    if (violations.filter((v) => v.invariant === invariant).length < 5) {
      violations.push({ invariant, jobId, message, witness: witness.slice(0, 8) })
    }
  }
  if (outcome !== "Done") {
    violate("liveness", null, `the run ended in ${outcome}${defect === null ? "" : `: ${defect}`}`, [])
  }

  const writesByJob = new Map<string, Array<Write>>()
  const callsByJob = new Map<string, Array<Call>>()
  /** The billed calls whose amount reached their caller, by call id. */
  const replies = new Map<string, Reply>()
  /** Per process, the intervals in which a fault acted on it: an injected fault or a crash at an instant, a pause for its length. */
  const faultsByWho = new Map<string, Array<readonly [number, number]>>()
  /** `who|t` of every injected fault, to find the store call it delayed (sent by `who` at `t`). */
  const faultedAt = new Set<string>()
  /** Store outages (F21): faults on every process for their length. */
  const outages: Array<readonly [number, number]> = []
  /** Per process, when it crashed and when its graceful shutdown began. */
  const crashes = new Map<string, Array<number>>()
  const shutdowns = new Map<string, Array<number>>()
  /** When each process first learned that its lease under a token was lost: `who|jobId|token` -> time. */
  const learnedLost = new Map<string, number>()
  const replays = new Map<string, Array<number>>()
  const healFinal = new Map<string, Snap>()
  const lastFinal = new Map<string, { snap: Snap; ledger: number }>()
  let phase: "run" | "heal" | "replay" | "final" = "run"
  const acked = new Set<string>()
  const keys = new Map<string, { hash: string; jobId: string; event: Event }>()
  const submittedKeys = new Set<string>()

  for (const e of events) {
    switch (e.k) {
      case "write": {
        const list = writesByJob.get(e.jobId) ?? []
        list.push(e)
        writesByJob.set(e.jobId, list)
        // A faulted call that waited in the store (a window inside the write) acted on its caller until it applied.
        if (e.t > e.start && faultedAt.has(`${e.who}|${e.start}`)) {
          const intervals = faultsByWho.get(e.who) ?? []
          intervals.push([e.start, e.t])
          faultsByWho.set(e.who, intervals)
        }
        break
      }
      case "call": {
        const list = callsByJob.get(e.jobId) ?? []
        list.push(e)
        callsByJob.set(e.jobId, list)
        break
      }
      case "fault": {
        faultsFired[e.id] = (faultsFired[e.id] ?? 0) + 1
        const list = faultsByWho.get(e.who) ?? []
        list.push([e.t, e.t])
        faultsByWho.set(e.who, list)
        faultedAt.add(`${e.who}|${e.t}`)
        if (e.id === "F6" || e.id === "F15") coverage.ambiguousWrite++
        if (e.id === "F8") coverage.crashAfterPersist++
        break
      }
      case "reply":
        replies.set(e.callId, e)
        break
      case "outage":
        outages.push([e.t, e.t + e.ms])
        break
      case "late": {
        // A late answer acts for its whole delay: the process waited on it (a heartbeat's, say) all that time.
        const list = faultsByWho.get(e.who) ?? []
        list.push([e.t - e.ms, e.t])
        faultsByWho.set(e.who, list)
        break
      }
      case "life": {
        if (e.what === "crash" || e.what === "shutdown") {
          const byWho = e.what === "crash" ? crashes : shutdowns
          const list = byWho.get(e.who) ?? []
          list.push(e.t)
          byWho.set(e.who, list)
        }
        if (e.what === "crash" || e.what === "pause") {
          const list = faultsByWho.get(e.who) ?? []
          // A pause acts for its whole length (the process resumes on beliefs it formed before): an interval.
          list.push([e.t, e.what === "pause" && e.ms !== null ? e.t + e.ms : e.t])
          faultsByWho.set(e.who, list)
        }
        break
      }
      case "lost": {
        const key = `${e.who}|${e.jobId}|${e.token}`
        if (!learnedLost.has(key)) learnedLost.set(key, e.t)
        break
      }
      case "submit": {
        submittedKeys.add(e.key)
        if (!e.ok) break
        acked.add(e.jobId!)
        const first = keys.get(e.key)
        if (first === undefined) keys.set(e.key, { hash: e.hash, jobId: e.jobId!, event: e })
        else if (first.hash !== e.hash) {
          violate("submit", e.jobId, `key ${e.key} reused with other input was accepted`, [first.event, e])
        } else if (first.jobId !== e.jobId) {
          violate("submit", e.jobId, `key ${e.key} returned two jobs`, [first.event, e])
        }
        break
      }
      case "msg": {
        // A Worker records each claim's owner as `${workerId}/${claim tag}`.
        const ownAttempt = e.owner !== null && (e.owner === e.who || e.owner.startsWith(`${e.who}/`))
        if (e.op === "ack" && e.state === "running" && ownAttempt) {
          violate("I9", e.jobId, `${e.who} acked while its own attempt was still running (outcome not persisted)`, [e])
        }
        break
      }
      case "op": {
        if (e.what === "cancel" && e.ok && e.before === "running") coverage.cancelRunning++
        if (e.what === "replay") {
          if (e.before === "succeeded") violate("replay", e.jobId, "replay moved a succeeded job", [e])
          const list = replays.get(e.jobId) ?? []
          list.push(e.t)
          replays.set(e.jobId, list)
        }
        break
      }
      case "phase":
        phase = e.name
        break
      case "final":
        if (phase === "heal") healFinal.set(e.jobId, e.snap)
        lastFinal.set(e.jobId, { snap: e.snap, ledger: e.ledger })
        break
    }
  }

  const overlaps = ([start, end]: readonly [number, number], from: number, to: number): boolean =>
    start <= to && end >= from
  const faultedBetween = (who: string, from: number, to: number): boolean =>
    (faultsByWho.get(who) ?? []).some((interval) => overlaps(interval, from, to)) ||
    outages.some((interval) => overlaps(interval, from, to))
  const faultFree = plan.faults.length === 0 && plan.targeted._tag === "None"
  // A drifting or jumping clock (F12) is the one fault under which a correct worker may measure its lease past the
  // store's: a call after the store's lease end is excused by as much as that worker's clock fell behind since the
  // send that granted or renewed the lease, never more (an offset cancels out of a measured duration).
  const skewed = has(plan, "F12")
  const shape = plan.handler ?? oneCall
  /** How far `who`'s clock fell behind true time between a grant's send and `asked`, the most over `sends`. */
  const skewAllowance = (who: string, sends: ReadonlyArray<number>, asked: number): number => {
    if (!skewed) return 0
    const slot = /^w(\d+)\./.exec(who)
    if (slot === null) return 0
    const skew = skewOf(plan, Number(slot[1]))
    let most = 0
    for (const sent of sends) if (sent <= asked) most = Math.max(most, lagBetween(skew, sent, asked))
    // The worker's clock reads whole milliseconds: each of its two readings may be short by up to one.
    return most > 0 ? most + 2 : 0
  }
  // Faults that delayed a claim (lost replies, retries, a pause while it was in flight) count for the attempt they
  // delayed: the window opens at the job's previous claim, or one lease before this one.
  const windowStart = (claim: Write, claims: ReadonlyArray<Write>): number => {
    const lease = Math.max(0, (claim.after?.leaseUntil ?? claim.t) - claim.t)
    const previous = claims.filter((w) => w.t < claim.t).map((w) => w.t)
    return Math.min(claim.start - lease, previous.length > 0 ? Math.max(...previous) : claim.start)
  }

  for (const [jobId, writes] of writesByJob) {
    let lastUpdated = -Infinity
    const granted = new Map<number, Write>()
    for (const w of writes) {
      // I11: once a process learned its lease under a token is lost, it sends no fenced write under that token.
      if (fencedOps.has(w.op) && w.token !== null) {
        const learned = learnedLost.get(`${w.who}|${jobId}|${w.token}`)
        if (learned !== undefined && w.start > learned) {
          violate(
            "I11",
            jobId,
            `${w.op} under token ${w.token} by ${w.who} sent after it learned at ${learned} that the lease was lost`,
            [w]
          )
        }
      }
      // A fenced write that waited in the store while the job was claimed under a later token.
      if (fencedOps.has(w.op) && w.token !== null) {
        const token = w.token
        for (const [later, claim] of granted) {
          if (later > token && claim.t > w.start && granted.has(token) && granted.get(token)!.t <= w.start) {
            coverage.writeOutlivedLease++
            break
          }
        }
      }
      if (!w.ok) {
        if (w.res === "LeaseLost") coverage.fencedWriteRejected++
        continue
      }
      if (w.op === "submit" && w.after !== null) {
        lastUpdated = Math.max(lastUpdated, w.after.updatedAt)
        // I3: a created record is stamped with store time at its write.
        if (w.res === "Created" && w.after.updatedAt !== w.t) {
          violate("I3", jobId, `created with updatedAt ${w.after.updatedAt}, not the store time ${w.t} of the write`, [
            w
          ])
        }
      }
      if (w.op === "claim") {
        if (w.res === "Busy") coverage.duplicateDelivery++
        if (w.res === "Settled") {
          coverage.duplicateDelivery++
          if (w.before !== null && terminalStates.has(w.before.state)) coverage.redeliveryOfTerminal++
        }
      }
      const { after, before } = w
      if (before === null || after === null) continue
      if (after.abandonReason === "budget" && before.abandonReason !== "budget") coverage.budgetExhausted++
      // I2: fencing and absorbing terminal states.
      if (fencedOps.has(w.op) && (before.state !== "running" || before.token !== w.token)) {
        totals.staleWrites++
        violate(
          w.op === "heartbeat" ? "I8" : "I2",
          jobId,
          `${w.op} by ${w.who} under token ${w.token} accepted while the job was ${before.state} under token ${before.token}`,
          [w]
        )
      }
      const didChange = changed(before, after)
      if (absorbing.has(before.state) && didChange && w.op !== "charge") {
        violate("I2", jobId, `${w.op} changed a ${before.state} job`, [w])
      }
      // I1: a sweep takes a lease back only once it ended (in store time): a live holder may still be calling.
      if (w.op === "sweep" && before.state === "running" && before.leaseUntil !== null && before.leaseUntil >= w.t) {
        violate("I1", jobId, `the sweep took back token ${before.token}'s lease, live until ${before.leaseUntil}`, [w])
      }
      // I8: legal transitions; heartbeats never move token or state.
      if (before.state !== after.state && !isLegal(before.state, after.state)) {
        violate("I8", jobId, `illegal transition ${before.state} -> ${after.state} by ${w.op}`, [w])
      }
      if (w.op === "heartbeat" && (before.state !== after.state || before.token !== after.token)) {
        violate("I8", jobId, "a heartbeat changed the token or the state", [w])
      }
      if (w.op === "claim" && w.res === "Claimed") {
        if (after.token <= before.token) {
          violate("I2", jobId, `claim did not bump the token (${before.token} -> ${after.token})`, [w])
        }
        if (granted.has(after.token)) {
          violate("I2", jobId, `token ${after.token} was granted by two claims`, [granted.get(after.token)!, w])
        }
        granted.set(after.token, w)
      }
      // I3: updatedAt strictly increasing per job, and a moved updatedAt is store time at the write: the store's
      // clock (w.t), or the previous value's next whole microsecond when that is not yet behind it. A heartbeat may
      // carry the store time it was sent at instead (one held inside the store applies at it, as a Postgres
      // statement reads now() at its transaction's start).
      const stampedFrom = w.op === "heartbeat" ? Math.min(w.start, w.t) : w.t
      if (after.updatedAt < lastUpdated || (didChange && after.updatedAt <= before.updatedAt)) {
        violate("I3", jobId, `updatedAt did not move forward (${before.updatedAt} -> ${after.updatedAt})`, [w])
      } else if (
        after.updatedAt !== before.updatedAt &&
        (after.updatedAt < stampedFrom - timeSlack ||
          after.updatedAt > Math.max(w.t, before.updatedAt + microStep) + timeSlack)
      ) {
        violate("I3", jobId, `${w.op} stamped updatedAt ${after.updatedAt}, not the store time ${w.t} of the write`, [
          w
        ])
      }
      lastUpdated = Math.max(lastUpdated, after.updatedAt)
      // I7: no claim once the attempt budget or the spend budget is exhausted.
      if (w.op === "claim" && w.res === "Claimed") {
        if (before.attempts - before.attemptsBase >= before.maxAttempts) {
          violate(
            "I7",
            jobId,
            `claimed with ${before.attempts - before.attemptsBase} of ${before.maxAttempts} attempts used`,
            [w]
          )
        }
        if (before.budgetCents !== null && before.costCents >= before.budgetCents) {
          violate("I7", jobId, `claimed with spend ${before.costCents} >= budget ${before.budgetCents}`, [w])
        }
      }
      // I2: a committed result comes from a call made under the committing token.
      if (w.op === "settle" && w.outcome === "Complete") {
        const calls = callsByJob.get(jobId) ?? []
        const source = calls.find((c) => c.token === w.token && c.outcome === "ok" && c.end <= w.t)
        if (w.resultToken !== w.token || source === undefined) {
          violate("I2", jobId, `result committed under token ${w.token} did not come from a call under that token`, [w])
        }
      }
    }
  }

  // I1: no double generation; I6: cost exactly once; I12: the per-call ledger; I7: spend at call start.
  const price = plan.model.priceCents
  const maxCall = maxCallCents(plan)
  const spread = maxCall - price
  /** Per job, how far its unsettled rows lie below what the provider billed for their calls. */
  const shortfallByJob = new Map<string, number>()
  /**
   * Whether the caller of a call whose amount reached it at `reply.t` stopped before it could settle it: it crashed
   * since, or it was shut down gracefully and its settlement was still being refused once the shutdown had begun (a
   * closing worker gives a settlement up only once its grace periods are over).
   */
  const stoppedBeforeSettling = (reply: Reply, writes: ReadonlyArray<Write>): boolean =>
    (crashes.get(reply.who) ?? []).some((t) => t >= reply.t) ||
    (shutdowns.get(reply.who) ?? []).some((t) =>
      writes.some(
        (w) =>
          !w.ok &&
          w.op === "charge" &&
          w.callId === reply.callId &&
          w.settled === true &&
          w.who === reply.who &&
          w.start >= t
      )
    )
  for (const [jobId, calls] of callsByJob) {
    const writes = writesByJob.get(jobId) ?? []
    const claims = writes.filter((w) => w.ok && w.op === "claim" && w.res === "Claimed")
    const tokens = [...new Set(calls.map((c) => c.token))].sort((a, b) => a - b)
    const commit = writes.find((w) => w.ok && w.after?.state === "succeeded" && w.before?.state !== "succeeded")
    /** The store's lease end of `token` as of `at`: its claim's lease, or the latest renewal applied by then. */
    const leaseEndAt = (token: number, at: number): number | undefined => {
      let end: number | undefined
      for (const w of writes) {
        if (w.t > at) break
        if (!w.ok || w.after === null || w.after.leaseUntil === null) continue
        const grants =
          (w.op === "claim" && w.res === "Claimed" && w.after.token === token) ||
          (w.op === "heartbeat" && w.token === token)
        if (grants) end = Math.max(end ?? 0, w.after.leaseUntil)
      }
      return end
    }
    /**
     * The sends a worker may have counted `call`'s lease from: its claim tries for the token (from the grant of the
     * token before, so a try whose reply was lost counts) and its renewals under it.
     */
    const grantSends = (call: Call): Array<number> => {
      const grant = claims.find((w) => w.after?.token === call.token)
      if (grant === undefined) return []
      const previous = Math.max(-Infinity, ...claims.filter((w) => w.after!.token < call.token).map((w) => w.t))
      return writes
        .filter(
          (w) =>
            w.who === call.who &&
            ((w.op === "claim" && w.start > previous && w.start <= grant.start) ||
              (w.op === "heartbeat" && w.token === call.token))
        )
        .map((w) => w.start)
    }
    for (const call of calls) {
      // I1: a call starts only while its lease is live in the store. A correct worker measures its lease from the
      // send of the write that granted or renewed it, so its own end is never past the store's, unless its clock
      // fell behind meanwhile (F12: drift, a backward jump), and then by no more than it fell behind; a call asked
      // for before a pause and sent after it is the pause's doing.
      const leaseEnd = leaseEndAt(call.token, call.asked)
      if (leaseEnd !== undefined && call.asked >= leaseEnd) {
        const allowance = skewAllowance(call.who, grantSends(call), call.asked)
        if (call.asked >= leaseEnd + allowance) {
          violate(
            "I1",
            jobId,
            `model call under token ${call.token} by ${call.who} asked at ${call.asked}, after its lease ended at ${leaseEnd}${
              skewed ? ` (its clock fell behind by at most ${Math.round(allowance)} ms)` : ""
            }`,
            [...writes.filter((w) => w.ok && w.after?.token === call.token && w.t <= call.asked).slice(-3), call]
          )
        }
      }
      // I10: no call under a token once its process learned that the token's lease is lost.
      const learned = learnedLost.get(`${call.who}|${jobId}|${call.token}`)
      if (learned !== undefined && call.asked > learned) {
        violate(
          "I10",
          jobId,
          `model call under token ${call.token} by ${call.who} after it learned at ${learned} that the lease was lost`,
          [call]
        )
      }
      if (commit !== undefined && call.t > commit.t) {
        // After a commit, only a stale holder (an older token) that a fault hit since its claim may still call.
        const claim = claims.find((w) => w.after?.token === call.token)
        const stale = commit.token !== null && call.token < commit.token
        if (stale && claim !== undefined && faultedBetween(call.who, windowStart(claim, claims), call.t)) {
          totals.duplicateGenerations.excused++
        } else {
          violate(
            "I1",
            jobId,
            `model called under token ${call.token} after the job succeeded under token ${commit.token}`,
            [...(commit === undefined ? [] : [commit]), call]
          )
        }
      }
      totals.billedCents += call.cents
      const claim = claims.find((w) => w.after?.token === call.token)
      if (claim === undefined || claim.who !== call.who || claim.t > call.t) {
        violate("I1", jobId, `model call by ${call.who} under token ${call.token} without that worker's claim`, [call])
      }
      // I6: every billed call has its ledger row (the reservation is written before the call), and a settled row
      // holds exactly what the provider billed. I12: a row below what was billed (a reservation under the amount) is
      // excused only when the amount never reached the caller (its own timeout, an interruption, a crash mid-call) or
      // the caller stopped before it could settle (a crash, or a shutdown whose settlement was still being refused).
      const charges = writes.filter((w) => w.ok && w.op === "charge" && w.callId === call.callId)
      const settled = charges.find((w) => w.settled === true)
      const recorded = settled?.amount ?? charges[0]?.amount
      const reply = replies.get(call.callId)
      if (recorded === undefined || recorded === null) {
        violate("I6", jobId, `billed call ${call.callId} (${call.cents}c) is missing from the charge ledger`, [call])
      } else if (settled !== undefined && settled.amount !== call.cents) {
        violate("I6", jobId, `call ${call.callId} billed ${call.cents}c but was settled at ${settled.amount}c`, [
          call,
          ...charges
        ])
      } else if (recorded < call.cents) {
        shortfallByJob.set(jobId, (shortfallByJob.get(jobId) ?? 0) + call.cents - recorded)
        if (reply !== undefined && !stoppedBeforeSettling(reply, writes)) {
          violate(
            "I12",
            jobId,
            `call ${call.callId} billed ${call.cents}c, which reached ${reply.who} at ${reply.t}, but its ledger row holds ${recorded}c unsettled while ${reply.who} lived on`,
            [call, reply, ...writes.filter((w) => w.op === "charge" && w.callId === call.callId)]
          )
        }
      }
      if (
        reply !== undefined &&
        settled !== undefined &&
        settled.t - reply.t > shortRetriesMs &&
        writes.some((w) => !w.ok && w.op === "charge" && w.callId === call.callId && w.settled === true)
      ) {
        coverage.lateSettlement++
      }
      if (call.budget !== null) {
        const before = call.spentAtStart - price
        // Another holder's call may be in flight, or settled above its estimate: one call of overshoot under faults.
        const limit = faultFree ? call.budget : call.budget + maxCall
        // Another holder's call may be in flight (a stale lease): one call of overshoot is allowed under faults.
        if ((faultFree && before >= call.budget) || call.spentAtStart > limit) {
          violate("I7", jobId, `call started with spend ${before}c (+${price}c) against budget ${call.budget}c`, [call])
        }
      }
    }
    // A job that waited for its provider resource (a `Throttle`) is claimed again: its calls may span tokens.
    const throttled = writes.some((w) => w.ok && w.op === "settle" && w.outcome === "Throttle")
    if (faultFree && !throttled && (tokens.length > 1 || calls.length > shape.steps)) {
      violate(
        "I1",
        jobId,
        `a fault-free run made ${calls.length} model calls for one job under ${tokens.length} tokens`,
        calls
      )
    }
    for (let i = 1; i < tokens.length; i++) {
      const e1 = tokens[i - 1]!
      const e2 = tokens[i]!
      const claim1 = claims.find((w) => w.after?.token === e1)
      const claim2 = claims.find((w) => w.after?.token === e2)
      if (claim1 === undefined || claim2 === undefined) continue
      const ended = writes.some(
        (w) => w.ok && w.op === "settle" && w.token === e1 && w.t <= claim2.t && w.after?.state !== "running"
      )
      const replayed = (replays.get(jobId) ?? []).some((t) => t >= claim1.t && t <= claim2.t)
      if (ended || replayed) continue
      const leaseEnd = Math.max(
        claim1.after?.leaseUntil ?? 0,
        ...writes
          .filter((w) => w.ok && w.op === "heartbeat" && w.token === e1 && w.t <= claim2.t)
          .map((w) => w.after?.leaseUntil ?? 0)
      )
      const witness: Array<Event> = [claim1, ...calls.filter((c) => c.token === e1 || c.token === e2), claim2]
      if (claim2.t < leaseEnd) {
        violate(
          "I1",
          jobId,
          `token ${e2} claimed at ${claim2.t} before token ${e1}'s lease ended at ${leaseEnd}`,
          witness
        )
        totals.duplicateGenerations.unexcused++
      } else if (faultedBetween(claim1.who, windowStart(claim1, claims), claim2.t)) {
        totals.duplicateGenerations.excused++
      } else {
        totals.duplicateGenerations.unexcused++
        violate("I1", jobId, `tokens ${e1} and ${e2} both called the model with no fault on ${claim1.who}`, witness)
      }
      if (calls.some((c) => c.token === e1 && c.end > claim2.t)) coverage.leaseExpiredMidCall++
    }
    // I1: calls within max attempts per run (a replay starts a fresh run). A call belongs to the run its token was
    // claimed in: a stale holder's late call made after a replay is still an attempt of the run before it.
    const runs = new Map<number, Set<number>>()
    for (const call of calls) {
      const claimedAt = claims.find((w) => w.after?.token === call.token)?.t ?? call.t
      const run = (replays.get(jobId) ?? []).filter((t) => t <= claimedAt).length
      const set = runs.get(run) ?? new Set<number>()
      set.add(call.token)
      runs.set(run, set)
    }
    const releases = writes.filter(
      (w) => w.ok && w.op === "settle" && (w.outcome === "Release" || w.outcome === "Throttle")
    ).length
    for (const set of runs.values()) {
      if (set.size > plan.maxAttempts + releases) {
        violate("I1", jobId, `${set.size} attempts called the model; max_attempts is ${plan.maxAttempts}`, calls)
      }
    }
  }

  // I13 to I16: fleet limits (LimitsCheckers.ts).
  checkLimits(events, plan, violate, coverage)

  // I4 / I5 / I6 totals on the final reads.
  totals.submitted = submittedKeys.size
  totals.acknowledged = acked.size
  for (const jobId of acked) {
    const heal = healFinal.get(jobId)
    const last = lastFinal.get(jobId)
    if (last === undefined) {
      totals.lost++
      violate("I4", jobId, "an acknowledged job is missing from the store", [])
      continue
    }
    totals.ledgerCents += last.ledger
    const billed = (callsByJob.get(jobId) ?? []).reduce((sum, c) => sum + c.cents, 0)
    // The ledger sums its rows: below what was billed by no more than its rows under their calls' amounts.
    const shortfall = shortfallByJob.get(jobId) ?? 0
    if (last.ledger < billed - shortfall) {
      violate(
        "I6",
        jobId,
        `the provider billed ${billed}c but the charge ledger holds ${last.ledger}c${shortfall > 0 ? ` (${shortfall}c of it in reservations under their calls' amounts)` : ""}`,
        []
      )
    }
    if (last.snap.costCents !== last.ledger) {
      violate("I6", jobId, `cost_cents ${last.snap.costCents} differs from the ledger's sum ${last.ledger}`, [])
    }
    // A call may be billed above its estimate (the spread) after the budget check let it start; under faults one more
    // call may have been in flight under a stale lease.
    if (
      last.snap.budgetCents !== null &&
      last.snap.costCents > last.snap.budgetCents + spread + (faultFree ? 0 : maxCall)
    ) {
      violate("I7", jobId, `spend ${last.snap.costCents}c overshoots budget ${last.snap.budgetCents}c`, [])
    }
    if (terminalStates.has(last.snap.state)) totals.terminal++
    if (heal !== undefined && !terminalStates.has(heal.state)) {
      totals.lost++
      const recent = (writesByJob.get(jobId) ?? []).slice(-4)
      violate("I5", jobId, `acknowledged job still ${heal.state} after the heal phase`, recent)
    }
  }
  // I30-I33 and I35 (batches) and I34 (schedules), in modules of their own.
  for (const v of [...BatchesCheck.check(events, plan), ...SchedulesCheck.check(events, plan)]) {
    violate(v.invariant, v.jobId, v.message, v.witness)
  }
  return { violations, totals, coverage, faultsFired }
}
