/**
 * A worker's intake: the one loop that claims work into the local queue, a batch at a time, whenever the worker has
 * room (free slots plus `prefetch`). Two shapes, chosen once by the transport's capabilities:
 * - the Store selects (`claimsFromStore`): one `Store.claimNext` call claims up to the room's worth of due jobs this
 *   worker can run; when it finds fewer than it asked for, the loop sleeps in `Transport.awaitWork` until a wake-up
 *   or the receive wait.
 * - the transport delivers: one `receive` for up to the room's worth of deliveries, then one `Store.claim` call
 *   for all of them, each item acting on its verdict: hold the job (claimed, or held already under this very call's
 *   owner tag after a lost reply), defer the delivery (busy elsewhere, not due yet, no handler here, a repeat within
 *   the batch), or ack it (settled, no such job).
 * Either way a claimed job is held from the claim on: its lease runs from the send of the call that was granted it
 * (never from the reply, which may arrive late), the keeper renews it, and it waits in the local queue for a slot.
 *
 * @internal
 */
import { Clock, Effect, Either, FiberRef } from "effect"
import type * as Handler from "../../Handler.js"
import type { JobId } from "../../Job.js"
import * as Metrics from "../../Metrics.js"
import type { Runnable } from "../../Protocol.js"
import type { ClaimItem } from "../../Store.js"
import type { AckItem, DeferItem, Delivery } from "../../Transport.js"
import { withNow } from "../now.js"
import { catchFailure, countThen } from "../steps.js"
import * as Tracing from "../tracing.js"
import type { WorkerAdmission } from "./admission.js"
import { dispatch } from "./attempt.js"
import { claimTag, deferItem, type Env, leaseFor, room } from "./env.js"
import { type Held, hold } from "./held.js"
import type { WorkerLimits } from "./limits.js"
import { retryStore } from "./store.js"

/**
 * How many jobs to claim now, or 0 to wait: the room, once it is a worthwhile batch (a quarter of the capacity) or
 * nothing waits for a free slot; never while outcome writes back up beyond twice the capacity.
 */
const wanted = <R>(env: Env<R>): number => {
  const capacity = env.concurrency + env.prefetch
  const free = room(env)
  if (free <= 0 || env.keeper.size() >= 2 * capacity) return 0
  const worthwhile =
    free >= Math.max(1, Math.ceil(capacity / 4)) || (env.waiting.length === 0 && env.busy < env.concurrency)
  return worthwhile ? Math.min(free, env.maxBatch) : 0
}

/** `f` of how many jobs to claim: at once when there is room now (no step of its own), else once `awaitRoom` says. */
const withRoom = <A, R>(env: Env<R>, f: (want: number) => Effect.Effect<A, never, R>): Effect.Effect<A, never, R> =>
  Effect.suspend(() => {
    const want = wanted(env)
    return want > 0 ? f(want) : Effect.flatMap(awaitRoom(env), f)
  })

/** Waits until `wanted` is above 0 and returns it. */
const awaitRoom = <R>(env: Env<R>): Effect.Effect<number> =>
  Effect.suspend(() => {
    const want = wanted(env)
    if (want > 0) return Effect.succeed(want)
    return Effect.zipRight(
      Effect.async<void>((resume) => {
        env.intakeWaiter = resume
      }),
      awaitRoom(env)
    )
  })

const succeedTrue = Effect.succeed(true)
const succeedFalse = Effect.succeed(false)

/** Take a claimed job into the local queue (and the keeper), its lease granted for `grantedMs` from `sentAt`. */
const take = <R>(env: Env<R>, held: Held, taken: Array<Held>): void => {
  env.keeper.add(held)
  env.waiting.push(held)
  taken.push(held)
}

/**
 * What a claim round's taken jobs report: each one's queue wait (store time from due to claim) in the histogram, and,
 * while tracing, a `slowcall.claim` span per job under its submit, from the send of the claim to now.
 */
