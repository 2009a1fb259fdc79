import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Fiber, Stream, TestClock } from "effect"
import * as Client from "../src/Client.js"
import * as DeadLetters from "../src/DeadLetters.js"
import { TransportError } from "../src/Errors.js"
import type { Job, JobId } from "../src/Job.js"
import { Query } from "../src/Query.js"
import * as StoreModule from "../src/Store.js"
import { Store } from "../src/Store.js"
import * as TransportModule from "../src/Transport.js"
import { Transport } from "../src/Transport.js"

type Wrap<S> = (service: S) => S

const setup = (options: { readonly transport?: Wrap<Transport["Type"]>; readonly store?: Wrap<Store["Type"]> } = {}) =>
  Effect.gen(function* () {
    const { store, query } = yield* StoreModule.makeMemory
    const memory = yield* TransportModule.makeMemory()
    const client = yield* Client.make.pipe(
      Effect.provideService(Store, options.store ? options.store(store) : store),
      Effect.provideService(Query, query),
      Effect.provideService(Transport, options.transport ? options.transport(memory) : memory)
    )
    return { store, query, memory, client }
  })

const receiveAll = (transport: Transport["Type"]) =>
  transport.receive({ queue: "q", max: 100, visibilityMs: 1_000, waitMs: 0 })

const claim = (store: Store["Type"], jobId: JobId) =>
  Effect.gen(function* () {
    const reply = yield* store.claim({ items: [{ jobId, owner: "w", leaseMs: 10_000 }] })
    const result = reply.results[0]!
    if (result._tag !== "Claimed") return yield* Effect.die(`expected a claim, got ${result._tag}`)
    return result.job
  })

const settle = (
  store: Store["Type"],
  job: Job,
  outcome: Parameters<Store["Type"]["settle"]>[0]["items"][0]["outcome"]
) => store.settle({ items: [{ jobId: job.id, token: job.leaseToken, outcome }] })

