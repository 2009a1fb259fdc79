import * as Canonical from "@slowcall/core/Canonical"
import * as Ids from "@slowcall/core/Ids"
import * as Lease from "@slowcall/core/Lease"
import * as Store from "@slowcall/core/Store"
import { Effect } from "effect"

// #region lease
// One attempt: a 60 s call timeout, one in-attempt retry, one fallback model.
const attempt = { timeoutMs: 60_000, retries: 1, fallbacks: 1 }
const leaseMs = Lease.leaseFor(attempt) // 3 x 60 s + 10% margin = 198_000
const heartbeatMs = Lease.heartbeatIntervalFor(leaseMs) // a third of the lease: 66_000
// #endregion lease

// #region story
// Store time is passed explicitly here (the `now` option exists for tests) so the story is reproducible.
const story = Effect.gen(function* () {
  const store = yield* Store.Store
  const input = { document: "contract.pdf" }
  const { job } = yield* store.submit({
    id: yield* Ids.makeJobId,
    queue: "docs",
    type: "summarize",
    version: 1,
    inputHash: yield* Canonical.inputHash(input),
    input,
    maxAttempts: 3,
    now: 0
  })

  // Worker A claims: token 1, lease until 198 s.
  const a = yield* store.claim({ jobId: job.id, owner: "worker-a", leaseMs, now: 1_000 })
  if (a._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
  // A reserves the call's estimate, then calls the model... and stalls (a long GC pause, a partition).
  yield* store.charge({
    jobId: job.id,
    callId: "call-a",
    token: a.job.leaseToken,
    amountCents: 3,
    settled: false,
    now: 1_000
  })

  // A duplicate delivery while A's lease is live costs one round trip: Busy, no model call.
  const dup = yield* store.claim({ jobId: job.id, owner: "worker-c", leaseMs, now: 50_000 })
  console.log(dup._tag) // "Busy"

  // A's lease lapses without a heartbeat; worker B takes over with token 2 and runs the job.
  const b = yield* store.claim({ jobId: job.id, owner: "worker-b", leaseMs, now: 200_000 })
  if (b._tag !== "Claimed") return yield* Effect.dieMessage("expected a takeover")
  console.log(b.takeover, b.job.leaseToken) // true 2

  // A wakes up with its result. Its write carries token 1 and is rejected: it can never commit.
  const stale = yield* store
    .complete({ jobId: job.id, token: a.job.leaseToken, result: { summary: "from A" }, now: 201_000 })
    .pipe(Effect.flip)
  if (stale._tag === "LeaseLost") console.log(stale._tag, stale.currentToken) // "LeaseLost" 2

  // But the money A spent is recorded: charges are accepted from stale tokens.
  yield* store.charge({
    jobId: job.id,
    callId: "call-a",
    token: a.job.leaseToken,
    amountCents: 4,
    settled: true,
    now: 201_000
  })

  const done = yield* store.complete({
    jobId: job.id,
    token: b.job.leaseToken,
    result: { summary: "from B" },
    now: 230_000
  })
  console.log(done.state, done.result, done.costCents) // "succeeded" { summary: "from B" } 4
})
// #endregion story

Effect.runPromise(story.pipe(Effect.provide(Store.layerMemory))).then(() => console.log({ leaseMs, heartbeatMs }))