const reportClaims = <R>(
  env: Env<R>,
  taken: ReadonlyArray<Held>,
  sentAt: number,
  batch: number
): Effect.Effect<void> => {
  if (taken.length === 0) return Effect.void
  // One step for the whole round, under the metric labels of this fiber (what `Metric.update` would use per job).
  const waits = Effect.withFiberRuntime<void>((fiber) => {
    const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
    for (const held of taken) {
      Metrics.queueWaitSeconds.unsafeUpdate(Math.max(0, held.job.updatedAt - held.job.runAfter) / 1_000, labels)
    }
    return Effect.void
  })
  const tracer = env.tracer
  if (tracer === undefined) return waits
  return Effect.zipRight(
    waits,
    withNow((endMs) => {
      for (const held of taken) {
        Tracing.record({
          tracer,
          name: "slowcall.claim",
          parent: Tracing.parentOf(held.job.traceId),
          startMs: sentAt,
          endMs,
          attributes: {
            "slowcall.job_id": held.job.id,
            "slowcall.queue": held.job.queue,
            "slowcall.type": held.job.type,
            "slowcall.token": held.job.leaseToken,
            "slowcall.attempt": held.job.attempts - held.job.attemptsBase,
            "slowcall.batch_size": batch,
            "slowcall.queue_wait_ms": Math.max(0, held.job.updatedAt - held.job.runAfter)
          }
        })
      }
      return Effect.void
    })
  )
}

/** The lease held for a job of its own handler (renewals use it), or the worker's longest when it has none here. */
const leaseOf = <R>(env: Env<R>, type: string, version: number): number => {
  const handler = env.registry.get(type, version)
  return handler === undefined ? env.visibilityMs : leaseFor(env, handler)
}

/**
 * One round of the Store-selected intake: claim up to `want` due jobs of the `types` given, in the worker's next tick
 * of store writes (with the settlements queued before it, in one `cycle` where the store has it); whether the store
 * had that many.
 */
const claimNext = <R>(env: Env<R>, want: number, types: ReadonlyArray<Runnable>): Effect.Effect<boolean, never, R> =>
  withNow((sentAt) =>
    env.writes
      .claimNext({
        queue: env.queue,
        max: want,
        owner: claimTag(env),
        leaseMs: env.visibilityMs,
        types,
        ...(env.fair === undefined ? {} : { fair: env.fair })
      })
      .pipe(
        Effect.matchEffect({
          // A lost reply may have claimed jobs: they are held under a tag no one knows, until their lease lapses.
          onFailure: (error) =>
            Effect.logWarning("claim failed", error).pipe(
              Effect.zipRight(Effect.sleep(env.storeErrorDelayMs)),
              Effect.as(true)
            ),
          // The match calls this when the reply lands: the jobs are held in that step, with no step of their own.
          onSuccess: (reply) => {
            const taken: Array<Held> = []
            let takeovers = 0
            for (const result of reply.results) {
              if (result._tag !== "Claimed") continue
              if (result.takeover) takeovers += 1
              const job = result.job
              const held = hold(job, leaseOf(env, job.type, job.version), sentAt, undefined)
              held.control.localLeaseEnd = sentAt + env.visibilityMs
              take(env, held, taken)
            }
            const full = reply.results.length >= want
            // Nothing taken and no slot to fill: nothing to report or start (no step for either).
            const rest =
              taken.length === 0 && (env.busy >= env.concurrency || env.waiting.length === 0)
                ? full
                  ? succeedTrue
                  : succeedFalse
                : Effect.zipRight(reportClaims(env, taken, sentAt, want), Effect.as(dispatch(env), full))
            return takeovers > 0 ? countThen(Metrics.leaseTakeovers, takeovers, rest) : rest
          }
        })
      )
  )

/** The jobs a worker holds that may still call: waiting in its local queue, or running. */
const heldJobs = <R>(env: Env<R>): Array<Held> => [...env.waiting, ...env.running]

