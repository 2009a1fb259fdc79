/**
 * The worker's store writes (settlements, charges and the intake's claims), sent in ticks.
 *
 * A tick is one round trip. A write handed in while one of the worker's two lanes is free and nothing is queued goes
 * out at once, alone, sent by its caller. Otherwise it is queued, and when a lane frees up everything queued goes
 * out as the next tick: with a store that has `cycle` and writes of more than one verb in the tick, one `cycle` call
 * (its settle, charge and claimNext parts at one store time, in one atomic write, the claim after the settlements,
 * so a job just released can be claimed at once); otherwise each verb with writes at once. A busy worker therefore
 * makes about one store round trip per tick however many jobs it runs, and one slow tick does not hold back the
 * writes queued behind it. Lease renewals do not wait for a lane: the lease keeper calls `Store.heartbeat` itself.
 *
 * Invariants:
 * - Every write handed in is applied by at most one call (a `cycle` the store refused for good applied nothing, and
 *   its writes go out again as the verbs), and is never sent when its caller was interrupted while it was still
 *   queued (it is taken back), its veto refused it when its tick was built, or it is a claim handed in after
 *   `stopClaims`.
 * - A tick carries at most `maxBatch` items (a claim counts as one); writes of one verb go out in the order they
 *   were handed in.
 * - Each caller gets its own write's results with the store time of the call that carried them, or that call's
 *   failure (a failed call may have applied any subset of its items, as the Store contract says; the caller decides
 *   whether to retry, with `retryStore`). A `cycle` the store refuses for good (a part its verb would refuse as a
 *   whole) is sent again as the separate verbs, so one write's refusal never fails the others of its tick.
 * - Every tick ends with each of its writes answered, however its fiber ends (an interruption or a defect too), and
 *   with its lane free again.
 *
 * @internal
 */
import { Cause, Effect, Exit, Option } from "effect"
import { LeaseLost, type StoreError } from "../../Errors.js"
import type {
  ChargeItem,
  ChargeResult,
  ClaimNextOptions,
  ClaimNextResult,
  CycleReply,
  Reply,
  SettleItem,
  Store
} from "../../Store.js"
import { type Charged, leaseLost, type Written } from "./store.js"
import {
  type Answer,
  answer,
  answerAll,
  answerClaims,
  emptyTick,
  itemsOf,
  type Pending,
  shareOut,
  single,
  sizeOf,
  type Tick,
  takeInto
} from "./tick.js"

/**
 * A worker's store writes, sent in ticks (see the module's invariants).
 *
 * @internal
 */
export interface WorkerStore {
  /**
   * One settlement: the job as it was left and the store time of the write, or `LeaseLost`. `gone`, when given, says
   * whether the caller has learned meanwhile that its lease is lost: then the write is not sent and fails with
   * `LeaseLost` (nothing is written under a token once its lease is known lost, however long the write waited for
   * its tick).
   */
  readonly settle: (item: SettleItem, gone?: () => boolean) => Effect.Effect<Written, LeaseLost | StoreError>
  /**
   * One charge: the job's spend after it and the store time of the write, and `refused` when the Store refused a
   * reservation for the job's batch's budget (nothing written). A charge for a job the store does not know is a bug
   * of the caller (the worker charges only jobs it claimed): a defect.
   */
  readonly charge: (item: ChargeItem) => Effect.Effect<Charged, StoreError>
  /**
   * One claim of the worker's next jobs: the jobs it wrote and the store time of the call. Queued, it goes out in
   * the next tick, after that tick's settlements (in one `cycle` where the store has it).
   */
  readonly claimNext: (options: ClaimNextOptions) => Effect.Effect<Reply<ClaimNextResult>, StoreError>
  /**
   * From now on no claim is sent: a queued one, and any handed in later, ends interrupted without a write (a
   * closing worker claims nothing more; a claim already sent still lands).
   */
  readonly stopClaims: () => void
  /** Items waiting for a tick. */
  readonly queued: () => number
}

/** How many ticks a worker keeps in flight at most. */
const lanes = 2

