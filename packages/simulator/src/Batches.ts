/**
 * Batches in a simulated run: the application submits the plan's batches with the real `Client.submitBatch` (items of
 * the simulated handler, a spend cap, callbacks into a queue no worker reads, so a callback job stays as it was
 * enqueued), the operator cancels them as planned, and the world records ground truth about them:
 *
 * - between any two writes the store applies (a quiescent point: as each write reaches the store and as it returns),
 *   the batch record beside what its items' records say, whenever either changed (`bstate`);
 * - each claim of an item that granted a lease, with the items' spend at that instant (`bclaim`);
 * - the spend of each batch with a budget, at the same quiescent points, whenever it changed (`bspend`);
 * - items landing and acknowledged cancels (`batch`), and at the end how many jobs the store holds under each
 *   callback's request key (`bfinal`).
 *
 * The checkers (`BatchesCheck.ts`) judge those events. The batch verbs themselves are not faulted (their items'
 * writes are: every claim, charge, settle, cancel, sweep and replay of an item goes through the faulty proxies).
 *
 * @since 0.8.0
 */
import * as Batch from "@slowcall/core/Batch"
import type * as Client from "@slowcall/core/Client"
import type { Job, JobId, JobState } from "@slowcall/core/Job"
import type * as Protocol from "@slowcall/core/Protocol"
import type * as Query from "@slowcall/core/Query"
import type * as Store from "@slowcall/core/Store"
import { Effect, Either } from "effect"
import type { BatchPlan } from "./BatchesPlan.js"
import type { History } from "./History.js"
import * as LimitsPlan from "./LimitsPlan.js"
import type { Plan } from "./Plan.js"
import type { VirtualClock } from "./SimClock.js"

/**
 * The queue of every batch's callback jobs: no worker reads it, so each callback job the store enqueued stays there.
 *
 * @since 0.8.0
 * @category models
 */
export const callbackQueue = "sim.callbacks"

/** The order in which counts are recorded. */
const states: ReadonlyArray<JobState> = ["queued", "running", "succeeded", "failed", "abandoned"]

/**
 * What the batch world needs from its run.
 *
 * @since 0.8.0
 * @category models
 */
export interface BatchEnv {
  readonly plan: Plan
  readonly clock: VirtualClock
  readonly history: History
  readonly peek: (jobId: JobId) => Job | undefined
  readonly peekBatch: (batchId: Batch.BatchId) => Batch.Batch | undefined
  /** An item's ledger rows in the store right now (ground truth, read without an effect). */
  readonly peekCharges: (jobId: JobId) => ReadonlyArray<Protocol.ChargeRow>
  readonly batches: Batch.BatchStore["Type"]
  readonly query: Query.Query["Type"]
  /** The run's acknowledged jobs: each landed item joins them (index `jobs + 100 * batch + item`). */
  readonly acknowledged: Map<number, JobId>
  /**
   * Opens a window of `ms` inside the next write the store applies (F19), noted as a fault on `who`; false when
   * faults are off or F19 is not on in the plan, or a window is open already.
   */
  readonly openWindow: (ms: number, who: string) => boolean
}

interface Tracked {
  readonly index: number
  readonly plan: BatchPlan
  batchId: Batch.BatchId | null
  readonly items: Array<JobId>
  /** The last `bstate` recorded, as its numbers and names, to record only changes. */
  last: string
  /** The last `bspend` recorded (spent and reserved), to record only changes. */
  lastSpend: string
  /** Whether the batch's targeted finish window was opened. */
  windowed: boolean
}

/**
 * The batches of one run. Invariant: every event it records reads the store's records directly (no effect, no
 * participant's view), in the same step as the write it follows or precedes.
 *
 * @since 0.8.0
 * @category models
 */
export class BatchWorld {
  private readonly tracked: Array<Tracked>
  private readonly itemOf = new Map<string, Tracked>()
  private readonly byId = new Map<string, Tracked>()

  constructor(readonly env: BatchEnv) {
    this.tracked = (env.plan.batches ?? []).map((plan, index) => ({
      index,
      plan,
      batchId: null,
      items: [],
      last: "",
      lastSpend: "",
      windowed: false
    }))
  }