/** Reads the limiter for the resources whose view is too old to plan on (`WorkerAdmission.stale`), if any. */
const refreshStale = <R>(env: Env<R>, gate: WorkerAdmission, limits: WorkerLimits): Effect.Effect<void> =>
  withNow((local) => {
    const stale = gate.stale(limits.storeNow(local), heldJobs(env))
    return stale.length === 0 ? Effect.void : limits.refresh(stale)
  })

/**
 * A claim round with admission before the claim: the plan at store time now (forecast from the local clock and the
 * limiter's last reply) is claimed, or, when no handler here has room, the round sleeps until the earliest opening.
 */
const admittedRound = Effect.fnUntraced(function* <R>(
  env: Env<R>,
  gate: WorkerAdmission,
  limits: WorkerLimits,
  want: number,
  claim: (want: number, types: ReadonlyArray<Runnable>) => Effect.Effect<void, never, R>
) {
  yield* refreshStale(env, gate, limits)
  const now = limits.storeNow(yield* Clock.currentTimeMillis)
  const plan = gate.plan(want, now, heldJobs(env))
  if (plan._tag === "Claim") return yield* claim(plan.max, plan.types)
  yield* Effect.sleep(Math.max(1, plan.until - now))
})

/**
 * The Store-selected intake loop. Waits may be interrupted; a claim that was sent runs to its end (every job it lands
 * on is held and dispatched, and a closing worker releases it). With admission before the claim (`env.gate`), each
 * round claims only what its plan admits, or sleeps until the earliest opening when no handler here has room.
 */
const fromStore = <R>(env: Env<R>): Effect.Effect<never, never, R> => {
  const claimed = (full: boolean): Effect.Effect<void, never, R> =>
    full ? Effect.void : env.transport.awaitWork({ queue: env.queue, waitMs: env.receiveWaitMs })
  const claim = (want: number, types: ReadonlyArray<Runnable>): Effect.Effect<void, never, R> =>
    Effect.flatMap(Effect.uninterruptible(claimNext(env, want, types)), claimed)
  const gate = env.gate
  const limits = env.limits
  const round: Effect.Effect<void, never, R> = withRoom(env, (want) =>
    gate === undefined || limits === undefined
      ? claim(want, env.runnable)
      : admittedRound(env, gate, limits, want, claim)
  )
  const again: Effect.Effect<never, never, R> = Effect.flatMap(round, () => again)
  return again
}

/** A delivery with the handler that will run its job. */
interface Candidate<R> {
  readonly delivery: Delivery
  readonly handler: Handler.Handler<any, any, R>
}

/** The transport writes one intake round decides on, sent together at its end (group-committed). */
interface Replies {
  readonly defers: Array<DeferItem>
  readonly acks: Array<AckItem>
}

/** Sends a round's defers and acks, each kind in one call. */
const reply = <R>(env: Env<R>, replies: Replies): Effect.Effect<void> =>
  Effect.suspend(() => {
    // Read when the round ends (its steps fill the lists); a kind with nothing to send costs no step.
    const { acks, defers } = replies
    if (defers.length === 0) return acks.length === 0 ? Effect.void : env.acks.offer(acks)
    return acks.length === 0
      ? env.defers.offer(defers)
      : Effect.zipRight(env.defers.offer(defers), env.acks.offer(acks))
  })

/** Sort deliveries: what can be claimed now, and what is deferred at once (no handler, closing, repeats). */
const candidatesOf = <R>(
  env: Env<R>,
  deliveries: ReadonlyArray<Delivery>,
  replies: Replies
): { readonly candidates: Array<Candidate<R>>; readonly unknown: number } => {
  const candidates: Array<Candidate<R>> = []
  const seen = new Set<JobId>()
  let unknown = 0
  for (const delivery of deliveries) {
    const handler = env.registry.get(delivery.type, delivery.version)
    if (handler === undefined) {
      unknown += 1
      replies.defers.push(deferItem(env, delivery, env.unknownHandlerDelayMs))
    } else if (env.closing) {
      // A closing worker claims nothing more; the message returns for another worker.
      replies.defers.push(deferItem(env, delivery, 0))
    } else if (seen.has(delivery.jobId)) {
      // Two deliveries of one job in one receive: the first one's claim decides; this one returns after its lease.
      replies.defers.push(deferItem(env, delivery, leaseFor(env, handler) + env.busyMarginMs))
    } else {
      seen.add(delivery.jobId)
      candidates.push({ delivery, handler })
    }
  }
  return { candidates, unknown }
}

