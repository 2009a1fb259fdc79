/**
 * The Worker under store faults, shutdown races, deadlines, parallel calls and handler bugs. Each test names the
 * guarantee it holds; together they keep the lease protocol's edge cases from coming back.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit, Fiber, Logger, ParseResult, Schema, Scope, TestClock } from "effect"
import { StoreError } from "../src/Errors.js"
import * as Handler from "../src/Handler.js"
import type { JobId, JobState } from "../src/Job.js"
import * as Metrics from "../src/Metrics.js"
import type { Store } from "../src/Store.js"
import * as fixtures from "./fixtures.js"

const Input = Schema.Struct({ text: Schema.String })
const Output = Schema.Struct({ text: Schema.String })

/** A fake model call: counts starts and interruptions, sleeps `ms` on the test clock, returns a text. */
const modelCall = (counter: { calls: number; interrupted?: number }, ms: number) =>
  Effect.sync(() => ++counter.calls).pipe(
    Effect.zipLeft(Effect.sleep(ms)),
    Effect.map((n) => `reply ${n}`),
    Effect.onInterrupt(() =>
      Effect.sync(() => {
        counter.interrupted = (counter.interrupted ?? 0) + 1
      })
    )
  )

/** A handler of the tests' job type running `run`; timeoutMs 3 s gives a 4 s lease, heartbeat every 1333 ms. */
const handlerOf = (
  run: (ctx: Handler.HandlerContext) => Effect.Effect<string, unknown>,
  options: { readonly timeoutMs?: number } = {}
) =>
  Handler.make({
    type: "t",
    version: 1,
    input: Input,
    result: Output,
    attempt: { timeoutMs: options.timeoutMs ?? 3_000 },
    run: (_input, ctx) => Effect.map(run(ctx), (text) => ({ text }))
  })

/** A handler making one call of `ms` that costs 1 cent. */
const oneCall = (counter: { calls: number }, ms: number, options: { readonly timeoutMs?: number } = {}) =>
  handlerOf((ctx) => ctx.call({ estimateCents: 1, run: modelCall(counter, ms), cost: () => 1 }), options)

/** The worker's view of a store whose heartbeats never arrive. */
const heartbeatsRefused = (store: Store["Type"]): Store["Type"] => ({
  ...store,
  heartbeat: () => Effect.fail(new StoreError({ reason: "Connection", operation: "heartbeat", detail: "refused" }))
})

const harness = (wrap: (store: Store["Type"]) => Store["Type"] = (store) => store) =>
  Effect.map(fixtures.harness({ wrap, defaults: { type: "t", input: { text: "doc" } } }), (t) => ({
    ...t,
    reaches: (jobId: JobId, states: ReadonlyArray<JobState>, maxMs = 60_000) => t.reaches(jobId, states, maxMs)
  }))

const HOUR = 3_600_000

const terminal: ReadonlyArray<JobState> = ["succeeded", "failed", "abandoned"]

const isComplete = (options: Parameters<Store["Type"]["settle"]>[0]) =>
  options.items.some((item) => item.outcome._tag === "Complete")

/**
 * A store whose settle with `Complete` fails with a retryable error while the store's clock is before `until` (set
 * by the test).
 */
const completeOutage = (reason: "Connection" | "Timeout", detail: string) => {
  const outage = {
    until: Number.POSITIVE_INFINITY,
    wrap: (store: Store["Type"]): Store["Type"] => ({
      ...store,
      settle: (options) =>
        Effect.flatMap(store.now, (now) =>
          isComplete(options) && now < outage.until
            ? Effect.fail(new StoreError({ reason, operation: "settle", detail }))
            : store.settle(options)
        )
    })
  }
  return outage
}

/**
 * A store whose charge settlements fail with a retryable error from the instant `from` is set (by the test's model
 * call, as it returns) for `ms`; `also` lists further verbs the outage takes down with them.
 */
const settlementOutage = (ms: number, also: ReadonlyArray<"heartbeat" | "settle"> = []) => {
  const outage = {
    from: Number.POSITIVE_INFINITY,
    refused: 0,
    down: (now: number) => now >= outage.from && now < outage.from + ms,
    wrap: (store: Store["Type"]): Store["Type"] => {
      const refuse = <A>(operation: string, down: boolean, write: Effect.Effect<A, StoreError>) =>
        Effect.flatMap(store.now, (now) => {
          if (!down || !outage.down(now)) return write
          outage.refused++
          return Effect.fail(new StoreError({ reason: "Connection", operation, detail: "connection refused" }))
        })
      return {
        ...store,
        charge: (options) =>
          refuse(
            "charge",
            options.items.some((item) => item.settled),
            store.charge(options)
          ),
        heartbeat: (options) => refuse("heartbeat", also.includes("heartbeat"), store.heartbeat(options)),
        settle: (options) => refuse("settle", also.includes("settle"), store.settle(options))
      }
    }
  }
  return outage
}

