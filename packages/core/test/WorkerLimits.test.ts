import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, TestClock } from "effect"
import { StoreError } from "../src/Errors.js"
import * as Handler from "../src/Handler.js"
import { throttledBy } from "../src/internal/worker/limits.js"
import type { JobId } from "../src/Job.js"
import * as Limiter from "../src/Limiter.js"
import * as Protocol from "../src/Protocol.js"
import { harness } from "./fixtures.js"

const RESOURCE = "openai:gpt-4.1:key-a"

/** What the fake provider of these tests saw: each call's job and its start and end (TestClock ms). */
interface Seen {
  readonly job: string
  readonly start: number
  end: number | undefined
}

/**
 * A limiter that counts its `apply` calls and items, so a test can tell what the worker sent; each call takes
 * `latencyMs` (a round trip) before it applies.
 */
const counting = (limiter: Limiter.Limiter["Type"], latencyMs = 0) => {
  const counts = { calls: 0, items: 0, acquires: 0 }
  const view: Limiter.Limiter["Type"] = {
    ...limiter,
    apply: (options) => {
      counts.calls += 1
      counts.items += options.items.length
      counts.acquires += options.items.filter((item) => item._tag === "Acquire").length
      return latencyMs === 0 ? limiter.apply(options) : Effect.zipRight(Effect.sleep(latencyMs), limiter.apply(options))
    }
  }
  return { counts, view }
}

/**
 * A handler whose one model call takes `callMs` and names `resource` (unless `resource` is null); `fail` decides,
 * from the job id and the call's index among all calls, an error to fail with instead of answering.
 */
const provider = (options: {
  readonly seen: Array<Seen>
  readonly callMs: number
  readonly resource?: string | null | undefined
  readonly handlerResource?: string | undefined
  readonly tokens?: Handler.CallTokens | undefined
  readonly usage?: Handler.CallUsage | undefined
  readonly fail?: ((index: number) => unknown) | undefined
  readonly timeoutMs?: number | undefined
}) =>
  Handler.make({
    type: "limited.call",
    version: 1,
    input: Schema.Unknown,
    result: Schema.String,
    attempt: { timeoutMs: options.timeoutMs ?? 5_000 },
    estimateCents: 2,
    ...(options.handlerResource === undefined ? {} : { resource: options.handlerResource }),
    run: (_input, ctx) =>
      ctx.call({
        estimateCents: 2,
        ...(options.resource === null ? {} : { resource: options.resource ?? RESOURCE }),
        ...(options.tokens === undefined ? {} : { tokens: options.tokens }),
        ...(options.usage === undefined ? {} : { usage: () => options.usage }),
        cost: () => 1,
        run: Effect.gen(function* () {
          const index = options.seen.length
          const start = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          const entry: Seen = { job: ctx.jobId, start, end: undefined }
          options.seen.push(entry)
          yield* Effect.sleep(options.callMs)
          entry.end = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          const error = options.fail?.(index)
          if (error !== undefined) return yield* Effect.fail(error)
          return "answered"
        })
      })
  })

/** The most calls in flight at once among `seen`. */
const maxInFlight = (seen: ReadonlyArray<Seen>): number => {
  let max = 0
  for (const a of seen) {
    const overlapping = seen.filter((b) => b.start <= a.start && (b.end === undefined || b.end > a.start)).length
    max = Math.max(max, overlapping)
  }
  return max
}

const setup = (limits: Limiter.Limits | undefined, latencyMs = 0) =>
  Effect.gen(function* () {
    const t = yield* harness({ defaults: { type: "limited.call", maxAttempts: 1 } })
    const limiter = yield* Limiter.makeMemory
    if (limits !== undefined) yield* limiter.define({ items: [{ resource: RESOURCE, limits }] })
    const { counts, view } = counting(limiter, latencyMs)
    return { t, limiter, counts, view }
  })

const submitAll = (t: { readonly submit: (spec?: { input?: number }) => Effect.Effect<JobId> }, n: number) =>
  Effect.forEach(
    Array.from({ length: n }, (_, i) => i),
    (i) => t.submit({ input: i })
  )

