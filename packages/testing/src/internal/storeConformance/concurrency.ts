/**
 * Store conformance, concurrency and shared state: the conditional writes stay atomic when many callers race them.
 * At most one claim of a job wins, racing `claimNext` calls never hand one job to two owners, stale fenced writes
 * lose however they interleave, duplicate charges count once; and two builds of a backend that shares its state
 * (a real database) keep one live lease and the fence across them. Registered only for backends that declare the
 * matching capability.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import { type Reply, Store } from "@slowcall/core/Store"
import { Context, Effect, Layer } from "effect"
import { type Area, expectTag, LEASE, only, outcome } from "./fixture.js"

/** Racing writers on one backend instance. */
const racingTests = ({ it, fixture }: Area): void => {
  it.effect("many concurrent claims of one job: exactly one Claimed, the rest Busy", () =>
    Effect.gen(function* () {
      const { store, now, submit, get, attempts } = yield* fixture
      const job = yield* submit()
      const at = yield* now

      const results = yield* Effect.all(
        Array.from({ length: 16 }, (_, i) =>
          Effect.map(store.claim({ items: [{ jobId: job.id, owner: `worker-${i}`, leaseMs: LEASE }], now: at }), only)
        ),
        { concurrency: "unbounded" }
      )

      const claimed = results.filter((r) => r._tag === "Claimed")
      expect(claimed).toHaveLength(1)
      expect(results.filter((r) => r._tag === "Busy")).toHaveLength(15)
      expect(yield* get(job.id)).toMatchObject({
        attempts: 1,
        leaseToken: 1,
        leaseOwner: claimed[0]!.job.leaseOwner
      })
      expect(yield* attempts(job.id)).toHaveLength(1)
    })
  )

  it.effect("many concurrent takeovers of an expired lease: exactly one Claimed", () =>
    Effect.gen(function* () {
      const { store, now, advance, submit, claimed, get } = yield* fixture
      const job = yield* submit({ maxAttempts: 5 })
      yield* claimed(job.id, "worker-a", 1_000)
      yield* advance(1_001)
      const at = yield* now

      const results = yield* Effect.all(
        Array.from({ length: 16 }, (_, i) =>
          Effect.map(store.claim({ items: [{ jobId: job.id, owner: `worker-${i}`, leaseMs: LEASE }], now: at }), only)
        ),
        { concurrency: "unbounded" }
      )

      expect(results.filter((r) => r._tag === "Claimed")).toHaveLength(1)
      expect(yield* get(job.id)).toMatchObject({ attempts: 2, leaseToken: 2 })
    })
  )

  it.effect("racing claimNext calls hand every job to exactly one owner", () =>
    Effect.gen(function* () {
      const { store, queue, now, submit, get } = yield* fixture
      const jobs = yield* Effect.all(Array.from({ length: 12 }, () => submit()))
      const at = yield* now

      const replies = yield* Effect.all(
        Array.from({ length: 6 }, (_, i) =>
          store.claimNext({ queue, max: 4, owner: `worker-${i}`, leaseMs: LEASE, now: at })
        ),
        { concurrency: "unbounded" }
      )

      const taken = replies.flatMap((reply) => reply.results.map((r) => expectTag(r, "Claimed").job.id))
      expect(new Set(taken).size).toBe(taken.length)
      expect([...taken].sort()).toEqual(jobs.map((j) => j.id).sort())
      for (const job of jobs) expect(yield* get(job.id)).toMatchObject({ state: "running", leaseToken: 1 })
    })
  )

  it.effect("contention: racing claims, stale writes and duplicate charges across many jobs", () =>
    Effect.gen(function* () {
      const { store, now, advance, submit, claimed, settled, get } = yield* fixture
      const jobs = yield* Effect.all(Array.from({ length: 8 }, () => submit({ maxAttempts: 5 })))
      // Token 1 becomes stale at once: each job is claimed and released before the race.
      for (const job of jobs) {
        const first = yield* claimed(job.id, "worker-a")
        yield* settled(job.id, first.leaseToken, outcome.release)
      }
      yield* advance(1)
      const at = yield* now
      const tag = <A extends { readonly _tag: string }>(reply: Reply<A>) => only(reply)._tag

      const results = yield* Effect.forEach(
        jobs,
        (job) =>
          Effect.all(
            [
              ...Array.from({ length: 6 }, (_, w) =>
                Effect.map(
                  store.claim({ items: [{ jobId: job.id, owner: `worker-${w}`, leaseMs: LEASE }], now: at }),
                  tag
                )
              ),
              ...Array.from({ length: 3 }, () =>
                Effect.map(store.heartbeat({ items: [{ jobId: job.id, token: 1, leaseMs: LEASE }], now: at }), tag)
              ),
              ...Array.from({ length: 3 }, () =>
                Effect.map(
                  store.settle({
                    items: [{ jobId: job.id, token: 1, outcome: outcome.complete("stale") }],
                    now: at
                  }),
                  tag
                )
              ),
              ...Array.from({ length: 4 }, () =>
                Effect.map(
                  store.charge({
                    items: [{ jobId: job.id, callId: "dup", token: 1, amountCents: 2, settled: true }],
                    now: at
                  }),
                  tag
                )
              )
            ],
            { concurrency: "unbounded" }
          ),
        { concurrency: "unbounded" }
      )

      for (const [i, tags] of results.entries()) {
        expect(tags.filter((t) => t === "Claimed")).toHaveLength(1)
        expect(tags.filter((t) => t === "LeaseLost")).toHaveLength(6)
        expect(tags.filter((t) => t === "Charged")).toHaveLength(4)
        expect(yield* get(jobs[i]!.id)).toMatchObject({ leaseToken: 2, attempts: 2, costCents: 2 })
      }
    })
  )
}

