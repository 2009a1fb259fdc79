/**
 * A worker's side of the fleet limiter (`Limiter.ts`): every model call that names a resource is admitted by an
 * `Acquire` before it starts and gives its permit back by a `Release` after it, corrected by the usage the provider
 * reported. All of a worker's limiter items go through one group-committed queue (`batcher.ts`): while
 * one `apply` is in flight, every Acquire, Release and Pause of the worker's calls waits for the next one, so a busy
 * worker makes one limiter round trip per tick, not one per call. Permits are renewed with the heartbeats of their
 * jobs, in one `apply` per heartbeat call.
 *
 * What a reply means for the call is decided here, as plain functions over the reply:
 * - `Granted`: the call runs under its permit.
 * - `Wait` / `Paused`: the call does not start; the job goes back to `queued` until the expected refill (a
 *   `Throttle` settlement: no attempt used, its reservation settled at 0). A wait for a concurrency permit or for a
 *   half-open resource's probe ends when a call ends, which the limiter cannot foresee: such a job asks again after
 *   at most `recheckMs`. A pause until an operator resumes (`quota_exhausted`, `manual`) is asked again every
 *   `pausedRecheckMs`.
 * - After a call: a `rate_limited` failure with a wait (its `retry-after`, or the reset of an exhausted dimension)
 *   pauses the resource until then, a `quota_exhausted` failure pauses it until resumed, and a successful reply whose
 *   rate-limit facts show a dimension exhausted (`remaining` 0 with a reset) pauses it until the reset. The job whose
 *   call failed so waits as a throttled job too.
 *
 * @internal
 */
import { Effect } from "effect"
import type { StoreError } from "../../Errors.js"
import type { CallUsage } from "../../Handler.js"
import type * as Limiter from "../../Limiter.js"
import * as Limits from "../../Limits.js"
import { normalize } from "../../Normalize.js"
import * as Protocol from "../../Protocol.js"
import * as RateLimit from "../../RateLimit.js"
import { withNow } from "../now.js"
import { type Answer, makeBatcher } from "./batcher.js"
import { noResult } from "./store.js"
import type { Start } from "./wake.js"

/**
 * Why a job's call did not run (or ran into a 429), for its `Throttle` settlement: the resource, what it waited for,
 * and the store time the wait ends.
 *
 * @internal
 */
export interface Throttled {
  readonly resource: string
  readonly why: string
  /** Store time at which the job is worth running again. */
  readonly until: number
  /** How long from the limiter's reply until then. */
  readonly delayMs: number
}

/**
 * The evidence a throttled job's record carries: which resource, what for, and until when (`Protocol.throttleEvidence`).
 *
 * @internal
 */
export const throttleEvidence = (throttled: Throttled): string => Protocol.throttleEvidence(throttled)

/** @internal */
export interface WorkerLimits {
  /** One item, group-committed with the other items of this worker's tick. */
  readonly apply: (item: Limiter.LimitItem) => Effect.Effect<Answer<Limiter.LimitResult>, StoreError>
  /**
   * One item handed in now, in the caller's step (an effect waits for its answer): every item handed in after it goes
   * out after it. A call's Release goes so, so that the next call of the same handler cannot be told to wait for the
   * permit its previous call still held.
   */
  readonly post: (item: Limiter.LimitItem) => Effect.Effect<Answer<Limiter.LimitResult>, StoreError>
  /**
   * Reads the resources' state (`Limiter.read`, which writes nothing) and hands their views to `learnStates`. A read
   * that fails is logged and teaches nothing: the forecast then falls back to a probe claim.
   */
  readonly refresh: (resources: ReadonlyArray<string>) => Effect.Effect<void>
  /** Renew permits (one call for all of them); failures are logged, a permit that lapses comes back by itself. */
  readonly renew: (items: ReadonlyArray<Limiter.Renew>) => Effect.Effect<void>
  /** Store time now, estimated from the local clock and the last reply (a pause's end is in store time). */
  readonly storeNow: (localNow: number) => number
  readonly recheckMs: number
  readonly pausedRecheckMs: number
}

/**
 * Defaults: a job waiting for a permit or a probe asks again after at most 1 s; a job of a resource paused until an
 * operator resumes it asks again every minute.
 *
 * @internal
 */
export const defaults = { recheckMs: 1_000, pausedRecheckMs: 60_000 } as const

