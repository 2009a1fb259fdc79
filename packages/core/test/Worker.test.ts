import { describe, expect, it } from "@effect/vitest"
import {
  Clock,
  Duration,
  Effect,
  Exit,
  Fiber,
  HashMap,
  Layer,
  Logger,
  LogLevel,
  Metric,
  Option,
  Schema,
  Scope,
  TestClock,
  Tracer
} from "effect"
import { StoreError } from "../src/Errors.js"
import * as Handler from "../src/Handler.js"
import type { JobId, JobState } from "../src/Job.js"
import * as Metrics from "../src/Metrics.js"
import { Store } from "../src/Store.js"
import * as Sweeper from "../src/Sweeper.js"
import { type Delivery, Transport } from "../src/Transport.js"
import { claimOne, harness, settleOne } from "./fixtures.js"

// A fake model that counts what really happened to it: calls started, calls finished, calls interrupted.
interface Step {
  readonly ms: number
  readonly fail?: unknown
  readonly cost?: number
}

const makeModel = () => {
  const state = { calls: 0, completed: 0, interrupted: 0, interruptedAt: [] as Array<number> }
  const call = (step: Step) =>
    Effect.sync(() => ++state.calls).pipe(
      Effect.zipLeft(Effect.sleep(step.ms)),
      Effect.flatMap((n) => (step.fail === undefined ? Effect.succeed(`summary ${n}`) : Effect.fail(step.fail))),
      Effect.tap(() => Effect.sync(() => state.completed++)),
      Effect.onInterrupt(() =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.sync(() => {
            state.interrupted++
            state.interruptedAt.push(now)
          })
        )
      )
    )
  return { state, call }
}
type Model = ReturnType<typeof makeModel>

const Input = Schema.Struct({ text: Schema.String })
const Output = Schema.Struct({ summary: Schema.String })

// timeoutMs 3 s -> lease 4 s (margin 1 s), heartbeat every 1333 ms.
const LEASE_MS = 4_000

const summarize = (
  model: Model,
  plan: (attempt: number) => Step,
  options: { readonly version?: number; readonly estimateCents?: number } = {}
) =>
  Handler.make({
    type: "summarize",
    version: options.version ?? 1,
    input: Input,
    result: Output,
    estimateCents: options.estimateCents ?? 5,
    attempt: { timeoutMs: 3_000 },
    run: (input, ctx) => {
      const step = plan(ctx.attempt)
      return Effect.map(
        ctx.call({
          estimateCents: options.estimateCents ?? 5,
          run: model.call(step),
          cost: () => step.cost ?? 3,
          costOnError: () => step.cost
        }),
        (text) => ({ summary: `${input.text}: ${text}` })
      )
    }
  })

const setup = Effect.gen(function* () {
  const t = yield* harness({ defaults: { type: "summarize", input: { text: "doc" } } })
  const reachesState = (jobId: JobId, ...states: ReadonlyArray<JobState>) => t.reaches(jobId, states)
  return { ...t, reaches: reachesState }
})

/** A clock that runs at half the speed of the test clock from the moment it is made. */
const halfSpeedClock = Effect.gen(function* () {
  const base = yield* Effect.clock
  const origin = base.unsafeCurrentTimeMillis()
  const millis = () => origin + (base.unsafeCurrentTimeMillis() - origin) / 2
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    unsafeCurrentTimeNanos: () => BigInt(Math.floor(millis() * 1_000_000)),
    currentTimeMillis: Effect.sync(millis),
    currentTimeNanos: Effect.sync(() => BigInt(Math.floor(millis() * 1_000_000))),
    sleep: (duration) => base.sleep(Duration.times(duration, 2))
  }
  return clock
})

const delta = (before: Readonly<Record<string, number>>, after: Readonly<Record<string, number>>, name: string) =>
  Metrics.read(after, name) - Metrics.read(before, name)

