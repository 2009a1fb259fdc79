import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit, Schema, Scope, TestClock } from "effect"
import * as Handler from "../src/Handler.js"
import * as Lease from "../src/Lease.js"
import type { HeartbeatItem, Store } from "../src/Store.js"
import * as Worker from "../src/Worker.js"
import { claimOne, harness, settleOne } from "./fixtures.js"

// A call whose worst case is a minute: timeoutMs 60 s, so the attempt's lease (`Lease.leaseFor`) is 66 s.
const WORST_CASE_MS = Lease.leaseFor({ timeoutMs: 60_000 })

const slowCall = (state: { calls: number; completed: number }, ms: number) =>
  Handler.make({
    type: "t",
    version: 1,
    input: Schema.Unknown,
    result: Schema.String,
    estimateCents: 1,
    attempt: { timeoutMs: 60_000 },
    run: (_input, ctx) =>
      ctx.call({
        estimateCents: 1,
        run: Effect.sync(() => ++state.calls).pipe(
          Effect.zipRight(Effect.sleep(ms)),
          Effect.tap(() => Effect.sync(() => state.completed++)),
          Effect.as("done")
        ),
        cost: () => 1
      })
  })

/** A Store view whose calls stop reaching the store once `dead.value` is set: a killed process, as the store sees it. */
const killable = (store: Store["Type"], dead: { value: boolean }): Store["Type"] => {
  const gate =
    <A extends ReadonlyArray<unknown>, B, E>(f: (...args: A) => Effect.Effect<B, E>) =>
    (...args: A): Effect.Effect<B, E> =>
      Effect.suspend(() => (dead.value ? Effect.never : f(...args)))
  return {
    ...store,
    claim: gate(store.claim),
    claimNext: gate(store.claimNext),
    heartbeat: gate(store.heartbeat),
    charge: gate(store.charge),
    settle: gate(store.settle)
  }
}