  /** Records each tracked batch beside its items' records when either changed since the last record. */
  checkpoint(): void {
    for (const tracked of this.tracked) {
      if (tracked.batchId === null) continue
      const batch = this.env.peekBatch(tracked.batchId)
      if (batch === undefined) continue
      const actual = [0, 0, 0, 0, 0]
      let actualCost = 0
      for (const jobId of tracked.items) {
        const job = this.env.peek(jobId)
        if (job === undefined) continue
        actual[states.indexOf(job.state)]! += 1
        actualCost += job.costCents
      }
      const counts = states.map((state) => batch.counts[state])
      const finished = batch.finishedAt !== null
      this.spend(tracked)
      const key = `${counts.join()}|${actual.join()}|${batch.costCents}|${actualCost}|${batch.added}|${batch.size}|${finished}|${batch.onCompleteJobId}|${batch.onSuccessJobId}`
      if (key === tracked.last) continue
      tracked.last = key
      this.env.history.push({
        k: "bstate",
        t: this.env.clock.now,
        batchId: batch.id,
        counts,
        actual,
        cost: batch.costCents,
        actualCost,
        added: batch.added,
        size: batch.size,
        finished,
        onComplete: batch.onCompleteJobId,
        onSuccess: batch.onSuccessJobId
      })
    }
  }

  /**
   * Records a batch's spend (`bspend`) when it changed: its items' ledger rows summed, and summed again with each
   * settled row at no more than the call's estimate (every call of the simulated handler is estimated at the model's
   * price), which leaves out what calls were billed above their estimates.
   */
  private spend(tracked: Tracked): void {
    const budget = tracked.plan.budgetCents
    if (budget === null || tracked.batchId === null) return
    const estimate = this.env.plan.model.priceCents
    let spent = 0
    let reserved = 0
    for (const jobId of tracked.items) {
      for (const row of this.env.peekCharges(jobId)) {
        spent += row.amountCents
        reserved += row.settled ? Math.min(row.amountCents, estimate) : row.amountCents
      }
    }
    const key = `${spent}|${reserved}`
    if (key === tracked.lastSpend) return
    tracked.lastSpend = key
    this.env.history.push({ k: "bspend", t: this.env.clock.now, batchId: tracked.batchId, spent, reserved, budget })
  }

  /** The items' spend of a tracked batch now (their records' costs, reservations included). */
  private spent(tracked: Tracked): number {
    let spent = 0
    for (const jobId of tracked.items) spent += this.env.peek(jobId)?.costCents ?? 0
    return spent
  }

  /** Records the claims of a reply that granted a lease to an item. */
  private claimed(results: ReadonlyArray<Store.ClaimResult>): void {
    for (const result of results) {
      if (result._tag !== "Claimed") continue
      const tracked = this.itemOf.get(result.job.id)
      if (tracked === undefined || tracked.batchId === null) continue
      this.env.history.push({
        k: "bclaim",
        t: this.env.clock.now,
        batchId: tracked.batchId,
        jobId: result.job.id,
        spent: this.spent(tracked),
        budget: tracked.plan.budgetCents
      })
    }
  }

  /**
   * The targeted finish window: the first settle of an item of a batch with `finishWindowMs` that reaches the store
   * while exactly two of its items are unfinished opens a window inside its write.
   */
  private finishWindow(items: ReadonlyArray<{ readonly jobId: JobId }>): void {
    const first = items[0]
    const tracked = first === undefined ? undefined : this.itemOf.get(first.jobId)
    const ms = tracked?.plan.finishWindowMs ?? null
    if (tracked === undefined || ms === null || tracked.windowed) return
    let unfinished = 0
    for (const jobId of tracked.items) {
      const state = this.env.peek(jobId)?.state
      if (state === "queued" || state === "running") unfinished++
    }
    if (unfinished !== 2 || tracked.items.length !== tracked.plan.items) return
    const owner = this.env.peek(first!.jobId)?.leaseOwner ?? "store"
    if (this.env.openWindow(ms, owner.split("/")[0]!)) tracked.windowed = true
  }