/** A handler whose one call, estimated at 1 cent, takes `ms`, costs 10 cents and starts `outage` as it returns. */
const costlyCall = (counter: { calls: number }, ms: number, outage: { from: number }) =>
  handlerOf((ctx) =>
    ctx.call({
      estimateCents: 1,
      run: Effect.zipLeft(
        modelCall(counter, ms),
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.sync(() => {
            if (counter.calls === 1) outage.from = now
          })
        )
      ),
      cost: () => 10
    })
  )

describe("Worker: claims", () => {
  it.scoped("a claim whose reply was lost is adopted: the job's only attempt is not burned", () =>
    Effect.gen(function* () {
      let claims = 0
      const t = yield* harness((store) => ({
        ...store,
        // The first claim applies in the store, but its reply is lost.
        claim: (options) =>
          Effect.flatMap(store.claim(options), (result) =>
            ++claims === 1
              ? Effect.fail(new StoreError({ reason: "Ambiguous", operation: "claim", detail: "reply lost" }))
              : Effect.succeed(result)
          )
      }))
      const counter = { calls: 0 }
      const id = yield* t.submit({ maxAttempts: 1 })
      yield* t.start({ queue: "q", id: "w1", handlers: [oneCall(counter, 100)] })

      const job = yield* t.reaches(id, terminal)

      expect({ state: job.state, errorClass: job.errorClass, attempts: job.attempts, calls: counter.calls }).toEqual({
        state: "succeeded",
        errorClass: null,
        attempts: 1,
        calls: 1
      })
    })
  )

  it.scoped("a live lease of another process that shares the worker id is not adopted", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const counter = { calls: 0 }
      const id = yield* t.submit()
      // Another process, also configured as "w1", holds the job.
      const other = yield* fixtures.claimOne(t.inner, id, "w1", 60_000)
      expect(other._tag).toBe("Claimed")
      yield* t.start({ queue: "q", id: "w1", handlers: [oneCall(counter, 100)] })

      for (let i = 0; i < 40; i++) {
        yield* Effect.yieldNow()
        yield* TestClock.adjust(50)
      }

      const job = yield* t.job(id)
      expect({ state: job.state, leaseToken: job.leaseToken, leaseOwner: job.leaseOwner }).toEqual({
        state: "running",
        leaseToken: 1,
        leaseOwner: "w1"
      })
      expect(counter.calls).toBe(0)
    })
  )
})

describe("Worker: a claim's lease runs from the send that was granted it", () => {
  const LEASE = 4_000
  const slowFailure = (ms: number, applied: boolean) => {
    let claims = 0
    return (store: Store["Type"]): Store["Type"] => ({
      ...store,
      // The first claim takes `ms` and then fails: cleanly (nothing written) or after applying (reply lost).
      claim: (options) =>
        Effect.suspend(() =>
          ++claims > 1
            ? store.claim(options)
            : Effect.zipRight(
                applied ? store.claim(options) : Effect.void,
                Effect.zipRight(
                  Effect.sleep(ms),
                  Effect.fail(
                    new StoreError({ reason: applied ? "Ambiguous" : "Connection", operation: "claim", detail: "slow" })
                  )
                )
              )
        )
    })
  }

  it.scoped("a retry granted after a slow failed try runs at once: the lease counts from the retry's send", () =>
    Effect.gen(function* () {
      const t = yield* harness(slowFailure(LEASE + 500, false))
      const counter = { calls: 0 }
      const id = yield* t.submit({ maxAttempts: 1 })
      yield* t.start({ queue: "q", id: "w1", handlers: [oneCall(counter, 100)] })

      const job = yield* t.reaches(id, terminal)

      // Counted from the failed try's send, the lease would have looked over: the attempt would run nothing and
      // the job's only attempt would be spent.
      expect({ state: job.state, attempts: job.attempts, calls: counter.calls }).toEqual({
        state: "succeeded",
        attempts: 1,
        calls: 1
      })
    })
  )

  it.scoped("a lease granted by a try whose reply was lost counts from the first send: no call after it ends", () =>
    Effect.gen(function* () {
      let claims = 0
      // The first claim reaches the store after 3 s, applies, and its reply is lost 1.5 s later; a retry then finds
      // the job Busy under the worker's own tag. Heartbeats never reach the store, so no lease is ever renewed.
      const t = yield* harness((store) => ({
        ...heartbeatsRefused(store),
        claim: (options) =>
          Effect.suspend(() =>
            ++claims > 1
              ? store.claim(options)
              : Effect.sleep(3_000).pipe(
                  Effect.zipRight(store.claim(options)),
                  Effect.zipRight(Effect.sleep(1_500)),
                  Effect.zipRight(
                    Effect.fail(new StoreError({ reason: "Ambiguous", operation: "claim", detail: "reply lost" }))
                  )
                )
          )
      }))
      const starts: Array<{ readonly at: number; readonly token: number; readonly leaseUntil: number | null }> = []
      const id = yield* t.submit({ maxAttempts: 3 })
      // Three seconds of preparation, then the call; the store's view of the lease is taken as it starts.
      const prepared = handlerOf((ctx) =>
        Effect.zipRight(
          Effect.sleep(3_000),
          ctx.call({
            estimateCents: 1,
            run: Effect.flatMap(t.now, (at) => {
              starts.push({ at, token: ctx.token, leaseUntil: t.peek(ctx.jobId)?.leaseUntil ?? null })
              return Effect.as(Effect.sleep(100), "reply")
            }),
            cost: () => 1
          })
        )
      )
      yield* t.start({ queue: "q", id: "w1", handlers: [prepared] })

      const job = yield* t.reaches(id, terminal)

      // Measured from the retry's send, the first attempt would have called at 7.55 s on a lease the store ended at
      // 7 s. Measured from the first send, it ran nothing; the call came under the next claim, inside its lease.
      expect(job.state).toBe("succeeded")
      expect(starts.length).toBe(1)
      for (const start of starts) expect(start.at).toBeLessThan(start.leaseUntil!)
      expect(starts[0]!.token).toBeGreaterThan(1)
    })
  )
})