describe("Client.submit", () => {
  it.effect("stores the job with its canonical input hash and publishes it once", () =>
    Effect.gen(function* () {
      const { client, memory, query } = yield* setup()
      const first = yield* client.submit({ queue: "q", type: "t", input: { b: 1, a: [true, null] }, requestKey: "k1" })
      const again = yield* client.submit({ queue: "q", type: "t", input: { a: [true, null], b: 1 }, requestKey: "k1" })

      expect(first.created).toBe(true)
      expect(again.created).toBe(false)
      expect(again.job.id).toBe(first.job.id)
      expect(first.job.inputHash).toMatch(/^[0-9a-f]{64}$/)
      expect(first.now).toBe(first.job.createdAt)
      expect((yield* query.list({})).length).toBe(1)
      const deliveries = yield* receiveAll(memory)
      expect(deliveries.map((d) => [d.jobId, d.type, d.version, d.priority])).toEqual([[first.job.id, "t", 1, 0]])
    })
  )

  it.effect("applies the one set of defaults: version 1, 3 attempts, priority 0, trace id from the job id", () =>
    Effect.gen(function* () {
      const { client } = yield* setup()
      const { job } = yield* client.submit({ queue: "q", type: "t" })

      expect(Client.defaults).toEqual({ version: 1, maxAttempts: 3, priority: 0 })
      expect(job).toMatchObject({
        version: 1,
        maxAttempts: 3,
        priority: 0,
        input: null,
        inputRef: null,
        tenant: null,
        requestKey: null,
        deadlineAt: null,
        budgetCents: null,
        runAfter: job.createdAt,
        traceId: job.id.replace(/-/g, "")
      })
    })
  )

  it.effect("stores an inputRef with null input and hashes the reference", () =>
    Effect.gen(function* () {
      const { client } = yield* setup()
      const a = yield* client.submit({ queue: "q", type: "t", inputRef: "s3://bucket/a", requestKey: "ref" })
      const same = yield* client.submit({ queue: "q", type: "t", inputRef: "s3://bucket/a", requestKey: "ref" })
      const other = yield* Effect.either(
        client.submit({ queue: "q", type: "t", inputRef: "s3://bucket/b", requestKey: "ref" })
      )

      expect([a.job.input, a.job.inputRef]).toEqual([null, "s3://bucket/a"])
      expect(same.created).toBe(false)
      expect(Either.isLeft(other) && other.left._tag).toBe("IdempotencyKeyReused")
    })
  )

  it.effect("rejects non-JSON input and bad options with InvalidInput and writes nothing", () =>
    Effect.gen(function* () {
      const { client, memory, query } = yield* setup()
      const inputs = [
        { n: Number.NaN },
        { when: new Date(0) },
        { f: () => 1 },
        { big: 1n },
        [undefined],
        { s: "a\u0000b" }
      ]
      for (const input of inputs) {
        const result = yield* Effect.either(client.submit({ queue: "q", type: "t", input }))
        expect(Either.isLeft(result) && result.left._tag).toBe("InvalidInput")
      }
      const badOptions: Array<[Partial<Client.SubmitOptions>, string]> = [
        [{ input: 1, inputRef: "ref" }, "inputRef"],
        [{ inputRef: "" }, "inputRef"],
        [{ type: "" }, "type"],
        [{ maxAttempts: 0 }, "maxAttempts"],
        [{ version: 1.5 }, "version"],
        [{ priority: 0.5 }, "priority"],
        [{ delayMs: Number.POSITIVE_INFINITY }, "delayMs"],
        [{ deadlineAt: Number.NaN }, "deadlineAt"],
        [{ budgetCents: -1 }, "budgetCents"],
        [{ requestKey: "" }, "requestKey"],
        // Ranges every store can hold: 32-bit integers, times from 1970 to the end of 9999, delays within a century.
        [{ priority: 2 ** 31 }, "priority"],
        [{ priority: -(2 ** 31) - 1 }, "priority"],
        [{ version: 2 ** 31 }, "version"],
        [{ maxAttempts: 2 ** 31 }, "maxAttempts"],
        [{ delayMs: 1e20 }, "delayMs"],
        [{ runAfter: 8.64e15 }, "runAfter"],
        [{ runAfter: -1 }, "runAfter"],
        [{ deadlineAt: Client.limits.maxEpochMs + 1 }, "deadlineAt"],
        // Strings no store can keep.
        [{ traceId: "t\u0000" }, "traceId"],
        [{ traceId: "\ud800" }, "traceId"],
        [{ inputRef: "ref\udc00" }, "inputRef"],
        [{ requestKey: "k\u0000" }, "requestKey"],
        [{ tenant: "\ud83d" }, "tenant"],
        [{ type: "t\u0000" }, "type"]
      ]
      for (const [options, path] of badOptions) {
        const result = yield* Effect.either(client.submit({ queue: "q", type: "t", ...options }))
        expect(Either.isLeft(result) && result.left._tag === "InvalidInput" && result.left.path).toBe(path)
      }
      expect(yield* query.list({})).toEqual([])
      expect(yield* memory.size("q")).toBe(0)
    })
  )

  it.effect("fails with IdempotencyKeyReused for a reused key and leaves the first job alone", () =>
    Effect.gen(function* () {
      const { client, memory, query } = yield* setup()
      const first = yield* client.submit({ queue: "q", type: "t", input: 1, requestKey: "k" })
      const reused = yield* Effect.either(client.submit({ queue: "q", type: "t", input: 2, requestKey: "k" }))

      expect(Either.isLeft(reused) && reused.left).toMatchObject({
        _tag: "IdempotencyKeyReused",
        requestKey: "k",
        existingJobId: first.job.id
      })
      expect(yield* query.list({})).toEqual([first.job])
      expect(yield* memory.size("q")).toBe(1)
    })
  )

  it.effect("the ranges' edges are accepted", () =>
    Effect.gen(function* () {
      const { client } = yield* setup()
      const { job } = yield* client.submit({
        queue: "q",
        type: "t",
        priority: Client.limits.maxInt,
        version: Client.limits.maxInt,
        maxAttempts: Client.limits.maxInt,
        deadlineAt: Client.limits.maxEpochMs,
        traceId: "\ud83d\ude00"
      })
      expect(job).toMatchObject({ priority: 2 ** 31 - 1, deadlineAt: Client.limits.maxEpochMs, traceId: "😀" })
    })
  )

  it.effect("a bound on queued jobs refuses a submit past it with QueueFull and writes nothing", () =>
    Effect.gen(function* () {
      const { store, query } = yield* StoreModule.makeMemory
      const memory = yield* TransportModule.makeMemory()
      const client = yield* Client.makeWith({ maxQueued: 3, maxQueuedPerTenant: 2, queueFullRetryAfterMs: 1_500 }).pipe(
        Effect.provideService(Store, store),
        Effect.provideService(Query, query),
        Effect.provideService(Transport, memory)
      )
      yield* client.submit({ queue: "q", type: "t", tenant: "a" })
      yield* client.submit({ queue: "q", type: "t", tenant: "a" })

      const tenantFull = yield* Effect.flip(client.submit({ queue: "q", type: "t", tenant: "a" }))
      yield* client.submit({ queue: "q", type: "t", tenant: "b" })
      const queueFull = yield* Effect.flip(client.submit({ queue: "q", type: "t", tenant: "c" }))
      const batch = yield* Effect.flip(
        client.submitMany([
          { queue: "other", type: "t" },
          { queue: "q", type: "t" }
        ])
      )

      expect(tenantFull).toMatchObject({ _tag: "QueueFull", queue: "q", tenant: "a", limit: 2, retryAfterMs: 1_500 })
      expect(queueFull).toMatchObject({ _tag: "QueueFull", queue: "q", tenant: null, limit: 3 })
      expect(batch).toMatchObject({ _tag: "QueueFull", queue: "q" })
      expect((yield* query.list({ limit: null })).length).toBe(3)
      expect(yield* memory.size("other")).toBe(0)
      // A job that leaves the queue makes room.
      const [oldest] = yield* query.list({ queue: "q", order: "oldest" })
      yield* claim(store, oldest!.id)
      expect((yield* client.submit({ queue: "q", type: "t", tenant: "c" })).created).toBe(true)
    })
  )

  it.effect("a reused key with the same input but any other option the key vouches for is IdempotencyKeyReused", () =>
    Effect.gen(function* () {
      const { client, memory, query } = yield* setup()
      const request: Client.SubmitOptions = {
        queue: "q",
        type: "t",
        input: { text: "same" },
        requestKey: "whole",
        budgetCents: 10,
        deadlineAt: 9_000_000,
        delayMs: 100
      }
      const first = yield* client.submit(request)
      const others: ReadonlyArray<Partial<Client.SubmitOptions>> = [
        { type: "u" },
        { version: 2 },
        { budgetCents: 11 },
        { budgetCents: undefined },
        { maxAttempts: 5 },
        { priority: 1 },
        { deadlineAt: 9_000_001 },
        { delayMs: 200 },
        { delayMs: undefined, runAfter: 100 },
        { input: undefined, inputRef: "s3://same" }
      ]
      for (const other of others) {
        const result = yield* Effect.either(client.submit({ ...request, ...other }))
        expect(Either.isLeft(result) && result.left, JSON.stringify(other)).toMatchObject({
          _tag: "IdempotencyKeyReused",
          existingJobId: first.job.id
        })
      }
      // What the defaults fill in is the same request; so is another trace id.
      const same = yield* client.submit({ ...request, version: 1, maxAttempts: 3, priority: 0, traceId: "retry" })
      expect(same).toMatchObject({ created: false, job: first.job })
      expect(yield* query.list({})).toEqual([first.job])
      expect(yield* memory.size("q")).toBe(1)
    })
  )

  it.effect("a retry with the same absolute runAfter is the same request, though store time has moved", () =>
    Effect.gen(function* () {
      const { client, query } = yield* setup()
      const request: Client.SubmitOptions = { queue: "q", type: "t", input: 1, requestKey: "at", runAfter: 60_000 }
      const first = yield* client.submit(request)
      yield* TestClock.adjust(20_000)
      const retry = yield* client.submit(request)
      const delayed = yield* Effect.either(client.submit({ ...request, runAfter: 60_001 }))

      expect(first.job.runAfter).toBe(60_000)
      expect(retry).toMatchObject({ created: false, job: first.job })
      expect(Either.isLeft(delayed) && delayed.left._tag).toBe("IdempotencyKeyReused")
      expect(yield* Effect.either(client.submit({ ...request, delayMs: 5 }))).toMatchObject({
        left: { _tag: "InvalidInput", path: "delayMs" }
      })
      expect((yield* query.list({})).length).toBe(1)
    })
  )

  it.effect("accepts the job when the publish fails; a delayed job is published with its delay", () =>
    Effect.gen(function* () {
      let publishes = 0
      const { client, query } = yield* setup({
        transport: (t) => ({
          ...t,
          publish: () =>
            Effect.suspend(() => {
              publishes++
              return Effect.fail(new TransportError({ reason: "Connection", operation: "publish", detail: "down" }))
            })
        })
      })
      const result = yield* client.submit({ queue: "q", type: "t", input: 1 })
      expect(result.created).toBe(true)
      expect(publishes).toBe(1)
      expect((yield* query.get({ jobId: result.job.id })).state).toBe("queued")

      const delayed = yield* setup()
      const later = yield* delayed.client.submit({ queue: "q", type: "t", input: 2, delayMs: 5_000 })
      expect(later.job.runAfter - later.now).toBe(5_000)
      expect(yield* receiveAll(delayed.memory)).toEqual([])
      yield* TestClock.adjust(5_000)
      expect((yield* receiveAll(delayed.memory)).map((d) => d.jobId)).toEqual([later.job.id])
    })
  )

  it.effect("publishes with the delay measured from the reply's store time, and leaves over-long delays alone", () =>
    Effect.gen(function* () {
      const published: Array<number | undefined> = []
      const { client, memory } = yield* setup({
        // A store whose clock runs 60 s ahead of the caller's: only the reply's `now` gives the right delay.
        store: (s) => ({ ...s, submit: (options) => s.submit({ ...options, now: 60_000 }) }),
        transport: (t) => ({
          ...t,
          capabilities: { ...t.capabilities, maxDelayMs: 10_000 },
          publish: (options) =>
            Effect.zipRight(
              Effect.sync(() => published.push(...options.items.map((item) => item.delayMs))),
              t.publish(options)
            )
        })
      })
      const soon = yield* client.submit({ queue: "q", type: "t", input: 1, delayMs: 2_000 })
      const far = yield* client.submit({ queue: "q", type: "t", input: 2, delayMs: 20_000 })

      expect(soon.job.runAfter).toBe(62_000)
      expect(far.job.state).toBe("queued")
      expect(published).toEqual([2_000])
      expect(yield* memory.size("q")).toBe(1)
    })
  )
})

