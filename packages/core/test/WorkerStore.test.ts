import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Fiber, TestClock } from "effect"
import { LeaseLost, StoreError } from "../src/Errors.js"
import { makeOutbox } from "../src/internal/workerBatch.js"
import { makeHelpers } from "../src/internal/workerFibers.js"
import { makeWorkerStore, retryStore } from "../src/internal/workerStore.js"
import type { JobId } from "../src/Job.js"
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

/** A store whose settle and charge calls are counted (items per call) and held until `release` resolves. */
const gatedStore = (store: Store["Type"]) => {
  const calls: Array<{ readonly verb: string; readonly items: number }> = []
  const gate = { open: true, waiters: [] as Array<() => void> }
  const pass = Effect.async<void>((resume) => {
    if (gate.open) return resume(Effect.void)
    gate.waiters.push(() => resume(Effect.void))
  })
  const view: Store["Type"] = {
    ...store,
    settle: (options) =>
      Effect.zipRight(
        Effect.sync(() => calls.push({ verb: "settle", items: options.items.length })),
        Effect.zipRight(pass, store.settle(options))
      ),
    charge: (options) =>
      Effect.zipRight(
        Effect.sync(() => calls.push({ verb: "charge", items: options.items.length })),
        Effect.zipRight(pass, store.charge(options))
      )
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
 * How the flushers run: forked for the whole test, or started on need by a worker's helpers (as `Worker.make` runs
 * them). Every test below holds for both.
 */
type Flushing = "flushers forked" | "flushers started on need"

/** The worker's group-committed store over `store`, its flushers running in the test's scope. */
const workerStoreWith =
  (flushing: Flushing) =>
  (store: Store["Type"], maxBatch = 100) =>
    Effect.gen(function* () {
      if (flushing === "flushers forked") {
        const writes = makeWorkerStore(store, maxBatch)
        for (const flusher of writes.flushers) yield* Effect.forkScoped(flusher)
        return writes
      }
      const helpers = makeHelpers(yield* Effect.runtime<never>())
      yield* Effect.addFinalizer(() => helpers.stop)
      return makeWorkerStore(store, maxBatch, helpers.start)
    })

describe.each<Flushing>(["flushers forked", "flushers started on need"])(
  "the worker's group-committed store calls (%s)",
  (flushing) => {
    const workerStore = workerStoreWith(flushing)
    const LEASE = 10_000

    it.scoped("a settle returns the job and the store time, and fails a fenced miss with LeaseLost", () =>
      Effect.gen(function* () {
        const { store } = yield* StoreModule.makeMemory
        const job = yield* submitOne(store)
        yield* store.claim({ items: [{ jobId: job.id, owner: "w", leaseMs: LEASE }] })
        yield* TestClock.setTime(900)
        const writes = yield* workerStore(store)

        const done = yield* writes.settle({ jobId: job.id, token: 1, outcome: { _tag: "Complete", result: 1 } })
        const again = yield* Effect.flip(
          writes.settle({ jobId: job.id, token: 1, outcome: { _tag: "Complete", result: 2 } })
        )

        expect(done).toMatchObject({ now: 900, job: { state: "succeeded", result: 1 } })
        expect(again).toBeInstanceOf(LeaseLost)
        expect(again).toMatchObject({ jobId: job.id, token: 1, currentToken: 1, state: "succeeded" })
      })
    )

    it.scoped("a charge returns the spend after it and the reply's store time", () =>
      Effect.gen(function* () {
        const { store } = yield* StoreModule.makeMemory
        const job = yield* submitOne(store)
        yield* TestClock.setTime(700)
        const writes = yield* workerStore(store)

        const reserved = yield* writes.charge({ jobId: job.id, callId: "c", token: 0, amountCents: 5, settled: false })
        const settled = yield* writes.charge({ jobId: job.id, callId: "c", token: 0, amountCents: 3, settled: true })

        expect(reserved).toEqual({ costCents: 5, now: 700 })
        expect(settled).toEqual({ costCents: 3, now: 700 })
      })
    )

    it.scoped("a charge for a job the store does not know is a defect of the caller", () =>
      Effect.gen(function* () {
        const { store } = yield* StoreModule.makeMemory
        const writes = yield* workerStore(store)
        const jobId = "019b76da-b098-7695-9262-309b5765a9f1" as JobId

        const exit = yield* Effect.exit(writes.charge({ jobId, callId: "c", token: 1, amountCents: 1, settled: true }))

        expect(exit._tag === "Failure" && Cause.isDie(exit.cause)).toBe(true)
      })
    )

    it.scoped("items handed in while a call is in flight go out together in the next call, each with its answer", () =>
      Effect.gen(function* () {
        const { store } = yield* StoreModule.makeMemory
        const gated = gatedStore(store)
        const jobs = []
        for (let i = 0; i < 5; i++) jobs.push(yield* submitOne(store, { requestKey: `k${i}` }))
        const writes = yield* workerStore(gated.view)

        yield* gated.hold
        const first = yield* Effect.fork(
          writes.charge({ jobId: jobs[0]!.id, callId: "a", token: 0, amountCents: 1, settled: true })
        )
        while (gated.calls.length === 0) yield* Effect.yieldNow()
        const rest = yield* Effect.fork(
          Effect.forEach(
            jobs.slice(1),
            (job, i) => writes.charge({ jobId: job.id, callId: `b${i}`, token: 0, amountCents: i + 2, settled: true }),
            { concurrency: "unbounded" }
          )
        )
        while (writes.queued() < 4) yield* Effect.yieldNow()
        yield* gated.release
        const answers = [yield* Fiber.join(first), ...(yield* Fiber.join(rest))]

        expect(gated.calls).toEqual([
          { verb: "charge", items: 1 },
          { verb: "charge", items: 4 }
        ])
        expect(answers.map((a) => a.costCents)).toEqual([1, 2, 3, 4, 5])
      })
    )

    it.scoped("a batch never carries more than maxBatch items", () =>
      Effect.gen(function* () {
        const { store } = yield* StoreModule.makeMemory
        const gated = gatedStore(store)
        const job = yield* submitOne(store)
        const writes = yield* workerStore(gated.view, 2)

        yield* gated.hold
        const all = yield* Effect.fork(
          Effect.forEach(
            [0, 1, 2, 3, 4],
            (i) => writes.charge({ jobId: job.id, callId: `c${i}`, token: 0, amountCents: 1, settled: true }),
            { concurrency: "unbounded" }
          )
        )
        // Until every caller has handed its item in: the first is in flight (its call waits at the gate), four queue.
        while (gated.calls.length === 0 || writes.queued() < 4) yield* Effect.yieldNow()
        yield* gated.release
        yield* Fiber.join(all)

        expect(gated.calls.map((c) => c.items)).toEqual([1, 2, 2])
      })
    )

    it.scoped("a failed call fails every item of it, and a later call is made for new items", () =>
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
        const writes = yield* workerStore(flaky)

        const failed = yield* Effect.flip(
          writes.charge({ jobId: job.id, callId: "c", token: 0, amountCents: 1, settled: true })
        )
        failing = false
        const ok = yield* writes.charge({ jobId: job.id, callId: "c", token: 0, amountCents: 1, settled: true })

        expect(failed).toMatchObject({ _tag: "StoreError", reason: "Connection" })
        expect(ok.costCents).toBe(1)
      })
    )

    it.scoped("a reply without a result for the item is a StoreError, not a silent success", () =>
      Effect.gen(function* () {
        const { store } = yield* StoreModule.makeMemory
        const empty: Store["Type"] = {
          ...store,
          settle: () => Effect.succeed({ now: 0, results: [] })
        }
        const writes = yield* workerStore(empty)
        const jobId = "019b76da-b098-7695-9262-309b5765a9f1" as JobId

        const settle = yield* Effect.flip(writes.settle({ jobId, token: 1, outcome: { _tag: "Release" } }))

        expect(settle).toMatchObject({ _tag: "StoreError", reason: "Unknown", operation: "settle" })
      })
    )
  }
)

