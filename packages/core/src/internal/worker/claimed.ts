/**
 * What both intake loops (`fromStore.ts`, `fromTransport.ts`) share: how much to claim and when, taking a claimed job
 * into the local queue and the keeper, what a claim round reports, and the limiter views admission plans on.
 *
 * @internal
 */
import { Effect, FiberRef } from "effect"
import * as Metrics from "../../Metrics.js"
import { withNow } from "../now.js"
import * as Tracing from "../tracing.js"
import type { WorkerAdmission } from "./admission.js"
import { type Env, room } from "./env.js"
import type { Held } from "./held.js"
import type { WorkerLimits } from "./limits.js"

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

/** `f` of how many jobs to claim: at once when there is room now, else once `awaitRoom` says. */
export const withRoom = <A, R>(
  env: Env<R>,
  f: (want: number) => Effect.Effect<A, never, R>
): Effect.Effect<A, never, R> =>
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

/** Take a claimed job into the local queue (and the keeper), its lease granted for `grantedMs` from `sentAt`. */
export const take = <R>(env: Env<R>, held: Held, taken: Array<Held>): void => {
  env.keeper.add(held)
  env.waiting.push(held)
  taken.push(held)
}

/**
 * What a claim round's taken jobs report: each one's queue wait (store time from due to claim) in the histogram, and,
 * while tracing, a `slowcall.claim` span per job under its submit, from the send of the claim to now.
 */
export const reportClaims = <R>(
  env: Env<R>,
  taken: ReadonlyArray<Held>,
  sentAt: number,
  batch: number
): Effect.Effect<void> => {
  if (taken.length === 0) return Effect.void
  // The whole round's waits at once, under the metric labels of this fiber (what `Metric.update` would use per job).
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

/** The jobs a worker holds that may still call: waiting in its local queue, or running. */
export const heldJobs = <R>(env: Env<R>): Array<Held> => [...env.waiting, ...env.running]

/** Reads the limiter for the resources whose view is too old to plan on (`WorkerAdmission.stale`), if any. */
export const refreshStale = <R>(env: Env<R>, gate: WorkerAdmission, limits: WorkerLimits): Effect.Effect<void> =>
  withNow((local) => {
    const stale = gate.stale(limits.storeNow(local), heldJobs(env))
    return stale.length === 0 ? Effect.void : limits.refresh(stale)
  })