describe("Client.submitMany", () => {
  it.effect("stores every item in one batch, reports each outcome and publishes only the created jobs", () =>
    Effect.gen(function* () {
      let batches = 0
      const { client, memory, query } = yield* setup({
        store: (s) => ({
          ...s,
          submit: (options) =>
            Effect.zipRight(
              Effect.sync(() => batches++),
              s.submit(options)
            )
        })
      })
      const existing = yield* client.submit({ queue: "q", type: "t", input: "x", requestKey: "old" })
      yield* receiveAll(memory).pipe(
        Effect.flatMap((ds) => Effect.forEach(ds, (delivery) => memory.ack({ items: [{ delivery }] })))
      )
      batches = 0

      const { now, results } = yield* client.submitMany([
        { queue: "q", type: "t", input: 1, priority: 2 },
        { queue: "q", type: "t", input: "x", requestKey: "old" },
        { queue: "q", type: "t", input: "y", requestKey: "old" },
        { queue: "q", type: "t", input: 3, delayMs: 1_000 }
      ])

      expect(batches).toBe(1)
      expect(results.map((r) => r._tag)).toEqual(["Created", "Existing", "KeyReused", "Created"])
      const created = results.flatMap((r) => (r._tag === "Created" ? [r.job] : []))
      expect(created.map((job) => [job.priority, job.runAfter - now, job.maxAttempts])).toEqual([
        [2, 0, 3],
        [0, 1_000, 3]
      ])
      expect(results[1]).toEqual({ _tag: "Existing", job: existing.job })
      const due = yield* receiveAll(memory)
      expect(due.map((d) => d.jobId)).toEqual([created[0]!.id])
      yield* Effect.forEach(due, (delivery) => memory.ack({ items: [{ delivery }] }))
      yield* TestClock.adjust(1_000)
      expect((yield* receiveAll(memory)).map((d) => d.jobId)).toEqual([created[1]!.id])
      expect((yield* query.list({})).length).toBe(3)
    })
  )

  it.effect("fails the whole batch with InvalidInput naming the item and writes nothing", () =>
    Effect.gen(function* () {
      const { client, memory, query } = yield* setup()
      const result = yield* Effect.either(
        client.submitMany([
          { queue: "q", type: "t", input: 1 },
          { queue: "q", type: "t", input: { n: Number.NaN } }
        ])
      )

      expect(Either.isLeft(result) && result.left).toMatchObject({ _tag: "InvalidInput", path: "[1].$.n" })
      expect(yield* query.list({})).toEqual([])
      expect(yield* memory.size("q")).toBe(0)
      expect((yield* client.submitMany([])).results).toEqual([])
    })
  )
})

