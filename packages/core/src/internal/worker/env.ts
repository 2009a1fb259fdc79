/**
 * What a worker's steps share: its services, resolved options, its one lease keeper and group-committed store and
 * transport calls, and the state of what it holds (the local queue of claimed jobs waiting for a slot, the handlers
 * running), and the small steps over them (room, wake-ups, owner tags, log annotations, acks and defers). The step
 * every attempt ends with, writing its outcome, is `persist.ts`'s.
 *
 * State fields are plain mutable values: every read and write happens inside one synchronous step of a fiber, and
 * fibers never run at the same time.
 *
 * @internal
 */
import { Effect, FiberRef, FiberRefs, HashMap, Logger, type Tracer } from "effect"
import type { FairOptions } from "../../Fairness.js"
import type * as Handler from "../../Handler.js"
import * as Lease from "../../Lease.js"
import type { Runnable } from "../../Protocol.js"
import type { Store } from "../../Store.js"
import type { AckItem, DeferItem, Delivery, Transport } from "../../Transport.js"
import type { WorkerAdmission } from "./admission.js"
import type { AroundCall } from "./context.js"
import type { Fibers } from "./fibers.js"
import type { Held } from "./held.js"
import type { Keeper } from "./lease.js"
import type { WorkerLimits } from "./limits.js"
import type { Outbox } from "./outbox.js"
import type { WorkerStore } from "./ticks.js"

/** @internal */
export type Admission<R> = {
  readonly beforeClaim?:
    | ((
        delivery: Delivery
      ) => Effect.Effect<{ readonly _tag: "Admit" } | { readonly _tag: "Defer"; readonly delayMs: number }, never, R>)
    | undefined
  readonly aroundCall?: AroundCall | undefined
}

/** @internal */
export interface Env<R> {
  readonly store: Store["Type"]
  readonly transport: Transport["Type"]
  readonly registry: Handler.Registry<R>
  /** The (type, version) pairs this worker runs: the filter of its `claimNext` calls. */
  readonly runnable: ReadonlyArray<Runnable>
  readonly owner: string
  readonly instance: string
  readonly queue: string
  readonly concurrency: number
  /** Jobs claimed ahead of a free slot, at most. */
  readonly prefetch: number
  readonly receiveWaitMs: number
  readonly shutdownGraceMs: number
  readonly unknownHandlerDelayMs: number
  readonly busyMarginMs: number
  readonly receiveErrorDelayMs: number
  readonly storeErrorDelayMs: number
  /** The keep-alive (`WorkerOptions.keepAliveMs`): the longest lease a claim or heartbeat of this worker asks for. */
  readonly keepAliveMs: number
  /** The lease of a claim before its handler is known (and a delivery's first visibility): the longest one held. */
  readonly visibilityMs: number
  /** The transport's longest delay (`capabilities.maxDelayMs`), or infinity. */
  readonly maxDelayMs: number
  /** The most items one store or transport call of this worker carries. */
  readonly maxBatch: number
  readonly retry: { readonly baseMs?: number | undefined; readonly capMs?: number | undefined } | undefined
  readonly admission: Admission<R> | undefined
  /** The `fair` option of every `claimNext` (the worker's `fairness`), or undefined for the plain order. */
  readonly fair: FairOptions | undefined
  readonly logging: boolean
  /** Where spans go; `undefined` when tracing is off or only Effect's built-in tracer is installed (no spans made). */
  readonly tracer: Tracer.Tracer | undefined
  readonly keeper: Keeper
  /** The fleet limiter's group-committed queue, when the worker has a limiter. */
  readonly limits: WorkerLimits | undefined
  /**
   * Admission before the claim (`admission.ts`), when the worker has a limiter and a handler that names a
   * resource: jobs of a resource without room are not claimed.
   */
  readonly gate: WorkerAdmission | undefined
  readonly writes: WorkerStore
  readonly acks: Outbox<AckItem>
  readonly defers: Outbox<DeferItem>
  /** The attempt fibers: one per dispatched job, from its start until its outcome is written. */
  readonly fibers: Fibers<R>
  /** Claimed jobs waiting for a slot, oldest claim first. */
  readonly waiting: Array<Held>
  /** The attempts whose handlers may still be running, for shutdown. */
  readonly running: Set<Held>
  /** Slots taken: dispatched attempts whose handler has not ended yet. */
  busy: number
  /** Set once when the scope starts closing. */
  closing: boolean
  /** Set once the shutdown's grace periods are over: outcome writes still retrying give up. */
  abandoning: boolean
  /** Claims made, for owner tags unique per claim call. */
  claims: number
  /** Wakes the intake loop when capacity frees up. */
  intakeWaiter: ((resume: Effect.Effect<void>) => void) | undefined
}

