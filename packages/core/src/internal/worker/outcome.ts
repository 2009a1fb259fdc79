/**
 * The worker's outcome decision, pure: given how the handler ended, why the attempt was stopped (if it was), the
 * job, what it has spent and what the next attempt is estimated to cost, which settlement to write, or none. The
 * rules it leans on (budget fit, attempts left, a retry that cannot start before the deadline) are `Protocol.ts`'s;
 * the deadline case of a retry is applied by the Store itself when it settles.
 *
 * @internal
 */
import type { Job, Json } from "../../Job.js"
import { attemptsLeft } from "../../Job.js"
import type { Normalized } from "../../Normalize.js"
import * as Protocol from "../../Protocol.js"
import type { StopReason } from "./control.js"
import { type Throttled, throttleEvidence } from "./limits.js"

/**
 * How the handler's run ended, as the decision sees it.
 *
 * @internal
 */
export type Ended =
  | { readonly _tag: "Succeeded"; readonly result: Json }
  /** The result does not match the handler's schema or is not storable JSON: the job fails (`unknown`). */
  | { readonly _tag: "Unstorable"; readonly error: string }
  | { readonly _tag: "BudgetExceeded"; readonly error: string }
  | { readonly _tag: "DeadlineExceeded"; readonly error: string }
  | { readonly _tag: "Failed"; readonly normalized: Normalized }

/**
 * What to do once the handler has ended: write a settlement (`Retry` still needs its delay, computed by the caller
 * only when a retry is decided), or write nothing and let the message return (`HandOff`: the lease is no longer
 * this worker's).
 *
 * @internal
 */
export type Decision =
  | { readonly _tag: "Settle"; readonly outcome: Exclude<Protocol.Outcome, { readonly _tag: "Retry" }> }
  | { readonly _tag: "Retry"; readonly normalized: Normalized }
  | { readonly _tag: "HandOff"; readonly selfFenced: boolean }

/**
 * The decision. A lost lease writes nothing; a handler that returned completes (a fenced write: it applies only if
 * the lease is still this worker's, even after a stop); a stop for cancel, deadline or shutdown settles accordingly
 * (a stop for a provider resource's wait is a `Throttle`: back to queued until the wait ends, no attempt used),
 * a self-fenced attempt writes nothing; otherwise the handler's end decides:
 * permanent errors and exhausted runs fail, a retry that the budget cannot cover is abandoned(budget), the rest
 * retries.
 *
 * @internal
 */
export const decide = (options: {
  readonly job: Job
  readonly ended: Ended
  readonly stop: StopReason | undefined
  /** What a `throttled` stop waits for. */
  readonly throttled?: Throttled | undefined
  readonly spentCents: number
  readonly nextEstimateCents: number
}): Decision => {
  const { ended, job, stop } = options
  if (stop === "lease_lost") return { _tag: "HandOff", selfFenced: false }
  if (ended._tag === "Succeeded") return { _tag: "Settle", outcome: { _tag: "Complete", result: ended.result } }
  if (ended._tag === "Unstorable") {
    return { _tag: "Settle", outcome: { _tag: "Fail", errorClass: "unknown", error: ended.error } }
  }
  switch (stop) {
    case "cancelled":
      return {
        _tag: "Settle",
        outcome: { _tag: "Abandon", reason: "cancelled", errorClass: "cancelled", error: "cancel requested" }
      }
    case "deadline":
      return {
        _tag: "Settle",
        outcome: { _tag: "Abandon", reason: "deadline", error: "the deadline passed while the attempt ran" }
      }
    case "self_fenced":
      return { _tag: "HandOff", selfFenced: true }
    case "shutdown":
      return { _tag: "Settle", outcome: { _tag: "Release" } }
    case "throttled": {
      const throttled = options.throttled
      if (throttled === undefined) return { _tag: "Settle", outcome: { _tag: "Release" } }
      return {
        _tag: "Settle",
        outcome: { _tag: "Throttle", delayMs: throttled.delayMs, error: throttleEvidence(throttled) }
      }
    }
    case undefined:
      break
  }
  switch (ended._tag) {
    case "BudgetExceeded":
      return { _tag: "Settle", outcome: { _tag: "Abandon", reason: "budget", error: ended.error } }
    case "DeadlineExceeded":
      return { _tag: "Settle", outcome: { _tag: "Abandon", reason: "deadline", error: ended.error } }
    case "Failed": {
      const { errorClass, evidence, retryable } = ended.normalized
      if (!retryable || attemptsLeft(job) === 0) {
        return { _tag: "Settle", outcome: { _tag: "Fail", errorClass, error: evidence } }
      }
      if (!Protocol.budgetFits(job.budgetCents, options.spentCents, options.nextEstimateCents)) {
        return { _tag: "Settle", outcome: { _tag: "Abandon", reason: "budget", errorClass, error: evidence } }
      }
      return { _tag: "Retry", normalized: ended.normalized }
    }
  }
}
