/**
 * SimStore: a proxy around a real Store (the in-memory one) that records every accepted and rejected write, one
 * event per item, with its token and the job record before and after, and injects faults at named points
 * (`store.claim`, `store.heartbeat`, `store.charge`, `store.settle`, `store.submit`, `store.cancel`, `store.replay`,
 * `store.sweep`, `store.claimNext`, and `store.cycle` where the world's store has `cycle`): a clean failure before the write (F5), an applied write whose reply is lost (F6
 * ambiguous, F15 partition, F17 a submit's reply), a slow call (F7), a crash of the calling process after a write (F8,
 * F10, F18), targeted heartbeat failures (F1), a window inside the write between the store's read and its apply in
 * which other processes run (F19, through the memory store's `interleave` option), and an applied write whose
 * successful reply arrives late (F20; targeted: a claim's reply later than its lease), and an outage that starts as
 * a worker settles a call's charge (F21: for 0.2 to 8 s every faulted process's calls fail before applying; targeted:
 * a holder's outcome write that waits in the store until the job was claimed again, while its holder crashes, pauses
 * or cannot renew). A lost reply of a batch of
 * several items may follow a write of only its first items, as the Store contract allows. Production code has no
 * switch for any of this: the proxy is the only place faults exist. When a heartbeat's or a settle's reply reaches
 * its caller with a `LeaseLost` item, the proxy records that the caller learned it (a `lost` event). A `cycle` is one
 * write with one fault decision: refused whole, or applied whole (its reply then answered, lost, late or followed by a
 * crash as any write's), its items recorded as their verbs' are, in the order the store applied them.
 *
 * @since 0.1.0
 */

import { StoreError } from "@slowcall/core/Errors"
import type { Job, JobId } from "@slowcall/core/Job"
import { bump, type ChargeRow, chargeStep, type SubmitItem } from "@slowcall/core/Protocol"
import type {
  CancelItem,
  CancelResult,
  ChargeItem,
  ChargeResult,
  ClaimItem,
  ClaimResult,
  CycleOptions,
  CycleReply,
  HeartbeatItem,
  HeartbeatResult,
  ReplayItemResult,
  Reply,
  SettleItem,
  SettleResult,
  Store,
  SubmitOutcome
} from "@slowcall/core/Store"
import { Effect, Random } from "effect"
import type { History, OutcomeTag, Snap, WriteOp } from "./History.js"
import { type Actor, type Faults, type Incarnation, passGate } from "./internal/world.js"
import type { FaultKind } from "./Plan.js"
import type { VirtualClock } from "./SimClock.js"

/**
 * What a proxy needs from its world.
 *
 * @since 0.1.0
 * @category models
 */
export interface SimStoreEnv {
  readonly actor: Actor
  readonly history: History
  readonly faults: Faults
  readonly clock: VirtualClock
  /** Crash the actor's incarnation; `restartAfterMs` null means it stays down until the heal phase. */
  readonly crash: (incarnation: Incarnation, restartAfterMs: number | null) => void
  /** The job record in the world's store right now (ground truth, read without an effect). */
  readonly peek: (jobId: JobId) => Job | undefined
  /** The job's charge ledger rows in the world's store right now (ground truth, read without an effect). */
  readonly peekCharges: (jobId: JobId) => ReadonlyArray<ChargeRow>
  /** The actor is the submitting client: a submit's reply may also be lost on its way back (F17). */
  readonly submitter?: boolean | undefined
  /** Opens an interleaving window of `ms` inside the next write the world's store applies (F19). */
  readonly openWindow: (ms: number) => void
  /**
   * Opens the targeted window that outlives a lease inside the next write the world's store applies: it lasts until
   * `jobId` is claimed under a token above `token` and the scenario's extra time has passed (at most a lease and
   * 10 s), and the scenario's fate strikes `incarnation` as it opens.
   */
  readonly openStaleWindow: (incarnation: Incarnation, jobId: JobId, token: number) => void
  /**
   * Whether a write under `token` could still be overtaken: the job runs under that token and could be claimed again
   * once its lease ends (attempts, spend and cancel allow it). The targeted stale window waits for such a write.
   */
  readonly canBeOvertaken: (jobId: JobId, token: number) => boolean
}

/** A fault point: the verb as the fault log names it (`store.<point>`). */
type Point =
  | "claim"
  | "claimNext"
  | "heartbeat"
  | "charge"
  | "settle"
  | "submit"
  | "cancel"
  | "replay"
  | "sweep"
  | "cycle"

const storeFaults: ReadonlyArray<FaultKind> = ["F5", "F6", "F7", "F15", "F19", "F20"]
const kinds = (...extra: ReadonlyArray<FaultKind>): ReadonlyArray<FaultKind> => [...storeFaults, ...extra]
/**
 * Which faults a point may fire: store errors everywhere, crashes after the writes that a crash there tests, an
 * outage as a call's charge is settled (what a store outage at the instant a call returns does to its cost).
 */