/**
 * The lease this worker holds for a job of `handler`: the keep-alive, or the handler's attempt worst case when that is
 * shorter (`Lease.keptLeaseMs`).
 *
 * @internal
 */
export const leaseFor = <R>(env: Env<R>, handler: Handler.Handler<any, any, R>): number =>
  Lease.keptLeaseMs(handler.leaseMs, env.keepAliveMs)

/**
 * The attempt a fiber works for, for its log lines: set around each handler (and each of the worker's own lines
 * about an attempt) with one FiberRef write; the worker's loggers (`withAttemptAnnotations`) read it only when a line
 * is written, so an attempt that logs nothing pays nothing for its annotations.
 *
 * @internal
 */
export const currentAttempt = FiberRef.unsafeMake<{ readonly worker: string; readonly held: Held } | undefined>(
  undefined
)

/** The log annotations of an attempt: the worker, the job, the token and the trace id. */
const annotationsOf = (worker: string, held: Held): HashMap.HashMap<string, unknown> =>
  HashMap.make(
    ["worker", worker],
    ["jobId", held.job.id],
    ["token", held.job.leaseToken],
    ["traceId", held.job.traceId ?? ""]
  )

/**
 * `logger` with the annotations of the attempt its line was written for (`currentAttempt`), when there is one.
 *
 * @internal
 */
export const withAttemptAnnotations = <M, O>(logger: Logger.Logger<M, O>): Logger.Logger<M, O> =>
  Logger.make((options) => {
    const attempt = FiberRefs.getOrDefault(options.context, currentAttempt)
    return logger.log(
      attempt === undefined
        ? options
        : { ...options, annotations: HashMap.union(options.annotations, annotationsOf(attempt.worker, attempt.held)) }
    )
  })

/** A forked handler's effect as work for `held`'s attempt (its fiber ends with it: nothing to restore). */
export const inAttemptFiber = <A, E, R, W>(env: Env<W>, held: Held, effect: Effect.Effect<A, E, R>) =>
  env.logging ? Effect.zipRight(FiberRef.set(currentAttempt, { worker: env.owner, held }), effect) : effect

/** `effect` (a log line of the worker's) as work for `held`'s attempt. */
export const asAttempt = <A, E, R, W>(env: Env<W>, held: Held, effect: Effect.Effect<A, E, R>) =>
  env.logging ? Effect.locally(effect, currentAttempt, { worker: env.owner, held }) : effect

/** A worker's own log line about an attempt, with the attempt's annotations. */
export const logFor = <R>(env: Env<R>, held: Held, line: Effect.Effect<void>): Effect.Effect<void> =>
  asAttempt(env, held, line)

/** How many more jobs the worker may claim now: free slots plus room in the local queue. */
export const room = <R>(env: Env<R>): number =>
  env.closing ? 0 : env.concurrency + env.prefetch - env.busy - env.waiting.length

/** Wake the intake loop if it waits for room. */
export const wakeIntake = <R>(env: Env<R>): void => {
  const waiter = env.intakeWaiter
  if (waiter === undefined) return
  env.intakeWaiter = undefined
  waiter(Effect.void)
}

/** A fresh owner tag for one claim call: unique per worker instance (random) and per call (counter). */
export const claimTag = <R>(env: Env<R>): string => `${env.owner}/${env.instance}.${++env.claims}`

// Transport operations never fail the worker: a lost ack or defer only means the message returns, and the claim in
// the Store decides what happens then. Both go out group-committed.
export const ack = <R>(env: Env<R>, delivery: Delivery | undefined): Effect.Effect<void> =>
  delivery === undefined ? Effect.void : env.acks.offer([{ delivery }])

/** A defer item; a delay beyond the transport's longest is cut to it (the message returns early and is deferred again). */
export const deferItem = <R>(env: Env<R>, delivery: Delivery, delayMs: number): DeferItem => ({
  delivery,
  delayMs: Math.min(Math.max(0, Math.ceil(delayMs)), env.maxDelayMs)
})

export const defer = <R>(env: Env<R>, delivery: Delivery | undefined, delayMs: number): Effect.Effect<void> =>
  delivery === undefined ? Effect.void : env.defers.offer([deferItem(env, delivery, delayMs)])