/**
 * The candidates admission before the claim lets through (`env.gate`): a delivery of a resource without room is
 * deferred until its forecast opening, without a claim.
 */
const forecastAdmitted = <R>(
  env: Env<R>,
  candidates: Array<Candidate<R>>,
  replies: Replies
): Effect.Effect<Array<Candidate<R>>> => {
  const gate = env.gate
  const limits = env.limits
  if (gate === undefined || limits === undefined) return Effect.succeed(candidates)
  const verdicts = withNow((local) => {
    const now = limits.storeNow(local)
    const verdicts = gate.verdicts(
      candidates.map((candidate) => candidate.handler),
      now,
      heldJobs(env)
    )
    const admit: Array<Candidate<R>> = []
    candidates.forEach((candidate, i) => {
      const until = verdicts[i]
      if (until === undefined) admit.push(candidate)
      else replies.defers.push(deferItem(env, candidate.delivery, Math.max(1, until - now)))
    })
    return Effect.succeed(admit)
  })
  return Effect.zipRight(refreshStale(env, gate, limits), verdicts)
}

/**
 * The candidates admitted: first by the forecast of their resources' room, then by the admission hook's verdict on
 * each, in order; a `Defer` hides the delivery without claiming.
 */
const admitted = <R>(
  env: Env<R>,
  candidates: Array<Candidate<R>>,
  replies: Replies
): Effect.Effect<Array<Candidate<R>>, never, R> => {
  const beforeClaim = env.admission?.beforeClaim
  if (beforeClaim === undefined) return forecastAdmitted(env, candidates, replies)
  return Effect.flatMap(forecastAdmitted(env, candidates, replies), (forecast) =>
    Effect.map(
      Effect.forEach(forecast, (candidate) =>
        Effect.map(beforeClaim(candidate.delivery), (verdict) => {
          if (verdict._tag === "Admit") return true
          replies.defers.push(deferItem(env, candidate.delivery, verdict.delayMs))
          return false
        })
      ),
      (admit) => forecast.filter((_, i) => admit[i])
    )
  )
}

/** One claim call for every candidate, and each item's verdict acted on. */
const claimDeliveries = <R>(
  env: Env<R>,
  candidates: ReadonlyArray<Candidate<R>>,
  replies: Replies
): Effect.Effect<void, never, R> => {
  const tag = claimTag(env)
  const items: Array<ClaimItem> = candidates.map(({ delivery, handler }) => ({
    jobId: delivery.jobId,
    owner: tag,
    leaseMs: leaseFor(env, handler),
    estimateCents: typeof handler.estimateCents === "number" ? handler.estimateCents : undefined
  }))
  // Each try notes its send time: a lease runs from the send of the try that was granted it, never from the reply
  // (which may arrive late) and never from an earlier try that did not apply.
  const sent = { first: -1, last: -1 }
  const call = retryStore(
    withNow((now) => {
      if (sent.first < 0) sent.first = now
      sent.last = now
      return env.store.claim({ items })
    })
  )
  return Effect.flatMap(Effect.either(call), (claimed) => {
    if (Either.isLeft(claimed)) {
      for (const { delivery } of candidates) replies.defers.push(deferItem(env, delivery, env.storeErrorDelayMs))
      return Effect.logWarning("claim failed", claimed.left)
    }
    const { now, results } = claimed.right
    const taken: Array<Held> = []
    let dropped = 0
    let takeovers = 0
    for (let i = 0; i < candidates.length; i++) {
      const { delivery, handler } = candidates[i]!
      const result = results[i]
      if (result === undefined) {
        replies.defers.push(deferItem(env, delivery, env.storeErrorDelayMs))
        continue
      }
      switch (result._tag) {
        case "NotFound":
          replies.acks.push({ delivery })
          break
        case "Settled":
          dropped += 1
          replies.acks.push({ delivery })
          break
        case "Busy":
          // Granted by an earlier try whose reply was lost: which one is unknown, so the lease runs from the first send.
          if (result.job.leaseOwner === tag)
            take(env, hold(result.job, leaseFor(env, handler), sent.first, delivery), taken)
          else replies.defers.push(deferItem(env, delivery, result.until - now + env.busyMarginMs))
          break
        case "NotDue":
          replies.defers.push(deferItem(env, delivery, result.until - now))
          break
        case "Claimed":
          if (result.takeover) takeovers += 1
          take(env, hold(result.job, leaseFor(env, handler), sent.last, delivery), taken)
          break
      }
    }
    // In this order: the dropped count, the takeover count, the claims' report (a count of zero is no step).
    let report = reportClaims(env, taken, sent.first, candidates.length)
    if (takeovers > 0) report = countThen(Metrics.leaseTakeovers, takeovers, report)
    if (dropped > 0) report = countThen(Metrics.duplicateDeliveriesDropped, dropped, report)
    return report
  })
}