const pointKinds = {
  claim: kinds("F10", "F18"),
  claimNext: kinds("F10", "F18"),
  heartbeat: kinds("F10"),
  charge: storeFaults,
  settlement: kinds("F21"),
  settleComplete: kinds("F8", "F18"),
  settle: kinds("F8"),
  submit: storeFaults,
  /** The client's submit: also a reply lost on its way back (F17), after which the client retries with its key. */
  clientSubmit: kinds("F17"),
  cancel: storeFaults,
  replay: storeFaults,
  sweep: storeFaults,
  /** A cycle settles, heartbeats, charges and claims in one write: the crashes after any of those writes. */
  cycle: kinds("F8", "F10", "F18"),
  /** A cycle of a worker that settles a call's charge: also the outage as it does (F21). */
  cycleSettlement: kinds("F8", "F10", "F18", "F21")
} as const

/** Every injected store failure made so far, by reason, operation and detail. */
const injectedErrors = new Map<string, StoreError>()

/**
 * An injected store failure. Its fields are constants of this module, so the schema check the error class runs on
 * construction is skipped, and each distinct failure is made once and then reused (errors are immutable values): an
 * error's construction captures a stack trace, which cost more than the rest of the fault point.
 */
const injected = (reason: StoreError["reason"], operation: string, detail: string): StoreError => {
  const key = `${reason}|${operation}|${detail}`
  let error = injectedErrors.get(key)
  if (error === undefined) {
    error = new StoreError({ reason, operation, detail }, { disableValidation: true })
    injectedErrors.set(key, error)
  }
  return error
}

/** What a recorded write says beyond the common fields (each defaults to false or null). */
interface Detail {
  readonly outcome?: OutcomeTag | undefined
  readonly takeover?: boolean | undefined
  readonly callId?: string | undefined
  readonly amount?: number | undefined
  readonly settled?: boolean | undefined
  readonly resultToken?: number | null | undefined
}

/**
 * What a fault point decided for one call: the fault that fires (F1 for a targeted heartbeat failure), if any;
 * `LateClaim` is the targeted late reply of a claim (F20 with the plan's delay), `Window` the targeted window inside
 * a write (F19 with the plan's length).
 */
type Decision = FaultKind | "LateClaim" | "Window" | "StaleWindow" | "Outage" | undefined

const opensWindow = (fault: Decision): boolean => fault === "F19" || fault === "Window" || fault === "StaleWindow"

/** Whether the call is refused before the store sees it: a clean failure, a failed heartbeat, an outage. */
const refusing = (fault: Decision): boolean => fault === "F5" || fault === "F1" || fault === "F21" || fault === "Outage"

/** The items of a reply that a fenced write rejected with `LeaseLost`: what its caller learns when the reply lands. */
type Learned = ReadonlyArray<{ readonly jobId: JobId; readonly token: number }>

const lostReply = (fault: Decision): boolean => fault === "F6" || fault === "F15" || fault === "F17"

const tagOf = (error: unknown): string => (error as { _tag?: string })._tag ?? "error"

const resultToken = (result: unknown): number | null =>
  typeof result === "object" && result !== null && typeof (result as { token?: unknown }).token === "number"
    ? (result as { token: number }).token
    : null

/** Whether a batch names some job twice (each item then needs its own call to see its own record before it). */
const repeats = (jobIds: ReadonlyArray<JobId>): boolean => jobIds.length > 1 && new Set(jobIds).size < jobIds.length

/** The recording and fault injection of one actor's proxy; the verbs below are thin uses of it. */
class Recorder {
  readonly gated: <A, E>(next: () => Effect.Effect<A, E>) => Effect.Effect<A, E>

  constructor(readonly env: SimStoreEnv) {
    this.gated = passGate(env.actor)
  }

  /** The job's record in the store right now, as the history keeps it. */
  peek(jobId: JobId): Snap | null {
    const job = this.env.peek(jobId)
    return job === undefined ? null : this.env.history.snapOf(job)
  }

  record(
    op: WriteOp,
    start: number,
    jobId: JobId,
    token: number | null,
    ok: boolean,
    res: string,
    before: Snap | null,
    after: Snap | null,
    detail?: Detail
  ): void {
    this.env.history.push({
      k: "write",
      t: this.env.clock.now,
      start,
      op,
      who: this.env.actor.id,
      jobId,
      token,
      ok,
      res,
      outcome: detail?.outcome ?? null,
      takeover: detail?.takeover ?? false,
      before,
      after,
      callId: detail?.callId ?? null,
      amount: detail?.amount ?? null,
      settled: detail?.settled ?? null,
      resultToken: detail?.resultToken ?? null
    })
  }

  /** A write that names its job only afterwards: the record now, with the record the history last saw as `before`. */
  named(op: WriteOp, start: number, jobId: JobId, res: string, detail?: Detail): void {
    this.record(op, start, jobId, null, true, res, this.env.history.latest.get(jobId) ?? null, this.peek(jobId), detail)
  }