describe("Worker with a fleet limiter", () => {
  it.scoped("calls that name no resource never touch the limiter", () =>
    Effect.gen(function* () {
      const { counts, t, view } = yield* setup({ maxConcurrent: 1 })
      const seen: Array<Seen> = []
      const ids = yield* submitAll(t, 3)
      yield* t.start({
        queue: "q",
        id: "w",
        concurrency: 3,
        limiter: view,
        handlers: [provider({ seen, callMs: 500, resource: null })]
      })
      for (const id of ids) yield* t.reaches(id, ["succeeded"])
      expect(counts.calls).toBe(0)
      // Not limited: the three calls ran at once.
      expect(maxInFlight(seen)).toBe(3)
    })
  )

  it.scoped("a worker without a limiter runs calls that name a resource unlimited", () =>
    Effect.gen(function* () {
      const { t } = yield* setup(undefined)
      const seen: Array<Seen> = []
      const ids = yield* submitAll(t, 3)
      yield* t.start({ queue: "q", id: "w", concurrency: 3, handlers: [provider({ seen, callMs: 500 })] })
      for (const id of ids) yield* t.reaches(id, ["succeeded"])
      expect(maxInFlight(seen)).toBe(3)
    })
  )

  it.scoped("the fleet's cap holds across workers; a job that waits uses no attempt and no money", () =>
    Effect.gen(function* () {
      const { limiter, t, view } = yield* setup({ maxConcurrent: 1 })
      const seen: Array<Seen> = []
      const ids = yield* submitAll(t, 4)
      const handlers = [provider({ seen, callMs: 400 })]
      for (const id of ["w1", "w2"]) {
        yield* t.start({ queue: "q", id, concurrency: 2, limiter: view, handlers })
      }
      // Seen mid-way: some job waits, queued, with why and until when on its record.
      yield* t.advanceUntil(
        Effect.map(
          Effect.forEach(ids, (id) => t.job(id)),
          (jobs) => jobs.some((job) => job.state === "queued" && job.attemptsBase > 0)
        ),
        10_000,
        10
      )
      const waiting = (yield* Effect.forEach(ids, (id) => t.job(id))).find(
        (job) => job.state === "queued" && job.attemptsBase > 0
      )!
      expect(waiting.errorClass).toBe("rate_limited")
      expect(waiting.lastError).toMatch(/^throttled: waiting for openai:gpt-4\.1:key-a \(concurrency\) until \d{4}-/)
      expect(Protocol.throttleOf(waiting)).toEqual({ resource: RESOURCE, why: "concurrency", until: waiting.runAfter })
      for (const id of ids) yield* t.reaches(id, ["succeeded"], 60_000)
      expect(seen).toHaveLength(4)
      expect(maxInFlight(seen)).toBe(1)
      for (const id of ids) {
        const job = yield* t.job(id)
        // maxAttempts is 1: every job ran on its one attempt, however often it waited; each paid its one call.
        expect(job.attempts - job.attemptsBase).toBe(1)
        expect(job.costCents).toBe(1)
      }
      const { resources } = yield* limiter.read({ resources: [RESOURCE] })
      expect(resources[0]!.permits).toEqual([])
      expect(resources[0]!.counters.grants).toBe(4)
      expect(resources[0]!.counters.waits.concurrency).toBeGreaterThan(0)
    })
  )

  it.scoped(
    "a handler's chained calls on a resource of one permit run one after another, never waiting on their own",
    () =>
      Effect.gen(function* () {
        // Each call's Release goes out before the next call's Acquire: had it gone after, every second call would be
        // told to wait for the permit of the first, and the job would be throttled back to its first call forever.
        const { limiter, t, view } = yield* setup({ maxConcurrent: 1 })
        const seen: Array<Seen> = []
        const chained = Handler.make({
          type: "limited.call",
          version: 1,
          input: Schema.Unknown,
          result: Schema.String,
          attempt: { timeoutMs: 5_000 },
          estimateCents: 2,
          run: (_input, ctx) => {
            const call = ctx.call({
              estimateCents: 2,
              resource: RESOURCE,
              cost: () => 1,
              run: Effect.gen(function* () {
                const start = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
                const entry: Seen = { job: ctx.jobId, start, end: undefined }
                seen.push(entry)
                yield* Effect.sleep(100)
                entry.end = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
                return "answered"
              })
            })
            return Effect.zipRight(Effect.zipRight(call, call), call)
          }
        })
        const [id] = yield* submitAll(t, 1)
        yield* t.start({ queue: "q", id: "w1", concurrency: 1, limiter: view, handlers: [chained] })
        yield* t.reaches(id!, ["succeeded"], 10_000)
        expect(seen).toHaveLength(3)
        const job = yield* t.job(id!)
        expect(job.attemptsBase).toBe(0)
        const { resources } = yield* limiter.read({ resources: [RESOURCE] })
        expect(resources[0]!.counters.grants).toBe(3)
        expect(resources[0]!.counters.waits.concurrency).toBe(0)
      })
  )

  it.scoped(
    "a call after the first of its attempt waits for room in place, never paying for the calls before it again",
    () =>
      Effect.gen(function* () {
        // One request a second, a bucket of one: the second call finds no room. Queued again, the job would start over
        // and make its first call again (paid twice); it waits in its attempt instead.
        const { t, view } = yield* setup({ requestsPerMinute: 60 })
        const seen: Array<Seen> = []
        const twoCalls = Handler.make({
          type: "limited.call",
          version: 1,
          input: Schema.Unknown,
          result: Schema.String,
          attempt: { timeoutMs: 5_000 },
          estimateCents: 2,
          run: (_input, ctx) => {
            const call = ctx.call({
              estimateCents: 2,
              resource: RESOURCE,
              cost: () => 1,
              run: Effect.gen(function* () {
                const start = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
                seen.push({ job: ctx.jobId, start, end: start })
                return "answered"
              })
            })
            return Effect.zipRight(call, call)
          }
        })
        const [id] = yield* submitAll(t, 1)
        yield* t.start({ queue: "q", id: "w1", concurrency: 1, limiter: view, handlers: [twoCalls] })
        yield* t.reaches(id!, ["succeeded"], 10_000)
        expect(seen).toHaveLength(2)
        expect(seen[1]!.start - seen[0]!.start).toBeGreaterThanOrEqual(1_000)
        const job = yield* t.job(id!)
        expect(job.attemptsBase).toBe(0)
        expect(job.costCents).toBe(2)
      })
  )

  it.scoped(
    "a job stopped while its first call's reservation goes back still gets it back (the refund is not cut)",
    () =>
      Effect.gen(function* () {
        // A refund (a settled charge at 0) takes 10 s to land; the job is cancelled meanwhile, and the worker learns it
        // at a heartbeat and stops the attempt while the refund is in flight.
        const t = yield* harness({
          defaults: { type: "limited.call", maxAttempts: 1 },
          wrap: (store) => ({
            ...store,
            charge: (options) =>
              options.items.some((item) => item.settled && item.amountCents === 0)
                ? Effect.zipRight(Effect.sleep(10_000), store.charge(options))
                : store.charge(options)
          })
        })
        const limiter = yield* Limiter.makeMemory
        yield* limiter.define({ items: [{ resource: RESOURCE, limits: { maxConcurrent: 1 } }] })
        const seen: Array<Seen> = []
        const holder = yield* t.submit({ input: 0 })
        yield* t.start({
          queue: "q",
          id: "w1",
          concurrency: 1,
          limiter,
          handlers: [provider({ seen, callMs: 30_000, timeoutMs: 60_000 })]
        })
        yield* t.advanceUntil(Effect.sync(() => seen.length === 1))
        const waiter = yield* t.submit({ input: 1 })
        yield* t.start({
          queue: "q",
          id: "w2",
          concurrency: 1,
          limiter,
          handlers: [provider({ seen, callMs: 30_000 })]
        })
        // The waiter's reservation is written, and its refund is on its way.
        yield* t.advanceUntil(
          Effect.map(t.query.charges({ jobId: waiter }), (charges) => charges.length === 1),
          10_000,
          10
        )
        yield* t.inner.cancel({ items: [{ jobId: waiter }] })
        yield* t.reaches(waiter, ["abandoned"], 60_000)
        // Long enough for any refund in flight to land.
        yield* TestClock.adjust(30_000)
        const charges = yield* t.query.charges({ jobId: waiter })
        // Nothing was called for it: its one call's reservation ends at 0, settled.
        expect(charges.map((charge) => [charge.amountCents, charge.settled])).toEqual([[0, true]])
        expect(seen.map((entry) => entry.job)).toEqual([holder])
      })
  )

  it.scoped("a call told to wait writes its reservation and one refund, nothing more", () =>
    Effect.gen(function* () {
      // Every charge item the store receives, in order: a throttled call costs the store two writes, not three.
      const written: Array<readonly [string, number, boolean]> = []
      const t = yield* harness({
        defaults: { type: "limited.call", maxAttempts: 1 },
        wrap: (store) => ({
          ...store,
          charge: (options) =>
            Effect.zipRight(
              Effect.sync(() => {
                for (const item of options.items) written.push([item.callId, item.amountCents, item.settled])
              }),
              store.charge(options)
            )
        })
      })
      const limiter = yield* Limiter.makeMemory
      yield* limiter.define({ items: [{ resource: RESOURCE, limits: { maxConcurrent: 1 } }] })
      const seen: Array<Seen> = []
      const handlers = [provider({ seen, callMs: 30_000, timeoutMs: 60_000 })]
      const holder = yield* t.submit({ input: 0 })
      yield* t.start({ queue: "q", id: "w1", concurrency: 1, limiter, handlers })
      yield* t.advanceUntil(Effect.sync(() => seen.length === 1))
      const waiter = yield* t.submit({ input: 1 })
      yield* t.start({ queue: "q", id: "w2", concurrency: 1, limiter, handlers })
      yield* t.advanceUntil(
        Effect.map(t.job(waiter), (job) => job.state === "queued" && job.attemptsBase > 0),
        10_000,
        10
      )
      const [first] = written.filter(([id]) => id.startsWith(`${waiter}:`))
      // Both then run (the waiter once the holder's permit is back).
      for (const id of [holder, waiter]) yield* t.reaches(id, ["succeeded"], 120_000)
      expect(written.filter(([id]) => id === first![0]).map(([, amount, settled]) => [amount, settled])).toEqual([
        [2, false],
        [0, true]
      ])
      expect(seen.map((entry) => entry.job)).toEqual([holder, waiter])
    })
  )

  it.scoped("the token reservation is corrected by the reported usage", () =>
    Effect.gen(function* () {
      const { limiter, t, view } = yield* setup({ inputTokensPerMinute: 60_000, outputTokensPerMinute: 60_000 })
      const seen: Array<Seen> = []
      const id = yield* t.submit({ input: 0 })
      yield* t.start({
        queue: "q",
        id: "w",
        limiter: view,
        handlers: [
          provider({
            seen,
            callMs: 0,
            tokens: { input: 600, maxOutput: 800 },
            usage: { inputTokens: 100, outputTokens: 50 }
          })
        ]
      })
      yield* t.reaches(id, ["succeeded"])
      // Buckets of 1,000 (one second's worth): the call kept what it used, the rest came back at once.
      const { resources } = yield* limiter.read({ resources: [RESOURCE], now: seen[0]!.end! })
      expect(resources[0]!.view.buckets.inputTokens?.level).toBe(900)
      expect(resources[0]!.view.buckets.outputTokens?.level).toBe(950)
      expect(resources[0]!.view.buckets.requests).toBeNull()
    })
  )

  it.scoped("the handler's resource is used by calls that name none", () =>
    Effect.gen(function* () {
      const { counts, limiter, t, view } = yield* setup(undefined)
      const seen: Array<Seen> = []
      const id = yield* t.submit({ input: 0 })
      yield* t.start({
        queue: "q",
        id: "w",
        limiter: view,
        handlers: [provider({ seen, callMs: 0, resource: null, handlerResource: "anthropic:sonnet:key-b" })]
      })
      yield* t.reaches(id, ["succeeded"])
      expect(counts.acquires).toBe(1)
      const { resources } = yield* limiter.read({})
      expect(resources.map((r) => [r.resource, r.counters.grants])).toEqual([["anthropic:sonnet:key-b", 1]])
    })
  )

  it.scoped("one 429 with retry-after pauses the fleet: no call for 2 s, then one probe, then the rest", () =>
    Effect.gen(function* () {
      const { limiter, t, view } = yield* setup(undefined)
      const seen: Array<Seen> = []
      const ids = yield* submitAll(t, 6)
      const handlers = [
        provider({
          seen,
          callMs: 100,
          fail: (index) => (index === 0 ? { status: 429, headers: { "retry-after": "2" } } : undefined)
        })
      ]
      yield* t.start({ queue: "q", id: "w1", concurrency: 1, limiter: view, handlers })
      // The first call answers 429; only then does a second worker start.
      yield* t.advanceUntil(
        Effect.sync(() => seen[0]?.end !== undefined),
        10_000,
        10
      )
      yield* t.start({ queue: "q", id: "w2", concurrency: 3, limiter: view, handlers })
      yield* t.start({ queue: "q", id: "w3", concurrency: 3, limiter: view, handlers })
      for (const id of ids) yield* t.reaches(id, ["succeeded"], 60_000)

      const first = seen[0]!
      const after = seen.slice(1).sort((a, b) => a.start - b.start)
      expect(after).toHaveLength(6)
      // Nothing for the pause, then exactly one probe, alone until it answered.
      expect(after[0]!.start).toBeGreaterThanOrEqual(first.end! + 2_000)
      expect(after[1]!.start).toBeGreaterThanOrEqual(after[0]!.end!)
      for (const id of ids) {
        const job = yield* t.job(id)
        expect(job.attempts - job.attemptsBase).toBe(1)
      }
      const { resources } = yield* limiter.read({ resources: [RESOURCE] })
      expect(resources[0]!.counters.pauses.rate_limited).toBe(1)
      expect(resources[0]!.view.pause).toBeNull()
      expect(resources[0]!.view.halfOpen).toBe(false)
    })
  )

  it.scoped(
    "with no limits declared, the fleet learns the provider's concurrency from its 429s: every chain finishes",
    () =>
      Effect.gen(function* () {
        // The provider takes two calls at once and answers a third at once with a 429 (retry-after 1 s); the fleet
        // declares nothing. Each job makes three calls in a row. Before the fleet learned from 429s, every 429 paused
        // the resource, the half-open probe met the same cap, and the pause sent the job holding the provider's
        // slot back to the queue mid-chain: chains started over and over and jobs never finished.
        const { limiter, t, view } = yield* setup(undefined)
        const cap = 1
        let inFlight = 0
        let maxSeen = 0
        let refused = 0
        let answered = 0
        const chained = Handler.make({
          type: "limited.call",
          version: 1,
          input: Schema.Unknown,
          result: Schema.String,
          attempt: { timeoutMs: 30_000 },
          estimateCents: 2,
          run: (_input, ctx) => {
            const call = ctx.call({
              estimateCents: 2,
              resource: RESOURCE,
              cost: () => 1,
              costOnError: () => 0,
              run: Effect.suspend(() => {
                if (inFlight >= cap) {
                  refused += 1
                  return Effect.fail({ status: 429, headers: { "retry-after": "1" } })
                }
                inFlight += 1
                maxSeen = Math.max(maxSeen, inFlight)
                return Effect.sleep(1_500).pipe(
                  Effect.ensuring(Effect.sync(() => (inFlight -= 1))),
                  Effect.zipRight(Effect.sync(() => (answered += 1))),
                  Effect.as("answered")
                )
              })
            })
            return Effect.zipRight(Effect.zipRight(call, call), call)
          }
        })
        const ids = yield* submitAll(t, 12)
        for (const id of ["w1", "w2", "w3"]) {
          yield* t.start({ queue: "q", id, concurrency: 2, limiter: view, handlers: [chained] })
        }
        // 36 calls of 1.5 s one at a time take 54 s; the 429s and pauses add a little.
        yield* t.advanceUntil(
          Effect.map(
            Effect.forEach(ids, (id) => t.stateOf(id)),
            (states) => states.every((state) => state === "succeeded")
          ),
          90_000,
          100
        )
        for (const id of ids) {
          const job = yield* t.job(id)
          // A 429 or a pause never costs an attempt.
          expect(job.attempts - job.attemptsBase).toBe(1)
        }
        expect(maxSeen).toBe(cap)
        // The first wave meets the cap once per call beyond it (twelve asked at once, two admitted); after that,
        // only the slow raise of the learned cap finds the provider's cap again, about once per 10 * cap calls.
        expect(refused).toBeLessThanOrEqual(10 + Math.ceil(answered / (10 * cap)) + 2)
        const { resources } = yield* limiter.read({ resources: [RESOURCE] })
        expect(resources[0]!.view.learnedConcurrent).toBeLessThanOrEqual(cap + 1)
      })
  )

  it.scoped("a success that reports a limit exhausted pauses the resource until its reset", () =>
    Effect.gen(function* () {
      const { limiter, t, view } = yield* setup(undefined)
      const id = yield* t.submit({ input: 0 })
      const handler = Handler.make({
        type: "limited.call",
        version: 1,
        input: Schema.Unknown,
        result: Schema.String,
        attempt: { timeoutMs: 5_000 },
        run: (_input, ctx) =>
          ctx.call({
            estimateCents: 1,
            resource: RESOURCE,
            cost: () => 1,
            rateLimit: () => ({ requests: { limit: 60, remaining: 0, resetMs: 3_000 } }),
            run: Effect.succeed("ok")
          })
      })
      yield* t.start({ queue: "q", id: "w", limiter: view, handlers: [handler] })
      const done = yield* t.reaches(id, ["succeeded"])
      expect(done.attempts - done.attemptsBase).toBe(1)
      const { now, resources } = yield* limiter.read({ resources: [RESOURCE] })
      expect(resources[0]!.pause).toMatchObject({ kind: "rate_limited" })
      expect(resources[0]!.pause!.until! - now).toBeGreaterThan(2_500)
    })
  )

  it.scoped("a spend cap pauses the resource until resumed; its jobs wait without using attempts", () =>
    Effect.gen(function* () {
      const { limiter, t, view } = yield* setup(undefined)
      const seen: Array<Seen> = []
      const ids = yield* submitAll(t, 2)
      const quota = { status: 429, body: { error: { type: "insufficient_quota", code: "insufficient_quota" } } }
      yield* t.start({
        queue: "q",
        id: "w",
        concurrency: 1,
        limiter: view,
        throttle: { pausedRecheckMs: 5_000 },
        handlers: [provider({ seen, callMs: 10, fail: (index) => (index === 0 ? quota : undefined) })]
      })
      yield* t.advanceUntil(
        Effect.map(
          Effect.forEach(ids, (id) => t.job(id)),
          (jobs) => jobs.every((job) => job.state === "queued" && job.attemptsBase > 0)
        ),
        20_000,
        10
      )
      // Minutes pass: one call in all (no retry storm), both jobs waiting, their attempts unused.
      yield* t.advanceUntil(Effect.succeed(false), 30_000, 1_000).pipe(
        Effect.ignore,
        Effect.catchAllDefect(() => Effect.void)
      )
      expect(seen).toHaveLength(1)
      for (const id of ids) {
        const job = yield* t.job(id)
        expect(job.state).toBe("queued")
        expect(job.lastError).toMatch(/paused \(quota_exhausted\) until resumed/)
      }
      yield* limiter.resume({ items: [{ resource: RESOURCE }] })
      for (const id of ids) {
        const job = yield* t.reaches(id, ["succeeded"], 20_000)
        expect(job.attempts - job.attemptsBase).toBe(1)
      }
      expect(seen).toHaveLength(3)
    })
  )

  it.scoped("permits live as long as their job's lease: renewed with its heartbeats", () =>
    Effect.gen(function* () {
      const { limiter, t, view } = yield* setup({ maxConcurrent: 1 })
      const seen: Array<Seen> = []
      const ids = yield* submitAll(t, 2)
      // A 2 s attempt has a lease of a few seconds; the call takes 20 s, renewed all along.
      yield* t.start({
        queue: "q",
        id: "w",
        concurrency: 2,
        limiter: view,
        handlers: [provider({ seen, callMs: 20_000, timeoutMs: 2_000 })]
      })
      for (const id of ids) yield* t.reaches(id, ["succeeded"], 120_000)
      expect(seen).toHaveLength(2)
      expect(maxInFlight(seen)).toBe(1)
      const { resources } = yield* limiter.read({ resources: [RESOURCE] })
      expect(resources[0]!.counters.grants).toBe(2)
    })
  )

  it.scoped("a limiter that cannot be reached fails the call before it starts: nothing called, nothing charged", () =>
    Effect.gen(function* () {
      const { t } = yield* setup(undefined)
      const seen: Array<Seen> = []
      const id = yield* t.submit({ input: 0 })
      const down: Limiter.Limiter["Type"] = {
        ...(yield* Limiter.makeMemory),
        apply: () => Effect.fail(new StoreError({ reason: "Connection", operation: "limiter.apply", detail: "down" }))
      }
      yield* t.start({ queue: "q", id: "w", limiter: down, handlers: [provider({ seen, callMs: 0 })] })
      const job = yield* t.reaches(id, ["failed", "abandoned", "succeeded"])
      expect(seen).toHaveLength(0)
      expect(job.costCents).toBe(0)
      expect(job.state).toBe("failed")
    })
  )

  it.scoped("the items of one tick go out in one apply", () =>
    Effect.gen(function* () {
      // Each apply takes 20 ms: the items handed in meanwhile wait for the next one.
      const { counts, t, view } = yield* setup(undefined, 20)
      const seen: Array<Seen> = []
      const ids = yield* submitAll(t, 8)
      yield* t.start({
        queue: "q",
        id: "w",
        concurrency: 8,
        limiter: view,
        handlers: [provider({ seen, callMs: 1_000 })]
      })
      for (const id of ids) yield* t.reaches(id, ["succeeded"])
      // Eight Acquires and eight Releases (a returned call's release goes out beside its settlement), in a few calls
      // (the first of each burst alone, the rest together).
      yield* t.advanceUntil(
        Effect.sync(() => counts.items >= 16),
        5_000,
        10
      )
      expect(counts.items).toBe(16)
      expect(counts.calls).toBeLessThanOrEqual(6)
    })
  )
})

describe("throttledBy", () => {
  const limits = { recheckMs: 1_000, pausedRecheckMs: 60_000 }
  it("a wait that ends now still waits a millisecond: at a permit's end the job is not claimed again at once", () => {
    // A permit is live through its end, so at that instant the Limiter answers a wait until now; a delay of 0 queued
    // the job for now, and with time standing still it was claimed and told to wait again without end.
    const now = 1_000_000
    for (const reason of ["concurrency", "probe", "requests"] as const) {
      const throttled = throttledBy(limits, RESOURCE, now, { _tag: "Wait", until: now, reason })
      expect(throttled.delayMs).toBe(1)
      expect(throttled.until).toBe(now + 1)
    }
    expect(
      throttledBy(limits, RESOURCE, now, { _tag: "Wait", until: now + 5_000, reason: "concurrency" }).delayMs
    ).toBe(1_000)
    expect(throttledBy(limits, RESOURCE, now, { _tag: "Wait", until: now + 250, reason: "requests" }).delayMs).toBe(250)
  })
})