describe("Worker: the lease gate", () => {
  it.scoped("no model call starts past the local lease end, even where the watchdog cannot interrupt", () =>
    Effect.gen(function* () {
      // Heartbeats cannot reach the store, and the reservation's write takes 5 s: longer than the 4 s lease.
      const t = yield* harness((store) => ({
        ...heartbeatsRefused(store),
        charge: (options) =>
          options.items.some((item) => !item.settled)
            ? Effect.zipRight(Effect.sleep(5_000), store.charge(options))
            : store.charge(options)
      }))
      const counter = { calls: 0 }
      const id = yield* t.submit({ maxAttempts: 1 })
      const before = yield* Metrics.snapshot
      // The call runs where the watchdog's interruption cannot reach it: only the gate can stop it.
      const masked = handlerOf((ctx) =>
        Effect.uninterruptible(ctx.call({ estimateCents: 2, run: modelCall(counter, 100), cost: () => 2 }))
      )
      yield* t.start({ queue: "q", id: "w1", handlers: [masked] })
      // The only attempt self-fences; once its lease has ended the returning message finds the attempts spent.
      const job = yield* t.reaches(id, terminal, 30_000)

      expect(counter.calls).toBe(0)
      const charges = yield* t.query.charges({ jobId: id })
      // The reservation was written and then settled at 0: nothing was spent.
      expect(charges.map((c) => [c.amountCents, c.settled])).toEqual([[0, true]])
      expect({ state: job.state, result: job.result, costCents: job.costCents }).toEqual({
        state: "failed",
        result: null,
        costCents: 0
      })
      const after = yield* Metrics.snapshot
      expect(
        Metrics.read(after, "slowcall_self_fenced_total") - Metrics.read(before, "slowcall_self_fenced_total")
      ).toBe(1)
    })
  )
})