/** @internal */
export const make = (options: {
  readonly limiter: Limiter.Limiter["Type"]
  readonly maxBatch: number
  readonly start?: Start | undefined
  readonly recheckMs?: number | undefined
  readonly pausedRecheckMs?: number | undefined
  /** Told every reply with the items it answers (the worker's admission before the claim learns from them). */
  readonly learn?:
    | ((
        items: ReadonlyArray<Limiter.LimitItem>,
        reply: { readonly now: number; readonly results: ReadonlyArray<Limiter.LimitResult> }
      ) => void)
    | undefined
  /** Told the views of every `refresh` (the worker's admission before the claim learns from them). */
  readonly learnStates?: ((now: number, states: ReadonlyArray<Limiter.ResourceState>) => void) | undefined
}): WorkerLimits => {
  const { limiter } = options
  // Store time minus local time at the last reply: 0 until one came.
  let offset = 0
  const learn = options.learn
  const observed =
    (items: ReadonlyArray<Limiter.LimitItem>) =>
    (reply: Limiter.Reply<Limiter.LimitResult>): Effect.Effect<Limiter.Reply<Limiter.LimitResult>> =>
      withNow((local) => {
        offset = reply.now - local
        learn?.(items, reply)
        return Effect.succeed(reply)
      })
  const send = (items: ReadonlyArray<Limiter.LimitItem>) =>
    // Every item was checked when it was handed in: the whole call is never refused for one of them.
    Effect.flatMap(
      Effect.catchTag(limiter.apply({ items }), "InvalidInput", (error) => Effect.die(error)),
      observed(items)
    )
  const batcher = makeBatcher<Limiter.LimitItem, Limiter.LimitResult, StoreError>({
    send,
    maxBatch: options.maxBatch,
    missing: noResult("limiter.apply"),
    start: options.start
  })
  return {
    apply: (item) =>
      Effect.suspend(() => {
        const problem = Limits.checkApply({ items: [item] })
        // A call naming an invalid resource (or a negative token reservation) is a bug in the handler.
        return problem === undefined
          ? batcher.submit(item)
          : Effect.die(new Error(`model call refused by the limiter: ${problem.path}: ${problem.message}`))
      }),
    post: (item) => {
      const problem = Limits.checkApply({ items: [item] })
      return problem === undefined
        ? batcher.post(item)
        : Effect.die(new Error(`limiter item refused: ${problem.path}: ${problem.message}`))
    },
    refresh: (resources) =>
      Effect.catchAll(
        Effect.flatMap(limiter.read({ resources }), (reply) =>
          withNow((local) => {
            offset = reply.now - local
            options.learnStates?.(reply.now, reply.resources)
            return Effect.void
          })
        ),
        (error) => Effect.logWarning("reading the limiter failed; a probe claim asks it instead", error)
      ),
    renew: (items) =>
      items.length === 0
        ? Effect.void
        : Effect.catchAll(Effect.flatMap(limiter.apply({ items }), observed(items)), (error) =>
            Effect.logWarning("permit renewal failed; the permits lapse unless renewed in time", error)
          ),
    storeNow: (local) => local + offset,
    recheckMs: Math.max(1, options.recheckMs ?? defaults.recheckMs),
    pausedRecheckMs: Math.max(1, options.pausedRecheckMs ?? defaults.pausedRecheckMs)
  }
}

/** The shortest wait of a throttled job. */
const minWaitMs = 1

/**
 * What an `Acquire` answered other than a grant means for the job: how long it waits and why.
 *
 * @internal
 */
export const throttledBy = (
  limits: Pick<WorkerLimits, "recheckMs" | "pausedRecheckMs">,
  resource: string,
  now: number,
  result:
    | { readonly _tag: "Wait"; readonly until: number; readonly reason: Limiter.WaitReason }
    | { readonly _tag: "Paused"; readonly until: number | null; readonly kind: Limiter.PauseKind }
): Throttled => {
  if (result._tag === "Paused") {
    if (result.until === null) {
      const until = now + limits.pausedRecheckMs
      return { resource, why: `paused (${result.kind}) until resumed`, until, delayMs: until - now }
    }
    return { resource, why: `paused (${result.kind})`, until: result.until, delayMs: Math.max(0, result.until - now) }
  }
  // A permit or a probe comes back when a call ends, usually long before the permit's lease would lapse. A wait is at
  // least a millisecond: a permit is live through its end (inclusive), so at that instant the answer is a wait until
  // now, and a job queued again for now would be claimed and told to wait again, over and over, before time moves.
  const wait = Math.max(minWaitMs, result.until - now)
  const delayMs = result.reason === "concurrency" || result.reason === "probe" ? Math.min(wait, limits.recheckMs) : wait
  return { resource, why: result.reason, until: now + delayMs, delayMs }
}

/**
 * The pause a call's end asks for, or none: see the module header. `waitMs` is measured from the reply.
 *
 * @internal
 */
export type PauseAsk =
  | { readonly kind: "rate_limited"; readonly waitMs: number; readonly why: string }
  | { readonly kind: "quota_exhausted"; readonly why: string }

/** @internal */
export const pauseAfterFailure = (error: unknown): PauseAsk | undefined => {
  const normalized = normalize(error)
  if (normalized.errorClass === "quota_exhausted") return { kind: "quota_exhausted", why: "spend cap reached" }
  if (normalized.errorClass !== "rate_limited") return undefined
  const waitMs = normalized.retryAfterMs ?? RateLimit.waitMs(normalized.rateLimit)
  return waitMs === undefined ? undefined : { kind: "rate_limited", waitMs, why: "429 from the provider" }
}

/**
 * A successful reply's pause: the longest reset among its exhausted dimensions (`remaining` 0 with a reset).
 *
 * @internal
 */
export const pauseAfterSuccess = (info: RateLimit.RateLimitInfo | undefined): PauseAsk | undefined => {
  if (info === undefined) return undefined
  let waitMs: number | undefined
  for (const d of RateLimit.dimensions) {
    const w = info[d]
    if (w?.remaining === 0 && w.resetMs !== undefined) waitMs = Math.max(waitMs ?? 0, w.resetMs)
  }
  return waitMs === undefined || waitMs <= 0
    ? undefined
    : { kind: "rate_limited", waitMs, why: "the provider reported a limit exhausted" }
}

/**
 * The usage to correct a reservation by, as the limiter takes it: finite counts >= 0 only (anything else unknown).
 *
 * @internal
 */
export const usageOf = (usage: CallUsage | undefined): Limiter.Usage | undefined => {
  if (usage === undefined) return undefined
  const count = (n: number | undefined) => (typeof n === "number" && Number.isFinite(n) && n >= 0 ? n : undefined)
  const inputTokens = count(usage.inputTokens)
  const outputTokens = count(usage.outputTokens)
  if (inputTokens === undefined && outputTokens === undefined) return undefined
  return {
    ...(inputTokens === undefined ? {} : { inputTokens }),
    ...(outputTokens === undefined ? {} : { outputTokens })
  }
}
