/**
 * The Store-selected intake (`claimsFromStore`): one `Store.claimNext` call claims up to the room's worth of due jobs
 * this worker can run, in the worker's next tick of store writes; when it finds fewer than it asked for, the loop
 * sleeps in `Transport.awaitWork` until a wake-up or the receive wait.
 *
 * @internal
 */
import { Clock, Effect } from "effect"
import * as Metrics from "../../Metrics.js"
import type { Runnable } from "../../Protocol.js"
import { withNow } from "../now.js"
import { countThen } from "../steps.js"
import type { WorkerAdmission } from "./admission.js"
import { dispatch } from "./attempt.js"
import { heldJobs, refreshStale, reportClaims, take, withRoom } from "./claimed.js"
import { claimTag, type Env, leaseFor } from "./env.js"
import { type Held, hold } from "./held.js"
import type { WorkerLimits } from "./limits.js"

const succeedTrue = Effect.succeed(true)
const succeedFalse = Effect.succeed(false)

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
          // Called when the reply lands: the claimed jobs are held from that instant.
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
            // Nothing taken and no slot to fill: nothing to report or start.
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
export const fromStore = <R>(env: Env<R>): Effect.Effect<never, never, R> => {
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