describe("Worker: committing the outcome", () => {
  it.scoped("a store outage shorter than the lease at commit time does not cost a second model call", () =>
    Effect.gen(function* () {
      const outage = completeOutage("Connection", "connection reset")
      const t = yield* harness(outage.wrap)
      const counter = { calls: 0 }
      const id = yield* t.submit()
      // The store refuses `complete` for 1 s from the start; the lease is 4 s.
      outage.until = (yield* t.now) + 1_000
      yield* t.start({ queue: "q", id: "w1", handlers: [oneCall(counter, 100)] })

      const job = yield* t.reaches(id, terminal)

      expect({ state: job.state, calls: counter.calls, attempts: job.attempts }).toEqual({
        state: "succeeded",
        calls: 1,
        attempts: 1
      })
    })
  )

  it.scoped(
    "a commit outage that outlasts the claimed lease is ridden out: the heartbeat keeps the lease until the commit",
    () =>
      Effect.gen(function* () {
        const outage = completeOutage("Timeout", "statement timeout")
        const t = yield* harness(outage.wrap)
        const counter = { calls: 0 }
        const id = yield* t.submit()
        // Commits refused until 4.3 s: past the 4 s lease granted at the claim, inside the retry window (one lease
        // length from the end of the 100 ms call).
        outage.until = (yield* t.now) + 4_300
        yield* t.start({ queue: "q", id: "w1", handlers: [oneCall(counter, 100)] })
        yield* t.reaches(id, ["running"])
        const claimedUntil = (yield* t.job(id)).leaseUntil!

        const job = yield* t.reaches(id, terminal)

        expect({ state: job.state, calls: counter.calls, attempts: job.attempts }).toEqual({
          state: "succeeded",
          calls: 1,
          attempts: 1
        })
        // It committed after the lease it was first granted would have ended: heartbeats extended it meanwhile.
        expect(job.updatedAt).toBeGreaterThan(claimedUntil)
      })
  )

  it.scoped(
    "a result the store refuses for good fails the job with that evidence and acks, without a second call",
    () =>
      Effect.gen(function* () {
        const t = yield* harness((store) => ({
          ...store,
          settle: (options) =>
            isComplete(options)
              ? Effect.fail(
                  new StoreError({
                    reason: "Constraint",
                    operation: "settle",
                    detail: "unsupported Unicode escape sequence"
                  })
                )
              : store.settle(options)
        }))
        const counter = { calls: 0 }
        const id = yield* t.submit({ maxAttempts: 3 })
        yield* t.start({ queue: "q", id: "w1", handlers: [oneCall(counter, 100)] })

        const job = yield* t.reaches(id, terminal)
        yield* TestClock.adjust(30_000)

        expect({ state: job.state, errorClass: job.errorClass, attempts: job.attempts }).toEqual({
          state: "failed",
          errorClass: "unknown",
          attempts: 1
        })
        expect(job.lastError).toContain("result not storable: unsupported Unicode escape sequence")
        expect(counter.calls).toBe(1)
        expect(yield* t.transport.size("q")).toBe(0)
      })
  )

  it.scoped("a result containing U+0000 fails the job at once with evidence, without a second call", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const counter = { calls: 0 }
      const handler = Handler.make({
        type: "t",
        version: 1,
        input: Input,
        result: Output,
        attempt: { timeoutMs: 3_000 },
        run: (_input, ctx) =>
          Effect.map(ctx.call({ estimateCents: 1, run: modelCall(counter, 100), cost: () => 1 }), (text) => ({
            text: `${text}\u0000`
          }))
      })
      const id = yield* t.submit({ maxAttempts: 3 })
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })

      const job = yield* t.reaches(id, terminal)

      expect({ state: job.state, errorClass: job.errorClass, attempts: job.attempts }).toEqual({
        state: "failed",
        errorClass: "unknown",
        attempts: 1
      })
      expect(job.lastError).toContain("U+0000 cannot be stored")
      expect(counter.calls).toBe(1)
    })
  )
})