describe("Worker", () => {
  it.scoped("runs a job once and acks it after the result is stored", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "w1", handlers: [summarize(model, () => ({ ms: 500, cost: 3 }))] })

      yield* t.reaches(id, "succeeded")

      const job = yield* t.job(id)
      expect(job.result).toEqual({ summary: "doc: summary 1" })
      expect(job.costCents).toBe(3)
      expect(job.attempts).toBe(1)
      expect(model.state.calls).toBe(1)
      const charges = yield* t.query.charges({ jobId: id })
      expect(charges.map((c) => [c.callId, c.amountCents, c.settled])).toEqual([[`${id}:1:1`, 3, true]])
      yield* t.advanceUntil(
        Effect.map(t.transport.size("q"), (n) => n === 0),
        5_000
      )
    })
  )

  it.scoped("a duplicate delivery makes no second model call", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      // A second message for the same job: the transport delivered it twice.
      yield* t.transport.publish({ queue: "q", items: [{ message: { jobId: id, type: "summarize", version: 1 } }] })
      const before = yield* Metrics.snapshot
      yield* t.start({ queue: "q", id: "w1", concurrency: 2, handlers: [summarize(model, () => ({ ms: 2_000 }))] })

      yield* t.reaches(id, "succeeded")
      yield* t.advanceUntil(
        Effect.map(t.transport.size("q"), (n) => n === 0),
        30_000
      )

      expect(model.state.calls).toBe(1)
      expect((yield* t.job(id)).attempts).toBe(1)
      const after = yield* Metrics.snapshot
      expect(delta(before, after, "slowcall_duplicate_deliveries_dropped_total")).toBe(1)
    })
  )

  it.scoped("a handler slower than its lease keeps it by heartbeat", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      const handler = summarize(model, () => ({ ms: 5 * LEASE_MS }))
      const before = yield* Metrics.snapshot
      // Two workers and an eager sweeper: if the lease lapsed, the job would be taken over.
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })
      yield* t.start({ queue: "q", id: "w2", handlers: [handler] })
      yield* Sweeper.make({ intervalMs: 200, republishAfterMs: 0 }).pipe(
        Effect.provideService(Store, t.store),
        Effect.provideService(Transport, t.transport)
      )

      yield* t.reaches(id, "succeeded")

      const job = yield* t.job(id)
      expect(job.attempts).toBe(1)
      expect(model.state.calls).toBe(1)
      expect(model.state.interrupted).toBe(0)
      const after = yield* Metrics.snapshot
      expect(delta(before, after, "slowcall_lease_takeovers_total")).toBe(0)
    })
  )

  it.scoped("a renewal call that never answers holds back no later renewal: the lease is kept by the next", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      const renewals: Array<number> = []
      // The first renewal's reply is lost for good; every later one lands.
      const firstHangs: Store["Type"] = {
        ...t.store,
        heartbeat: (options) =>
          Effect.suspend(() => {
            renewals.push(options.items.length)
            return renewals.length === 1 ? Effect.never : t.store.heartbeat(options)
          })
      }
      const before = yield* Metrics.snapshot
      yield* t.start({ queue: "q", id: "w1", handlers: [summarize(model, () => ({ ms: 3 * LEASE_MS }))] }, firstHangs)

      yield* t.reaches(id, "succeeded")

      const job = yield* t.job(id)
      expect(job.attempts).toBe(1)
      expect(model.state.calls).toBe(1)
      expect(model.state.interrupted).toBe(0)
      expect(renewals.length).toBeGreaterThan(2)
      const after = yield* Metrics.snapshot
      expect(delta(before, after, "slowcall_self_fenced_total")).toBe(0)
    })
  )

  it.scoped("renewal calls that never answer are given up after their lease: later leases are renewed again", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      let calls = 0
      // The first two renewals (every slot the keeper has) never answer; every later one lands.
      const twoHang: Store["Type"] = {
        ...t.store,
        heartbeat: (options) =>
          Effect.suspend(() => {
            calls += 1
            return calls <= 2 ? Effect.never : t.store.heartbeat(options)
          })
      }
      const before = yield* Metrics.snapshot
      yield* t.start({ queue: "q", id: "w1", handlers: [summarize(model, () => ({ ms: 3 * LEASE_MS }))] }, twoHang)

      // The first attempt loses its lease (nothing renewed it); the next one is renewed and finishes.
      yield* t.reaches(id, "succeeded")

      const after = yield* Metrics.snapshot
      expect(delta(before, after, "slowcall_self_fenced_total")).toBe(1)
      expect(calls).toBeGreaterThan(3)
      expect(model.state.calls).toBe(2)
    })
  )

  it.scoped("a worker whose lease was taken over cannot write its result, and its spend is recorded", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      // Worker A's clock runs at half speed (drift) and its heartbeats never reach the store: it believes it still
      // holds the lease when another holder has already taken over.
      const slow = yield* halfSpeedClock
      const partitioned: Store["Type"] = { ...t.store, heartbeat: () => Effect.never }
      const before = yield* Metrics.snapshot
      yield* t
        .start(
          { queue: "q", id: "A", handlers: [summarize(model, () => ({ ms: LEASE_MS * 0.75, cost: 4 }))] },
          partitioned
        )
        .pipe(Effect.withClock(slow))
      yield* t.reaches(id, "running")
      const claimedUntil = (yield* t.job(id)).leaseUntil!

      // Past A's lease (store time) another holder takes over and commits.
      yield* t.advanceUntil(Effect.map(t.now, (now) => now > claimedUntil))
      const takeover = yield* claimOne(t.inner, id, "B", LEASE_MS)
      expect(takeover._tag === "Claimed" && takeover.takeover).toBe(true)
      yield* settleOne(t.inner, id, 2, { _tag: "Complete", result: { summary: "from B" } })
      expect(model.state.completed).toBe(0)

      // A's call ends later; its result write is fenced out.
      yield* t.advanceUntil(
        Effect.map(Metrics.snapshot, (now) => delta(before, now, "slowcall_fenced_writes_rejected_total") === 1)
      )
      const job = yield* t.job(id)
      expect(job.state).toBe("succeeded")
      expect(job.result).toEqual({ summary: "from B" })
      expect(model.state.calls).toBe(1)
      expect(model.state.completed).toBe(1)
      const charges = yield* t.query.charges({ jobId: id })
      expect(charges.map((c) => [c.callId, c.token, c.amountCents, c.settled])).toEqual([[`${id}:1:1`, 1, 4, true]])
      expect(job.costCents).toBe(4)
    })
  )

  it.scoped("an outcome the store keeps refusing is retried while the lease is held, then left unacked", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      const writes: Array<number> = []
      const failingComplete: Store["Type"] = {
        ...t.store,
        settle: (options) =>
          options.items.some((item) => item.outcome._tag === "Complete")
            ? Effect.flatMap(Clock.currentTimeMillis, (now) => {
                writes.push(now)
                return Effect.fail(new StoreError({ reason: "Connection", operation: "settle", detail: "reset" }))
              })
            : t.store.settle(options)
      }
      const scope = yield* Scope.make()
      yield* t
        .start({ queue: "q", id: "w1", handlers: [summarize(model, () => ({ ms: 100 }))] }, failingComplete)
        .pipe(Scope.extend(scope))

      yield* t.advanceUntil(
        Effect.sync(() => writes.length > 0),
        10_000
      )
      const firstWrite = writes[0]!
      yield* TestClock.adjust(LEASE_MS + 2_000)

      // Retried for one lease length (the heartbeat kept the lease meanwhile), then given up: nothing acked, the job
      // still running under this worker's lease, the message still held, no second model call.
      expect(writes.length).toBeGreaterThan(4)
      // (The last retry may start up to one retry spacing, 1 s, after the lease length has run out.)
      expect(writes[writes.length - 1]! - firstWrite).toBeLessThanOrEqual(LEASE_MS + 1_000)
      expect(writes[writes.length - 1]! - firstWrite).toBeGreaterThan(LEASE_MS / 2)
      expect(yield* t.stateOf(id)).toBe("running")
      expect(yield* t.transport.size("q")).toBe(1)
      expect(model.state.calls).toBe(1)
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* t.advanceUntil(Effect.map(Fiber.poll(closing), Option.isSome), 30_000)
    })
  )

  it.scoped("a heartbeat that finds the lease lost stops the handler and writes nothing more", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      const before = yield* Metrics.snapshot
      yield* t.start({ queue: "q", id: "A", handlers: [summarize(model, () => ({ ms: 60_000 }))] })
      yield* t.advanceUntil(Effect.sync(() => model.state.calls === 1))

      // The lease moves to another holder behind A's back (token 1 -> 2).
      yield* settleOne(t.inner, id, 1, { _tag: "Release" })
      const other = yield* claimOne(t.inner, id, "B", 60_000)
      expect(other._tag).toBe("Claimed")
      const updatedBefore = (yield* t.job(id)).updatedAt

      yield* t.advanceUntil(
        Effect.sync(() => model.state.interrupted === 1),
        5_000
      )
      yield* TestClock.adjust(LEASE_MS)

      const job = yield* t.job(id)
      expect(job.state).toBe("running")
      expect(job.leaseToken).toBe(2)
      expect(job.leaseOwner).toBe("B")
      expect(job.updatedAt).toBe(updatedBefore)
      const after = yield* Metrics.snapshot
      expect(delta(before, after, "slowcall_fenced_writes_rejected_total")).toBe(1)
      const charges = yield* t.query.charges({ jobId: id })
      expect(charges.map((c) => [c.callId, c.amountCents, c.settled])).toEqual([[`${id}:1:1`, 5, false]])
    })
  )

  it.scoped("cancelling a running job interrupts the handler and ends abandoned(cancelled)", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "w1", handlers: [summarize(model, () => ({ ms: 60_000 }))] })
      yield* t.advanceUntil(Effect.sync(() => model.state.calls === 1))

      const cancelled = yield* t.inner.cancel({ items: [{ jobId: id }] })
      expect(cancelled.results[0]?._tag).toBe("Cancelled")
      const flagged = yield* t.job(id)
      expect(flagged.state).toBe("running")
      expect(flagged.cancelRequestedAt).not.toBeNull()
      yield* t.reaches(id, "abandoned")

      const job = yield* t.job(id)
      expect(job.abandonReason).toBe("cancelled")
      expect(model.state.interrupted).toBe(1)
      expect(model.state.completed).toBe(0)
      // Interrupted within one heartbeat interval of the request.
      expect(job.updatedAt - flagged.cancelRequestedAt!).toBeLessThanOrEqual(LEASE_MS / 3 + 100)
      expect(job.costCents).toBe(5)
    })
  )

  it.scoped("a call cut by cancel settles at what costOnInterrupt says it consumed", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const consumed = (amount: number) =>
        Handler.make({
          type: "summarize",
          version: 1,
          input: Input,
          result: Output,
          estimateCents: 5,
          attempt: { timeoutMs: 3_000 },
          run: (input, ctx) =>
            Effect.map(
              ctx.call({
                estimateCents: 5,
                run: model.call({ ms: 60_000 }),
                cost: () => 4,
                costOnInterrupt: () => amount
              }),
              (text) => ({ summary: `${input.text}: ${text}` })
            )
        })
      const cut = yield* t.submit()
      yield* t.start({ queue: "q", id: "w1", handlers: [consumed(2)] })
      yield* t.advanceUntil(Effect.sync(() => model.state.calls === 1))

      yield* t.inner.cancel({ items: [{ jobId: cut }] })
      yield* t.reaches(cut, "abandoned")

      const job = yield* t.job(cut)
      expect(model.state.interrupted).toBe(1)
      expect(job.costCents).toBe(2)
      const charges = yield* t.query.charges({ jobId: cut })
      expect(charges.map((c) => [c.amountCents, c.settled])).toEqual([[2, true]])
    })
  )

  it.scoped("a call cut while waiting for admission, before it started, never asks costOnInterrupt", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      let asked = 0
      const handler = Handler.make({
        type: "summarize",
        version: 1,
        input: Input,
        result: Output,
        estimateCents: 5,
        attempt: { timeoutMs: 3_000 },
        run: (input, ctx) =>
          Effect.map(
            ctx.call({
              estimateCents: 5,
              run: model.call({ ms: 100 }),
              cost: () => 4,
              costOnInterrupt: () => {
                asked += 1
                return 1
              }
            }),
            (text) => ({ summary: `${input.text}: ${text}` })
          )
      })
      let waiting = false
      const id = yield* t.submit()
      yield* t.start({
        queue: "q",
        id: "w1",
        handlers: [handler],
        // A permit that never comes: the call waits here until the attempt is stopped.
        admission: {
          aroundCall: (_info, call) =>
            Effect.zipRight(
              Effect.sync(() => {
                waiting = true
              }),
              Effect.zipRight(Effect.never, call)
            )
        }
      })
      yield* t.advanceUntil(Effect.sync(() => waiting))

      yield* t.inner.cancel({ items: [{ jobId: id }] })
      yield* t.reaches(id, "abandoned")

      expect(model.state.calls).toBe(0)
      expect(asked).toBe(0)
      // Nothing was consumed: the reservation goes back, settled at 0.
      const charges = yield* t.query.charges({ jobId: id })
      expect(charges.map((c) => [c.amountCents, c.settled])).toEqual([[0, true]])
    })
  )

  it.scoped("costOnInterrupt giving undefined keeps the reservation as the record", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const handler = Handler.make({
        type: "summarize",
        version: 1,
        input: Input,
        result: Output,
        estimateCents: 5,
        attempt: { timeoutMs: 3_000 },
        run: (input, ctx) =>
          Effect.map(
            ctx.call({
              estimateCents: 5,
              run: model.call({ ms: 60_000 }),
              cost: () => 4,
              costOnInterrupt: () => undefined
            }),
            (text) => ({ summary: `${input.text}: ${text}` })
          )
      })
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })
      yield* t.advanceUntil(Effect.sync(() => model.state.calls === 1))

      yield* t.inner.cancel({ items: [{ jobId: id }] })
      yield* t.reaches(id, "abandoned")

      const job = yield* t.job(id)
      expect(job.costCents).toBe(5)
      const charges = yield* t.query.charges({ jobId: id })
      expect(charges.map((c) => [c.amountCents, c.settled])).toEqual([[5, false]])
    })
  )

  it.scoped("shutdown releases running leases and another worker finishes the job", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const slow = makeModel()
      const fast = makeModel()
      const id = yield* t.submit()
      const scopeA = yield* Scope.make()
      yield* t
        .start({ queue: "q", id: "A", shutdownGraceMs: 1_000, handlers: [summarize(slow, () => ({ ms: 60_000 }))] })
        .pipe(Scope.extend(scopeA))
      yield* t.advanceUntil(Effect.sync(() => slow.state.calls === 1))

      const closing = yield* Effect.fork(Scope.close(scopeA, Exit.void))
      yield* t.advanceUntil(Effect.map(Fiber.poll(closing), Option.isSome), 10_000)
      const released = yield* t.job(id)
      expect(released.state).toBe("queued")
      expect(released.leaseOwner).toBeNull()
      expect(released.attemptsBase).toBe(1)
      expect(slow.state.interrupted).toBe(1)

      const shutdownAt = yield* Clock.currentTimeMillis
      yield* t.start({ queue: "q", id: "B", handlers: [summarize(fast, () => ({ ms: 100 }))] })
      yield* t.reaches(id, "succeeded")

      // B claimed at once: no wait for the old lease to run out.
      expect((yield* Clock.currentTimeMillis) - shutdownAt).toBeLessThan(LEASE_MS)
      const attempts = yield* t.query.attempts({ jobId: id })
      // Each claim's owner is the worker id, a slash, and a tag unique to that claim.
      expect(attempts.map((a) => [a.worker.split("/")[0], a.outcome])).toEqual([
        ["A", "released"],
        ["B", "succeeded"]
      ])
      expect(fast.state.calls).toBe(1)
    })
  )

  it.scoped("shutdown lets a handler that finishes within the grace period complete", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      const scope = yield* Scope.make()
      yield* t
        .start({ queue: "q", id: "A", shutdownGraceMs: 5_000, handlers: [summarize(model, () => ({ ms: 2_000 }))] })
        .pipe(Scope.extend(scope))
      yield* t.advanceUntil(Effect.sync(() => model.state.calls === 1))

      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* t.advanceUntil(Effect.map(Fiber.poll(closing), Option.isSome), 10_000)

      expect(yield* t.stateOf(id)).toBe("succeeded")
      expect(model.state.interrupted).toBe(0)
    })
  )

  it.scoped("a job whose budget cannot cover the next attempt ends abandoned(budget) without calling the model", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      // Attempt 1 fails retryably after spending 6; 6 + estimate 6 > budget 10.
      const failing = summarize(model, () => ({ ms: 100, fail: { status: 500, message: "boom" }, cost: 6 }), {
        estimateCents: 6
      })
      const id = yield* t.submit({ budgetCents: 10, maxAttempts: 5 })
      // Budget 4 < estimate 6: the claim itself abandons, no call at all.
      const tooPoor = yield* t.submit({ budgetCents: 4, input: { text: "poor" } })
      yield* t.start({ queue: "q", id: "w1", handlers: [failing] })

      yield* t.reaches(id, "abandoned")
      yield* t.reaches(tooPoor, "abandoned")

      const job = yield* t.job(id)
      expect(job.abandonReason).toBe("budget")
      expect(job.costCents).toBe(6)
      expect(job.attempts).toBe(1)
      expect(job.errorClass).toBe("server_error")
      const poor = yield* t.job(tooPoor)
      expect(poor.abandonReason).toBe("budget")
      expect(poor.attempts).toBe(0)
      expect(model.state.calls).toBe(1)
    })
  )

  it.scoped("retries with backoff, honours Retry-After, then succeeds", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const plan = (attempt: number): Step =>
        attempt === 1
          ? { ms: 100, fail: { status: 500, message: "upstream failed" } }
          : attempt === 2
            ? { ms: 100, fail: { status: 429, headers: { "retry-after": "20" }, message: "slow down" } }
            : { ms: 100 }
      const id = yield* t.submit({ maxAttempts: 3 })
      const before = yield* Metrics.snapshot
      yield* t.start({
        queue: "q",
        id: "w1",
        retry: { baseMs: 1_000, capMs: 1_000 },
        handlers: [summarize(model, plan)]
      })

      yield* t.reaches(id, "succeeded")

      const attempts = yield* t.query.attempts({ jobId: id })
      expect(attempts.map((a) => [a.outcome, a.errorClass])).toEqual([
        ["retried", "server_error"],
        ["retried", "rate_limited"],
        ["succeeded", null]
      ])
      const [first, second, third] = attempts
      // Full jitter within [0, 1000] ms after the 503; the 429's Retry-After (20 s) is a floor.
      expect(second!.startedAt - first!.endedAt!).toBeLessThanOrEqual(1_000 + 300)
      expect(third!.startedAt - second!.endedAt!).toBeGreaterThanOrEqual(20_000)
      expect(model.state.calls).toBe(3)
      const after = yield* Metrics.snapshot
      expect(delta(before, after, "slowcall_retries_total")).toBe(2)
    })
  )

  it.scoped("a retryable error with no attempt left fails the job", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit({ maxAttempts: 2 })
      yield* t.start({
        queue: "q",
        id: "w1",
        retry: { baseMs: 100, capMs: 100 },
        handlers: [summarize(model, () => ({ ms: 100, fail: { status: 500, message: "boom" } }))]
      })

      yield* t.reaches(id, "failed")

      const job = yield* t.job(id)
      expect(job.errorClass).toBe("server_error")
      expect(job.attempts).toBe(2)
      expect(model.state.calls).toBe(2)
    })
  )

  it.scoped("a failed call settles at its class's default when the handler gives no cost for the error", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      // 429 and 529 are not billed by providers; a timeout may have been: its reservation (5) stays as the record.
      const plan = (attempt: number): Step =>
        attempt === 1
          ? { ms: 100, fail: { status: 429, headers: { "retry-after": "1" }, message: "slow down" } }
          : attempt === 2
            ? { ms: 100, fail: { status: 529, message: "overloaded" } }
            : attempt === 3
              ? { ms: 100, fail: Object.assign(new Error("socket timed out"), { code: "ETIMEDOUT" }) }
              : { ms: 100, fail: { status: 400, message: "bad request" }, cost: 2 }
      const id = yield* t.submit({ maxAttempts: 4 })
      yield* t.start({ queue: "q", id: "w1", retry: { baseMs: 100, capMs: 100 }, handlers: [summarize(model, plan)] })

      yield* t.reaches(id, "failed")

      const charges = yield* t.query.charges({ jobId: id })
      expect(charges.map((c) => [c.token, c.amountCents, c.settled])).toEqual([
        [1, 0, true],
        [2, 0, true],
        [3, 5, false],
        // The handler's own cost for the error wins over the class's default.
        [4, 2, true]
      ])
      expect((yield* t.job(id)).costCents).toBe(7)
    })
  )

  it.scoped("a retry that would start past the deadline is abandoned(deadline) by the store's settle", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const now = yield* t.now
      const id = yield* t.submit({ deadlineAt: now + 10_000, maxAttempts: 5 })
      yield* t.start({
        queue: "q",
        id: "w1",
        handlers: [summarize(model, () => ({ ms: 100, fail: { status: 429, headers: { "retry-after": "60" } } }))]
      })

      yield* t.reaches(id, "abandoned")

      const job = yield* t.job(id)
      expect(job.abandonReason).toBe("deadline")
      expect(job.errorClass).toBe("rate_limited")
      expect(model.state.calls).toBe(1)
      // The worker asked for a retry; the store turned it into the abandonment, in one write.
      const attempts = yield* t.query.attempts({ jobId: id })
      expect(attempts.map((a) => [a.outcome, a.errorClass])).toEqual([["abandoned", "rate_limited"]])
      yield* t.advanceUntil(
        Effect.map(t.transport.size("q"), (n) => n === 0),
        5_000
      )
    })
  )

  it.scoped("a permanent error fails the job at once", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit({ maxAttempts: 5 })
      const before = yield* Metrics.snapshot
      yield* t.start({
        queue: "q",
        id: "w1",
        handlers: [summarize(model, () => ({ ms: 100, fail: { status: 401, message: "bad key sk-abcdefghijkl" } }))]
      })

      yield* t.reaches(id, "failed")

      const job = yield* t.job(id)
      expect(job.errorClass).toBe("auth")
      expect(job.attempts).toBe(1)
      expect(job.lastError).not.toContain("sk-abcdefghijkl")
      expect(model.state.calls).toBe(1)
      const after = yield* Metrics.snapshot
      expect(delta(before, after, "slowcall_dead_letter_arrivals_total")).toBe(1)
    })
  )

  it.scoped("an unknown version stays queued until a worker that knows it arrives", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit({ version: 2 })
      yield* t.start({
        queue: "q",
        id: "old",
        unknownHandlerDelayMs: 1_000,
        handlers: [summarize(model, () => ({ ms: 10 }))]
      })

      yield* TestClock.adjust(10_000)
      const waiting = yield* t.job(id)
      expect(waiting.state).toBe("queued")
      expect(waiting.attempts).toBe(0)
      expect(yield* t.transport.size("q")).toBe(1)
      expect(model.state.calls).toBe(0)

      yield* t.start({ queue: "q", id: "new", handlers: [summarize(model, () => ({ ms: 10 }), { version: 2 })] })
      yield* t.reaches(id, "succeeded")
      expect((yield* t.job(id)).leaseOwner).toBeNull()
      expect(model.state.calls).toBe(1)
    })
  )

  it.scoped("self-fences when the store is unreachable: the call is interrupted before the lease ends", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit()
      let down = false
      const unreachable = new StoreError({ reason: "Connection", operation: "heartbeat", detail: "refused" })
      const flaky: Store["Type"] = {
        ...t.store,
        heartbeat: (options) => (down ? Effect.fail(unreachable) : t.inner.heartbeat(options))
      }
      const before = yield* Metrics.snapshot
      yield* t.start({ queue: "q", id: "w1", handlers: [summarize(model, () => ({ ms: 60_000 }))] }, flaky)
      yield* t.advanceUntil(Effect.sync(() => model.state.calls === 1))
      yield* TestClock.adjust(LEASE_MS / 2)
      const renewed = yield* t.job(id)
      down = true

      yield* t.advanceUntil(
        Effect.sync(() => model.state.interrupted === 1),
        30_000
      )

      // Interrupted no later than the lease the store last granted.
      expect(model.state.interruptedAt[0]!).toBeLessThanOrEqual(renewed.leaseUntil!)
      const after = yield* Metrics.snapshot
      expect(delta(before, after, "slowcall_self_fenced_total")).toBe(1)
      const job = yield* t.job(id)
      expect(job.state).toBe("running")
      expect(job.result).toBeNull()
      const charges = yield* t.query.charges({ jobId: id })
      expect(charges.map((c) => [c.amountCents, c.settled])).toEqual([[5, false]])
    })
  )

  it.scoped("input that fails the handler's schema ends failed(invalid_input) without a model call", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const id = yield* t.submit({ input: { words: 3 } })
      yield* t.start({ queue: "q", id: "w1", handlers: [summarize(model, () => ({ ms: 10 }))] })

      yield* t.reaches(id, "failed")

      const job = yield* t.job(id)
      expect(job.errorClass).toBe("invalid_input")
      expect(job.lastError).toContain("text")
      expect(model.state.calls).toBe(0)
      // The evidence is the list of issues, one per line, not the schema's whole tree.
      const attempts = yield* t.query.attempts({ jobId: id })
      expect(attempts[0]!.evidence).toBe(job.lastError)
      expect(job.lastError!.split("\n").length).toBeLessThanOrEqual(3)
      expect(job.lastError!.length).toBeLessThan(300)
      expect(job.lastError).toMatch(/^text: is missing$/m)
    })
  )

  it.scoped("progress reported by the handler is stored with the next heartbeat", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const handler = Handler.make({
        type: "summarize",
        version: 1,
        input: Input,
        result: Output,
        attempt: { timeoutMs: 3_000 },
        run: (_, ctx) =>
          Effect.gen(function* () {
            yield* ctx.progress(0.5)
            yield* Effect.sleep(10_000)
            yield* ctx.checkpoint
            return { summary: "done" }
          })
      })
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })

      yield* t.advanceUntil(Effect.map(t.job(id), (j) => j.progress === 0.5))
      expect((yield* t.job(id)).state).toBe("running")
      yield* t.reaches(id, "succeeded")
      expect((yield* t.job(id)).progress).toBe(1)
    })
  )
})