/**
 * The worker's store writes over `store`. `run` starts a queued tick in a fiber of the worker's own and calls
 * `onExit` when that fiber ends, however it ends (it must be interrupted when the worker stops).
 *
 * @internal
 */
export const makeWorkerStore = (
  store: Store["Type"],
  maxBatch: number,
  run: (tick: Effect.Effect<void>, onExit: () => void) => void
): WorkerStore => new Ticks(store, Math.max(1, maxBatch), run)

class Ticks implements WorkerStore {
  private readonly queue: Tick = emptyTick()
  private inFlight = 0
  private claimsStopped = false

  constructor(
    private readonly store: Store["Type"],
    private readonly limit: number,
    private readonly run: (tick: Effect.Effect<void>, onExit: () => void) => void
  ) {}

  queued = (): number => sizeOf(this.queue)

  settle = (item: SettleItem, gone?: () => boolean): Effect.Effect<Written, LeaseLost | StoreError> =>
    Effect.flatMap(
      this.submit(
        this.queue.settle,
        item,
        this.settleAlone,
        gone === undefined
          ? undefined
          : () =>
              gone()
                ? new LeaseLost({ jobId: item.jobId, token: item.token, currentToken: null, state: null })
                : undefined
      ),
      ({ now, result }): Effect.Effect<Written, LeaseLost | StoreError> =>
        result._tag === "Settled" ? Effect.succeed({ job: result.job, now }) : Effect.fail(leaseLost(result))
    )

  // Neither a charge nor a claim has a veto: they never fail with `LeaseLost` here.
  charge = (item: ChargeItem): Effect.Effect<Charged, StoreError> =>
    Effect.flatMap(
      this.submit(this.queue.charge, item, this.chargeAlone) as Effect.Effect<Answer<ChargeResult>, StoreError>,
      ({ now, result }): Effect.Effect<Charged> => {
        switch (result._tag) {
          case "Charged":
            return Effect.succeed({ costCents: result.costCents, now })
          case "BatchBudgetExceeded":
            return Effect.succeed({
              costCents: result.costCents,
              now,
              refused: {
                batchId: result.batchId,
                batchCostCents: result.batchCostCents,
                budgetCents: result.budgetCents
              }
            })
          case "NotFound":
            return Effect.die(new Error(`charge for unknown job ${result.jobId}`))
        }
      }
    )

  claimNext = (options: ClaimNextOptions): Effect.Effect<Reply<ClaimNextResult>, StoreError> =>
    Effect.suspend(() =>
      this.claimsStopped
        ? Effect.interrupt
        : (this.submit(this.queue.claim, options, this.claimAlone) as Effect.Effect<Reply<ClaimNextResult>, StoreError>)
    )

  stopClaims = (): void => {
    this.claimsStopped = true
    for (const claim of this.queue.claim.splice(0)) answer(claim, Effect.interrupt)
  }

  private readonly settleAlone = (item: SettleItem) => single("settle", this.store.settle({ items: [item] }))
  private readonly chargeAlone = (item: ChargeItem) => single("charge", this.store.charge({ items: [item] }))
  private readonly claimAlone = (options: ClaimNextOptions) => this.store.claimNext(options)

  /**
   * Hands one write in and waits for its answer: sent at once, alone, by the caller when a lane is free and nothing
   * is queued (the lane is held until the call ends, however it ends), else queued for the next tick. A caller
   * interrupted while its write is still queued takes it back (it is never sent); one interrupted while its tick is
   * in flight drops only the answer.
   */
  private submit<I, A>(
    into: Array<Pending<I, A>>,
    item: I,
    alone: (item: I) => Effect.Effect<A, StoreError>,
    veto?: () => LeaseLost | undefined
  ): Effect.Effect<A, StoreError | LeaseLost> {
    return Effect.suspend(() => {
      if (this.inFlight < lanes && this.queued() === 0) {
        const refused = veto?.()
        if (refused !== undefined) return Effect.fail(refused)
        return Effect.acquireUseRelease(
          Effect.sync(() => {
            this.inFlight += 1
          }),
          () => alone(item),
          () => Effect.sync(this.freeLane)
        )
      }
      return Effect.async<A, StoreError | LeaseLost>((resume) => {
        const pending: Pending<I, A> = { item, veto, resume, answered: false }
        into.push(pending)
        this.pump()
        return Effect.sync(() => {
          const at = into.indexOf(pending)
          if (at >= 0) into.splice(at, 1)
        })
      })
    })
  }

