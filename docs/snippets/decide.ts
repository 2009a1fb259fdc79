import * as Decide from "@slowcall/core/Decide"
import { Either } from "effect"

// #region decide
const decision = Decide.decide({
  p99Ms: 45_000,
  hops: [
    { name: "cdn", timeoutMs: 100_000 },
    { name: "lb", timeoutMs: 60_000 }
  ],
  userWaiting: true,
  outlivesSession: false,
  resultNeededNow: true
})

if (Either.isRight(decision)) {
  const d = decision.right
  // "async" "within-2x" 0.75: 45 s is at least half of the 60 s load balancer timeout
  console.log(d.mode, d.rule, d.ratio, d.marginMs)
  console.log(d.reasons[0])
} else {
  // NoHops or InvalidDecideInput
  console.error(decision.left.message)
}
// #endregion decide

// #region effective
// Single-attempt latencies (ms) from your logs; a 20 s timeout with two retries and 1 s full-jitter backoff.
const samples = [2_100, 2_400, 2_600, 3_000, 3_300, 4_100, 5_200, 7_800, 14_000, 41_000]
const effective = Decide.effectiveP99({ samples, timeoutMs: 20_000, retries: 2, backoffMs: 1_000, seed: 7 })
if (Either.isRight(effective)) {
  const { p50Ms, p99Ms, timeoutRate } = effective.right
  console.log({ p50Ms, p99Ms, timeoutRate })
}
// #endregion effective