describe("Worker observability", () => {
  /** A handler that logs one line and reports the span it runs under. */
  const observed = (seen: Array<{ name: string; attributes: Record<string, unknown> } | null>) =>
    Handler.make({
      type: "summarize",
      version: 1,
      input: Input,
      result: Output,
      attempt: { timeoutMs: 3_000 },
      run: () =>
        Effect.gen(function* () {
          yield* Effect.logInfo("inside the handler")
          const span = yield* Effect.option(Effect.currentSpan)
          seen.push(
            Option.isSome(span)
              ? { name: span.value.name, attributes: Object.fromEntries(span.value.attributes) }
              : null
          )
          return { summary: "done" }
        })
    })

  const capture = (lines: Array<{ message: unknown; annotations: Record<string, unknown> }>) =>
    Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ message, annotations }) => {
        lines.push({ message, annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
      })
    )

  /** A tracer of its own (as OpenTelemetry's would be), which makes the spans Effect's built-in tracer makes. */
  const ownTracer = Layer.setTracer(Tracer.make({ span: (...args) => nativeTracer.span(...args), context: (f) => f() }))
  const nativeTracer = Effect.runSync(Effect.tracer)

  it.scoped("with logging and a tracer on, an attempt's log lines and span name the job, token and trace", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const lines: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
      const seen: Array<{ name: string; attributes: Record<string, unknown> } | null> = []
      const id = yield* t.submit()
      yield* t
        .start({ queue: "q", id: "w1", handlers: [observed(seen)] })
        .pipe(Effect.provide(capture(lines)), Effect.provide(ownTracer))
      yield* t.reaches(id, "succeeded")
      const job = yield* t.job(id)
      const line = lines.find((l) => Array.isArray(l.message) && l.message[0] === "inside the handler")
      expect(line?.annotations).toEqual({ worker: "w1", jobId: id, token: 1, traceId: job.traceId })
      expect(seen).toEqual([
        {
          name: "slowcall.attempt",
          attributes: {
            "slowcall.job_id": id,
            "slowcall.queue": "q",
            "slowcall.type": "summarize",
            "slowcall.version": 1,
            "slowcall.token": 1,
            "slowcall.attempt": 1,
            "slowcall.trace_id": job.traceId
          }
        }
      ])
    })
  )

  it.scoped("under Effect's built-in tracer, which exports nothing, no attempt span is made", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const seen: Array<{ name: string; attributes: Record<string, unknown> } | null> = []
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "w1", handlers: [observed(seen)] })
      yield* t.reaches(id, "succeeded")
      expect(seen).toEqual([null])
    })
  )

  it.scoped("a worker started with logging and tracing off makes no annotations and no attempt span", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const lines: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
      const seen: Array<{ name: string; attributes: Record<string, unknown> } | null> = []
      const id = yield* t.submit()
      yield* t
        .start({ queue: "q", id: "w1", handlers: [observed(seen)] })
        .pipe(
          Logger.withMinimumLogLevel(LogLevel.None),
          Effect.withTracerEnabled(false),
          Effect.provide(capture(lines))
        )
      yield* t.reaches(id, "succeeded")
      expect(lines).toEqual([])
      expect(seen).toEqual([null])
    })
  )
})