  /** A write with a checkpoint as it reaches the store and as it returns. */
  private readonly checkpointed = <A, E>(write: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      this.checkpoint()
      return Effect.ensuring(
        write,
        Effect.sync(() => this.checkpoint())
      )
    })

  /** The world's store with a checkpoint as each write reaches it and as it returns, and its claims recorded. */
  observe(store: Store.Store["Type"]): Store.Store["Type"] {
    if (this.tracked.length === 0) return store
    const around = this.checkpointed
    return {
      ...store,
      submit: (options) => around(store.submit(options)),
      claim: (options) =>
        around(
          Effect.map(store.claim(options), (reply) => {
            this.claimed(reply.results)
            return reply
          })
        ),
      claimNext: (options) =>
        around(
          Effect.map(store.claimNext(options), (reply) => {
            this.claimed(reply.results)
            return reply
          })
        ),
      heartbeat: (options) => around(store.heartbeat(options)),
      charge: (options) => around(store.charge(options)),
      settle: (options) =>
        around(
          Effect.suspend(() => {
            this.finishWindow(options.items)
            return store.settle(options)
          })
        ),
      cancel: (options) => around(store.cancel(options)),
      replay: (options) => around(store.replay(options)),
      sweep: (options) => around(store.sweep(options)),
      // A cycle is its settle and claim parts at once: observed as both, or not offered when the store has none.
      cycle: store.cycle === undefined ? undefined : this.cycle(store.cycle)
    }
  }

  /** `cycle` observed as `settle` and `claimNext` are: the settle part's window first, the claim part's claims. */
  private cycle(cycle: NonNullable<Store.Store["Type"]["cycle"]>): NonNullable<Store.Store["Type"]["cycle"]> {
    return (options) =>
      this.checkpointed(
        Effect.suspend(() => {
          this.finishWindow(options.settle ?? [])
          return Effect.map(cycle(options), (reply) => {
            this.claimed(reply.claimNext)
            return reply
          })
        })
      )
  }

  /**
   * Records the item writes of a batch cancel as the proxies record a job cancel's (one `write` per item, the record
   * before and after), so the job invariants see every change of an item's record.
   */
  private cancelled(jobs: ReadonlyArray<Job>): void {
    const { clock, history } = this.env
    for (const job of jobs) {
      history.push({
        k: "write",
        t: clock.now,
        start: clock.now,
        op: "cancel",
        who: "operator",
        jobId: job.id,
        token: null,
        ok: true,
        res: "Cancelled",
        outcome: null,
        takeover: false,
        before: history.latest.get(job.id) ?? null,
        after: history.snapOf(job),
        callId: null,
        amount: null,
        settled: null,
        resultToken: null
      })
    }
  }

  /** The world's batch verbs, tracking each batch and its items in the step that writes them, checkpointed. */
  verbs(): Batch.BatchStore["Type"] {
    const inner = this.env.batches
    const around = this.checkpointed
    return {
      ...inner,
      open: (options) =>
        around(
          Effect.map(inner.open(options), (reply) => {
            const result = reply.result
            if (
              result._tag === "Created" &&
              options.spec.requestKey !== null &&
              options.spec.requestKey !== undefined
            ) {
              const tracked = this.tracked[Number(options.spec.requestKey.slice("batch-".length))]
              if (tracked !== undefined && tracked.batchId === null) {
                tracked.batchId = result.batch.id
                this.byId.set(result.batch.id, tracked)
              }
            }
            return reply
          })
        ),
      add: (options) =>
        around(
          Effect.map(inner.add(options), (reply) => {
            const result = reply.result
            const tracked = this.byId.get(options.batchId)
            if (result._tag === "Added" && tracked !== undefined) {
              for (const job of result.jobs) {
                tracked.items.push(job.id)
                this.itemOf.set(job.id, tracked)
              }
              this.env.history.push({
                k: "batch",
                t: this.env.clock.now,
                batchId: options.batchId,
                what: "items",
                jobIds: result.jobs.map((job) => job.id),
                ok: true
              })
            }
            return reply
          })
        ).pipe(Effect.tap((reply) => this.chunkGap(options.batchId, reply.result))),
      cancel: (options) =>
        around(
          Effect.map(inner.cancel(options), (reply) => {
            if (reply.result._tag === "Cancelled") this.cancelled(reply.result.jobs)
            return reply
          })
        ),
      replay: (options) => around(inner.replay(options))
    }
  }

  /**
   * The application's pause after landing a chunk of a batch planned in `chunks`, unless it was the last: the items
   * landed so far may be claimed and finish before the rest land.
   */
  private chunkGap(batchId: Batch.BatchId, result: Batch.AddResult): Effect.Effect<void> {
    const gapMs = this.byId.get(batchId)?.plan.chunks?.gapMs
    if (gapMs === undefined || result._tag !== "Added" || result.batch.added >= result.batch.size) return Effect.void
    return this.env.clock.sleepMillis(gapMs)
  }

  /**
   * The application's batches: each submitted at its planned time through `client` (a submit that failed with a
   * store error is tried again with the same request key, up to six times); each landed item is acknowledged.
   */
  workload(client: Client.ClientService, until: (at: number) => Effect.Effect<void>): Effect.Effect<void> {
    const order = [...this.tracked].sort((a, b) => a.plan.at - b.plan.at || a.index - b.index)
    return Effect.forEach(order, (tracked) => Effect.zipRight(until(tracked.plan.at), this.submit(client, tracked)), {
      discard: true
    })
  }

  private submit(client: Client.ClientService, tracked: Tracked): Effect.Effect<void> {
    const { plan } = this.env
    const b = tracked.index
    const callback = (kind: Batch.CallbackKind) => ({ queue: callbackQueue, type: "sim.callback", input: { b, kind } })
    const options: Client.SubmitBatchOptions = {
      items: Array.from({ length: tracked.plan.items }, (_, i) => {
        const n = 10_000 + 100 * b + i
        return {
          queue: "sim",
          type: LimitsPlan.jobTypeOfJob(plan.limits, n),
          input: { n },
          maxAttempts: plan.maxAttempts
        }
      }),
      requestKey: `batch-${b}`,
      ...(tracked.plan.chunks == null ? {} : { chunkSize: tracked.plan.chunks.size }),
      ...(tracked.plan.budgetCents === null ? {} : { budgetCents: tracked.plan.budgetCents }),
      ...(tracked.plan.onComplete ? { onComplete: callback("onComplete") } : {}),
      ...(tracked.plan.onSuccess ? { onSuccess: callback("onSuccess") } : {})
    }
    const attempt = (n: number): Effect.Effect<void> =>
      Effect.flatMap(Effect.either(client.submitBatch(options)), (result) => {
        if (Either.isRight(result)) return Effect.sync(() => this.acknowledge(tracked))
        if (result.left._tag !== "StoreError" || n >= 5) return Effect.void
        return Effect.zipRight(this.env.clock.sleepMillis(300), attempt(n + 1))
      })
    return attempt(0)
  }

  /** Every landed item of a submitted batch is an acknowledged job of the run, submitted under its own key. */
  private acknowledge(tracked: Tracked): void {
    const { acknowledged, clock, history, plan } = this.env
    tracked.items.forEach((jobId, i) => {
      const key = `batch-${tracked.index}/${i}`
      history.push({ k: "submit", t: clock.now, key, hash: key, ok: true, jobId, created: true, error: null })
      acknowledged.set(plan.jobs + 100 * tracked.index + i, jobId)
    })
  }

  /** The operator: cancels each batch at its planned time (when it was submitted), recording what it was told. */
  operator(until: (at: number) => Effect.Effect<void>): Effect.Effect<void> {
    const cancels = this.tracked
      .filter((tracked) => tracked.plan.cancelAt !== null)
      .sort((a, b) => a.plan.cancelAt! - b.plan.cancelAt! || a.index - b.index)
    const verbs = this.verbs()
    return Effect.forEach(
      cancels,
      (tracked) =>
        Effect.zipRight(
          until(tracked.plan.cancelAt!),
          Effect.suspend(() => {
            const batchId = tracked.batchId
            if (batchId === null) return Effect.void
            return Effect.map(Effect.either(verbs.cancel({ batchId })), (reply) => {
              const tag = Either.isRight(reply) ? reply.right.result._tag : "StoreError"
              this.env.history.push({
                k: "batch",
                t: this.env.clock.now,
                batchId,
                what: "cancel",
                jobIds: [],
                ok: tag === "Cancelled" || tag === "Unchanged"
              })
            })
          })
        ),
      { discard: true }
    )
  }

  /** The last checkpoint, then how many jobs the store holds under each callback's request key. */
  finalReads(): Effect.Effect<void> {
    return Effect.suspend(() => {
      this.checkpoint()
      return Effect.forEach(
        this.tracked,
        (tracked) => {
          const batchId = tracked.batchId
          if (batchId === null) return Effect.void
          const count = (kind: Batch.CallbackKind) =>
            Effect.map(
              Effect.orDie(
                this.env.query.list({ queue: callbackQueue, requestKey: Batch.callbackKey(batchId, kind), limit: null })
              ),
              (jobs) => jobs.length
            )
          return Effect.map(
            Effect.all([count("onComplete"), count("onSuccess")]),
            ([onCompleteJobs, onSuccessJobs]) => {
              const names: Array<Batch.CallbackKind> = []
              if (tracked.plan.onComplete) names.push("onComplete")
              if (tracked.plan.onSuccess) names.push("onSuccess")
              this.env.history.push({
                k: "bfinal",
                t: this.env.clock.now,
                batchId,
                names,
                onCompleteJobs,
                onSuccessJobs
              })
            }
          )
        },
        { discard: true }
      )
    })
  }
}
