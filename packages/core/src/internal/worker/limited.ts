/**
 * A reserved model call admitted by the fleet limiter (`Limiter.ts`, the worker's side in `limits.ts`): `Acquire`
 * (one request and the call's token reservation), then the call under its permit, then `Release` corrected by the
 * usage the provider reported, and the pause a 429 asks for.
 *
 * Told to wait (or paused), the call does not start. A first call's job waits out of its attempt: the attempt stops
 * as `throttled` and the job goes back to queued until the wait ends, no attempt used. An attempt that has made calls
 * already waits in place, keeping its reservation (see `waitFor`).
 *
 * @internal
 */
import { Cause, Effect, Exit, Option } from "effect"
import type { StoreError } from "../../Errors.js"
import type { CallOptions } from "../../Handler.js"
import type * as Limiter from "../../Limiter.js"
import { normalize } from "../../Normalize.js"
import { withNow } from "../now.js"
import { catchFailure } from "../steps.js"
import * as Control from "./control.js"
import type { Attempt } from "./ledger.js"
import {
  type PauseAsk,
  pauseAfterFailure,
  pauseAfterSuccess,
  type Throttled,
  throttledBy,
  usageOf,
  type WorkerLimits
} from "./limits.js"

/** One call on its way through the limiter. */
interface Permit<A, E, R> {
  readonly attempt: Attempt
  readonly limits: WorkerLimits
  readonly call: CallOptions<A, E, R>
  readonly callId: string
  readonly resource: string
  /** The call itself, behind its lease gate. */
  readonly run: Effect.Effect<A, E, R>
  /** Whether the call itself started (an interruption before that consumed nothing). */
  readonly started: () => boolean
  /** The lease of the permit: the job's (permits are renewed with its heartbeats). */
  readonly leaseMs: number
  readonly holder: Limiter.Holder
}

/**
 * The call `run` (reserved as `callId`) admitted by the limiter for `resource`.
 *
 * @internal
 */
export const limited = <A, E, R>(
  attempt: Attempt,
  limits: WorkerLimits,
  call: CallOptions<A, E, R>,
  callId: string,
  resource: string,
  run: Effect.Effect<A, E, R>,
  started: () => boolean,
  permitLeaseMs: number | undefined
): Effect.Effect<A, E | StoreError, R> =>
  acquire({
    attempt,
    limits,
    call,
    callId,
    resource,
    run,
    started,
    leaseMs: Math.max(1, permitLeaseMs ?? 60_000),
    holder: { jobId: attempt.job.id, token: attempt.token }
  })

const acquire = <A, E, R>(permit: Permit<A, E, R>): Effect.Effect<A, E | StoreError, R> => {
  const { attempt, call, callId, resource } = permit
  const { job, control } = attempt
  return Effect.flatMap(
    permit.limits.apply({
      _tag: "Acquire",
      resource,
      callId,
      holder: permit.holder,
      leaseMs: permit.leaseMs,
      tenant: job.tenant,
      priority: job.priority,
      cost: { requests: 1, inputTokens: call.tokens?.input ?? 0, outputTokens: call.tokens?.maxOutput ?? 0 }
    }),
    ({ now, result }): Effect.Effect<A, E | StoreError, R> => {
      switch (result._tag) {
        case "Granted": {
          control.permits ??= new Map()
          control.permits.set(callId, resource)
          return Effect.onExit(permit.run, (exit) => afterCall(permit, exit))
        }
        case "Wait":
          return waitFor(permit, now, result)
        case "Paused":
          // A pause with an end is waited for as a wait is; one until an operator resumes sends the job back.
          return result.until === null ? waitOut(permit, now, result) : waitFor(permit, now, result)
        default:
          return Effect.die(new Error(`limiter answered ${result._tag} to an Acquire`))
      }
    }
  )
}

/** Stop the attempt as throttled (the first wait counts): the job goes back to queued until `throttled.until`. */
const throttle = (attempt: Attempt, throttled: Throttled): Effect.Effect<boolean> =>
  Effect.suspend(() => {
    attempt.control.throttled ??= throttled
    return Control.stop(attempt.control, "throttled")
  })

type WaitAnswer = Parameters<typeof throttledBy>[3]

/**
 * Nothing was called: the attempt stops and the job waits without using an attempt. The reservation goes back in
 * the settlement step of the call (`context.ts`), uninterruptibly, as for every call stopped before it started (one
 * refund write).
 */
const waitOut = <A, E, R>(permit: Permit<A, E, R>, now: number, answer: WaitAnswer): Effect.Effect<never> =>
  Effect.zipRight(throttle(permit.attempt, throttledBy(permit.limits, permit.resource, now, answer)), Effect.interrupt)

