import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Fiber, TestClock } from "effect"
import { LeaseLost, StoreError } from "../src/Errors.js"
import { makeHelpers } from "../src/internal/worker/fibers.js"
import { makeOutbox } from "../src/internal/worker/outbox.js"
import { retryStore } from "../src/internal/worker/store.js"
import { makeWorkerStore } from "../src/internal/worker/ticks.js"
import type { Job, JobId } from "../src/Job.js"
import type { Store } from "../src/Store.js"
import * as StoreModule from "../src/Store.js"
import { submitOne } from "./fixtures.js"

/** An effect that fails with `errors` in turn, then succeeds; `tries` records the TestClock time of each try. */
const scripted = (errors: ReadonlyArray<StoreError | LeaseLost>) => {
  const tries: Array<number> = []
  const effect = Effect.flatMap(
    Effect.clockWith((clock) => clock.currentTimeMillis),
    (now) => {
      tries.push(now)
      const error = errors[tries.length - 1]
      return error === undefined ? Effect.succeed("ok" as const) : Effect.fail(error)
    }
  )
  return { effect, tries }
}

const timeout = new StoreError({ reason: "Timeout", operation: "claim", detail: "slow" })

describe("retryStore", () => {
  it.effect("a first try that succeeds runs once and waits for nothing", () =>
    Effect.gen(function* () {
      const { effect, tries } = scripted([])
      expect(yield* retryStore(effect)).toBe("ok")
      expect(tries).toEqual([0])
    })
  )

  it.effect("retries a retryable StoreError after 50, 100 and 200 ms, then succeeds", () =>
    Effect.gen(function* () {
      const { effect, tries } = scripted([timeout, timeout, timeout])
      const fiber = yield* Effect.fork(retryStore(effect))
      yield* TestClock.adjust(1_000)
      expect(yield* Fiber.join(fiber)).toBe("ok")
      expect(tries).toEqual([0, 50, 150, 350])
    })
  )

  it.effect("gives up after `times` retries with the last error", () =>
    Effect.gen(function* () {
      const last = new StoreError({ reason: "Connection", operation: "claim", detail: "down" })
      const { effect, tries } = scripted([timeout, timeout, last])
      const fiber = yield* Effect.fork(Effect.flip(retryStore(effect, { times: 2, baseMs: 10 })))
      yield* TestClock.adjust(1_000)
      expect(yield* Fiber.join(fiber)).toBe(last)
      expect(tries).toEqual([0, 10, 30])
    })
  )

  it.effect("never retries a non-retryable StoreError or another error", () =>
    Effect.gen(function* () {
      const refused = new StoreError({ reason: "Constraint", operation: "complete", detail: "too large" })
      expect(refused.isRetryable).toBe(false)
      const first = scripted([refused])
      expect(yield* Effect.flip(retryStore(first.effect))).toBe(refused)
      expect(first.tries).toEqual([0])
      const lost = new LeaseLost({
        jobId: "019b76da-b098-7695-9262-309b5765a9f1" as JobId,
        token: 1,
        currentToken: 2,
        state: "running"
      })
      const second = scripted([lost])
      expect(yield* Effect.flip(retryStore(second.effect))).toBe(lost)
      expect(second.tries).toEqual([0])
    })
  )
})

/**
 * A store whose settle, charge, claimNext and cycle calls (the worker's store writes) are recorded (verb and items per
 * call; a claim counts as one item outside a cycle) and held while the gate is closed. `cycle` is offered only when
 * the store under it has one.
 */
