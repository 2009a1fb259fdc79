/**
 * The worker's store writes (settlements, charges and the intake's claims), sent in ticks, and its retry of store
 * calls.
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
 * Store calls made by a worker are retried a few times with a short exponential backoff when the Store reports a
 * retryable failure (connection, timeout, conflict, ambiguous). Fenced writes stay safe to repeat: a repeated write
 * whose first try applied is rejected with `LeaseLost` and changes nothing.
 *
 * @internal
 */
import { Cause, Effect, Exit, Option } from "effect"
import { LeaseLost, StoreError } from "../../Errors.js"
import type { Job } from "../../Job.js"
import type {
  ChargeItem,
  ChargeResult,
  ClaimNextOptions,
  ClaimNextResult,
  CycleReply,
  Fenced,
  Reply,
  SettleItem,
  SettleResult,
  Store
} from "../../Store.js"

const isRetryableStoreError = (error: unknown): boolean =>
  typeof error === "object" &&
  error !== null &&
  (error as { _tag?: unknown })._tag === "StoreError" &&
  (error as StoreError).isRetryable

/**
 * Runs `effect`; while it fails with a retryable `StoreError`, waits `baseMs * 2^n` on the Clock (n = 0, 1, ...) and
 * runs it again, at most `times` more times. The first try costs no more than the effect itself: most store calls
 * succeed at once, and this sits on every store call a worker makes.
 *
 * @internal
 */
export const retryStore = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  options: { readonly times?: number | undefined; readonly baseMs?: number | undefined } = {}
): Effect.Effect<A, E, R> => {
  const times = options.times ?? 3
  const baseMs = options.baseMs ?? 50
  const attempt = (n: number): Effect.Effect<A, E, R> =>
    n >= times
      ? effect
      : Effect.catchIf(effect, isRetryableStoreError, () =>
          Effect.zipRight(Effect.sleep(baseMs * 2 ** n), attempt(n + 1))
        )
  return attempt(0)
}

/**
 * A fenced miss as the `LeaseLost` failure the worker's steps use.
 *
 * @internal
 */
export const leaseLost = (fenced: Fenced): LeaseLost =>
  new LeaseLost({ jobId: fenced.jobId, token: fenced.token, currentToken: fenced.currentToken, state: fenced.state })

/**
 * The failure of an item a reply had no result for (a backend bug: a reply has one result per item).
 *
 * @internal
 */
export const noResult = (operation: string) => () =>
  new StoreError({ reason: "Unknown", operation, detail: "the store returned no result for the item" })

/**
 * A written settlement: the job as it was left and the store time of the write.
 *
 * @internal
 */
export type Written = { readonly job: Job; readonly now: number }

/**
 * A charge as the worker reads it: the job's spend after it, the store time of the write, and, for a reservation the
 * Store refused for the batch's budget, the batch's figures.
 *
 * @internal
 */
export interface Charged {
  readonly costCents: number
  readonly now: number
  readonly refused?:
    | { readonly batchId: string; readonly batchCostCents: number; readonly budgetCents: number }
    | undefined
}

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

/** What a settlement or a charge gets back: the store time of its call and its result. */
interface Answer<R> {
  readonly now: number
  readonly result: R
}

/** A write handed in and not yet answered: one item (a claim's is its options) and what its caller waits for. */
interface Pending<I, A> {
  readonly item: I
  readonly veto: (() => LeaseLost | undefined) | undefined
  readonly resume: (answer: Effect.Effect<A, StoreError | LeaseLost>) => void
  answered: boolean
}

/** Answers a write once (a later answer, such as the end of a tick that already answered it, is dropped). */
const answer = <I, A>(pending: Pending<I, A>, effect: Effect.Effect<A, StoreError | LeaseLost>): void => {
  if (pending.answered) return
  pending.answered = true
  pending.resume(effect)
}