/** A Store view that counts what a worker asks of it: each verb's items, renewals granted, and each `now` read. */
const counting = (store: Store["Type"]) => {
  const counts = { now: 0, claim: 0, heartbeat: 0, renewed: 0, charge: 0, settle: 0 }
  const view: Store["Type"] = {
    ...store,
    now: Effect.suspend(() => {
      counts.now++
      return store.now
    }),
    claim: (options) =>
      Effect.suspend(() => {
        counts.claim += options.items.length
        return store.claim(options)
      }),
    heartbeat: (options) =>
      Effect.suspend(() => {
        counts.heartbeat += options.items.length
        return Effect.tap(store.heartbeat(options), (reply) => {
          counts.renewed += reply.results.filter((result) => result._tag === "Renewed").length
        })
      }),
    charge: (options) =>
      Effect.suspend(() => {
        counts.charge += options.items.length
        return store.charge(options)
      }),
    settle: (options) =>
      Effect.suspend(() => {
        counts.settle += options.items.length
        return store.settle(options)
      })
  }
  return { counts, view }
}

describe("Worker: admission", () => {
  it.scoped("a Defer from beforeClaim claims nothing, writes nothing and hides the delivery for its delay", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const { counts, view } = counting(t.store)
      const seen: Array<{ readonly at: number; readonly delivery: Delivery }> = []
      let admit = false
      const id = yield* t.submit()
      const submitted = yield* t.job(id)
      yield* t.start(
        {
          queue: "q",
          id: "w1",
          handlers: [summarize(model, () => ({ ms: 100 }))],
          admission: {
            beforeClaim: (delivery) =>
              Effect.map(Clock.currentTimeMillis, (at) => {
                seen.push({ at, delivery })
                return admit ? { _tag: "Admit" as const } : { _tag: "Defer" as const, delayMs: 5_000 }
              })
          }
        },
        view
      )

      yield* t.advanceUntil(Effect.sync(() => seen.length === 1))
      // Hidden: another consumer of the queue sees nothing while the delay runs.
      const competing = yield* t.transport.receive({ queue: "q", max: 10, visibilityMs: 1_000, waitMs: 0 })
      yield* t.advanceUntil(Effect.sync(() => seen.length === 3))

      expect(competing).toEqual([])
      expect(seen.map((s) => s.delivery.jobId)).toEqual([id, id, id])
      expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(5_000)
      expect(seen[2]!.at - seen[1]!.at).toBeGreaterThanOrEqual(5_000)
      expect(counts.claim).toBe(0)
      expect(t.peek(id)).toEqual(submitted)
      expect(model.state.calls).toBe(0)

      admit = true
      yield* t.reaches(id, "succeeded")

      expect(counts.claim).toBe(1)
      expect(model.state.calls).toBe(1)
      expect((yield* t.job(id)).attempts).toBe(1)
    })
  )

  it.scoped("aroundCall wraps each ctx.call exactly once, around the model call, with the job and estimate", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const wraps: Array<{ readonly jobId: JobId; readonly estimateCents: number }> = []
      const depthAtCall: Array<number> = []
      let depth = 0
      const handler = Handler.make({
        type: "summarize",
        version: 1,
        input: Input,
        result: Output,
        attempt: { timeoutMs: 3_000 },
        run: (_input, ctx) =>
          Effect.gen(function* () {
            const texts: Array<string> = []
            for (const estimateCents of [1, 2, 3]) {
              texts.push(
                yield* ctx.call({
                  estimateCents,
                  run: Effect.sync(() => {
                    depthAtCall.push(depth)
                    return `call ${estimateCents}`
                  }),
                  cost: () => estimateCents
                })
              )
            }
            return { summary: texts.join(", ") }
          })
      })
      const id = yield* t.submit()
      yield* t.start({
        queue: "q",
        id: "w1",
        handlers: [handler],
        admission: {
          aroundCall: (info, call) =>
            Effect.suspend(() => {
              wraps.push({ jobId: info.job.id, estimateCents: info.estimateCents })
              depth++
              // A permit wait before the call runs.
              return Effect.ensuring(
                Effect.zipRight(Effect.sleep(100), call),
                Effect.sync(() => depth--)
              )
            })
        }
      })

      const job = yield* t.reaches(id, "succeeded")

      expect(wraps).toEqual([
        { jobId: id, estimateCents: 1 },
        { jobId: id, estimateCents: 2 },
        { jobId: id, estimateCents: 3 }
      ])
      expect(depthAtCall).toEqual([1, 1, 1])
      expect(depth).toBe(0)
      expect(job.result).toEqual({ summary: "call 1, call 2, call 3" })
      expect(job.costCents).toBe(6)
    })
  )
})