describe("Worker: spend", () => {
  it.scoped("parallel calls of one handler never spend past the budget", () =>
    Effect.gen(function* () {
      const t = yield* harness((store) => ({
        ...store,
        // A store round trip takes time, as on any networked store.
        charge: (options) => Effect.zipRight(Effect.sleep(5), store.charge(options))
      }))
      const counter = { calls: 0 }
      const call = (ctx: Handler.HandlerContext) =>
        ctx.call({ estimateCents: 6, run: modelCall(counter, 100), cost: () => 6 })
      const handler = Handler.make({
        type: "t",
        version: 1,
        input: Input,
        result: Output,
        estimateCents: 6,
        attempt: { timeoutMs: 3_000 },
        run: (_input, ctx) =>
          Effect.map(Effect.all([call(ctx), call(ctx)], { concurrency: 2 }), ([a, b]) => ({ text: `${a} ${b}` }))
      })
      const id = yield* t.submit({ budgetCents: 10, maxAttempts: 1 })
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })

      const job = yield* t.reaches(id, terminal)

      expect(counter.calls).toBe(1)
      expect(job.costCents).toBeLessThanOrEqual(10)
      expect(job).toMatchObject({ state: "abandoned", abandonReason: "budget" })
    })
  )

  it.scoped("the actual cost of a finished call is recorded even when a cancel lands during its settlement", () =>
    Effect.gen(function* () {
      const t = yield* harness((store) => ({
        ...store,
        charge: (options) =>
          Effect.zipRight(Effect.sleep(options.items.some((item) => item.settled) ? 100 : 0), store.charge(options))
      }))
      const counter = { calls: 0 }
      // Lease 4 s, heartbeat every 1333 ms; the call ends at 1300 ms, its settlement lands at 1400 ms.
      const handler = Handler.make({
        type: "t",
        version: 1,
        input: Input,
        result: Output,
        attempt: { timeoutMs: 3_000 },
        run: (_input, ctx) =>
          Effect.map(ctx.call({ estimateCents: 1, run: modelCall(counter, 1_300), cost: () => 10 }), (text) => ({
            text
          }))
      })
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })
      yield* t.reaches(id, ["running"])
      yield* TestClock.adjust(500)
      yield* t.inner.cancel({ items: [{ jobId: id }] })

      const job = yield* t.reaches(id, terminal)

      expect(counter.calls).toBe(1)
      expect(job.costCents).toBe(10)
    })
  )

  it.scoped(
    "a settlement refused for a second as the call returns is retried until it lands: the ledger holds the cost",
    () =>
      Effect.gen(function* () {
        // Three tries 50, 100 and 200 ms apart are over in 350 ms: the outage outlasts them.
        const outage = settlementOutage(1_000)
        const t = yield* harness(outage.wrap)
        const counter = { calls: 0 }
        const id = yield* t.submit({ maxAttempts: 1 })
        yield* t.start({ queue: "q", id: "w1", handlers: [costlyCall(counter, 500, outage)] })

        const job = yield* t.reaches(id, terminal)

        expect(outage.refused).toBeGreaterThan(3)
        expect({ state: job.state, costCents: job.costCents, calls: counter.calls }).toEqual({
          state: "succeeded",
          costCents: 10,
          calls: 1
        })
        const charges = yield* t.query.charges({ jobId: id })
        expect(charges.map((c) => [c.callId, c.amountCents, c.settled])).toEqual([[`${id}:1:1`, 10, true]])
      })
  )

  it.scoped(
    "the settlement of a made call still lands when the lease is lost while its write is retried (charges are not fenced)",
    () =>
      Effect.gen(function* () {
        // Settlements, heartbeats and outcome writes are refused for 6 s as the call returns: past the 4 s lease, so
        // the worker fences itself and writes no outcome; the call's cost is still recorded once the store is back.
        const outage = settlementOutage(6_000, ["heartbeat", "settle"])
        const t = yield* harness(outage.wrap)
        const counter = { calls: 0 }
        const id = yield* t.submit({ maxAttempts: 3 })
        yield* t.start({ queue: "q", id: "w1", handlers: [costlyCall(counter, 500, outage)] })
        yield* t.reaches(id, ["running"])

        yield* t.advanceUntil(
          Effect.map(t.query.charges({ jobId: id }), (charges) =>
            charges.some((c) => c.callId === `${id}:1:1` && c.settled)
          )
        )

        const first = (yield* t.query.charges({ jobId: id })).find((c) => c.callId === `${id}:1:1`)
        expect(first).toMatchObject({ amountCents: 10, settled: true })
        const job = yield* t.reaches(id, terminal)
        // The attempt that lost its lease committed nothing: the job was run again, and both calls are in the ledger.
        expect({ state: job.state, attempts: job.attempts, calls: counter.calls }).toEqual({
          state: "succeeded",
          attempts: 2,
          calls: 2
        })
        expect(job.costCents).toBe(20)
      })
  )

  it.scoped("a cancel interrupts the running call at the next heartbeat and keeps its reservation", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const counter = { calls: 0, interrupted: 0 }
      const id = yield* t.submit()
      yield* t.start({ queue: "q", id: "w1", handlers: [oneCall(counter, 20_000, { timeoutMs: 30_000 })] })
      yield* t.reaches(id, ["running"])
      yield* t.inner.cancel({ items: [{ jobId: id }] })

      // Lease 33 s, heartbeat every 11 s: the call is stopped well before its 20 s end.
      const job = yield* t.reaches(id, terminal, 15_000)

      expect(job).toMatchObject({ state: "abandoned", abandonReason: "cancelled" })
      expect(counter).toEqual({ calls: 1, interrupted: 1 })
      expect(job.costCents).toBe(1)
    })
  )

  /** A handler making one call per estimate in turn, each costing its estimate; refusals are recorded. */
  const calls = (counter: { calls: number }, estimates: ReadonlyArray<number>, refused: Array<string>) =>
    Handler.make({
      type: "t",
      version: 1,
      input: Input,
      result: Output,
      attempt: { timeoutMs: 3_000 },
      run: (_input, ctx) =>
        Effect.gen(function* () {
          const texts: Array<string> = []
          for (const estimateCents of estimates) {
            texts.push(
              yield* ctx
                .call({ estimateCents, run: modelCall(counter, 100), cost: () => estimateCents })
                .pipe(Effect.tapError((error) => Effect.sync(() => refused.push(error._tag))))
            )
          }
          return { text: texts.join(" ") }
        })
    })

  it.scoped("a spend equal to the budget stops even a zero-estimate call: BudgetExceeded, abandoned(budget)", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const counter = { calls: 0 }
      const refused: Array<string> = []
      const id = yield* t.submit({ budgetCents: 10, maxAttempts: 3 })
      yield* t.start({ queue: "q", id: "w1", handlers: [calls(counter, [10, 0], refused)] })

      const job = yield* t.reaches(id, terminal)

      expect(refused).toEqual(["BudgetExceeded"])
      expect(counter.calls).toBe(1)
      expect(job).toMatchObject({ state: "abandoned", abandonReason: "budget", costCents: 10, attempts: 1 })
      expect(job.lastError).toContain("spend 10 + estimate 0 exceeds budget 10")
      const charges = yield* t.query.charges({ jobId: id })
      expect(charges.map((c) => [c.callId, c.amountCents, c.settled])).toEqual([[`${id}:1:1`, 10, true]])
    })
  )

  it.scoped("spend plus estimate equal to the budget fits: the call is made", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const counter = { calls: 0 }
      const refused: Array<string> = []
      const id = yield* t.submit({ budgetCents: 10 })
      yield* t.start({ queue: "q", id: "w1", handlers: [calls(counter, [4, 6], refused)] })

      const job = yield* t.reaches(id, terminal)

      expect(refused).toEqual([])
      expect(counter.calls).toBe(2)
      expect(job).toMatchObject({ state: "succeeded", costCents: 10 })
    })
  )
})