describe("Client.watch", () => {
  it.effect("emits the current job, each change, and ends after the terminal state", () =>
    Effect.gen(function* () {
      const { client, store } = yield* setup()
      const { job } = yield* client.submit({ queue: "q", type: "t", input: { x: 1 } })
      const watching = yield* Effect.fork(Stream.runCollect(client.watch(job.id, { intervalMs: 100 })))

      yield* TestClock.adjust(250)
      const claimed = yield* claim(store, job.id)
      yield* TestClock.adjust(250)
      yield* store.heartbeat({ items: [{ jobId: job.id, token: claimed.leaseToken, leaseMs: 10_000, progress: 0.5 }] })
      yield* TestClock.adjust(250)
      yield* settle(store, claimed, { _tag: "Complete", result: { ok: true } })
      yield* TestClock.adjust(250)

      const seen = Chunk.toReadonlyArray(yield* Fiber.join(watching))
      expect(seen.map((j) => [j.state, j.progress])).toEqual([
        ["queued", 0],
        ["running", 0],
        ["running", 0.5],
        ["succeeded", 1]
      ])
      for (let i = 1; i < seen.length; i++) expect(seen[i]!.updatedAt).toBeGreaterThan(seen[i - 1]!.updatedAt)
    })
  )

  it.effect("fails with JobNotFound for an unknown id and for another tenant's job", () =>
    Effect.gen(function* () {
      const { client } = yield* setup()
      const unknown = yield* Effect.either(
        Stream.runCollect(client.watch("01890a5d-ac96-774b-bcce-b302099a8057" as JobId, { intervalMs: 10 }))
      )
      const { job } = yield* client.submit({ queue: "q", type: "t", tenant: "a" })
      const foreign = yield* Effect.either(Stream.runCollect(client.watch(job.id, { intervalMs: 10, tenant: "b" })))

      expect(Either.isLeft(unknown) && unknown.left._tag).toBe("JobNotFound")
      expect(Either.isLeft(foreign) && foreign.left._tag).toBe("JobNotFound")
    })
  )
})