describe("Worker: transport capabilities", () => {
  /** The memory transport declaring `visibilityFollowsLease`, with every `extend` recorded. */
  const declaring = (transport: Transport["Type"], visibilityFollowsLease: boolean) => {
    const extended: Array<{ readonly jobId: JobId; readonly visibilityMs: number }> = []
    const view: Transport["Type"] = {
      ...transport,
      capabilities: { ...transport.capabilities, visibilityFollowsLease },
      extend: (options) =>
        Effect.suspend(() => {
          for (const item of options.items) {
            extended.push({ jobId: item.delivery.jobId, visibilityMs: item.visibilityMs })
          }
          return transport.extend(options)
        })
    }
    return { extended, view }
  }

  it.scoped("a transport whose visibility follows the lease is never asked to extend", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const { counts, view: store } = counting(t.store)
      const { extended, view } = declaring(t.transport, true)
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "w1", handlers: [summarize(model, () => ({ ms: 3 * LEASE_MS }))] }, store, view)

      yield* t.reaches(id, "succeeded")

      expect(counts.renewed).toBeGreaterThanOrEqual(8)
      expect(extended).toEqual([])
      expect(model.state.calls).toBe(1)
    })
  )

  it.scoped("a renewal reply that lands after a later call's extends nothing: the later one already did", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const { extended, view } = declaring(t.transport, false)
      let calls = 0
      let replies = 0
      // The first renewal applies at once but its reply takes half a lease: the second call's reply lands first.
      const firstLate: Store["Type"] = {
        ...t.store,
        heartbeat: (options) =>
          Effect.suspend(() => {
            calls += 1
            const reply = Effect.tap(t.store.heartbeat(options), () => {
              replies += 1
            })
            return calls === 1 ? Effect.zipLeft(reply, Effect.sleep(LEASE_MS / 2)) : reply
          })
      }
      const before = yield* Metrics.snapshot
      const id = yield* t.submit()
      yield* t.start(
        { queue: "q", id: "w1", handlers: [summarize(model, () => ({ ms: 3 * LEASE_MS }))] },
        firstLate,
        view
      )

      yield* t.reaches(id, "succeeded")

      expect(replies).toBeGreaterThanOrEqual(8)
      expect(extended).toHaveLength(replies - 1)
      expect(model.state.calls).toBe(1)
      const after = yield* Metrics.snapshot
      expect(delta(before, after, "slowcall_self_fenced_total")).toBe(0)
    })
  )

  it.scoped("a transport whose visibility does not follow the lease is extended with every renewal", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const { counts, view: store } = counting(t.store)
      const { extended, view } = declaring(t.transport, false)
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "w1", handlers: [summarize(model, () => ({ ms: 3 * LEASE_MS }))] }, store, view)

      yield* t.reaches(id, "succeeded")

      expect(counts.renewed).toBeGreaterThanOrEqual(8)
      expect(extended).toHaveLength(counts.renewed)
      expect(new Set(extended.map((e) => `${e.jobId}/${e.visibilityMs}`))).toEqual(new Set([`${id}/${LEASE_MS}`]))
      expect(model.state.calls).toBe(1)
    })
  )
})

