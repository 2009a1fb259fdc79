/**
 * Store conformance, batches: every verb takes a batch and answers one result per item, in item order, with the
 * store time it used. Items are applied as if one after another (a later item sees an earlier one's write), so a
 * duplicate in one batch meets the first one's effect, and one item's `LeaseLost` or `NotFound` never fails or
 * changes its neighbours.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import { Effect } from "effect"
import { type Area, expectTag, LEASE, outcome } from "./fixture.js"

/** The shape of a batch reply and independent items. */
const shapeTests = ({ it, fixture }: Area): void => {
  it.effect("an empty batch writes nothing and answers no results at the store time it was given", () =>
    Effect.gen(function* () {
      const { store, queue, now } = yield* fixture
      const at = yield* now

      const replies = [
        yield* store.submit({ items: [], now: at }),
        yield* store.claim({ items: [], now: at }),
        yield* store.heartbeat({ items: [], now: at }),
        yield* store.charge({ items: [], now: at }),
        yield* store.settle({ items: [], now: at }),
        yield* store.cancel({ items: [], now: at }),
        yield* store.replay({ items: [], now: at }),
        yield* store.claimNext({ queue, max: 0, owner: "w", leaseMs: LEASE, now: at })
      ]

      for (const reply of replies) expect(reply).toEqual({ now: at, results: [] })
    })
  )

  it.effect("results come one per item, in item order; an unknown id is NotFound between its neighbours", () =>
    Effect.gen(function* () {
      const { store, factory, now, submit } = yield* fixture
      const a = yield* submit()
      const b = yield* submit()
      const unknown = yield* factory.jobId
      const at = yield* now

      const reply = yield* store.claim({
        items: [
          { jobId: b.id, owner: "worker-b", leaseMs: LEASE },
          { jobId: unknown, owner: "worker-x", leaseMs: LEASE },
          { jobId: a.id, owner: "worker-a", leaseMs: LEASE }
        ],
        now: at
      })

      expect(reply.now).toBe(at)
      expect(reply.results.map((r) => r._tag)).toEqual(["Claimed", "NotFound", "Claimed"])
      expect(expectTag(reply.results[0]!, "Claimed").job).toMatchObject({ id: b.id, leaseOwner: "worker-b" })
      expect(reply.results[1]).toEqual({ _tag: "NotFound", jobId: unknown })
      expect(expectTag(reply.results[2]!, "Claimed").job).toMatchObject({ id: a.id, leaseOwner: "worker-a" })
    })
  )

  it.effect("one item's LeaseLost never fails or changes its neighbours", () =>
    Effect.gen(function* () {
      const { store, now, advance, submit, claimed, get } = yield* fixture
      const a = yield* submit()
      const b = yield* submit()
      const c = yield* submit()
      const ra = yield* claimed(a.id)
      const stale = yield* claimed(b.id, "worker-a", 1_000)
      const rc = yield* claimed(c.id)
      yield* advance(1_001)
      const rb = yield* claimed(b.id, "worker-b")
      const at = yield* now

      const beats = yield* store.heartbeat({
        items: [
          { jobId: b.id, token: stale.leaseToken, leaseMs: LEASE },
          { jobId: a.id, token: ra.leaseToken, leaseMs: 2 * LEASE, progress: 0.5 }
        ],
        now: at
      })
      const settles = yield* store.settle({
        items: [
          { jobId: a.id, token: ra.leaseToken, outcome: outcome.complete("a") },
          { jobId: b.id, token: stale.leaseToken, outcome: outcome.complete("stale") },
          { jobId: c.id, token: rc.leaseToken, outcome: outcome.fail("auth", "401") }
        ],
        now: at
      })

      expect(beats.results).toEqual([
        { _tag: "LeaseLost", jobId: b.id, token: stale.leaseToken, currentToken: rb.leaseToken, state: "running" },
        { _tag: "Renewed", leaseUntil: at + 2 * LEASE, cancelRequested: false, costCents: 0 }
      ])
      expect(settles.results.map((r) => r._tag)).toEqual(["Settled", "LeaseLost", "Settled"])
      expect(yield* get(a.id)).toMatchObject({ state: "succeeded", result: "a" })
      expect(yield* get(b.id)).toEqual(rb)
      expect(yield* get(c.id)).toMatchObject({ state: "failed", errorClass: "auth" })
    })
  )

  it.effect("items apply in order: the second claim of a job in one batch finds the first one's lease", () =>
    Effect.gen(function* () {
      const { store, now, submit, get, attempts } = yield* fixture
      const job = yield* submit()
      const at = yield* now

      const reply = yield* store.claim({
        items: [
          { jobId: job.id, owner: "worker-a", leaseMs: LEASE },
          { jobId: job.id, owner: "worker-b", leaseMs: LEASE }
        ],
        now: at
      })

      const first = expectTag(reply.results[0]!, "Claimed").job
      expect(reply.results[1]).toEqual({ _tag: "Busy", job: first, until: at + LEASE })
      expect(yield* get(job.id)).toEqual(first)
      expect(yield* attempts(job.id)).toHaveLength(1)
    })
  )
}