describe("Client.cancel, deadLetters, replay and the reads", () => {
  it.effect("cancel abandons a queued job; replay requeues dead letters and publishes them", () =>
    Effect.gen(function* () {
      const { client, memory, store } = yield* setup()
      const queued = yield* client.submit({ queue: "q", type: "t", input: 1 })
      const cancelled = yield* client.cancel(queued.job.id)
      expect([cancelled.state, cancelled.abandonReason]).toEqual(["abandoned", "cancelled"])
      const again = yield* Effect.either(client.cancel(queued.job.id))
      expect(Either.isLeft(again) && again.left).toMatchObject({ _tag: "AlreadyTerminal", state: "abandoned" })
      const missing = yield* Effect.either(client.cancel("01890a5d-ac96-774b-bcce-b302099a8057" as JobId))
      expect(Either.isLeft(missing) && missing.left._tag).toBe("JobNotFound")

      const dead = yield* client.submit({ queue: "q", type: "t", input: 2 })
      const claimed = yield* claim(store, dead.job.id)
      yield* settle(store, claimed, { _tag: "Fail", errorClass: "auth", error: "401" })
      const letters = yield* client.deadLetters({ queue: "q" })
      expect(letters.jobs.map((j) => j.id)).toEqual([dead.job.id])
      yield* receiveAll(memory).pipe(
        Effect.flatMap((ds) => Effect.forEach(ds, (delivery) => memory.ack({ items: [{ delivery }] })))
      )

      const replayed = yield* client.replay({ jobIds: [dead.job.id, queued.job.id] })
      expect(replayed.replayed).toEqual([dead.job.id])
      expect(replayed.skipped).toEqual([queued.job.id])
      expect((yield* client.get(dead.job.id)).state).toBe("queued")
      expect((yield* receiveAll(memory)).map((d) => d.jobId)).toEqual([dead.job.id])
      expect((yield* client.list({ state: "queued" })).map((j) => j.id)).toEqual([dead.job.id])
    })
  )

  it.effect("deadLetterPage: the view's page with each group's most recent job, only the caller's tenant", () =>
    Effect.gen(function* () {
      const { client, store } = yield* setup()
      const fail = (input: unknown, tenant: string, errorClass: "auth" | "timeout") =>
        Effect.gen(function* () {
          const { job } = yield* client.submit({ queue: "q", type: "t", input, tenant, maxAttempts: 1 })
          yield* TestClock.adjust(1)
          const claimed = yield* claim(store, job.id)
          yield* settle(store, claimed, { _tag: "Fail", errorClass, error: `${errorClass} failed` })
          return job
        })
      const a1 = yield* fail({ text: "same" }, "a", "timeout")
      const a2 = yield* fail({ text: "same" }, "a", "timeout")
      const lone = yield* fail({ text: "lone" }, "a", "auth")
      yield* fail({ text: "other tenant" }, "b", "auth")

      const page = yield* client.deadLetterPage({ queue: "q", tenant: "a", sort: "count", limit: 1 })
      const next = yield* client.deadLetterPage({
        queue: "q",
        tenant: "a",
        sort: "count",
        limit: 1,
        cursor: DeadLetters.decodeCursor(page.next!)
      })

      expect(page.groups).toHaveLength(1)
      expect(page.groups[0]).toMatchObject({
        errorClass: "timeout",
        inputHash: a1.inputHash,
        count: 2,
        jobIds: [a2.id, a1.id],
        collapsed: false
      })
      expect(page.groups[0]!.latest).toMatchObject({ id: a2.id, input: { text: "same" }, lastError: "timeout failed" })
      expect(page).toMatchObject({ totalGroups: 2, totalJobs: 3 })
      expect(page.jobs.map((job) => job.id)).toEqual([lone.id])
      expect(next.groups.map((g) => [g.errorClass, g.inputHash, g.collapsed, g.latest?.id])).toEqual([
        ["auth", null, true, lone.id]
      ])
      expect(next.next).toBeNull()
    })
  )

  it.effect("cancel of a running job requests the cancel; a tenant sees only its own jobs", () =>
    Effect.gen(function* () {
      const { client, store } = yield* setup()
      const { job } = yield* client.submit({ queue: "q", type: "t", tenant: "a" })
      yield* claim(store, job.id)

      const foreign = yield* Effect.either(client.cancel(job.id, { tenant: "b" }))
      const requested = yield* client.cancel(job.id, { tenant: "a" })

      expect(Either.isLeft(foreign) && foreign.left._tag).toBe("JobNotFound")
      expect(requested.state).toBe("running")
      expect(requested.cancelRequestedAt).not.toBeNull()
      expect((yield* Effect.either(client.get(job.id, { tenant: "b" })))._tag).toBe("Left")
    })
  )

  it.effect("attempts, charges, stats and now read through the Query at store time", () =>
    Effect.gen(function* () {
      const { client, store } = yield* setup()
      const { job } = yield* client.submit({ queue: "q", type: "t", priority: 4 })
      const waiting = yield* client.submit({ queue: "q", type: "t", priority: 1 })
      const claimed = yield* claim(store, job.id)
      yield* store.charge({
        items: [{ jobId: job.id, callId: "c1", token: claimed.leaseToken, amountCents: 7, settled: true }]
      })
      yield* TestClock.adjust(1_000)
      yield* settle(store, claimed, { _tag: "Fail", errorClass: "rate_limited", error: "429" })

      const attempts = yield* client.attempts(job.id)
      const charges = yield* client.charges(job.id)
      const { now, stats, windowMs } = yield* client.stats({ queue: "q", windowMs: 60_000 })

      expect(attempts.map((a) => [a.token, a.outcome])).toEqual([[1, "failed"]])
      expect(charges.map((c) => [c.callId, c.amountCents])).toEqual([["c1", 7]])
      expect(now).toBe(yield* client.now)
      expect(windowMs).toBe(60_000)
      expect(stats.byState).toMatchObject({ queued: 1, failed: 1 })
      expect(stats.oldestQueuedAt).toEqual({ "1": waiting.job.runAfter })
      expect(stats.costCentsByErrorClass).toMatchObject({ rate_limited: 7 })
      expect(stats.failedInWindow).toBe(1)
    })
  )
})