  /**
   * Which fault fires at this call of `point` (one tape entry consumed when faults are on and one of `kinds` is). A
   * targeted scenario decides without the tape.
   */
  decide(
    point: Point,
    kinds: ReadonlyArray<FaultKind>,
    first?: { readonly jobId: JobId; readonly token: number | null }
  ): Decision {
    const { actor, faults } = this.env
    if (!actor.faulted) return undefined
    // The store is unreachable for everyone: no tape entry is consumed, nothing else can happen at this point.
    if (faults.outage) return "Outage"
    const incarnation = actor.incarnation
    if (point === "heartbeat" && incarnation !== null && faults.enabled) {
      const muted = faults.muted.get(incarnation.slot)
      if (muted !== undefined && this.env.clock.now < muted) {
        faults.note("F1", actor.id, "heartbeat fails (targeted: its outcome write waits in the store)")
        return "F1"
      }
      const left = faults.heartbeatFailures.get(incarnation.slot) ?? 0
      if (left > 0) {
        faults.heartbeatFailures.set(incarnation.slot, left - 1)
        faults.note("F1", actor.id, "heartbeat fails (targeted)")
        return "F1"
      }
    }
    if (point === "claim" && incarnation !== null && faults.enabled && faults.lateClaims.delete(incarnation.slot)) {
      faults.note("F20", actor.id, "claim reply later than the lease (targeted)")
      return "LateClaim"
    }
    if (
      point === "settle" &&
      incarnation !== null &&
      faults.enabled &&
      faults.staleWindow !== undefined &&
      first !== undefined &&
      first.token !== null &&
      this.env.canBeOvertaken(first.jobId, first.token)
    ) {
      faults.staleWindow = undefined
      faults.note("F19", actor.id, "window inside store.settle until the job is claimed again (targeted)")
      return "StaleWindow"
    }
    if (incarnation !== null && faults.enabled && faults.windowed?.slot === incarnation.slot) {
      faults.note("F19", actor.id, `window inside store.${point} (targeted)`)
      return "Window"
    }
    return faults.roll(kinds, actor.id, `store.${point}`, incarnation === null)
  }

  /** The failure of a call refused before the store saw it (F5, F1, an outage). */
  refused(point: Point, fault: Decision): StoreError {
    return injected(
      "Connection",
      point,
      fault === "F1"
        ? "injected: heartbeat fails"
        : fault === "F5"
          ? "injected: write not applied"
          : "injected: the store is unreachable"
    )
  }

  /**
   * A refused call's failure; an outage that fires here (F21) starts first: the store is unreachable for 0.2 to 8 s
   * (more often short than long), for every faulted process.
   */
  refuse<A>(point: Point, fault: Decision): Effect.Effect<A, StoreError> {
    if (fault !== "F21") return Effect.fail(this.refused(point, fault))
    return Effect.flatMap(Random.next, (u) => {
      const { clock, faults, history } = this.env
      const ms = 200 + Math.floor(u * u * 7_800)
      faults.outageUntil = clock.now + ms
      history.push({ k: "outage", t: clock.now, ms })
      return Effect.fail(this.refused(point, fault))
    })
  }

  /**
   * After the write: crash the caller if the plan says so, then hand it `answer` (or lose the answer, or hand it over
   * late). `learned` is recorded as the caller's knowledge at the instant the answer reaches it.
   */
  answer<A>(
    point: Point,
    fault: Decision,
    answer: Effect.Effect<A, StoreError>,
    learned?: Learned
  ): Effect.Effect<A, StoreError> {
    const incarnation = this.env.actor.incarnation
    if (incarnation !== null && (fault === "F8" || fault === "F10" || fault === "F18")) {
      this.env.crash(incarnation, fault === "F18" ? 500 : null)
    }
    const gated = this.gated
    const deliver = (): Effect.Effect<A, StoreError> => {
      if (learned !== undefined) {
        const { clock, history } = this.env
        for (const { jobId, token } of learned) {
          history.push({ k: "lost", t: clock.now, who: this.env.actor.id, op: point, jobId, token })
        }
      }
      return answer
    }
    /** `answer` handed over `ms` late, the delay recorded as the fault's acting interval when it ends. */
    const late = <B>(ms: number, answer: () => Effect.Effect<B, StoreError>) =>
      this.env.clock.sleepThen(
        ms,
        Effect.suspend(() => {
          const { clock, history } = this.env
          history.push({ k: "late", t: clock.now, who: this.env.actor.id, point, ms })
          return gated(answer)
        })
      )
    return gated((): Effect.Effect<A, StoreError> => {
      if (fault === "F20" || fault === "LateClaim") {
        return fault === "LateClaim"
          ? late(this.env.faults.lateClaimMs, deliver)
          : Effect.flatMap(Random.nextIntBetween(100, 3_000), (ms) => late(ms, deliver))
      }
      if (!lostReply(fault)) return deliver()
      const error = injected(
        fault === "F6" ? "Ambiguous" : "Timeout",
        point,
        "injected: the write applied but the reply was lost"
      )
      return fault === "F15" ? late(1_000, () => Effect.fail(error)) : Effect.fail(error)
    })
  }

  /** The length of the window a write opens: drawn for F19, the plan's for the targeted scenario. */
  windowMs(fault: Decision): Effect.Effect<number> {
    return fault === "Window" ? Effect.succeed(this.env.faults.windowed?.ms ?? 0) : Random.nextIntBetween(1, 1_500)
  }

  /** Runs `apply` after the fault point's delay: at once, or after a slow store's extra time (F7). */
  delayed<A>(fault: Decision, apply: () => Effect.Effect<A, StoreError>): Effect.Effect<A, StoreError> {
    if (fault !== "F7") return apply()
    return Effect.flatMap(Random.nextIntBetween(100, 2_000), (ms) =>
      this.env.clock.sleepThen(
        ms,
        Effect.suspend(() => this.gated(apply))
      )
    )
  }