const gatedStore = (store: Store["Type"]) => {
  const calls: Array<{ readonly verb: string; readonly items: number }> = []
  const gate = { open: true, waiters: [] as Array<() => void> }
  const pass = Effect.async<void>((resume) => {
    if (gate.open) return resume(Effect.void)
    gate.waiters.push(() => resume(Effect.void))
  })
  const gated = <A, E>(verb: string, items: number, call: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.zipRight(
      Effect.sync(() => calls.push({ verb, items })),
      Effect.zipRight(pass, call)
    )
  const cycle = store.cycle
  const view: Store["Type"] = {
    ...store,
    settle: (options) => gated("settle", options.items.length, store.settle(options)),
    charge: (options) => gated("charge", options.items.length, store.charge(options)),
    claimNext: (options) => gated("claimNext", 1, store.claimNext(options)),
    cycle:
      cycle === undefined
        ? undefined
        : (options) => gated("cycle", (options.settle?.length ?? 0) + (options.charge?.length ?? 0), cycle(options))
  }
  const release = Effect.sync(() => {
    gate.open = true
    for (const w of gate.waiters.splice(0)) w()
  })
  const hold = Effect.sync(() => {
    gate.open = false
  })
  return { calls, view, hold, release }
}

/**
 * Holds both lanes of `writes`: the gate closes and two charges of `jobId` go out, one per lane, and wait at it.
 * Returns their fiber; writes handed in after this queue for the next tick.
 */
const busyLanes = (
  gated: ReturnType<typeof gatedStore>,
  writes: ReturnType<typeof makeWorkerStore>,
  jobId: JobId,
  token: number
) =>
  Effect.gen(function* () {
    yield* gated.hold
    const busy = yield* Effect.fork(
      Effect.all(
        [
          writes.charge({ jobId, callId: "x", token, amountCents: 1, settled: true }),
          writes.charge({ jobId, callId: "y", token, amountCents: 1, settled: true })
        ],
        { concurrency: "unbounded" }
      )
    )
    while (gated.calls.length < 2) yield* Effect.yieldNow()
    return busy
  })

/** `n` jobs submitted to `store` and claimed, each under token 1. */
const claimedJobs = (store: Store["Type"], n: number) =>
  Effect.forEach(
    Array.from({ length: n }, (_, i) => i),
    (i) =>
      Effect.tap(submitOne(store, { requestKey: `k${i}` }), (job) =>
        store.claim({ items: [{ jobId: job.id, owner: "w", leaseMs: 10_000 }] })
      )
  )

/** The memory store without its `cycle` verb (a store that does not offer it). */
const withoutCycle = (store: Store["Type"]): Store["Type"] => ({ ...store, cycle: undefined })

/** The worker's store writes over `store`, their ticks run by helpers stopped with the test's scope. */
const writesOver = (store: Store["Type"], maxBatch: number) =>
  Effect.gen(function* () {
    const helpers = makeHelpers(yield* Effect.runtime<never>())
    yield* Effect.addFinalizer(() => helpers.stop)
    return makeWorkerStore(store, maxBatch, helpers.run)
  })

describe("the worker's store writes, sent in ticks", () => {
  const LEASE = 10_000

  it.scoped("a settle returns the job and the store time, and fails a fenced miss with LeaseLost", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store)
      yield* store.claim({ items: [{ jobId: job.id, owner: "w", leaseMs: LEASE }] })
      yield* TestClock.setTime(900)
      const writes = yield* writesOver(store, 100)

      const done = yield* writes.settle({ jobId: job.id, token: 1, outcome: { _tag: "Complete", result: 1 } })
      const again = yield* Effect.flip(
        writes.settle({ jobId: job.id, token: 1, outcome: { _tag: "Complete", result: 2 } })
      )

      expect(done).toMatchObject({ now: 900, job: { state: "succeeded", result: 1 } })
      expect(again).toBeInstanceOf(LeaseLost)
      expect(again).toMatchObject({ jobId: job.id, token: 1, currentToken: 1, state: "succeeded" })
    })
  )

  it.scoped("a settle whose caller learned its lease is lost is not sent and fails with LeaseLost", () =>
    Effect.gen(function* () {
      const { store, peek } = yield* StoreModule.makeMemory
      const gated = gatedStore(store)
      const job = yield* submitOne(store)
      yield* store.claim({ items: [{ jobId: job.id, owner: "w", leaseMs: LEASE }] })
      const writes = yield* writesOver(gated.view, 100)

      const lost = yield* Effect.flip(
        writes.settle({ jobId: job.id, token: 1, outcome: { _tag: "Complete", result: 1 } }, () => true)
      )

      expect(lost).toBeInstanceOf(LeaseLost)
      expect(gated.calls).toEqual([])
      expect(peek(job.id)?.state).toBe("running")
    })
  )

  it.scoped("a charge returns the spend after it and the reply's store time", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store)
      yield* TestClock.setTime(700)
      const writes = yield* writesOver(store, 100)

      const reserved = yield* writes.charge({ jobId: job.id, callId: "c", token: 0, amountCents: 5, settled: false })
      const settled = yield* writes.charge({ jobId: job.id, callId: "c", token: 0, amountCents: 3, settled: true })

      expect(reserved).toEqual({ costCents: 5, now: 700 })
      expect(settled).toEqual({ costCents: 3, now: 700 })
    })
  )

  it.scoped("a charge for a job the store does not know is a defect of the caller", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const writes = yield* writesOver(store, 100)
      const jobId = "019b76da-b098-7695-9262-309b5765a9f1" as JobId

      const exit = yield* Effect.exit(writes.charge({ jobId, callId: "c", token: 1, amountCents: 1, settled: true }))

      expect(exit._tag === "Failure" && Cause.isDie(exit.cause)).toBe(true)
    })
  )

  it.scoped("two ticks go out at once; writes handed in meanwhile go out together in the next, each answered", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const gated = gatedStore(store)
      const jobs: Array<Job> = []
      for (let i = 0; i < 6; i++) jobs.push(yield* submitOne(store, { requestKey: `k${i}` }))
      const writes = yield* writesOver(gated.view, 100)
      const charge = (i: number) =>
        writes.charge({ jobId: jobs[i]!.id, callId: `c${i}`, token: 0, amountCents: i + 1, settled: true })

      yield* gated.hold
      const first = yield* Effect.fork(charge(0))
      while (gated.calls.length < 1) yield* Effect.yieldNow()
      const second = yield* Effect.fork(charge(1))
      while (gated.calls.length < 2) yield* Effect.yieldNow()
      const rest = yield* Effect.fork(Effect.forEach([2, 3, 4, 5], charge, { concurrency: "unbounded" }))
      while (writes.queued() < 4) yield* Effect.yieldNow()
      // Both lanes are busy: nothing more goes out until one is free.
      expect(gated.calls.length).toBe(2)
      yield* gated.release
      const answers = [yield* Fiber.join(first), yield* Fiber.join(second), ...(yield* Fiber.join(rest))]

      expect(gated.calls).toEqual([
        { verb: "charge", items: 1 },
        { verb: "charge", items: 1 },
        { verb: "charge", items: 4 }
      ])
      expect(answers.map((a) => a.costCents)).toEqual([1, 2, 3, 4, 5, 6])
    })
  )

  it.scoped("a tick never carries more than maxBatch items", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const gated = gatedStore(store)
      const job = yield* submitOne(store)
      const writes = yield* writesOver(gated.view, 2)

      yield* gated.hold
      const all = yield* Effect.fork(
        Effect.forEach(
          [0, 1, 2, 3, 4, 5, 6],
          (i) => writes.charge({ jobId: job.id, callId: `c${i}`, token: 0, amountCents: 1, settled: true }),
          { concurrency: "unbounded" }
        )
      )
      while (gated.calls.length < 2 || writes.queued() < 5) yield* Effect.yieldNow()
      yield* gated.release
      yield* Fiber.join(all)

      expect(gated.calls.map((c) => c.items).reduce((a, b) => a + b, 0)).toBe(7)
      expect(Math.max(...gated.calls.map((c) => c.items))).toBe(2)
    })
  )

  it.scoped("writes of several verbs in one tick go out as one cycle, at one store time", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const gated = gatedStore(store)
      const jobs = yield* claimedJobs(store, 4)
      const writes = yield* writesOver(gated.view, 100)

      const busy = yield* busyLanes(gated, writes, jobs[0]!.id, 1)
      yield* TestClock.setTime(500)
      const tick = yield* Effect.fork(
        Effect.all(
          [
            writes.settle({ jobId: jobs[1]!.id, token: 1, outcome: { _tag: "Complete", result: "ok" } }),
            writes.settle({ jobId: jobs[2]!.id, token: 1, outcome: { _tag: "Complete", result: "ok" } }),
            writes.charge({ jobId: jobs[3]!.id, callId: "z", token: 1, amountCents: 7, settled: true })
          ],
          { concurrency: "unbounded" }
        )
      )
      while (writes.queued() < 3) yield* Effect.yieldNow()
      yield* gated.release
      yield* Fiber.join(busy)
      const [settled, settledToo, charged] = yield* Fiber.join(tick)

      expect(gated.calls.slice(2)).toEqual([{ verb: "cycle", items: 3 }])
      expect(settled).toMatchObject({ now: 500, job: { state: "succeeded" } })
      expect(settledToo).toMatchObject({ now: 500, job: { state: "succeeded" } })
      expect(charged).toEqual({ costCents: 7, now: 500 })
    })
  )

  it.scoped(
    "a claim queued behind settlements goes out in their cycle, after them: it can take a job they released",
    () =>
      Effect.gen(function* () {
        const { store } = yield* StoreModule.makeMemory
        const gated = gatedStore(store)
        const held = yield* submitOne(store, { requestKey: "held" })
        const other = yield* submitOne(store, { requestKey: "other" })
        yield* store.claim({ items: [{ jobId: held.id, owner: "w", leaseMs: LEASE }] })
        yield* store.claim({ items: [{ jobId: other.id, owner: "w", leaseMs: LEASE }] })
        const writes = yield* writesOver(gated.view, 100)

        const busy = yield* busyLanes(gated, writes, other.id, 1)
        const tick = yield* Effect.fork(
          Effect.all(
            [
              writes.settle({ jobId: held.id, token: 1, outcome: { _tag: "Release" } }),
              writes.claimNext({ queue: held.queue, max: 5, owner: "w2", leaseMs: LEASE })
            ],
            { concurrency: "unbounded" }
          )
        )
        while (writes.queued() < 2) yield* Effect.yieldNow()
        yield* gated.release
        yield* Fiber.join(busy)
        const [released, claimed] = yield* Fiber.join(tick)

        expect(gated.calls.slice(2)).toEqual([{ verb: "cycle", items: 1 }])
        expect(released.job.state).toBe("queued")
        expect(claimed.results.map((r) => (r._tag === "Claimed" ? r.job.id : r._tag))).toEqual([held.id])
        expect(claimed.now).toBe(released.now)
      })
  )

  it.scoped("without a cycle verb, a tick calls each verb with writes, all at once", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const gated = gatedStore(withoutCycle(store))
      const jobs = yield* claimedJobs(store, 3)
      const writes = yield* writesOver(gated.view, 100)

      const busy = yield* busyLanes(gated, writes, jobs[0]!.id, 1)
      const tick = yield* Effect.fork(
        Effect.all(
          [
            writes.settle({ jobId: jobs[1]!.id, token: 1, outcome: { _tag: "Complete", result: "ok" } }),
            writes.charge({ jobId: jobs[2]!.id, callId: "z", token: 1, amountCents: 2, settled: true })
          ],
          { concurrency: "unbounded" }
        )
      )
      while (writes.queued() < 2) yield* Effect.yieldNow()
      yield* gated.release
      yield* Fiber.join(busy)
      yield* Fiber.join(tick)

      expect(
        gated.calls
          .slice(2)
          .map((c) => c.verb)
          .sort()
      ).toEqual(["charge", "settle"])
    })
  )

  it.scoped("a cycle the store refuses for good goes out again as the verbs: only the refused write fails", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const gated = gatedStore(store)
      const jobs = yield* claimedJobs(store, 2)
      const writes = yield* writesOver(gated.view, 100)

      const busy = yield* busyLanes(gated, writes, jobs[0]!.id, 1)
      const tick = yield* Effect.fork(
        Effect.all(
          [
            Effect.either(writes.settle({ jobId: jobs[1]!.id, token: 1, outcome: { _tag: "Complete", result: "ok" } })),
            Effect.either(
              writes.charge({ jobId: jobs[1]!.id, callId: "bad", token: 1, amountCents: -1, settled: true })
            )
          ],
          { concurrency: "unbounded" }
        )
      )
      while (writes.queued() < 2) yield* Effect.yieldNow()
      yield* gated.release
      yield* Fiber.join(busy)
      const [settled, charged] = yield* Fiber.join(tick)

      expect(gated.calls[2]).toEqual({ verb: "cycle", items: 2 })
      expect(
        gated.calls
          .slice(3)
          .map((c) => c.verb)
          .sort()
      ).toEqual(["charge", "settle"])
      expect(settled._tag).toBe("Right")
      expect(charged).toMatchObject({ _tag: "Left", left: { _tag: "StoreError", reason: "Constraint" } })
    })
  )

  it.scoped("a caller interrupted while its write waits for a lane takes it back: it is never sent", () =>
    Effect.gen(function* () {
      const { store, peek } = yield* StoreModule.makeMemory
      const gated = gatedStore(store)
      const job = yield* submitOne(store)
      const writes = yield* writesOver(gated.view, 100)
      const charge = (callId: string) =>
        writes.charge({ jobId: job.id, callId, token: 0, amountCents: 1, settled: true })

      yield* gated.hold
      const busy = yield* Effect.fork(Effect.all([charge("a"), charge("b")], { concurrency: "unbounded" }))
      while (gated.calls.length < 2) yield* Effect.yieldNow()
      const waiting = yield* Effect.fork(charge("c"))
      while (writes.queued() < 1) yield* Effect.yieldNow()
      yield* Fiber.interrupt(waiting)
      expect(writes.queued()).toBe(0)
      yield* gated.release
      yield* Fiber.join(busy)

      expect(gated.calls).toEqual([
        { verb: "charge", items: 1 },
        { verb: "charge", items: 1 }
      ])
      expect(peek(job.id)?.costCents).toBe(2)
    })
  )

  it.scoped("a tick whose fiber the worker's stop interrupts before it starts still answers its writes", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const gated = gatedStore(store)
      const job = yield* submitOne(store)
      const helpers = makeHelpers(yield* Effect.runtime<never>())
      const writes = makeWorkerStore(gated.view, 100, helpers.run)
      const charge = (callId: string) =>
        writes.charge({ jobId: job.id, callId, token: 0, amountCents: 1, settled: true })

      yield* gated.hold
      const busy = yield* Effect.fork(Effect.all([charge("a"), charge("b")], { concurrency: "unbounded" }))
      while (gated.calls.length < 2) yield* Effect.yieldNow()
      const waiting = yield* Effect.fork(charge("c"))
      while (writes.queued() < 1) yield* Effect.yieldNow()
      yield* helpers.stop
      yield* gated.release
      yield* Fiber.join(busy)
      const exit = yield* Fiber.await(waiting)

      expect(exit._tag === "Failure" && Cause.isInterruptedOnly(exit.cause)).toBe(true)
      expect(gated.calls.length).toBe(2)
    })
  )

  it.scoped("after stopClaims no claim is sent: a queued one and a later one end interrupted", () =>
    Effect.gen(function* () {
      const { store, peek } = yield* StoreModule.makeMemory
      const gated = gatedStore(store)
      const job = yield* submitOne(store)
      const writes = yield* writesOver(gated.view, 100)
      const claim = writes.claimNext({ queue: job.queue, max: 1, owner: "w", leaseMs: LEASE })

      yield* gated.hold
      const busy = yield* Effect.fork(
        Effect.all(
          [
            writes.charge({ jobId: job.id, callId: "a", token: 0, amountCents: 1, settled: true }),
            writes.charge({ jobId: job.id, callId: "b", token: 0, amountCents: 1, settled: true })
          ],
          { concurrency: "unbounded" }
        )
      )
      while (gated.calls.length < 2) yield* Effect.yieldNow()
      const queuedClaim = yield* Effect.fork(claim)
      while (writes.queued() < 1) yield* Effect.yieldNow()
      writes.stopClaims()
      const queuedExit = yield* Fiber.await(queuedClaim)
      yield* gated.release
      yield* Fiber.join(busy)
      const laterExit = yield* Effect.exit(claim)

      expect(queuedExit._tag === "Failure" && Cause.isInterruptedOnly(queuedExit.cause)).toBe(true)
      expect(laterExit._tag === "Failure" && Cause.isInterruptedOnly(laterExit.cause)).toBe(true)
      expect(gated.calls.map((c) => c.verb)).toEqual(["charge", "charge"])
      expect(peek(job.id)?.state).toBe("queued")
    })
  )

  it.scoped("a failed call fails every write of it, and a later tick is made for new writes", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const job = yield* submitOne(store)
      let failing = true
      const flaky: Store["Type"] = {
        ...store,
        charge: (options) =>
          failing
            ? Effect.fail(new StoreError({ reason: "Connection", operation: "charge", detail: "down" }))
            : store.charge(options)
      }
      const writes = yield* writesOver(flaky, 100)

      const failed = yield* Effect.flip(
        writes.charge({ jobId: job.id, callId: "c", token: 0, amountCents: 1, settled: true })
      )
      failing = false
      const ok = yield* writes.charge({ jobId: job.id, callId: "c", token: 0, amountCents: 1, settled: true })

      expect(failed).toMatchObject({ _tag: "StoreError", reason: "Connection" })
      expect(ok.costCents).toBe(1)
    })
  )

  it.scoped("a reply without a result for the write is a StoreError, not a silent success", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const empty: Store["Type"] = {
        ...store,
        settle: () => Effect.succeed({ now: 0, results: [] })
      }
      const writes = yield* writesOver(empty, 100)
      const jobId = "019b76da-b098-7695-9262-309b5765a9f1" as JobId

      const settle = yield* Effect.flip(writes.settle({ jobId, token: 1, outcome: { _tag: "Release" } }))

      expect(settle).toMatchObject({ _tag: "StoreError", reason: "Unknown", operation: "settle" })
    })
  )
})

