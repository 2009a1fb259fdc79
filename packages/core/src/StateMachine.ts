/**
 * The job state machine of DESIGN.md section 2 as a pure table. Every Store consults it (or mirrors it in SQL/Lua
 * conditions checked by the conformance suite); a transition outside it is an `InvalidTransition`.
 *
 * ```
 * queued   -> running (claim) | abandoned (cancel, deadline, budget) | failed (a claim finds no attempt left)
 * running  -> succeeded | queued (retry, release, expire) | failed | abandoned | running (takeover, new token)
 * failed   -> queued (replay)
 * succeeded, abandoned: absorbing
 * ```
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { InvalidTransition } from "./Errors.js"
import type { JobState } from "./Job.js"

/**
 * Everything that can happen to a job.
 *
 * @since 0.1.0
 * @category models
 */
export type Event =
  | "claim"
  | "takeover"
  | "complete"
  | "retry"
  | "release"
  | "expire"
  | "fail"
  | "abandon"
  | "cancel"
  | "replay"

/**
 * The legal (from, event) -> to entries. Anything not listed is illegal.
 *
 * @since 0.1.0
 * @category models
 */
export const table: ReadonlyArray<readonly [from: JobState, event: Event, to: JobState]> = [
  ["queued", "claim", "running"],
  ["queued", "cancel", "abandoned"],
  ["queued", "abandon", "abandoned"],
  // A claim of a queued job whose run has no attempt left settles it as failed (see `Store.claim`).
  ["queued", "fail", "failed"],
  ["running", "complete", "succeeded"],
  ["running", "retry", "queued"],
  ["running", "release", "queued"],
  ["running", "expire", "queued"],
  ["running", "fail", "failed"],
  ["running", "abandon", "abandoned"],
  ["running", "takeover", "running"],
  ["failed", "replay", "queued"]
]

const index = new Map<string, JobState>(table.map(([from, event, to]) => [`${from}:${event}`, to]))

/**
 * The state an event leads to, or `undefined` when the event is illegal in `from`.
 * (`running` + `cancel` is legal but is not a state change: it sets `cancelRequestedAt`.)
 *
 * @since 0.1.0
 * @category combinators
 */
export const next = (from: JobState, event: Event): JobState | undefined =>
  from === "running" && event === "cancel" ? "running" : index.get(`${from}:${event}`)

/**
 * Whether `from -> to` appears anywhere in the table (used by history checkers that see states, not events).
 *
 * @since 0.1.0
 * @category combinators
 */
export const isLegal = (from: JobState, to: JobState): boolean =>
  from === to ? from === "running" : table.some(([f, , t]) => f === from && t === to)

/**
 * `next` as an Effect: the new state, or an `InvalidTransition` failure.
 *
 * @since 0.1.0
 * @category combinators
 */
export const transition = (from: JobState, event: Event): Effect.Effect<JobState, InvalidTransition> => {
  const to = next(from, event)
  return to === undefined ? Effect.fail(new InvalidTransition({ from, event })) : Effect.succeed(to)
}