  /**
   * A batch verb whose items each name a job. Each item is recorded with the record before and after it. A lost reply
   * of a batch of several items follows a write of a prefix of it (at least its first item).
   */
  items<I, R>(
    verb: ItemVerb<I, R>,
    items: ReadonlyArray<I>,
    call: (items: ReadonlyArray<I>, now?: number) => Effect.Effect<Reply<R>, StoreError>
  ): Effect.Effect<Reply<R>, StoreError> {
    return Effect.suspend(() => {
      const start = this.env.clock.now
      return this.gated(() => {
        const first = items[0]
        const fault = this.decide(
          verb.point,
          verb.kinds(items, this.env),
          first === undefined ? undefined : { jobId: verb.jobIdOf(first), token: verb.tokenOf(first) }
        )
        if (refusing(fault)) {
          for (const item of items) {
            const jobId = verb.jobIdOf(item)
            const before = this.peek(jobId)
            this.record(
              verb.op,
              start,
              jobId,
              verb.tokenOf(item),
              false,
              "StoreError",
              before,
              before,
              verb.detailOf(item)
            )
          }
          return this.refuse(verb.point, fault)
        }
        if (fault === undefined && !repeats(items.map(verb.jobIdOf))) {
          // No fault at this point: the send and the answer in one step (the same records, in the same order).
          return this.sendNow(
            verb,
            items,
            call,
            start,
            items.map((item) => this.peek(verb.jobIdOf(item))),
            (reply) =>
              this.answer(
                verb.point,
                undefined,
                Effect.succeed(reply),
                verb.fenced ? learnedOf(verb, items, reply) : undefined
              ),
            (error) => this.answer(verb.point, undefined, Effect.fail(error))
          )
        }
        const sent = this.delayed(fault, () =>
          lostReply(fault) && items.length > 1
            ? Effect.flatMap(Random.nextIntBetween(1, items.length + 1), (count) =>
                this.send(verb, items.slice(0, count), call, start, fault)
              )
            : this.send(verb, items, call, start, fault)
        )
        return Effect.matchEffect(sent, {
          onSuccess: (reply) =>
            this.answer(
              verb.point,
              fault,
              Effect.succeed(reply),
              verb.fenced ? learnedOf(verb, items, reply) : undefined
            ),
          onFailure: (error) => this.answer(verb.point, fault, Effect.fail(error))
        })
      })
    })
  }

  /**
   * Sends items and records each with its record before and after. A batch that names a job twice is sent one item
   * at a time, so that each item's `before` is the record the store applied it to. Under F19 the store opens a window
   * before it applies the write: the record each item was applied to is then the one the history last saw when the
   * write landed, not the one at the send.
   */
  send<I, R>(
    verb: ItemVerb<I, R>,
    items: ReadonlyArray<I>,
    call: (items: ReadonlyArray<I>, now?: number) => Effect.Effect<Reply<R>, StoreError>,
    start: number,
    fault: Decision
  ): Effect.Effect<Reply<R>, StoreError> {
    if (repeats(items.map(verb.jobIdOf))) {
      return Effect.map(
        Effect.forEach(items, (item) => this.send(verb, [item], call, start, undefined)),
        (replies): Reply<R> => ({
          now: replies[replies.length - 1]?.now ?? this.env.clock.now,
          results: replies.flatMap((r) => r.results)
        })
      )
    }
    if (fault === "StaleWindow" && this.env.actor.incarnation !== null && items.length > 0) {
      const first = items[0]!
      this.env.openStaleWindow(this.env.actor.incarnation, verb.jobIdOf(first), verb.tokenOf(first) ?? 0)
      return Effect.uninterruptible(this.sendNow(verb, items, call, start, undefined))
    }
    if (opensWindow(fault)) {
      // A write that reached the store lands whatever happens to its caller meanwhile, and is recorded.
      return Effect.uninterruptible(
        Effect.flatMap(this.windowMs(fault), (ms) => {
          this.env.openWindow(ms)
          // A renewal that waits inside the store applies at the store time it was sent at, as a Postgres statement
          // reads now() at its transaction's start: a newer renewal may apply during the window, this one after it.
          const atStart = verb.point === "heartbeat" ? (chunk: ReadonlyArray<I>) => call(chunk, start) : call
          return this.sendNow(verb, items, atStart, start, undefined)
        })
      )
    }
    return this.sendNow(
      verb,
      items,
      call,
      start,
      items.map((item) => this.peek(verb.jobIdOf(item)))
    )
  }

