import * as Canonical from "@slowcall/core/Canonical"
import * as Ids from "@slowcall/core/Ids"
import * as Lease from "@slowcall/core/Lease"
import * as Store from "@slowcall/core/Store"
import { Effect } from "effect"

// #region lease
// One attempt: a 60 s call timeout, one in-attempt retry, one fallback model.
const attempt = { timeoutMs: 60_000, retries: 1, fallbacks: 1 }
const worstCaseMs = Lease.leaseFor(attempt) // 3 x 60 s + 10% margin = 198_000
// The lease a worker holds is the keep-alive (the Worker's `keepAliveMs`, 6 s by default), never the worst case.
const leaseMs = Lease.keptLeaseMs(worstCaseMs, Lease.defaultKeepAliveMs) // 6_000
const heartbeatMs = Lease.heartbeatIntervalFor(leaseMs) // a third of it: 2_000
// #endregion lease

// #region story
// Store time is passed explicitly here (the `now` option exists for tests) so the story is reproducible. Every Store
// verb takes a batch of items and answers one result per item; this story writes one item at a time.
const story = Effect.gen(function* () {
  const store = yield* Store.Store
  const input = { document: "contract.pdf" }
  const item = {
    id: yield* Ids.makeJobId,
    queue: "docs",
    type: "summarize",
    version: 1,
    inputHash: yield* Canonical.inputHash(input),
    input,
    maxAttempts: 3
  }
  const [submitted] = (yield* store.submit({ items: [item], now: 0 })).results
  if (submitted?._tag !== "Created") return yield* Effect.dieMessage("expected a new job")
  const jobId = submitted.job.id

  // Worker A claims: token 1, lease until 7 s.
  const [a] = (yield* store.claim({ items: [{ jobId, owner: "worker-a", leaseMs }], now: 1_000 })).results
  if (a?._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
  // A reserves the call's estimate, then calls the model... and stalls (a long GC pause, a partition).
  const reserve = { jobId, callId: "call-a", token: a.job.leaseToken, amountCents: 3, settled: false }
  yield* store.charge({ items: [reserve], now: 1_000 })

  // A duplicate delivery while A's lease is live costs one round trip: Busy, no model call.
  const [dup] = (yield* store.claim({ items: [{ jobId, owner: "worker-c", leaseMs }], now: 5_000 })).results
  console.log(dup?._tag) // "Busy"

  // A's lease lapses, no heartbeat having renewed it; the next claim, worker B's, takes over with token 2.
  const [b] = (yield* store.claim({ items: [{ jobId, owner: "worker-b", leaseMs }], now: 8_000 })).results
  if (b?._tag !== "Claimed") return yield* Effect.dieMessage("expected a takeover")
  console.log(b.takeover, b.job.leaseToken) // true 2

  // A wakes up with its result. Its settle carries token 1 and is fenced: it can never commit.
  const complete = (token: number, summary: string, now: number) =>
    store.settle({ items: [{ jobId, token, outcome: { _tag: "Complete", result: { summary } } }], now })
  const [stale] = (yield* complete(a.job.leaseToken, "from A", 9_000)).results
  if (stale?._tag === "LeaseLost") console.log(stale._tag, stale.currentToken) // "LeaseLost" 2

  // But the money A spent is recorded: charges are accepted from stale tokens.
  yield* store.charge({ items: [{ ...reserve, amountCents: 4, settled: true }], now: 9_000 })

  const [done] = (yield* complete(b.job.leaseToken, "from B", 12_000)).results
  // "succeeded" { summary: "from B" } 4
  if (done?._tag === "Settled") console.log(done.job.state, done.job.result, done.job.costCents)
})
// #endregion story

Effect.runPromise(story.pipe(Effect.provide(Store.layerMemory))).then(() => console.log({ leaseMs, heartbeatMs }))