describe("outboxes started on need", () => {
  it.scoped(
    "an outbox is idle only with nothing queued and nothing in flight; its flusher starts on the first overlap",
    () =>
      Effect.gen(function* () {
        const helpers = makeHelpers(yield* Effect.runtime<never>())
        yield* Effect.addFinalizer(() => helpers.stop)
        const sent: Array<ReadonlyArray<number>> = []
        const gate = yield* Deferred.make<void>()
        const outbox = makeOutbox<number, never>({
          send: (items) =>
            Effect.zipRight(
              Effect.sync(() => sent.push(items)),
              sent.length === 0 ? Deferred.await(gate) : Effect.void
            ),
          maxBatch: 10,
          onFailure: () => Effect.void,
          start: helpers.start
        })
        expect(outbox.idle()).toBe(true)

        const first = yield* Effect.fork(outbox.offer([1]))
        while (sent.length === 0) yield* Effect.yieldNow()
        expect(outbox.idle()).toBe(false)
        yield* outbox.offer([2, 3])
        // Queued behind the call in flight; the flusher is needed only when that call ends.
        expect(helpers.started()).toBe(0)
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(first)
        yield* outbox.drained
        expect(helpers.started()).toBe(1)

        expect(sent).toEqual([[1], [2, 3]])
        expect(outbox.idle()).toBe(true)
      })
  )
})
