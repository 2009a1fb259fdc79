import * as Canonical from "@slowcall/core/Canonical"
import * as Ids from "@slowcall/core/Ids"
import * as Metrics from "@slowcall/core/Metrics"
import * as Store from "@slowcall/core/Store"
import { Effect } from "effect"

// Arrange: three jobs with the same oversized input fail permanently with context_length.
const failOne = Effect.gen(function* () {
  const store = yield* Store.Store
  const input = { document: "the-whole-wiki.txt" }
  const { job } = yield* store.submit({
    id: yield* Ids.makeJobId,
    queue: "docs",
    type: "summarize",
    version: 1,
    inputHash: yield* Canonical.inputHash(input),
    input,
    maxAttempts: 3
  })
  const claim = yield* store.claim({ jobId: job.id, owner: "worker-a", leaseMs: 60_000 })
  if (claim._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
  yield* store.charge({ jobId: job.id, callId: `${job.id}:1:1`, token: 1, amountCents: 12, settled: true })
  return yield* store.fail({ jobId: job.id, token: 1, errorClass: "context_length", error: "prompt is too long" })
})

// #region dlq
const program = Effect.gen(function* () {
  const store = yield* Store.Store
  yield* Effect.repeatN(failOne, 2)

  // One query answers "what did this cost" and "which inputs caused it".
  const { groups, jobs } = yield* store.deadLetters({ queue: "docs" })
  console.log(jobs.length, groups) // 3 [{ errorClass: "context_length", inputHash: "…", count: 3, costCents: 36 }]

  // Alert on the arrival rate into failed, not on depth: refresh the gauges from the Store.
  yield* Metrics.refresh({ queue: "docs", windowMs: 5 * 60_000 })
  const snapshot = yield* Metrics.snapshot
  console.log(Metrics.read(snapshot, "slowcall_dead_letter_rate_per_minute")) // 0.6: 3 arrivals in 5 minutes

  // Replay moves failed -> queued through one conditional write per job: a job in any other state is skipped,
  // so replaying a filter twice, or a list that contains a succeeded job, never re-runs anything twice.
  const first = yield* store.replay({ queue: "docs", errorClass: "context_length" })
  const second = yield* store.replay({ jobIds: first.replayed })
  console.log(first.replayed.length, second.replayed.length, second.skipped.length) // 3 0 3
})
// #endregion dlq

Effect.runPromise(program.pipe(Effect.provide(Store.layerMemory)))
