/**
 * The transport-delivered intake: one `receive` for up to the room's worth of deliveries, then one `Store.claim` call
 * for all of them, each item acting on its verdict: hold the job (claimed, or held already under this very call's
 * owner tag after a lost reply), defer the delivery (busy elsewhere, not due yet, no handler here, a repeat within the
 * batch), or ack it (settled, no such job).
 *
 * @internal
 */
import { Effect, Either } from "effect"
import type * as Handler from "../../Handler.js"
import type { JobId } from "../../Job.js"
import * as Metrics from "../../Metrics.js"
import type { ClaimItem } from "../../Store.js"
import type { AckItem, DeferItem, Delivery } from "../../Transport.js"
import { withNow } from "../now.js"
import { catchFailure, countThen } from "../steps.js"
import { dispatch } from "./attempt.js"
import { heldJobs, refreshStale, reportClaims, take, withRoom } from "./claimed.js"
import { claimTag, deferItem, type Env, leaseFor } from "./env.js"
import { type Held, hold } from "./held.js"
import { retryStore } from "./store.js"

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
    // Read when the round ends (its steps fill the lists); a kind with nothing to send sends no call.
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
    // In this order: the dropped count, the takeover count, the claims' report (a count of zero is not added).
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
        // Without an admission hook or a forecast every candidate is admitted: there are no verdicts to wait for.
        const rest =
          env.admission?.beforeClaim === undefined && env.gate === undefined
            ? claim(candidates)
            : Effect.flatMap(restore(admitted(env, candidates, replies)), claim)
        return unknown > 0 ? countThen(Metrics.unknownHandlerDeferred, unknown, rest) : rest
      })
    )
  )

/** The transport-delivered intake loop. */
export const fromTransport = <R>(env: Env<R>): Effect.Effect<never, never, R> => {
  const maxBatch = Math.max(1, env.transport.capabilities.maxBatch)
  // Each round waits (for room, or in the receive; an empty receive that did not wait yields), so no yield between.
  const again: Effect.Effect<never, never, R> = Effect.flatMap(
    withRoom(env, (want) => receiveAndClaim(env, Math.min(want, maxBatch))),
    () => again
  )
  return again
}