describe("Worker: deadlines", () => {
  it.scoped("no model call starts after the job's deadline", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const counter = { calls: 0 }
      const handler = Handler.make({
        type: "t",
        version: 1,
        input: Input,
        result: Output,
        attempt: { timeoutMs: 3_000, retries: 1 },
        run: (_input, ctx) =>
          Effect.gen(function* () {
            const first = yield* ctx.call({ estimateCents: 1, run: modelCall(counter, 2_500), cost: () => 1 })
            const second = yield* ctx.call({ estimateCents: 1, run: modelCall(counter, 2_500), cost: () => 1 })
            return { text: `${first} ${second}` }
          })
      })
      const now = yield* t.now
      const id = yield* t.submit({ deadlineAt: now + 2_000, maxAttempts: 1 })
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })

      const job = yield* t.reaches(id, terminal)

      expect(counter.calls).toBe(1)
      expect(job).toMatchObject({ state: "abandoned", abandonReason: "deadline" })
      expect(job.lastError).toContain("deadline")
    })
  )

  it.scoped("a deadline seen at a heartbeat stops the running call and abandons the job", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const counter = { calls: 0, interrupted: 0 }
      const now = yield* t.now
      const id = yield* t.submit({ deadlineAt: now + 2_000 })
      // Lease 4 s, heartbeat every 1333 ms: the second one (2666 ms) is past the deadline; the call would end at 10 s.
      yield* t.start({ queue: "q", id: "w1", handlers: [oneCall(counter, 10_000, { timeoutMs: 3_000 })] })

      const job = yield* t.reaches(id, terminal, 5_000)

      expect(job).toMatchObject({ state: "abandoned", abandonReason: "deadline" })
      expect(counter).toEqual({ calls: 1, interrupted: 1 })
      expect(job.updatedAt - now).toBeLessThan(2_000 + 1_400)
    })
  )
  /**
   * A handler that waits `waitMs` without calling, then makes one call: only the reservation's reply can tell it
   * the deadline has passed (its lease is long, so no heartbeat comes first).
   */
  const lateCall = (counter: { calls: number }, waitMs: number) =>
    Handler.make({
      type: "t",
      version: 1,
      input: Input,
      result: Output,
      attempt: { timeoutMs: 30_000 },
      run: (_input, ctx) =>
        Effect.zipRight(
          Effect.sleep(waitMs),
          Effect.map(ctx.call({ estimateCents: 4, run: modelCall(counter, 100), cost: () => 4 }), (text) => ({ text }))
        )
    })

  /** Store time well clear of zero, and a worker whose own clock is an hour behind it. */
  const behindTheStore = Effect.zipRight(TestClock.setTime(10 * HOUR), fixtures.offsetClock(-HOUR))

  it.scoped(
    "a call reserved exactly at the deadline (store time of the reply) is not made: settled at 0, abandoned",
    () =>
      Effect.gen(function* () {
        let nowReads = 0
        const t = yield* harness((store) => ({
          ...store,
          now: Effect.suspend(() => {
            nowReads++
            return store.now
          })
        }))
        const behind = yield* behindTheStore
        const counter = { calls: 0 }
        const id = yield* t.submit({ deadlineAt: (yield* t.now) + 3_000, maxAttempts: 3 })
        // By its own clock the worker is an hour early for the deadline; the store's reply says otherwise.
        yield* t.start({ queue: "q", id: "w1", handlers: [lateCall(counter, 3_000)] }).pipe(Effect.withClock(behind))

        const job = yield* t.reaches(id, terminal, 10_000)

        expect(counter.calls).toBe(0)
        expect(job).toMatchObject({ state: "abandoned", abandonReason: "deadline", costCents: 0, attempts: 1 })
        expect(job.lastError).toContain(`deadline ${job.deadlineAt} passed (store time ${job.deadlineAt})`)
        const charges = yield* t.query.charges({ jobId: id })
        expect(charges.map((c) => [c.callId, c.amountCents, c.settled])).toEqual([[`${id}:1:1`, 0, true]])
        expect(nowReads).toBe(0)
      })
  )

  it.scoped("a call reserved a millisecond before the deadline is made", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const behind = yield* behindTheStore
      const counter = { calls: 0 }
      const id = yield* t.submit({ deadlineAt: (yield* t.now) + 3_001 })
      yield* t.start({ queue: "q", id: "w1", handlers: [lateCall(counter, 3_000)] }).pipe(Effect.withClock(behind))

      const job = yield* t.reaches(id, terminal, 10_000)

      expect(counter.calls).toBe(1)
      expect(job).toMatchObject({ state: "succeeded", costCents: 4 })
    })
  )
})