/** Two instances of the backend over the same state. */
const sharedStateTests = ({ it, fixture, layer }: Area): void => {
  it.effect("two instances of the store: one live lease, and fencing holds across them", () =>
    Effect.gen(function* () {
      const { store, now, submit } = yield* fixture
      const other = Context.get(yield* Effect.orDie(Layer.build(layer)), Store)
      const job = yield* submit()
      const at = yield* now

      const results = yield* Effect.all(
        Array.from({ length: 8 }, (_, i) =>
          Effect.map(
            (i % 2 === 0 ? store : other).claim({
              items: [{ jobId: job.id, owner: `worker-${i}`, leaseMs: 1_000 }],
              now: at
            }),
            only
          )
        ),
        { concurrency: "unbounded" }
      )

      expect(results.filter((r) => r._tag === "Claimed")).toHaveLength(1)
      const takeover = expectTag(
        only(yield* other.claim({ items: [{ jobId: job.id, owner: "worker-x", leaseMs: LEASE }], now: at + 1_001 })),
        "Claimed"
      ).job
      const stale = only(
        yield* store.settle({
          items: [{ jobId: job.id, token: 1, outcome: outcome.complete(null) }],
          now: at + 1_001
        })
      )
      expect(stale).toMatchObject({ _tag: "LeaseLost", currentToken: takeover.leaseToken, state: "running" })
    }).pipe(Effect.scoped)
  )
}

/** Registers the concurrency and shared-state tests the capabilities allow. @internal */
export const concurrencyTests = (area: Area): void => {
  // What is not run is named at registration, before the describe block below collects its tests.
  if (!area.capabilities.concurrent) {
    area.notRun("racing claims, claimNext and fenced writes", "capabilities.concurrent is false")
  }
  if (!area.capabilities.sharedState)
    area.notRun("two instances sharing one backend", "capabilities.sharedState is false")
  if (!area.capabilities.concurrent && !area.capabilities.sharedState) return
  describe("concurrency and shared state", () => {
    if (area.capabilities.concurrent) racingTests(area)
    if (area.capabilities.sharedState) sharedStateTests(area)
  })
}