/**
 * An attempt that has made calls already waits for the room in place, its reservation kept: queued again, it would
 * start over and pay for those calls again, and under steady contention a chain of calls could lose its place this
 * way without end (a 429 of another job's call pauses the resource for every worker, the job holding the provider's
 * slot mid-chain too). A stop (cancel, lease lost, shutdown) ends the wait; stopped while it waits, nothing was
 * called, and the reservation goes back. A first call's job waits out of its attempt.
 */
const waitFor = <A, E, R>(
  permit: Permit<A, E, R>,
  now: number,
  answer: WaitAnswer
): Effect.Effect<A, E | StoreError, R> =>
  permit.attempt.control.callCount > 1
    ? Effect.zipRight(Effect.sleep(throttledBy(permit.limits, permit.resource, now, answer).delayMs), acquire(permit))
    : waitOut(permit, now, answer)

/** A limiter write after a call: its failure is logged, never the call's (a permit lapses by itself). */
const logged = <A>(effect: Effect.Effect<A, StoreError>): Effect.Effect<A | undefined> =>
  catchFailure(effect, (error) =>
    Effect.as(Effect.logWarning("limiter write after a model call failed", error), undefined)
  )

/** The permit goes back after the call, with the usage the provider reported and the pause it asked for. */
const afterCall = <A, E, R>(permit: Permit<A, E, R>, exit: Exit.Exit<A, E>): Effect.Effect<unknown> =>
  Effect.suspend(() => {
    const { call, callId, resource } = permit
    permit.attempt.control.permits?.delete(callId)
    const reached = permit.started()
    let usage: Limiter.Usage | undefined
    let ask: PauseAsk | undefined
    // A 429 (rate limited) teaches the fleet the resource's concurrency (`Limits.learn`).
    let rateLimited = false
    if (Exit.isSuccess(exit)) {
      try {
        usage = usageOf(call.usage?.(exit.value))
      } catch {
        usage = undefined
      }
      try {
        ask = pauseAfterSuccess(call.rateLimit?.(exit.value))
      } catch {
        ask = undefined
      }
    } else if (reached) {
      const failure = Cause.failureOption(exit.cause)
      if (Option.isSome(failure)) {
        ask = pauseAfterFailure(failure.value)
        rateLimited = normalize(failure.value).errorClass === "rate_limited"
      }
    }
    const release: Limiter.Release = {
      _tag: "Release",
      resource,
      callId,
      holder: permit.holder,
      reached,
      ...(usage === undefined ? {} : { usage }),
      ...(rateLimited ? { rateLimited } : {})
    }
    // A call that returned hands its result back at once: its permit goes back (and any pause it asks for goes out)
    // beside the settlement, not before it. Its Release is handed in before the result is handed back, so the
    // handler's next call cannot be told to wait for this call's own permit (with a cap of one, every chained call
    // would wait so, and its job would never get past the first call). One that failed waits for its pause, which
    // may throttle the job.
    if (Exit.isSuccess(exit)) {
      return Effect.forkDaemon(
        ask === undefined ? logged(permit.limits.post(release)) : tell(permit, ask, release, exit)
      )
    }
    return ask === undefined ? logged(permit.limits.apply(release)) : tell(permit, ask, release, exit)
  })

/** The pause a call's reply asked for, then its Release; a call that failed on the 429 waits out the pause. */
const tell = <A, E, R>(
  permit: Permit<A, E, R>,
  pauseAsk: PauseAsk,
  release: Limiter.Release,
  exit: Exit.Exit<A, E>
): Effect.Effect<unknown> =>
  withNow((local) => {
    const { limits, resource } = permit
    const estimate = pauseAsk.kind === "rate_limited" ? limits.storeNow(local) + pauseAsk.waitMs : null
    const pause: Limiter.Pause = {
      _tag: "Pause",
      resource,
      kind: pauseAsk.kind,
      until: estimate,
      reason: pauseAsk.why
    }
    return Effect.flatMap(logged(limits.apply(pause)), (answer): Effect.Effect<unknown> => {
      const released = logged(limits.apply(release))
      // A call that succeeded keeps its result; one that failed on the 429 waits out the pause, no attempt used.
      if (Exit.isSuccess(exit)) return released
      const now = answer?.now ?? limits.storeNow(local)
      const result = answer?.result
      const throttled: Throttled =
        result?._tag === "Paused"
          ? throttledBy(limits, resource, now, result)
          : estimate === null
            ? throttledBy(limits, resource, now, { _tag: "Paused", until: null, kind: pauseAsk.kind })
            : { resource, why: pauseAsk.why, until: estimate, delayMs: Math.max(0, estimate - now) }
      return Effect.zipRight(released, throttle(permit.attempt, throttled))
    })
  })