describe("Worker: shutdown", () => {
  it.effect("a job claimed while the worker is closing is released, not run", () =>
    Effect.gen(function* () {
      const t = yield* harness((store) => ({
        ...store,
        // The claim reaches the store 50 ms after it is sent (a store round trip).
        claim: (options) => Effect.zipRight(Effect.sleep(50), store.claim(options))
      }))
      const counter = { calls: 0 }
      const id = yield* t.submit()
      const scope = yield* Scope.make()
      yield* t
        .start({
          queue: "q",
          id: "w1",
          handlers: [oneCall(counter, 30_000, { timeoutMs: 60_000 })],
          shutdownGraceMs: 10
        })
        .pipe(Scope.extend(scope))
      yield* TestClock.adjust(5)

      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      for (let i = 0; i < 100; i++) {
        yield* Effect.yieldNow()
        yield* TestClock.adjust(50)
      }
      yield* Fiber.join(closing)

      const job = yield* t.job(id)
      expect({ state: job.state, leaseOwner: job.leaseOwner }).toEqual({ state: "queued", leaseOwner: null })
      expect(counter.calls).toBe(0)
      const attempts = yield* t.query.attempts({ jobId: id })
      expect(attempts.map((a) => a.outcome)).toEqual(["released"])
    })
  )

  /** Starts a worker in a scope of its own, lets its one call return, then closes the scope: the close's fiber. */
  const closedAfterTheCall = (outageMs: number) =>
    Effect.gen(function* () {
      const outage = settlementOutage(outageMs)
      const t = yield* harness(outage.wrap)
      const counter = { calls: 0 }
      const id = yield* t.submit({ maxAttempts: 1 })
      const scope = yield* Scope.make()
      yield* t
        .start({ queue: "q", id: "w1", handlers: [costlyCall(counter, 500, outage)], shutdownGraceMs: 2_000 })
        .pipe(Scope.extend(scope))
      yield* t.advanceUntil(Effect.sync(() => outage.from < Number.POSITIVE_INFINITY))
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      return { t, id, outage, counter, closing }
    })

  it.effect("a closing worker still settles a made call whose settlement is refused for less than its grace", () =>
    Effect.gen(function* () {
      const { closing, counter, id, t } = yield* closedAfterTheCall(1_500)
      yield* t.advanceUntil(Effect.map(closing.poll, (exit) => exit._tag === "Some"))

      const job = yield* t.job(id)
      expect({ state: job.state, costCents: job.costCents, calls: counter.calls }).toEqual({
        state: "succeeded",
        costCents: 10,
        calls: 1
      })
    })
  )

  it.effect("a settlement refused past a closing worker's grace periods stops being retried: the shutdown ends", () =>
    Effect.gen(function* () {
      const { closing, id, outage, t } = yield* closedAfterTheCall(Number.POSITIVE_INFINITY)
      // Grace 2 s, then the stop's 2 s, then at most 1 s for acks: the retries end with the last of them.
      yield* t.advanceUntil(
        Effect.map(closing.poll, (exit) => exit._tag === "Some"),
        20_000
      )

      // The reservation stays as the record (the estimate, 1 cent), after more tries than the few short ones.
      expect(outage.refused).toBeGreaterThan(3)
      const charges = yield* t.query.charges({ jobId: id })
      expect(charges.map((c) => [c.amountCents, c.settled])).toEqual([[1, false]])
    })
  )
})