describe("Worker: keep-alive leases", () => {
  it("the default keep-alive meets the 10 s recovery target with the default receive wait", () => {
    // The lease ends at most one keep-alive after the last renewal reached the store, and a live worker's next claim
    // round comes within its receive wait (1 s by default).
    expect(Lease.defaultKeepAliveMs + 1_000).toBeLessThanOrEqual(10_000)
    expect(Lease.keptLeaseMs(WORST_CASE_MS, Lease.defaultKeepAliveMs)).toBe(6_000)
    // A call shorter than the keep-alive holds no longer lease than its own worst case.
    expect(Lease.keptLeaseMs(Lease.leaseFor({ timeoutMs: 1_000 }), Lease.defaultKeepAliveMs)).toBe(2_000)
  })

  it.scoped("a claim and every renewal ask for the keep-alive, not the attempt's worst case", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const renewals: Array<HeartbeatItem> = []
      const counting: Store["Type"] = {
        ...t.store,
        heartbeat: (options) => {
          renewals.push(...options.items)
          return t.store.heartbeat(options)
        }
      }
      const state = { calls: 0, completed: 0 }
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "w", handlers: [slowCall(state, 20_000)] }, counting)
      yield* t.reaches(id, ["running"])
      const claimed = yield* t.job(id)
      const attempts = yield* t.query.attempts({ jobId: id })
      expect(claimed.leaseUntil! - attempts[0]!.startedAt).toBe(Lease.defaultKeepAliveMs)

      yield* t.reaches(id, ["succeeded"])
      expect(state.calls).toBe(1)
      expect(renewals.length).toBeGreaterThanOrEqual(9)
      expect(new Set(renewals.map((r) => r.leaseMs))).toEqual(new Set([Lease.defaultKeepAliveMs]))
    })
  )

  it.scoped("a killed worker's job is taken over after about the keep-alive, and its token never commits", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const state = { calls: 0, completed: 0 }
      const dead = { value: false }
      const id = yield* t.submit()
      // A's scope is never closed: the process dies holding the job, nothing it sends reaches the store any more.
      const scopeA = yield* Scope.make()
      yield* t
        .start(
          { queue: "q", id: "A", keepAliveMs: 2_000, handlers: [slowCall(state, 30_000)] },
          killable(t.store, dead)
        )
        .pipe(Scope.extend(scopeA))
      yield* t.advanceUntil(Effect.sync(() => state.calls === 1))
      yield* TestClock.adjust(5_000)
      const lastRenewal = yield* t.job(id)
      dead.value = true
      const killedAt = yield* Clock.currentTimeMillis

      yield* t.start({ queue: "q", id: "B", keepAliveMs: 2_000, handlers: [slowCall(state, 100)] })
      const taken = yield* t.reaches(id, ["succeeded"])

      const attempts = yield* t.query.attempts({ jobId: id })
      expect(attempts.map((a) => [a.worker.split("/")[0], a.outcome])).toEqual([
        ["A", "expired"],
        ["B", "succeeded"]
      ])
      // B's claim came once A's 2 s keep-alive had run out (plus the delivery's wait), not after A's 66 s worst case.
      const takenAt = attempts[1]!.startedAt
      expect(takenAt).toBeGreaterThan(lastRenewal.leaseUntil!)
      expect(takenAt - killedAt).toBeLessThan(5_000)
      expect(taken.leaseToken).toBe(2)
      // The dead process's token can never commit, whatever it later sends.
      const late = yield* settleOne(t.inner, id, 1, { _tag: "Complete", result: "from A" })
      expect(late._tag).toBe("LeaseLost")
      expect((yield* t.job(id)).result).toBe("done")
    })
  )

  it.scoped("a lease claimed straight through the Store and never renewed is taken over once it ends", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const state = { calls: 0, completed: 0 }
      const id = yield* t.submit()
      const first = yield* claimOne(t.inner, id, "gone", 1_500)
      expect(first._tag).toBe("Claimed")
      const claimedAt = yield* t.now

      yield* t.start({ queue: "q", id: "B", handlers: [slowCall(state, 100)] })
      yield* t.reaches(id, ["succeeded"])

      const attempts = yield* t.query.attempts({ jobId: id })
      expect(attempts.map((a) => a.outcome)).toEqual(["expired", "succeeded"])
      expect(attempts[1]!.startedAt - claimedAt).toBeGreaterThan(1_500)
      expect(attempts[1]!.startedAt - claimedAt).toBeLessThan(3_000)
      expect((yield* settleOne(t.inner, id, 1, { _tag: "Complete", result: "stale" }))._tag).toBe("LeaseLost")
    })
  )

  it.scoped("a call many keep-alives long keeps its job by renewals alone", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const state = { calls: 0, completed: 0 }
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "A", keepAliveMs: 1_000, handlers: [slowCall(state, 40_000)] })
      yield* t.start({ queue: "q", id: "B", keepAliveMs: 1_000, handlers: [slowCall(state, 40_000)] })
      yield* t.advanceUntil(
        Effect.map(t.stateOf(id), (s) => s === "succeeded"),
        120_000,
        250
      )
      expect((yield* t.job(id)).attempts).toBe(1)
      expect(state).toEqual({ calls: 1, completed: 1 })
    })
  )

  it.scoped("a keepAliveMs that cannot work is refused with a typed error; nothing starts", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const state = { calls: 0, completed: 0 }
      const id = yield* t.submit()
      for (const bad of [0, 2, -1, 2.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        const exit = yield* Effect.exit(
          t.start({ queue: "q", id: "w", keepAliveMs: bad, handlers: [slowCall(state, 10)] })
        )
        expect(exit).toStrictEqual(
          Exit.fail(
            new Worker.InvalidWorkerOptions({
              option: "keepAliveMs",
              reason: `keepAliveMs must be a whole number of milliseconds, at least 3; got ${String(bad)}`
            })
          )
        )
      }
      yield* TestClock.adjust(5_000)
      expect((yield* t.job(id)).state).toBe("queued")
      expect(state.calls).toBe(0)
    })
  )
})
