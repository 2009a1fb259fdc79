import * as Canonical from "@slowcall/core/Canonical"
import * as DeadLetters from "@slowcall/core/DeadLetters"
import * as Ids from "@slowcall/core/Ids"
import * as Metrics from "@slowcall/core/Metrics"
import * as Query from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import { Effect } from "effect"

// Arrange: three jobs with the same oversized input fail permanently with context_length.
const failOne = Effect.gen(function* () {
  const store = yield* Store.Store
  const input = { document: "the-whole-wiki.txt" }
  const item = {
    id: yield* Ids.makeJobId,
    queue: "docs",
    type: "summarize",
    version: 1,
    inputHash: yield* Canonical.inputHash(input),
    input,
    maxAttempts: 3
  }
  const [submitted] = (yield* store.submit({ items: [item] })).results
  if (submitted?._tag !== "Created") return yield* Effect.dieMessage("expected a new job")
  const jobId = submitted.job.id
  const [claim] = (yield* store.claim({ items: [{ jobId, owner: "worker-a", leaseMs: 60_000 }] })).results
  if (claim?._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
  const token = claim.job.leaseToken
  yield* store.charge({ items: [{ jobId, callId: `${jobId}:1:1`, token, amountCents: 12, settled: true }] })
  const outcome = { _tag: "Fail", errorClass: "context_length", error: "prompt is too long" } as const
  return yield* store.settle({ items: [{ jobId, token, outcome }] })
})

// #region dlq
const program = Effect.gen(function* () {
  const store = yield* Store.Store
  const query = yield* Query.Query
  yield* Effect.repeatN(failOne, 2)

  // One query answers "what did this cost" and "which inputs caused it".
  const { groups, jobs } = yield* query.deadLetters({ queue: "docs" })
  console.log(jobs.length, groups) // 3 [{ errorClass: "context_length", inputHash: "…", count: 3, costCents: 36, … }]
  // The view every screen shows: singletons collapsed per error class, the costliest first, a page at a time.
  const page = DeadLetters.page(groups, { sort: "cost", limit: 20 })
  console.log(page.totalGroups, page.groups[0]?.jobIds.length, page.next) // 1 3 null

  // Alert on the arrival rate into failed, not on depth: refresh the gauges from the Store.
  yield* Metrics.refresh({ queue: "docs", windowMs: 5 * 60_000 })
  const snapshot = yield* Metrics.snapshot
  console.log(Metrics.read(snapshot, "slowcall_dead_letter_rate_per_minute")) // 0.6: 3 arrivals in 5 minutes

  // Replay moves failed -> queued through one conditional write per job: a job in any other state is skipped,
  // so replaying a filter twice, or a list that contains a succeeded job, never re-runs anything twice.
  // Ask first: a dry run counts the matches and estimates what re-running them once costs, changing nothing.
  const ask = yield* Query.replay(store, query, { queue: "docs", errorClass: "context_length", dryRun: true })
  console.log(ask.matched, ask.estimatedCents) // 3 36
  const first = yield* Query.replay(store, query, { queue: "docs", errorClass: "context_length" })
  const second = yield* Query.replay(store, query, { jobIds: first.replayed })
  console.log(first.replayed.length, second.replayed.length, second.skipped.length) // 3 0 3
})
// #endregion dlq

Effect.runPromise(program.pipe(Effect.provide(Store.layerMemory)))