describe("Worker: store time", () => {
  it.scoped("a fault-free run (not due, retry, calls, heartbeats, commit) never asks the store for the time", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const { counts, view } = counting(t.store)
      // Published at once but due in 2 s: the first claim finds it NotDue. A far deadline is checked on every call.
      const id = yield* t.submit({ delayMs: 2_000, deadlineAt: (yield* t.now) + 3_600_000 })
      const plan = (attempt: number): Step =>
        attempt === 1 ? { ms: 100, fail: { status: 500, message: "boom" } } : { ms: 2 * LEASE_MS }
      yield* t.start(
        { queue: "q", id: "w1", retry: { baseMs: 1_000, capMs: 1_000 }, handlers: [summarize(model, plan)] },
        view
      )

      const job = yield* t.reaches(id, "succeeded")

      expect(counts.now).toBe(0)
      expect(counts.claim).toBeGreaterThanOrEqual(3)
      expect(counts.renewed).toBeGreaterThanOrEqual(5)
      expect(counts.settle).toBe(2)
      const attempts = yield* t.query.attempts({ jobId: id })
      expect(attempts.map((a) => a.outcome)).toEqual(["retried", "succeeded"])
      // The NotDue defer was measured from the claim reply's store time: the claim came exactly when due.
      expect(attempts[0]!.startedAt).toBe(job.createdAt + 2_000)
      expect(model.state.calls).toBe(2)
    })
  )
})