  /**
   * One call to the store; with `befores` undefined each item's record before is the history's latest at the write.
   * Once every item is recorded, the reply goes on to `then` (the error to `otherwise`).
   */
  sendNow<I, R>(
    verb: ItemVerb<I, R>,
    items: ReadonlyArray<I>,
    call: (items: ReadonlyArray<I>, now?: number) => Effect.Effect<Reply<R>, StoreError>,
    start: number,
    befores: ReadonlyArray<Snap | null> | undefined,
    then: (reply: Reply<R>) => Effect.Effect<Reply<R>, StoreError> = Effect.succeed,
    otherwise: (error: StoreError) => Effect.Effect<Reply<R>, StoreError> = Effect.fail
  ): Effect.Effect<Reply<R>, StoreError> {
    const beforeOf = (i: number): Snap | null =>
      befores !== undefined ? befores[i]! : (this.env.history.latest.get(verb.jobIdOf(items[i]!)) ?? null)
    return Effect.matchEffect(call(items), {
      onSuccess: (reply) => {
        // Every `before` is read before the first item is recorded: recording moves the history's latest record.
        const seen = items.map((_, i) => beforeOf(i))
        for (let i = 0; i < items.length; i++) verb.recordResult(this, items[i]!, seen[i]!, reply.results[i]!, start)
        return then(reply)
      },
      onFailure: (error) => {
        for (let i = 0; i < items.length; i++) {
          const item = items[i]!
          const jobId = verb.jobIdOf(item)
          this.record(
            verb.op,
            start,
            jobId,
            verb.tokenOf(item),
            false,
            tagOf(error),
            beforeOf(i),
            this.peek(jobId),
            verb.detailOf(item)
          )
        }
        return otherwise(error)
      }
    })
  }

  /** A verb that names the jobs it wrote only in its reply (`claimNext`, `sweep`): recorded by `written`. */
  afterwards<A>(
    point: Point,
    kinds: ReadonlyArray<FaultKind>,
    call: Effect.Effect<A, StoreError>,
    written: (reply: A, start: number) => void
  ): Effect.Effect<A, StoreError> {
    return Effect.suspend(() => {
      const start = this.env.clock.now
      return this.gated(() => {
        const fault = this.decide(point, kinds)
        if (refusing(fault)) return this.refuse(point, fault)
        if (fault === undefined) {
          // No fault at this point: the call, its record and the answer in one step.
          return Effect.matchEffect(call, {
            onSuccess: (reply) => {
              written(reply, start)
              return this.answer(point, undefined, Effect.succeed(reply))
            },
            onFailure: (error) => this.answer(point, undefined, Effect.fail(error))
          })
        }
        const record = (reply: A) => {
          written(reply, start)
          return reply
        }
        // Under F19 the store opens a window before it applies; a write that reached it lands, and is recorded,
        // whatever happens to its caller meanwhile.
        const applied = opensWindow(fault)
          ? Effect.uninterruptible(
              Effect.flatMap(this.windowMs(fault), (ms) => {
                this.env.openWindow(ms)
                return Effect.map(call, record)
              })
            )
          : Effect.map(call, record)
        return this.delayed(fault, () =>
          Effect.matchEffect(applied, {
            onSuccess: (reply) => this.answer(point, fault, Effect.succeed(reply)),
            onFailure: (error) => this.answer(point, fault, Effect.fail(error))
          })
        )
      })
    })
  }
}

/** The items of a fenced write's reply that were rejected with `LeaseLost`, with the token each was sent under. */
const learnedOf = <I, R>(verb: ItemVerb<I, R>, items: ReadonlyArray<I>, reply: Reply<R>): Learned | undefined => {
  let learned: Array<{ readonly jobId: JobId; readonly token: number }> | undefined
  for (let i = 0; i < reply.results.length; i++) {
    const result = reply.results[i] as { readonly _tag?: string }
    const item = items[i]
    if (result._tag === "LeaseLost" && item !== undefined) {
      learned ??= []
      learned.push({ jobId: verb.jobIdOf(item), token: verb.tokenOf(item) ?? -1 })
    }
  }
  return learned
}

/**
 * How one batch verb names, records and faults its items. `recordResult` records one item from its result.
 */
interface ItemVerb<I, R> {
  readonly op: WriteOp
  readonly point: Point
  /** Whether the Store fences the verb by token (its `LeaseLost` replies teach the caller its lease is gone). */
  readonly fenced: boolean
  readonly kinds: (items: ReadonlyArray<I>, env: SimStoreEnv) => ReadonlyArray<FaultKind>
  readonly jobIdOf: (item: I) => JobId
  readonly tokenOf: (item: I) => number | null
  readonly detailOf: (item: I) => Detail | undefined
  /** `after` is the record after the item (default: the store's record now). */
  readonly recordResult: (
    rec: Recorder,
    item: I,
    before: Snap | null,
    result: R,
    start: number,
    after?: Snap | null
  ) => void
}

const noToken = (): null => null
const noDetail = (): undefined => undefined

const submitVerb: ItemVerb<SubmitItem, SubmitOutcome> = {
  op: "submit",
  point: "submit",
  fenced: false,
  kinds: (_, env) => (env.submitter === true ? pointKinds.clientSubmit : pointKinds.submit),
  jobIdOf: (item) => item.id,
  tokenOf: noToken,
  detailOf: noDetail,
  recordResult: (rec, item, before, result, start) => {
    switch (result._tag) {
      case "Created":
        return rec.record("submit", start, item.id, null, true, "Created", before, rec.peek(item.id))
      case "Existing": {
        const existing = rec.peek(result.job.id)
        return rec.record("submit", start, result.job.id, null, true, "Existing", existing, existing)
      }
      case "KeyReused": {
        const existing = rec.peek(result.existingJobId)
        return rec.record("submit", start, result.existingJobId, null, false, "KeyReused", existing, existing)
      }
    }
  }
}

