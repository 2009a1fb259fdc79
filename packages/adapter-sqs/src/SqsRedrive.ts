/**
 * Redrive safety: the rule that says whether an SQS queue's redrive policy could move a healthy job's message to the
 * dead-letter queue before the Store gave up on the job. SQS counts receives, not attempts: every attempt is at least
 * one receive, a duplicate publish or a deferral during deploy skew adds one, and a consumer that receives without
 * naming a visibility (a console poll, another tool) makes SQS count one more every `VisibilityTimeout`. A message in
 * the dead-letter queue never orphans its job (the Store keeps it queued or running and the sweeper republishes it
 * once it is stale), but it costs the job a sweep interval and a republish: a queue configured so that this is the
 * normal path is a mistake worth failing on.
 *
 * @since 0.1.0
 */
import { Data } from "effect"

/**
 * What the rule reads: the queue's `maxReceiveCount` (null: no redrive policy) and `VisibilityTimeout`, and what the
 * Store allows a job: `maxAttempts` attempts of at most `leaseMs` each, plus `receiveMargin` receives that are no
 * attempt (duplicates, deferrals).
 *
 * @since 0.1.0
 * @category models
 */
export interface RedriveInput {
  readonly maxReceiveCount: number | null
  readonly visibilityTimeoutMs: number
  readonly maxAttempts: number
  readonly leaseMs: number
  readonly receiveMargin: number
}

/**
 * The verdict: `Safe`, or `Unsafe` with the reason (`receives`: fewer receives than attempts plus margin;
 * `window`: `maxReceiveCount × VisibilityTimeout` is shorter than the Store's `maxAttempts × leaseMs`) and the
 * least `maxReceiveCount` that would be safe.
 *
 * @since 0.1.0
 * @category models
 */
export type RedriveVerdict =
  | { readonly _tag: "Safe" }
  | {
      readonly _tag: "Unsafe"
      readonly reason: "receives" | "window"
      readonly neededReceiveCount: number
    }

/**
 * Decides whether the queue's redrive can dead-letter a healthy job (see the module header). Pure; no queue is read.
 * Safe exactly when there is no redrive policy, or `maxReceiveCount >= maxAttempts + receiveMargin` and
 * `maxReceiveCount × visibilityTimeoutMs >= maxAttempts × leaseMs`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const verdict = (input: RedriveInput): RedriveVerdict => {
  if (input.maxReceiveCount === null) return { _tag: "Safe" }
  const byReceives = input.maxAttempts + Math.max(0, input.receiveMargin)
  const byWindow = Math.ceil((input.maxAttempts * input.leaseMs) / Math.max(1, input.visibilityTimeoutMs))
  const needed = Math.max(byReceives, byWindow)
  if (input.maxReceiveCount < byReceives) return { _tag: "Unsafe", reason: "receives", neededReceiveCount: needed }
  if (input.maxReceiveCount < byWindow) return { _tag: "Unsafe", reason: "window", neededReceiveCount: needed }
  return { _tag: "Safe" }
}

/**
 * The transport refused to start on a queue whose redrive policy could dead-letter a healthy job (see `verdict`).
 * Nothing was sent or received. Raise `maxReceiveCount` to `neededReceiveCount` (or the queue's
 * `VisibilityTimeout`), or start with `redrive.onUnsafe: "warn"` to accept the risk.
 *
 * @since 0.1.0
 * @category errors
 */
export class RedriveUnsafe extends Data.TaggedError("RedriveUnsafe")<{
  readonly queue: string
  readonly queueUrl: string
  readonly reason: "receives" | "window"
  readonly maxReceiveCount: number
  readonly neededReceiveCount: number
  readonly visibilityTimeoutMs: number
  readonly maxAttempts: number
  readonly leaseMs: number
}> {
  override get message() {
    const why =
      this.reason === "receives"
        ? `${this.maxAttempts} attempts need more receives than maxReceiveCount ${this.maxReceiveCount}`
        : `maxReceiveCount ${this.maxReceiveCount} x VisibilityTimeout ${this.visibilityTimeoutMs} ms is shorter than ${this.maxAttempts} attempts x ${this.leaseMs} ms`
    return `SQS queue ${this.queueUrl} (${this.queue}) could dead-letter a healthy job: ${why}; set maxReceiveCount to at least ${this.neededReceiveCount}`
  }
}