/** The writes of one tick, by verb, each in the order they were handed in. */
interface Tick {
  readonly settle: Array<Pending<SettleItem, Answer<SettleResult>>>
  readonly charge: Array<Pending<ChargeItem, Answer<ChargeResult>>>
  /** At most one claim. */
  readonly claim: Array<Pending<ClaimNextOptions, Reply<ClaimNextResult>>>
}

const emptyTick = (): Tick => ({ settle: [], charge: [], claim: [] })

const sizeOf = (tick: Tick): number => tick.settle.length + tick.charge.length + tick.claim.length

/** Answers every write of the tick not answered yet. */
const answerAll = (tick: Tick, effect: Effect.Effect<never>): void => {
  for (const write of tick.settle) answer(write, effect)
  for (const write of tick.charge) answer(write, effect)
  for (const write of tick.claim) answer(write, effect)
}

const itemsOf = <I, A>(writes: ReadonlyArray<Pending<I, A>>): Array<I> => writes.map((write) => write.item)

/** A reply of one result per item shared out among the writes that sent them, in order. */
const shareOut = <I, R>(
  writes: ReadonlyArray<Pending<I, Answer<R>>>,
  exit: Exit.Exit<Reply<R>, StoreError>,
  operation: string
): void => {
  for (let i = 0; i < writes.length; i++) {
    if (Exit.isFailure(exit)) {
      answer(writes[i]!, Effect.failCause(exit.cause))
      continue
    }
    const result = exit.value.results[i]
    answer(
      writes[i]!,
      result === undefined ? Effect.fail(noResult(operation)()) : Effect.succeed({ now: exit.value.now, result })
    )
  }
}

/** A claim's reply is its one write's answer. */
const answerClaims = (
  claims: ReadonlyArray<Pending<ClaimNextOptions, Reply<ClaimNextResult>>>,
  exit: Exit.Exit<Reply<ClaimNextResult>, StoreError>
): void => {
  for (const claim of claims) answer(claim, exit)
}