describe("Worker: model-call duration", () => {
  /** The histogram's count and sum (seconds) now. */
  const durations = Effect.map(Metric.value(Metrics.modelCallDurationSeconds), (state) => ({
    count: state.count,
    sum: state.sum
  }))

  /** A job of one call of `ms` that returns or fails for good (a 401), with or without an admission hook's wait. */
  const timedCall = (options: { readonly ms: number; readonly fail?: boolean; readonly hookMs?: number }) =>
    Effect.gen(function* () {
      const t = yield* setup
      const model = makeModel()
      const handler = Handler.make({
        type: "summarize",
        version: 1,
        input: Input,
        result: Output,
        attempt: { timeoutMs: 3_000 },
        run: (input, ctx) =>
          Effect.map(
            ctx.call({
              estimateCents: 1,
              run: model.call(
                options.fail === true
                  ? { ms: options.ms, fail: { status: 401, message: "bad key" } }
                  : { ms: options.ms }
              ),
              cost: () => 1
            }),
            (text) => ({ summary: `${input.text}: ${text}` })
          )
      })
      const before = yield* durations
      const id = yield* t.submit()
      const hookMs = options.hookMs
      yield* t.start({
        queue: "q",
        id: "w1",
        handlers: [handler],
        ...(hookMs === undefined
          ? {}
          : { admission: { aroundCall: (_info, call) => Effect.zipRight(Effect.sleep(hookMs), call) } })
      })
      return { t, id, model, before }
    })

  for (const hook of [undefined, 250]) {
    const withHook = hook === undefined ? "without an admission hook" : "with an admission hook"
    it.scoped(`a returned and a failed call are each timed once, from the lease gate to their end (${withHook})`, () =>
      Effect.gen(function* () {
        const ok = yield* timedCall({ ms: 700, ...(hook === undefined ? {} : { hookMs: hook }) })
        yield* ok.t.reaches(ok.id, "succeeded")
        const afterOk = yield* durations
        expect(afterOk.count - ok.before.count).toBe(1)
        // The permit wait comes before the gate: it is not part of the call's time.
        expect(afterOk.sum - ok.before.sum).toBeCloseTo(0.7, 6)

        const failed = yield* timedCall({ ms: 400, fail: true, ...(hook === undefined ? {} : { hookMs: hook }) })
        yield* failed.t.reaches(failed.id, "failed")
        const afterFailed = yield* durations
        expect(afterFailed.count - failed.before.count).toBe(1)
        expect(afterFailed.sum - failed.before.sum).toBeCloseTo(0.4, 6)
      })
    )

    it.scoped(`a call cut by a cancel is timed up to the cut (${withHook})`, () =>
      Effect.gen(function* () {
        const cut = yield* timedCall({ ms: 60_000, ...(hook === undefined ? {} : { hookMs: hook }) })
        yield* cut.t.advanceUntil(Effect.sync(() => cut.model.state.calls === 1))
        const startedAt = yield* Clock.currentTimeMillis
        yield* TestClock.adjust(500)
        yield* cut.t.inner.cancel({ items: [{ jobId: cut.id }] })
        yield* cut.t.reaches(cut.id, "abandoned")
        const after = yield* durations
        expect(cut.model.state.interrupted).toBe(1)
        expect(after.count - cut.before.count).toBe(1)
        // From the call's start (within one 50 ms step before `startedAt`, the instant it was seen running) to the
        // interruption: not the 60 s the call would have taken, and not the admission hook's wait before it.
        const cutAt = cut.model.state.interruptedAt[0]!
        const timed = after.sum - cut.before.sum
        expect(timed).toBeGreaterThan((cutAt - startedAt) / 1_000 - 1e-9)
        expect(timed).toBeLessThan((cutAt - startedAt + 50) / 1_000 + 1e-9)
      })
    )
  }
})
