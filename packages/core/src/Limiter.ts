/**
 * The Limiter: provider limits the whole fleet keeps, in store time. A **resource** names what a model call uses
 * (provider + model class + credential, e.g. `openai:gpt-4.1:key-a`); its **limits** are any of a cap on concurrent
 * calls and token buckets for requests, input tokens and output tokens per minute. Every worker asks the same
 * Limiter before a call (`Acquire`) and tells it after (`Release` with the provider's usage), so a fleet of eight
 * workers keeps one provider key's limits instead of eight times them; one 429 pauses the resource for everyone.
 *
 * A separate service from the `Store`: jobs that name no resource never touch it (no statement on their path), and
 * the Store contract stays as narrow as it was. Each adapter layer provides it next to its `Store`.
 *
 * Contract (checked by `@slowcall/testing`'s `LimiterConformance` and `LimiterProperty` on every adapter):
 * - Every rule is the one `Limits.ts` states (bucket refill, the admission verdict, release correction, renewal,
 *   pause merge, the half-open probe); an adapter's SQL transaction or Lua script is an atomic version of it.
 * - Store time, as for the `Store`: the backend's own clock (SQL `now()`, Redis `TIME`, the `Clock` captured by the
 *   memory Limiter), or the `now` a test passes. Every reply carries the store time it used (`now`).
 * - Batches: each verb takes items and answers one result per item, in item order, each item one atomic step
 *   applied as if one after another (a later item sees an earlier one's write). A `StoreError` fails the whole call,
 *   and any subset of the items may then have applied. Every verb is safe to repeat as sent: an `Acquire` repeated
 *   with the same call and holder returns the grant the first made, and a second `Release` is `NotHeld`.
 * - Bad input (a resource id outside `[A-Za-z0-9._:/@+-]{1,200}`, a negative, zero or non-finite limit, NaN
 *   anywhere) fails the whole call with `InvalidInput` before anything is written (`Limits.check*`).
 * - Every item names one resource; a resource no verb has named yet behaves as one defined with no limits, and the
 *   first `define`, `apply` or `resume` item naming it creates its record (so `read` lists it).
 *
 * @since 0.4.0
 */
import { Context, type Effect, Layer } from "effect"
import type { InvalidInput, StoreError } from "./Errors.js"
import * as internalMemoryLimiter from "./internal/memoryLimiter.js"
import type * as Store from "./Store.js"

/**
 * A reply: the store time the call used and one result per item, in item order (`Store.Reply`).
 *
 * @since 0.4.0
 * @category models
 */
export type Reply<A> = Store.Reply<A>

/**
 * Options every verb takes: `now` overrides store time, for tests only (`Store.WriteOptions`).
 *
 * @since 0.4.0
 * @category models
 */
export type WriteOptions = Store.WriteOptions

/**
 * Reserved capacity for important calls: `share` (0 <= share < 1) of every bucket's capacity, and
 * `floor(maxConcurrent * share)` of the concurrency cap, is kept for calls of jobs whose priority is at least
 * `minPriority`. Calls below it may use only the rest.
 *
 * @since 0.4.0
 * @category models
 */
export interface PriorityShare {
  readonly minPriority: number
  readonly share: number
}

/**
 * The limits of one resource, each optional (absent: unlimited in that dimension).
 * - `maxConcurrent`: calls holding a live permit at once (an integer >= 1).
 * - `requestsPerMinute`, `inputTokensPerMinute`, `outputTokensPerMinute` (> 0): token buckets refilled
 *   continuously at `limit / 60000` per ms up to a capacity of `max(1, limit * burstSeconds / 60)`.
 * - `burstSeconds` (> 0, default 1): how many seconds' worth of each limit a bucket holds ("60 RPM may be enforced
 *   as 1 request per second").
 * - `priorityShare`: capacity kept for important calls (see `PriorityShare`).
 *
 * @since 0.4.0
 * @category models
 */
export interface Limits {
  readonly maxConcurrent?: number | undefined
  readonly requestsPerMinute?: number | undefined
  readonly inputTokensPerMinute?: number | undefined
  readonly outputTokensPerMinute?: number | undefined
  readonly burstSeconds?: number | undefined
  readonly priorityShare?: PriorityShare | undefined
}

/**
 * The three bucket dimensions, in the order the admission verdict checks them (after concurrency).
 *
 * @since 0.4.0
 * @category models
 */
export type Dimension = "requests" | "inputTokens" | "outputTokens"

/**
 * Who holds a permit: the job and its lease token. A permit is named by its call id and holder together, so a stale
 * holder (an older token of the same job) can neither renew nor release the permit of the current one.
 *
 * @since 0.4.0
 * @category models
 */
export interface Holder {
  readonly jobId: string
  readonly token: number
}

/**
 * What a call takes from the buckets (each >= 0; defaults: one request, no tokens): the request, the estimated
 * input tokens and `max_tokens` for the output.
 *
 * @since 0.4.0
 * @category models
 */
export interface Cost {
  readonly requests?: number | undefined
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
}

/**
 * What the provider reported a call used, per token dimension; an absent dimension is unknown.
 *
 * @since 0.4.0
 * @category models
 */