const claimVerb: ItemVerb<ClaimItem, ClaimResult> = {
  op: "claim",
  point: "claim",
  fenced: false,
  kinds: () => pointKinds.claim,
  jobIdOf: (item) => item.jobId,
  tokenOf: noToken,
  detailOf: noDetail,
  recordResult: (rec, { jobId }, before, result, start) =>
    rec.record("claim", start, jobId, null, result._tag !== "NotFound", result._tag, before, rec.peek(jobId), {
      takeover: result._tag === "Claimed" && result.takeover
    })
}

const heartbeatVerb: ItemVerb<HeartbeatItem, HeartbeatResult> = {
  op: "heartbeat",
  point: "heartbeat",
  fenced: true,
  kinds: () => pointKinds.heartbeat,
  jobIdOf: (item) => item.jobId,
  tokenOf: (item) => item.token,
  detailOf: noDetail,
  recordResult: (rec, item, before, result, start, after = rec.peek(item.jobId)) => {
    const jobId = item.jobId
    const renewed = result._tag === "Renewed"
    const res = renewed ? (result.cancelRequested ? "cancel" : "ok") : result._tag
    rec.record("heartbeat", start, jobId, item.token, renewed, res, before, after)
  }
}

const chargeDetail = (item: ChargeItem): Detail => ({
  callId: item.callId,
  amount: item.amountCents,
  settled: item.settled
})

const chargeVerb: ItemVerb<ChargeItem, ChargeResult> = {
  op: "charge",
  point: "charge",
  fenced: false,
  kinds: (items, env) =>
    env.actor.incarnation !== null && items.some((item) => item.settled) ? pointKinds.settlement : pointKinds.charge,
  jobIdOf: (item) => item.jobId,
  tokenOf: (item) => item.token,
  detailOf: chargeDetail,
  recordResult: (rec, item, before, result, start, after = rec.peek(item.jobId)) => {
    const jobId = item.jobId
    const charged = result._tag === "Charged"
    const res = charged ? "ok" : result._tag
    rec.record("charge", start, jobId, item.token, charged, res, before, after, chargeDetail(item))
  }
}

const settleDetail = (item: SettleItem): Detail => ({
  outcome: item.outcome._tag,
  resultToken: item.outcome._tag === "Complete" ? resultToken(item.outcome.result) : null
})

const settleVerb: ItemVerb<SettleItem, SettleResult> = {
  op: "settle",
  point: "settle",
  fenced: true,
  kinds: (items) => (items[0]?.outcome._tag === "Complete" ? pointKinds.settleComplete : pointKinds.settle),
  jobIdOf: (item) => item.jobId,
  tokenOf: (item) => item.token,
  detailOf: settleDetail,
  recordResult: (rec, item, before, result, start, after = rec.peek(item.jobId)) => {
    const jobId = item.jobId
    const settled = result._tag === "Settled"
    const res = settled ? result.job.state : result._tag
    rec.record("settle", start, jobId, item.token, settled, res, before, after, settleDetail(item))
  }
}

const cancelVerb: ItemVerb<CancelItem, CancelResult> = {
  op: "cancel",
  point: "cancel",
  fenced: false,
  kinds: () => pointKinds.cancel,
  jobIdOf: (item) => item.jobId,
  tokenOf: noToken,
  detailOf: noDetail,
  recordResult: (rec, { jobId }, before, result, start) =>
    rec.record("cancel", start, jobId, null, result._tag === "Cancelled", result._tag, before, rec.peek(jobId))
}

const replayVerb: ItemVerb<{ readonly jobId: JobId }, ReplayItemResult> = {
  op: "replay",
  point: "replay",
  fenced: false,
  kinds: () => pointKinds.replay,
  jobIdOf: (item) => item.jobId,
  tokenOf: noToken,
  detailOf: noDetail,
  recordResult: (rec, { jobId }, before, result, start) =>
    rec.record("replay", start, jobId, null, result._tag === "Replayed", result._tag, before, rec.peek(jobId))
}

/**
 * Wrap `inner` for one actor. Invariant: every write that reaches `inner` is recorded exactly once per item, in the
 * order `inner` applied it; a crashed actor's later calls never reach `inner` and never return.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (inner: Store["Type"], env: SimStoreEnv): Store["Type"] => {
  const rec = new Recorder(env)
  return {
    now: Effect.suspend(() => rec.gated(() => inner.now)),
    submit: (options) => rec.items(submitVerb, options.items, (items) => inner.submit({ ...options, items })),
    claim: (options) => rec.items(claimVerb, options.items, (items) => inner.claim({ ...options, items })),
    claimNext: (options) =>
      rec.afterwards("claimNext", pointKinds.claimNext, inner.claimNext(options), (reply, start) => {
        for (const result of reply.results) {
          rec.named("claim", start, result.job.id, result._tag, {
            takeover: result._tag === "Claimed" && result.takeover
          })
        }
      }),
    heartbeat: (options) =>
      rec.items(heartbeatVerb, options.items, (items, now) =>
        inner.heartbeat(now === undefined ? { ...options, items } : { ...options, items, now })
      ),
    charge: (options) => rec.items(chargeVerb, options.items, (items) => inner.charge({ ...options, items })),
    settle: (options) => rec.items(settleVerb, options.items, (items) => inner.settle({ ...options, items })),
    cancel: (options) => rec.items(cancelVerb, options.items, (items) => inner.cancel({ ...options, items })),
    replay: (options) => rec.items(replayVerb, options.items, (items) => inner.replay({ ...options, items })),
    sweep: (options) =>
      rec.afterwards("sweep", pointKinds.sweep, inner.sweep(options), (result, start) => {
        for (const job of result.requeued) rec.named("sweep", start, job.id, "requeued")
        for (const jobId of result.expiredFailed) rec.named("sweep", start, jobId, "expiredFailed")
        for (const jobId of result.abandoned) rec.named("sweep", start, jobId, "abandoned")
      }),
    // Offered only where the world's store has it, as the Store contract asks of a wrapper.
    cycle: inner.cycle === undefined ? undefined : cycleOf(rec, inner.cycle)
  }
}

/** The parts of a cycle as lists (an absent part: empty). */
const partsOf = (options: CycleOptions) => ({
  settle: options.settle ?? [],
  heartbeat: options.heartbeat ?? [],
  charge: options.charge ?? []
})