/** Items applied one after another, and duplicates. */
const orderTests = ({ it, fixture }: Area): void => {
  it.effect("items apply in order: a settle after a settle of the same job in one batch is LeaseLost", () =>
    Effect.gen(function* () {
      const { store, now, submit, claimed, get } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)

      const reply = yield* store.settle({
        items: [
          { jobId: job.id, token: running.leaseToken, outcome: outcome.complete("first") },
          { jobId: job.id, token: running.leaseToken, outcome: outcome.retry(0, "timeout", "second") }
        ],
        now: yield* now
      })

      const done = expectTag(reply.results[0]!, "Settled").job
      expect(reply.results[1]).toEqual({
        _tag: "LeaseLost",
        jobId: job.id,
        token: running.leaseToken,
        currentToken: running.leaseToken,
        state: "succeeded"
      })
      expect(yield* get(job.id)).toEqual(done)
    })
  )

  it.effect("items apply in order: a reservation, its settlement and a repeat of it in one charge batch", () =>
    Effect.gen(function* () {
      const { store, now, submit, claimed, charges } = yield* fixture
      const job = yield* submit()
      const running = yield* claimed(job.id)
      const base = { jobId: job.id, callId: "call", token: running.leaseToken }

      const reply = yield* store.charge({
        items: [
          { ...base, amountCents: 5, settled: false },
          { ...base, amountCents: 3, settled: true },
          { ...base, amountCents: 8, settled: true },
          { ...base, callId: "other", amountCents: 1, settled: true }
        ],
        now: yield* now
      })

      expect(reply.results).toEqual([
        { _tag: "Charged", costCents: 5 },
        { _tag: "Charged", costCents: 3 },
        { _tag: "Charged", costCents: 3 },
        { _tag: "Charged", costCents: 4 }
      ])
      expect((yield* charges(job.id)).map((c) => [c.callId, c.amountCents, c.settled])).toEqual([
        ["call", 3, true],
        ["other", 1, true]
      ])
    })
  )

  it.effect("duplicates in one batch: a request key meets the earlier item's job; a replay applies once", () =>
    Effect.gen(function* () {
      const { store, query, queue, now, item, submit, claimed, settled } = yield* fixture
      const first = yield* item({ requestKey: "dup", input: { a: 1 } })
      const same = yield* item({ requestKey: "dup", input: { a: 1 } })
      const other = yield* item({ requestKey: "dup", input: { a: 2 } })
      const unkeyed = yield* item({ requestKey: null, input: { a: 1 } })
      const at = yield* now

      const submitted = yield* store.submit({ items: [first, same, other, unkeyed], now: at })

      const created = expectTag(submitted.results[0]!, "Created").job
      expect(submitted.results.slice(1)).toEqual([
        { _tag: "Existing", job: created },
        { _tag: "KeyReused", requestKey: "dup", existingJobId: first.id },
        { _tag: "Created", job: expectTag(submitted.results[3]!, "Created").job }
      ])
      expect((yield* query.list({ queue, order: "oldest" })).map((j) => j.id)).toEqual([first.id, unkeyed.id])

      const job = yield* submit({ maxAttempts: 1 })
      const running = yield* claimed(job.id)
      yield* settled(job.id, running.leaseToken, outcome.fail("auth", "401"))
      const replays = yield* store.replay({ items: [{ jobId: job.id }, { jobId: job.id }], now: at })
      expect(replays.results.map((r) => r._tag)).toEqual(["Replayed", "Skipped"])
      expect(replays.results[1]).toEqual({ _tag: "Skipped", jobId: job.id, state: "queued" })
    })
  )

  it.effect("duplicates in one batch: a second cancel of a running job keeps the first request", () =>
    Effect.gen(function* () {
      const { store, now, submit, claimed, get } = yield* fixture
      const job = yield* submit()
      yield* claimed(job.id)
      const at = yield* now

      const reply = yield* store.cancel({ items: [{ jobId: job.id }, { jobId: job.id }], now: at })

      const requested = expectTag(reply.results[0]!, "Cancelled").job
      expect(requested.cancelRequestedAt).toBe(at)
      expect(reply.results[1]).toEqual({ _tag: "Cancelled", job: requested })
      expect(yield* get(job.id)).toEqual(requested)
    })
  )
}

/** Registers the batch tests. @internal */
export const batchTests = (area: Area): void => {
  describe("batches", () => {
    shapeTests(area)
    orderTests(area)
  })
}