export interface Usage {
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
}

/**
 * Why a resource is paused: a 429 with a reset (`rate_limited`, ends by itself, then half-open), a spend cap
 * (`quota_exhausted`, until an operator resumes), or an operator's pause (`manual`).
 *
 * @since 0.4.0
 * @category models
 */
export type PauseKind = "rate_limited" | "quota_exhausted" | "manual"

/**
 * Why an `Acquire` must wait: a dimension without room, or a half-open resource whose probe call is in flight.
 *
 * @since 0.4.0
 * @category models
 */
export type WaitReason = "concurrency" | "requests" | "inputTokens" | "outputTokens" | "probe"

/**
 * Take a concurrency permit and the call's cost from the buckets. The permit is a fenced lease named by `callId`
 * and `holder`, live while `permitUntil >= now`, with `permitUntil = now + leaseMs`. `priority` is the job's (for
 * `PriorityShare`), `tenant` is recorded on the permit.
 *
 * @since 0.4.0
 * @category models
 */
export interface Acquire {
  readonly _tag: "Acquire"
  readonly resource: string
  readonly callId: string
  readonly holder: Holder
  readonly leaseMs: number
  readonly tenant?: string | null | undefined
  readonly priority?: number | undefined
  readonly cost?: Cost | undefined
}

/**
 * Give a permit back after the call, with whether the call reached the provider and the usage it reported. Frees
 * the permit only for its exact holder, and corrects the buckets once (see `Limits.release`).
 *
 * @since 0.4.0
 * @category models
 */
export interface Release {
  readonly _tag: "Release"
  readonly resource: string
  readonly callId: string
  readonly holder: Holder
  readonly reached: boolean
  readonly usage?: Usage | undefined
  /**
   * The provider refused the call with a rate limit (a `rate_limited` 429): the resource's concurrency is lowered
   * to the calls still in flight beside it (`Limits.learn`). Counts only when `reached`.
   */
  readonly rateLimited?: boolean | undefined
}

/**
 * Extend a live permit to `now + leaseMs` (sent with the heartbeats of the call's job).
 *
 * @since 0.4.0
 * @category models
 */
export interface Renew {
  readonly _tag: "Renew"
  readonly resource: string
  readonly callId: string
  readonly holder: Holder
  readonly leaseMs: number
}

/**
 * Pause a resource for every worker until `until` (store time), or until an operator resumes it (`until: null`).
 * `reason` (at most 1000 characters) is shown to operators.
 *
 * @since 0.4.0
 * @category models
 */
export interface Pause {
  readonly _tag: "Pause"
  readonly resource: string
  readonly kind: PauseKind
  readonly until: number | null
  readonly reason: string
}

/**
 * One item of `apply`.
 *
 * @since 0.4.0
 * @category models
 */
export type LimitItem = Acquire | Release | Renew | Pause

/**
 * One bucket as the view shows it: its level at the reply's `now` (negative: debt), its capacity and its limit per
 * minute. The level at a later time `t` (with nothing taken meanwhile) is
 * `min(capacity, level + (t - now) * perMinute / 60000)`.
 *
 * @since 0.4.0
 * @category models
 */
export interface BucketView {
  readonly level: number
  readonly capacity: number
  readonly perMinute: number
}

/**
 * A pause as it stands: its kind, its end (`null`: until resumed), why, and since when (store time of the `Pause`
 * that set it).
 *
 * @since 0.4.0
 * @category models
 */
export interface PauseState {
  readonly kind: PauseKind
  readonly until: number | null
  readonly reason: string
  readonly since: number
}

/**
 * A compact snapshot of a resource at the reply's `now`, so a worker can predict capacity locally without another
 * round trip: live permits against the cap, each bucket, the reserved share, the pause and whether the resource is
 * half-open. `maxConcurrent` is the declared cap; `learnedConcurrent` the lower cap the fleet learned from 429s
 * (`Limits.learn`), null when none: the cap in force is the lower of the two.
 *
 * @since 0.4.0
 * @category models
 */
export interface View {
  readonly permits: number
  readonly maxConcurrent: number | null
  readonly learnedConcurrent: number | null
  readonly buckets: { readonly [D in Dimension]: BucketView | null }
  readonly priorityShare: PriorityShare | null
  readonly pause: { readonly kind: PauseKind; readonly until: number | null } | null
  readonly halfOpen: boolean
}

/**
 * The result of one `apply` item:
 * - `Granted` (Acquire): the call may start; its permit is live until `permitUntil`; `probe` when it is the one
 *   call a half-open resource admits. A repeated Acquire answers the grant as it was made (a `permitUntil` already
 *   past means the grant lapsed).
 * - `Wait` (Acquire): no room now; `until` is the store time at which the resource is expected to admit the call
 *   if nothing else takes capacity; `reason` is the first dimension without room (or `probe`). Nothing taken.
 * - `Paused` (Acquire, Pause): the resource is paused until `until` (`null`: until resumed). Nothing taken.
 * - `Released` (Release): the permit is gone and its reservation corrected.
 * - `Renewed` (Renew): the live permit now runs to `permitUntil`.
 * - `NotHeld` (Release, Renew): no such permit for this holder (never granted, released already, or, for Renew,
 *   lapsed); nothing changed.
 *
 * Each carries the resource's `view` after the item.
 *
 * @since 0.4.0
 * @category models
 */