describe("flushers started on need", () => {
  it.scoped("calls that never overlap start no flusher; the first overlap starts one, and only one", () =>
    Effect.gen(function* () {
      const { store } = yield* StoreModule.makeMemory
      const gated = gatedStore(store)
      const jobs = yield* Effect.forEach([0, 1, 2, 3], (i) => submitOne(store, { requestKey: `k${i}` }))
      const helpers = makeHelpers(yield* Effect.runtime<never>())
      yield* Effect.addFinalizer(() => helpers.stop)
      const writes = makeWorkerStore(gated.view, 100, helpers.start)
      const charge = (i: number, callId: string) =>
        writes.charge({ jobId: jobs[i]!.id, callId, token: 0, amountCents: 1, settled: true })

      yield* charge(0, "a")
      yield* charge(1, "a")
      expect(helpers.started()).toBe(0)

      for (const round of ["b", "c"]) {
        yield* gated.hold
        const first = yield* Effect.fork(charge(0, round))
        while (gated.calls.length === 0 || writes.queued() > 0) yield* Effect.yieldNow()
        const rest = yield* Effect.fork(
          Effect.forEach([1, 2, 3], (i) => charge(i, round), { concurrency: "unbounded" })
        )
        while (writes.queued() < 3) yield* Effect.yieldNow()
        yield* gated.release
        yield* Fiber.join(first)
        yield* Fiber.join(rest)
      }

      expect(gated.calls.map((c) => c.items)).toEqual([1, 1, 1, 3, 1, 3])
      expect(helpers.started()).toBe(1)
    })
  )

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