/**
 * The record after one item of a cycle whose job a later part of the same cycle writes again (the store's record now
 * shows only the last): from the item's reply and the record before it, by the rules the store applies. A settle's
 * reply holds its record; a renewal moves the lease end and `updatedAt`; a charge that wrote its ledger row moves the
 * spend and `updatedAt`, even when it moved no money (a settlement at its reservation's amount): `charged` says
 * whether it did, from the ledger rows read as the cycle was sent.
 */
const between = (
  rec: Recorder,
  part: "settle" | "heartbeat" | "charge",
  before: Snap | null,
  result: SettleResult | HeartbeatResult | ChargeResult,
  now: number,
  charged: boolean
): Snap | null => {
  if (part === "settle") return result._tag === "Settled" ? rec.env.history.snapOf(result.job) : before
  if (before === null) return null
  if (result._tag === "Renewed")
    return { ...before, leaseUntil: result.leaseUntil, updatedAt: bump(before.updatedAt, now) }
  if (result._tag === "Charged" && charged) {
    return { ...before, costCents: result.costCents, updatedAt: bump(before.updatedAt, now) }
  }
  return before
}

/**
 * Whether each charge item of a cycle writes its ledger row (and so its job), by `Protocol.chargeStep` over the rows
 * `rows` gives for its job as the cycle is sent, in item order (an earlier item of the same call counts).
 */
const chargeWrites = (
  items: ReadonlyArray<ChargeItem>,
  rows: (jobId: JobId) => ReadonlyArray<ChargeRow>,
  now: number
): ReadonlyArray<boolean> => {
  const ledger = new Map<string, ChargeRow | undefined>()
  return items.map((item) => {
    const key = `${item.jobId} ${item.callId}`
    if (!ledger.has(key))
      ledger.set(
        key,
        rows(item.jobId).find((row) => row.callId === item.callId)
      )
    const step = chargeStep(ledger.get(key), item, now)
    if (step !== undefined) ledger.set(key, step.row)
    return step !== undefined
  })
}

/**
 * Records an applied cycle's items in the order the store applied them: each settle, heartbeat and charge item as its
 * verb's proxy records it, then each job the claim part took (as `claimNext`'s are, a `claim`). Each item's record
 * before is the one the previous item of its job left (the first: `first`, read before the write); its record after
 * is the store's record now when no later item writes the job, else derived by `between`. `ledger` gives a job's
 * charge rows as the cycle was sent.
 */
const recordCycle = (
  rec: Recorder,
  options: CycleOptions,
  reply: CycleReply,
  start: number,
  first: (jobId: JobId) => Snap | null,
  ledger: (jobId: JobId) => ReadonlyArray<ChargeRow>
): void => {
  const { settle, heartbeat, charge } = partsOf(options)
  const charges = chargeWrites(charge, ledger, reply.now)
  const order: ReadonlyArray<JobId> = [
    ...settle.map((item) => item.jobId),
    ...heartbeat.map((item) => item.jobId),
    ...charge.map((item) => item.jobId),
    ...reply.claimNext.map((result) => result.job.id)
  ]
  const last = new Map<JobId, number>()
  for (let i = 0; i < order.length; i++) last.set(order[i]!, i)
  const current = new Map<JobId, Snap | null>()
  let at = 0
  const step = (
    jobId: JobId,
    part: "settle" | "heartbeat" | "charge",
    result: SettleResult | HeartbeatResult | ChargeResult,
    charged = false
  ): { readonly before: Snap | null; readonly after: Snap | null } => {
    const before = current.has(jobId) ? current.get(jobId)! : first(jobId)
    const after = last.get(jobId) === at ? rec.peek(jobId) : between(rec, part, before, result, reply.now, charged)
    current.set(jobId, after)
    at += 1
    return { before, after }
  }
  settle.forEach((item, i) => {
    const result = reply.settle[i]!
    const { before, after } = step(item.jobId, "settle", result)
    settleVerb.recordResult(rec, item, before, result, start, after)
  })
  heartbeat.forEach((item, i) => {
    const result = reply.heartbeat[i]!
    const { before, after } = step(item.jobId, "heartbeat", result)
    heartbeatVerb.recordResult(rec, item, before, result, start, after)
  })
  charge.forEach((item, i) => {
    const result = reply.charge[i]!
    const { before, after } = step(item.jobId, "charge", result, charges[i]!)
    chargeVerb.recordResult(rec, item, before, result, start, after)
  })
  for (const result of reply.claimNext) {
    const jobId = result.job.id
    const before = current.has(jobId) ? current.get(jobId)! : (rec.env.history.latest.get(jobId) ?? null)
    rec.record("claim", start, jobId, null, true, result._tag, before, rec.peek(jobId), {
      takeover: result._tag === "Claimed" && result.takeover
    })
  }
}