/**
 * One receive, and the claim of what it brought. The wait for deliveries (and the admission hook) may be
 * interrupted: received messages simply return after their visibility. Once the claim is sent, the round runs to its
 * end, so that every job a claim lands on is held and dispatched (a closing worker then releases it).
 */
const receiveAndClaim = <R>(env: Env<R>, want: number): Effect.Effect<void, never, R> =>
  Effect.uninterruptibleMask((restore) =>
    restore(
      env.transport.receive({ queue: env.queue, max: want, visibilityMs: env.visibilityMs, waitMs: env.receiveWaitMs })
    ).pipe(
      (received) =>
        catchFailure(received, (error) =>
          Effect.logWarning("receive failed", error).pipe(
            Effect.zipRight(restore(Effect.sleep(env.receiveErrorDelayMs))),
            Effect.as([] as ReadonlyArray<Delivery>)
          )
        ),
      Effect.flatMap((deliveries) => {
        // An empty receive that did not wait (a zero wait, a failing transport) yields, so it cannot spin.
        if (deliveries.length === 0) return Effect.yieldNow()
        const replies: Replies = { defers: [], acks: [] }
        const { candidates, unknown } = candidatesOf(env, deliveries, replies)
        const claim = (admit: Array<Candidate<R>>): Effect.Effect<void, never, R> =>
          admit.length === 0
            ? reply(env, replies)
            : Effect.zipRight(claimDeliveries(env, admit, replies), Effect.zipRight(dispatch(env), reply(env, replies)))
        // Without an admission hook or a forecast every candidate is admitted: no step for the verdicts.
        const rest =
          env.admission?.beforeClaim === undefined && env.gate === undefined
            ? claim(candidates)
            : Effect.flatMap(restore(admitted(env, candidates, replies)), claim)
        return unknown > 0 ? countThen(Metrics.unknownHandlerDeferred, unknown, rest) : rest
      })
    )
  )

/** The transport-delivered intake loop. */
const fromTransport = <R>(env: Env<R>): Effect.Effect<never, never, R> => {
  const maxBatch = Math.max(1, env.transport.capabilities.maxBatch)
  // Each round waits (for room, or in the receive; an empty receive that did not wait yields), so no yield between.
  const again: Effect.Effect<never, never, R> = Effect.flatMap(
    withRoom(env, (want) => receiveAndClaim(env, Math.min(want, maxBatch))),
    () => again
  )
  return again
}

/**
 * The intake loop of a worker, in the shape its transport calls for.
 *
 * @internal
 */
export const intake = <R>(env: Env<R>): Effect.Effect<never, never, R> =>
  env.transport.capabilities.claimsFromStore ? fromStore(env) : fromTransport(env)