  private readonly freeLane = (): void => {
    this.inFlight -= 1
    this.pump()
  }

  /** Starts ticks while a lane is free and writes are queued. Called in the steps that queue a write or end a tick. */
  private pump(): void {
    while (this.inFlight < lanes && this.queued() > 0) {
      const tick = this.take()
      if (sizeOf(tick) === 0) continue
      this.inFlight += 1
      this.run(this.send(tick), () => {
        // However the tick's fiber ended (interrupted, even before its first step, or by a defect), every write of it
        // has its answer.
        answerAll(tick, Effect.interrupt)
        this.freeLane()
      })
    }
  }

  /** The next tick: charges first (a billed call waits for its reservation), then settlements, then one claim. */
  private take(): Tick {
    const tick = emptyTick()
    let room = this.limit
    room -= takeInto(this.queue.charge, tick.charge, room)
    room -= takeInto(this.queue.settle, tick.settle, room)
    takeInto(this.queue.claim, tick.claim, Math.min(room, 1))
    return tick
  }

  /** Sends one tick: `cycle` for writes of more than one verb where the store has it, else the verbs at once. */
  private send(tick: Tick): Effect.Effect<void> {
    const verbsInTick = (tick.settle.length > 0 ? 1 : 0) + (tick.charge.length > 0 ? 1 : 0) + tick.claim.length
    return this.store.cycle === undefined || verbsInTick === 1 ? this.verbs(tick) : this.cycle(this.store.cycle, tick)
  }

  /** Each verb with writes in the tick, called at once. */
  private verbs(tick: Tick): Effect.Effect<void> {
    const { store } = this
    const calls: Array<Effect.Effect<void>> = []
    if (tick.settle.length > 0) {
      const items = itemsOf(tick.settle)
      calls.push(Effect.map(Effect.exit(store.settle({ items })), (exit) => shareOut(tick.settle, exit, "settle")))
    }
    if (tick.charge.length > 0) {
      const items = itemsOf(tick.charge)
      calls.push(Effect.map(Effect.exit(store.charge({ items })), (exit) => shareOut(tick.charge, exit, "charge")))
    }
    for (const claim of tick.claim) {
      calls.push(Effect.map(Effect.exit(store.claimNext(claim.item)), (exit) => answerClaims([claim], exit)))
    }
    return calls.length === 1 ? calls[0]! : Effect.all(calls, { concurrency: "unbounded", discard: true })
  }

  /**
   * The tick as one `cycle`. One the store refuses for good (`Constraint` or `Unknown`: a part its verb would refuse
   * as a whole, such as a result it cannot store, wrote nothing) goes out again as the verbs, so only the refused
   * write fails, as it would alone.
   */
  private cycle(cycleVerb: NonNullable<Store["Type"]["cycle"]>, tick: Tick): Effect.Effect<void> {
    return Effect.flatMap(
      Effect.exit(
        cycleVerb({ settle: itemsOf(tick.settle), charge: itemsOf(tick.charge), claimNext: tick.claim[0]?.item })
      ),
      (exit) => {
        if (Exit.isFailure(exit)) {
          const error = Cause.failureOption(exit.cause)
          if (Option.isSome(error) && !error.value.isRetryable) return this.verbs(tick)
        }
        const part = <A>(pick: (reply: CycleReply) => ReadonlyArray<A>) =>
          Exit.map(exit, (reply) => ({ now: reply.now, results: pick(reply) }))
        shareOut(
          tick.settle,
          part((reply) => reply.settle),
          "cycle"
        )
        shareOut(
          tick.charge,
          part((reply) => reply.charge),
          "cycle"
        )
        answerClaims(
          tick.claim,
          part((reply) => reply.claimNext)
        )
        return Effect.void
      }
    )
  }
}