/** Records every item of a cycle that did not apply (refused, or failed at the store), with its record unchanged. */
const recordUnapplied = (
  rec: Recorder,
  options: CycleOptions,
  start: number,
  res: string,
  beforeOf: (jobId: JobId) => Snap | null
): void => {
  const { settle, heartbeat, charge } = partsOf(options)
  const unapplied = <I extends { readonly jobId: JobId }>(verb: ItemVerb<I, unknown>, items: ReadonlyArray<I>) => {
    for (const item of items) {
      const before = beforeOf(item.jobId)
      rec.record(
        verb.op,
        start,
        item.jobId,
        verb.tokenOf(item),
        false,
        res,
        before,
        rec.peek(item.jobId),
        verb.detailOf(item)
      )
    }
  }
  unapplied(settleVerb as ItemVerb<SettleItem, unknown>, settle)
  unapplied(heartbeatVerb as ItemVerb<HeartbeatItem, unknown>, heartbeat)
  unapplied(chargeVerb as ItemVerb<ChargeItem, unknown>, charge)
}

/** The items of a cycle's fenced parts (settle, heartbeat) that its reply rejected with `LeaseLost`. */
const learnedOfCycle = (options: CycleOptions, reply: CycleReply): Learned | undefined => {
  const { settle, heartbeat } = partsOf(options)
  const learned = [
    ...settle.flatMap((item, i) => (reply.settle[i]?._tag === "LeaseLost" ? [item] : [])),
    ...heartbeat.flatMap((item, i) => (reply.heartbeat[i]?._tag === "LeaseLost" ? [item] : []))
  ].map((item) => ({ jobId: item.jobId, token: item.token }))
  return learned.length === 0 ? undefined : learned
}

/**
 * The proxy's `cycle`: one fault point (`store.cycle`) for the whole write, as every other write verb has one per
 * call. A refusal (F5, F21, an outage) writes nothing and records every item as not applied; otherwise the whole cycle
 * applies (after a slow store's delay, or inside a window) and is recorded, and its reply reaches the caller, is lost
 * (F6, F15), arrives late (F20) or never arrives because the caller crashed (F8, F10, F18).
 */
const cycleOf =
  (rec: Recorder, inner: NonNullable<Store["Type"]["cycle"]>): NonNullable<Store["Type"]["cycle"]> =>
  (options) =>
    Effect.suspend(() => {
      const start = rec.env.clock.now
      return rec.gated(() => {
        const env = rec.env
        const settling = env.actor.incarnation !== null && (options.charge ?? []).some((item) => item.settled)
        const fault = rec.decide("cycle", settling ? pointKinds.cycleSettlement : pointKinds.cycle)
        if (refusing(fault)) {
          recordUnapplied(rec, options, start, "StoreError", (jobId) => rec.peek(jobId))
          return rec.refuse<CycleReply>("cycle", fault)
        }
        const window = opensWindow(fault)
        const send = (): Effect.Effect<CycleReply, StoreError> => {
          // Without a window the records before are read as the cycle is sent; with one, the store applies the cycle
          // to the records the history last saw when it lands.
          const firsts = new Map<JobId, Snap | null>()
          if (!window) {
            const { settle, heartbeat, charge } = partsOf(options)
            for (const item of [...settle, ...heartbeat, ...charge]) {
              if (!firsts.has(item.jobId)) firsts.set(item.jobId, rec.peek(item.jobId))
            }
          }
          const first = (jobId: JobId): Snap | null =>
            firsts.has(jobId) ? firsts.get(jobId)! : (env.history.latest.get(jobId) ?? null)
          // The charge rows are read as the cycle is sent, window or not: no other writer settles this worker's calls.
          const rows = new Map<JobId, ReadonlyArray<ChargeRow>>()
          for (const item of options.charge ?? []) {
            if (!rows.has(item.jobId)) rows.set(item.jobId, env.peekCharges(item.jobId))
          }
          const ledger = (jobId: JobId): ReadonlyArray<ChargeRow> => rows.get(jobId) ?? []
          return Effect.tapBoth(inner(options), {
            onSuccess: (reply) => Effect.sync(() => recordCycle(rec, options, reply, start, first, ledger)),
            onFailure: (error) => Effect.sync(() => recordUnapplied(rec, options, start, tagOf(error), first))
          })
        }
        const applied = window
          ? Effect.uninterruptible(
              Effect.flatMap(rec.windowMs(fault), (ms) => {
                env.openWindow(ms)
                return send()
              })
            )
          : Effect.suspend(send)
        return Effect.matchEffect(
          rec.delayed(fault, () => applied),
          {
            onSuccess: (reply) => rec.answer("cycle", fault, Effect.succeed(reply), learnedOfCycle(options, reply)),
            onFailure: (error) => rec.answer("cycle", fault, Effect.fail(error))
          }
        )
      })
    })