/** A verb's reply for one item alone, checked to have exactly one result. */
const single = <R>(
  operation: string,
  call: Effect.Effect<Reply<R>, StoreError>
): Effect.Effect<Answer<R>, StoreError> =>
  Effect.flatMap(call, ({ now, results }) =>
    results.length === 1 ? Effect.succeed({ now, result: results[0]! }) : Effect.fail(noResult(operation)())
  )

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
): WorkerStore => {
  const limit = Math.max(1, maxBatch)
  const queue: Tick = emptyTick()
  let inFlight = 0
  let claimsStopped = false
  const queued = (): number => sizeOf(queue)

  /** Takes queued writes of one verb while the tick has room; vetoed ones are answered at once and left out. */
  const takeInto = <I, A>(from: Array<Pending<I, A>>, into: Array<Pending<I, A>>, room: number): number => {
    let taken = 0
    while (from.length > 0 && taken < room) {
      const write = from.shift()!
      const refused = write.veto?.()
      if (refused !== undefined) {
        answer(write, Effect.fail(refused))
        continue
      }
      into.push(write)
      taken += 1
    }
    return taken
  }

  /** The next tick: charges first (a billed call waits for its reservation), then settlements, then one claim. */
  const take = (): Tick => {
    const tick = emptyTick()
    let room = limit
    room -= takeInto(queue.charge, tick.charge, room)
    room -= takeInto(queue.settle, tick.settle, room)
    takeInto(queue.claim, tick.claim, Math.min(room, 1))
    return tick
  }

  /** Each verb with writes in the tick, called at once. */
  const verbs = (tick: Tick): Effect.Effect<void> => {
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
   * The tick as one `cycle`. One the store refuses for good (`Constraint` or `Unknown`: a part its verb would
   * refuse as a whole, such as a result it cannot store, wrote nothing) goes out again as the verbs, so only the
   * refused write fails, as it would alone.
   */
  const cycle = (cycleVerb: NonNullable<Store["Type"]["cycle"]>, tick: Tick): Effect.Effect<void> =>
    Effect.flatMap(
      Effect.exit(
        cycleVerb({ settle: itemsOf(tick.settle), charge: itemsOf(tick.charge), claimNext: tick.claim[0]?.item })
      ),
      (exit) => {
        if (Exit.isFailure(exit)) {
          const error = Cause.failureOption(exit.cause)
          if (Option.isSome(error) && !error.value.isRetryable) return verbs(tick)
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

  /** Sends one tick: `cycle` for writes of more than one verb where the store has it, else the verbs at once. */
  const send = (tick: Tick): Effect.Effect<void> => {
    const verbsInTick = (tick.settle.length > 0 ? 1 : 0) + (tick.charge.length > 0 ? 1 : 0) + tick.claim.length
    return store.cycle === undefined || verbsInTick === 1 ? verbs(tick) : cycle(store.cycle, tick)
  }

  const freeLane = (): void => {
    inFlight -= 1
    pump()
  }

  /** Starts ticks while a lane is free and writes are queued. Called in the steps that queue a write or end a tick. */
  const pump = (): void => {
    while (inFlight < lanes && queued() > 0) {
      const tick = take()
      if (sizeOf(tick) === 0) continue
      inFlight += 1
      run(send(tick), () => {
        // However the tick's fiber ended (interrupted, even before its first step, or by a defect), every write of
        // it has its answer.
        answerAll(tick, Effect.interrupt)
        freeLane()
      })
    }
  }

  /**
   * Hands one write in and waits for its answer: sent at once, alone, by the caller when a lane is free and nothing
   * is queued (the lane is held until the call ends, however it ends), else queued for the next tick. A caller
   * interrupted while its write is still queued takes it back (it is never sent); one interrupted while its tick is
   * in flight drops only the answer.
   */
  const submit = <I, A>(
    into: Array<Pending<I, A>>,
    item: I,
    alone: (item: I) => Effect.Effect<A, StoreError>,
    veto?: () => LeaseLost | undefined
  ): Effect.Effect<A, StoreError | LeaseLost> =>
    Effect.suspend(() => {
      if (inFlight < lanes && queued() === 0) {
        const refused = veto?.()
        if (refused !== undefined) return Effect.fail(refused)
        return Effect.acquireUseRelease(
          Effect.sync(() => {
            inFlight += 1
          }),
          () => alone(item),
          () => Effect.sync(freeLane)
        )
      }
      return Effect.async<A, StoreError | LeaseLost>((resume) => {
        const pending: Pending<I, A> = { item, veto, resume, answered: false }
        into.push(pending)
        pump()
        return Effect.sync(() => {
          const at = into.indexOf(pending)
          if (at >= 0) into.splice(at, 1)
        })
      })
    })

  const settle = (item: SettleItem) => single("settle", store.settle({ items: [item] }))
  const charge = (item: ChargeItem) => single("charge", store.charge({ items: [item] }))
  const claimNext = (options: ClaimNextOptions) => store.claimNext(options)

  return {
    settle: (item, gone) =>
      Effect.flatMap(
        submit(
          queue.settle,
          item,
          settle,
          gone === undefined
            ? undefined
            : () =>
                gone()
                  ? new LeaseLost({ jobId: item.jobId, token: item.token, currentToken: null, state: null })
                  : undefined
        ),
        ({ now, result }): Effect.Effect<Written, LeaseLost | StoreError> =>
          result._tag === "Settled" ? Effect.succeed({ job: result.job, now }) : Effect.fail(leaseLost(result))
      ),
    // Neither a charge nor a claim has a veto: they never fail with `LeaseLost` here.
    charge: (item) =>
      Effect.flatMap(
        submit(queue.charge, item, charge) as Effect.Effect<Answer<ChargeResult>, StoreError>,
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
      ),
    claimNext: (options) =>
      Effect.suspend(() =>
        claimsStopped
          ? Effect.interrupt
          : (submit(queue.claim, options, claimNext) as Effect.Effect<Reply<ClaimNextResult>, StoreError>)
      ),
    stopClaims: () => {
      claimsStopped = true
      for (const claim of queue.claim.splice(0)) answer(claim, Effect.interrupt)
    },
    queued
  }
}