describe("Worker: handler bugs", () => {
  /** A handler that returns its input's text, decoded by `text`: what the schema does is all that is under test. */
  const echoing = (text: Schema.Schema<string, string>) =>
    Handler.make({
      type: "t",
      version: 1,
      input: Schema.Struct({ text }),
      result: Output,
      attempt: { timeoutMs: 3_000 },
      run: (input) => Effect.succeed({ text: input.text })
    })

  it.scoped("a handler that throws while building its effect fails the job with evidence", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const handler = Handler.make({
        type: "t",
        version: 1,
        input: Input,
        result: Output,
        attempt: { timeoutMs: 3_000 },
        run: (input): Effect.Effect<{ readonly text: string }> => {
          if (input.text === "doc") throw new Error("handler bug")
          return Effect.succeed({ text: input.text })
        }
      })
      const id = yield* t.submit({ maxAttempts: 1 })
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })

      const job = yield* t.reaches(id, terminal, 2_000)

      expect(job.state).toBe("failed")
      expect(job.errorClass).not.toBe("lease_expired")
      expect(job.lastError).toContain("handler bug")
    })
  )

  it.scoped("a result that does not match the result schema fails the job with the parse error as evidence", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const handler = Handler.make({
        type: "t",
        version: 1,
        input: Input,
        result: Schema.Struct({ text: Schema.String.pipe(Schema.minLength(10)) }),
        attempt: { timeoutMs: 3_000 },
        run: () => Effect.succeed({ text: "short" })
      })
      const id = yield* t.submit({ maxAttempts: 3 })
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })

      const job = yield* t.reaches(id, terminal, 2_000)

      expect({ state: job.state, errorClass: job.errorClass, attempts: job.attempts }).toEqual({
        state: "failed",
        errorClass: "unknown",
        attempts: 1
      })
      expect(job.lastError).toContain("result does not match the handler's result schema")
      expect(job.lastError).toMatch(/text: Expected a string at least 10 character\(s\) long/)
    })
  )

  it.scoped("a schema transformation that throws is reported as a defect in the evidence, not a crash", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const Exploding = Schema.transform(Schema.String, Schema.String, {
        strict: true,
        decode: (text) => {
          if (text === "doc") throw new Error("transform bug")
          return text
        },
        encode: (text) => text
      })
      const handler = echoing(Exploding)
      const id = yield* t.submit({ maxAttempts: 3 })
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })

      const job = yield* t.reaches(id, terminal, 2_000)

      expect({ state: job.state, errorClass: job.errorClass }).toEqual({ state: "failed", errorClass: "invalid_input" })
      expect(job.lastError).toContain("transform bug")
    })
  )

  it.scoped("an input schema with an asynchronous step is decoded once, in the worker's fiber", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const runs = { before: 0, after: 0 }
      const Slow = Schema.transformOrFail(Schema.String, Schema.String, {
        strict: true,
        decode: (text) =>
          Effect.sync(() => void runs.before++).pipe(
            Effect.zipRight(Effect.sleep(10)),
            Effect.zipRight(Effect.sync(() => void runs.after++)),
            // The worker's clock (the TestClock), not the wall clock.
            Effect.zipRight(Clock.currentTimeMillis),
            Effect.map((now) => `${text.toUpperCase()}@${now < 1e9 ? "test-clock" : "wall-clock"}`)
          ),
        encode: (text) => Effect.succeed(text)
      })
      const handler = echoing(Slow)
      const id = yield* t.submit({ maxAttempts: 3 })
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })

      const job = yield* t.reaches(id, terminal, 2_000)

      expect({ state: job.state, result: job.result }).toEqual({
        state: "succeeded",
        result: { text: "DOC@test-clock" }
      })
      expect(runs).toEqual({ before: 1, after: 1 })
    })
  )

  it.scoped(
    "an effectful transformation that rejects the input runs once and its log goes to the worker's logger",
    () =>
      Effect.gen(function* () {
        const t = yield* harness()
        let runs = 0
        const lines: Array<unknown> = []
        const Rejecting = Schema.transformOrFail(Schema.String, Schema.String, {
          strict: true,
          decode: (text, _, ast) =>
            Effect.sync(() => void runs++).pipe(
              Effect.zipRight(Effect.logInfo("checking the input")),
              Effect.zipRight(ParseResult.fail(new ParseResult.Type(ast, text, "rejected by the check")))
            ),
          encode: (text) => ParseResult.succeed(text)
        })
        const handler = echoing(Rejecting)
        const id = yield* t.submit({ maxAttempts: 3 })
        yield* t.start({ queue: "q", id: "w1", handlers: [handler] }).pipe(
          Effect.provide(
            Logger.replace(
              Logger.defaultLogger,
              Logger.make(({ message }) => lines.push(message))
            )
          )
        )

        const job = yield* t.reaches(id, terminal, 2_000)

        expect({ state: job.state, errorClass: job.errorClass }).toEqual({
          state: "failed",
          errorClass: "invalid_input"
        })
        expect(job.lastError).toContain("rejected by the check")
        expect(runs).toBe(1)
        expect(lines).toContainEqual(["checking the input"])
      })
  )

  it.scoped("an estimate function that throws fails the job with evidence before any model call", () =>
    Effect.gen(function* () {
      const t = yield* harness()
      const counter = { calls: 0 }
      const handler = Handler.make({
        type: "t",
        version: 1,
        input: Input,
        result: Output,
        estimateCents: (input) => {
          if (input.text === "doc") throw new Error("no price for this input")
          return 1
        },
        attempt: { timeoutMs: 3_000 },
        run: (_input, ctx) =>
          Effect.map(ctx.call({ estimateCents: 1, run: modelCall(counter, 100), cost: () => 1 }), (text) => ({ text }))
      })
      const id = yield* t.submit({ maxAttempts: 3 })
      const startedAt = yield* Clock.currentTimeMillis
      yield* t.start({ queue: "q", id: "w1", handlers: [handler] })

      const job = yield* t.reaches(id, terminal, 2_000)

      expect({ state: job.state, errorClass: job.errorClass, attempts: job.attempts }).toEqual({
        state: "failed",
        errorClass: "unknown",
        attempts: 1
      })
      expect(job.lastError).toContain("estimate failed: no price for this input")
      expect(counter.calls).toBe(0)
      expect((yield* Clock.currentTimeMillis) - startedAt).toBeLessThan(2_000)
    })
  )
})