export type LimitResult =
  | { readonly _tag: "Granted"; readonly permitUntil: number; readonly probe: boolean; readonly view: View }
  | { readonly _tag: "Wait"; readonly until: number; readonly reason: WaitReason; readonly view: View }
  | { readonly _tag: "Paused"; readonly until: number | null; readonly kind: PauseKind; readonly view: View }
  | { readonly _tag: "Released"; readonly view: View }
  | { readonly _tag: "Renewed"; readonly permitUntil: number; readonly view: View }
  | { readonly _tag: "NotHeld"; readonly view: View }

/**
 * One resource's limits to set (an upsert: the new limits replace the old ones whole).
 *
 * @since 0.4.0
 * @category models
 */
export interface DefineItem {
  readonly resource: string
  readonly limits: Limits
}

/**
 * The result of a define: the resource's view after it.
 *
 * @since 0.4.0
 * @category models
 */
export interface DefineResult {
  readonly _tag: "Defined"
  readonly view: View
}

/**
 * The result of a resume: whether the resource was paused or half-open before, and its view after.
 *
 * @since 0.4.0
 * @category models
 */
export interface ResumeResult {
  readonly _tag: "Resumed"
  readonly wasPaused: boolean
  readonly view: View
}

/**
 * A live permit as `read` shows it.
 *
 * @since 0.4.0
 * @category models
 */
export interface PermitView {
  readonly callId: string
  readonly holder: Holder
  readonly tenant: string | null
  readonly priority: number
  readonly permitUntil: number
  readonly probe: boolean
}

/**
 * What a resource has seen since its record was made, each count only ever growing: grants, waits by reason,
 * Acquires answered `Paused`, and `Pause` items by kind (`rate_limited` plus `quota_exhausted` are the 429s the
 * fleet reported).
 *
 * @since 0.4.0
 * @category models
 */
export interface Counters {
  readonly grants: number
  readonly waits: { readonly [R in WaitReason]: number }
  readonly paused: number
  readonly pauses: { readonly [K in PauseKind]: number }
}

/**
 * One resource as `read` describes it at the reply's `now`: its limits, its view, the pause in force (with its
 * reason), its live permits (by `permitUntil`, then call id, job id and token) and its counters.
 *
 * @since 0.4.0
 * @category models
 */
export interface ResourceState {
  readonly resource: string
  readonly limits: Limits
  readonly view: View
  readonly pause: PauseState | null
  readonly permits: ReadonlyArray<PermitView>
  readonly counters: Counters
}

/**
 * The Limiter service: one tag, an implementation per backend. See the module header for what every verb keeps.
 *
 * @since 0.4.0
 * @category services
 */
export class Limiter extends Context.Tag("@slowcall/core/Limiter")<
  Limiter,
  {
    /**
     * Set each resource's limits (`Limits.define`): bucket levels are kept (clamped to the new capacity; a new
     * dimension starts full), permits and pauses too.
     */
    readonly define: (
      options: WriteOptions & { readonly items: ReadonlyArray<DefineItem> }
    ) => Effect.Effect<Reply<DefineResult>, InvalidInput | StoreError>
    /** Acquire, release, renew and pause, each item by its rule of `Limits.ts` (`Limits.applyItem`). */
    readonly apply: (
      options: WriteOptions & { readonly items: ReadonlyArray<LimitItem> }
    ) => Effect.Effect<Reply<LimitResult>, InvalidInput | StoreError>
    /** Operator action: clear any pause and half-open state of each resource (`Limits.resume`). */
    readonly resume: (
      options: WriteOptions & { readonly items: ReadonlyArray<{ readonly resource: string }> }
    ) => Effect.Effect<Reply<ResumeResult>, InvalidInput | StoreError>
    /**
     * The named resources in the order given (one never named by a write is described as an undefined resource),
     * or every resource with a record, by id. Writes nothing.
     */
    readonly read: (options: {
      readonly resources?: ReadonlyArray<string> | undefined
      readonly now?: number | undefined
    }) => Effect.Effect<
      { readonly now: number; readonly resources: ReadonlyArray<ResourceState> },
      InvalidInput | StoreError
    >
  }
>() {}

/**
 * A fresh, empty in-memory Limiter built from `Limits.ts` and nothing else. Each call is one synchronous step, so
 * every item is atomic among fibers. Store time is the `Clock` in scope when it is made (or an explicit `now`).
 * Nothing is persisted: for tests, examples and the simulator.
 *
 * @since 0.4.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Limiter["Type"]> = internalMemoryLimiter.make

/**
 * A Layer with a fresh in-memory Limiter (see `makeMemory`).
 *
 * @since 0.4.0
 * @category layers
 */
export const layerMemory: Layer.Layer<Limiter> = Layer.effect(Limiter, makeMemory)
