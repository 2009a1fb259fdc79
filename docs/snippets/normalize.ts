import * as ErrorClass from "@slowcall/core/ErrorClass"
import * as Normalize from "@slowcall/core/Normalize"
import * as Retry from "@slowcall/core/Retry"
import { Effect } from "effect"

// #region normalize
// What a fetch wrapper throws for an Anthropic overload: status, headers, parsed body.
const thrown = {
  status: 529,
  headers: new Headers({ "retry-after": "20" }),
  body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }
}
const n = Normalize.normalize(thrown)
// { errorClass: "overloaded", retryable: true, retryAfterMs: 20000, status: 529, evidence: "HTTP 529; ..." }

// A 429 is not always a rate limit: OpenAI's insufficient_quota is about money, and retrying cannot help.
const quota = Normalize.normalize({
  status: 429,
  body: { error: { type: "insufficient_quota", code: "insufficient_quota", message: "You exceeded your quota" } }
})
console.log(quota.errorClass, quota.retryable) // "quota_exhausted" false

// Node's fetch hides the network error in `cause`.
const reset = Normalize.normalize(
  new TypeError("fetch failed", { cause: Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }) })
)
console.log(reset.errorClass) // "network"
// #endregion normalize

// #region delay
// The delay before the next attempt: full-jitter backoff from the class policy, never below a Retry-After the
// class honours. Randomness comes from Effect's Random, so a seeded run replays the same delays.
const delay = Retry.delayFor(n, 2) // attempt 2 of an overloaded call: max(uniform[0, 10 s], 20 s)
Effect.runPromise(delay).then((ms) => console.log(n.errorClass, ErrorClass.policy(n.errorClass).baseMs, ms))
// #endregion delay
