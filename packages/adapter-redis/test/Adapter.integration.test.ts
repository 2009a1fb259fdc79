/**
 * What only the Redis adapter has, on the machine's Redis server: the whole adapter under the core Worker and
 * Client, pub/sub wake-ups and `watch`, the retention of finished jobs' data, reads and sweeps over every queue,
 * routes of refused submits, the server settings check, and the memory one queued job takes.
 */
import { expect, it } from "@effect/vitest"
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import { makeJobId } from "@slowcall/core/Ids"
import type { SubmitItem } from "@slowcall/core/Protocol"
import * as Worker from "@slowcall/core/Worker"
import { KeepAliveTakeover } from "@slowcall/testing/KeepAliveTakeover"
import { Chunk, Context, Effect, Fiber, Layer, Schema, Stream } from "effect"
import { Redis } from "ioredis"
import { describe } from "vitest"
import * as RedisStore from "../src/RedisStore.js"
import * as RedisTransport from "../src/RedisTransport.js"
import { dropPrefix, item, REDIS_URL, uniquePrefix } from "./support.js"

/** The whole adapter under a fresh prefix, its keys dropped when the layer closes. */
const adapter = (options: RedisStore.LayerOptions = {}) => {
  const prefix = uniquePrefix("adapter")
  return Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropPrefix(REDIS_URL, prefix)))).pipe(
    Layer.provideMerge(RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false, pollMs: 60_000, ...options }))
  )
}

const echo = Handler.make({
  type: "demo.echo",
  version: 1,
  input: Schema.Struct({ text: Schema.String }),
  result: Schema.Struct({ echoed: Schema.String }),
  attempt: { timeoutMs: 5_000 },
  run: (input) => Effect.succeed({ echoed: input.text })
})

// The Worker's claimNext finds the lapsed lease by polling: nothing publishes when a lease ends.
KeepAliveTakeover({ name: "redis server", layer: Layer.suspend(() => adapter({ pollMs: 500 })) })

describe("the adapter under the core Worker", () => {
  it.live("a worker waiting on pub/sub (no polling) runs submitted jobs at once; watch follows each to the end", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(
          Layer.mergeAll(Client.layer, Worker.layer({ queue: "echo", concurrency: 4, handlers: [echo] })).pipe(
            Layer.provideMerge(adapter())
          )
        )
        const client = Context.get(context, Client.Client)
        const store = Context.get(context, RedisStore.RedisStore)
        // Let the worker reach its waiting receive; with a 60 s poll only a wake-up can end that wait quickly.
        yield* Effect.sleep("300 millis")
        const started = Date.now()
        const submitted = yield* Effect.forEach(["a", "b", "c"], (text) =>
          client.submit({ queue: "echo", type: "demo.echo", input: { text } })
        )
        const finals = yield* Effect.forEach(submitted, (s) =>
          store.watch(s.job.id, { intervalMs: 60_000 }).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))
        )
        const elapsed = Date.now() - started

        expect(elapsed).toBeLessThan(5_000)
        for (const [i, states] of finals.entries()) {
          const last = states[states.length - 1]!
          expect(last).toMatchObject({ state: "succeeded", result: { echoed: ["a", "b", "c"][i] } })
          for (let k = 1; k < states.length; k++) {
            expect(states[k]!.updatedAt).toBeGreaterThan(states[k - 1]!.updatedAt)
          }
        }
        const attempts = yield* store.attempts({ jobId: submitted[0]!.job.id })
        expect(attempts).toMatchObject([{ token: 1, outcome: "succeeded" }])
      })
    )
  )

  it.live("watch ends at once on a finished job and fails on an unknown one", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter())
        const store = Context.get(context, RedisStore.RedisStore)
        const job = yield* item("watch")
        yield* store.submit({ items: [job] })
        yield* store.cancel({ items: [{ jobId: job.id }] })

        const seen = yield* store.watch(job.id).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))
        const unknown = yield* store.watch(yield* makeJobId).pipe(Stream.runCollect, Effect.flip)

        expect(seen.map((j) => j.state)).toEqual(["abandoned"])
        expect(unknown).toMatchObject({ _tag: "JobNotFound" })
      })
    )
  )

  it.live("a receive waiting on pub/sub wakes when a job is queued, long before its poll", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter())
        const store = Context.get(context, RedisStore.RedisStore)
        const transport = Context.get(context, RedisTransport.RedisTransport)
        const waiting = yield* Effect.fork(
          transport.receive({ queue: "wake", max: 1, visibilityMs: 10_000, waitMs: 30_000 })
        )
        yield* Effect.sleep("200 millis")
        const job = yield* item("wake")
        const sent = Date.now()
        yield* store.submit({ items: [job] })

        const deliveries = yield* Fiber.join(waiting)

        expect(deliveries.map((d) => d.jobId)).toEqual([job.id])
        expect(Date.now() - sent).toBeLessThan(2_000)
      })
    )
  )
})

describe("retention", () => {
  it.live(
    "a finished job's input and result expire; its record, attempts and charges stay; a dead letter keeps all",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const context = yield* Layer.build(adapter({ dataRetentionMs: 300 }))
          const store = Context.get(context, RedisStore.RedisStore)
          const done = yield* item("retention")
          const dead = yield* item("retention")
          yield* store.submit({ items: [done, dead] })
          const claimed = yield* store.claim({
            items: [done, dead].map((j) => ({ jobId: j.id, owner: "w", leaseMs: 10_000 }))
          })
          const tokens = claimed.results.map((r) => (r._tag === "Claimed" ? r.job.leaseToken : -1))
          yield* store.charge({
            items: [{ jobId: done.id, callId: "call-1", token: tokens[0]!, amountCents: 4, settled: true }]
          })
          yield* store.settle({
            items: [
              { jobId: done.id, token: tokens[0]!, outcome: { _tag: "Complete", result: { answer: 42 } } },
              { jobId: dead.id, token: tokens[1]!, outcome: { _tag: "Fail", errorClass: "auth", error: "401" } }
            ]
          })
          const fresh = yield* store.get({ jobId: done.id })

          yield* Effect.sleep("700 millis")
          const later = yield* store.get({ jobId: done.id })
          const deadLater = yield* store.get({ jobId: dead.id })

          expect(fresh).toMatchObject({ state: "succeeded", input: done.input, result: { answer: 42 } })
          expect(later).toEqual({ ...fresh, input: null, result: null })
          expect(yield* store.charges({ jobId: done.id })).toMatchObject([{ callId: "call-1", amountCents: 4 }])
          expect(yield* store.attempts({ jobId: done.id })).toMatchObject([{ outcome: "succeeded" }])
          expect(deadLater).toMatchObject({ state: "failed", input: dead.input })
        })
      )
  )
})

/** A RedisStore under a prefix of its own, whose keys are deleted when the scope closes. */
const storeUnder = Effect.fnUntraced(function* (name: string) {
  const prefix = uniquePrefix(name)
  yield* Effect.addFinalizer(() => Effect.promise(() => dropPrefix(REDIS_URL, prefix)))
  const store = Context.get(
    yield* Layer.build(RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false })),
    RedisStore.RedisStore
  )
  return { prefix, store }
})

describe("purge", () => {
  it.live("deletes finished jobs and every trace of them; a queued job and, when asked, dead letters stay", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { prefix, store } = yield* storeUnder("purge")
        const done = yield* item("purge", { requestKey: "k-done" })
        const dead = yield* item("purge")
        const waiting = yield* item("purge")
        yield* store.submit({ items: [done, dead, waiting] })
        const claimed = yield* store.claim({
          items: [done, dead].map((j) => ({ jobId: j.id, owner: "w", leaseMs: 10_000 }))
        })
        const [t1, t2] = claimed.results.map((r) => (r._tag === "Claimed" ? r.job.leaseToken : -1))
        yield* store.charge({ items: [{ jobId: dead.id, callId: "c", token: t2!, amountCents: 5, settled: true }] })
        const settled = yield* store.settle({
          items: [
            { jobId: done.id, token: t1!, outcome: { _tag: "Complete", result: null } },
            { jobId: dead.id, token: t2!, outcome: { _tag: "Fail", errorClass: "auth", error: "401" } }
          ]
        })

        const first = yield* store.purge({ queue: "purge", createdBefore: settled.now + 1, states: ["succeeded"] })
        const stillDead = yield* store.deadLetters({ queue: "purge" })
        const second = yield* store.purge({ queue: "purge", createdBefore: settled.now + 1 })
        const stats = yield* store.stats({ queue: "purge", failedSince: 0 })
        const keys = yield* Effect.promise(async () => {
          const client = new Redis(REDIS_URL)
          const found = await Promise.all(
            [done.id, dead.id].map((id) => client.keys(`${prefix}:*${id}*`).then((k) => k.length))
          )
          const routes = await Promise.all(
            [done.id, dead.id].map(async (id) => {
              const buckets = await client.keys(`${prefix}:r:*`)
              const hits = await Promise.all(buckets.map((b) => client.hexists(b, id)))
              return hits.filter((h) => h === 1).length
            })
          )
          client.disconnect()
          return { found, routes }
        })
        const again = yield* store.submit({ items: [{ ...(yield* item("purge")), requestKey: "k-done" }] })

        expect(first).toEqual([done.id])
        expect(stillDead.jobs.map((j) => j.id)).toEqual([dead.id])
        expect(second).toEqual([dead.id])
        expect(stats.byState).toEqual({ queued: 1, running: 0, succeeded: 0, failed: 0, abandoned: 0 })
        expect(stats.costCentsByErrorClass).toEqual({})
        expect(yield* store.deadLetters({ queue: "purge" })).toEqual({ jobs: [], groups: [] })
        expect(keys).toEqual({ found: [0, 0], routes: [0, 0] })
        expect(yield* Effect.flip(store.get({ jobId: done.id }))).toMatchObject({ _tag: "JobNotFound" })
        expect((yield* store.list({ queue: "purge", limit: null })).map((j) => j.id)).toContain(waiting.id)
        expect(again.results[0]!._tag).toBe("Created")
      })
    )
  )

  it.live("picks the oldest across the states asked for, insertion order breaking equal creation times", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { store } = yield* storeUnder("purge")
        const t0 = Date.UTC(2031, 0, 1)
        // Arrange: given and kept created together at t0 (in that order), then late at t0 + 1; abandoned, succeeded,
        // failed, so that no state's own order is the order across states.
        const given = yield* item("purge", { maxAttempts: 1 })
        const kept = yield* item("purge", { maxAttempts: 1 })
        const late = yield* item("purge", { maxAttempts: 1 })
        yield* store.submit({ items: [given, kept], now: t0 })
        yield* store.submit({ items: [late], now: t0 + 1 })
        const claimed = yield* store.claim({
          items: [given, kept, late].map((j) => ({ jobId: j.id, owner: "w", leaseMs: 10_000 })),
          now: t0 + 2
        })
        const [t1, t2, t3] = claimed.results.map((r) => (r._tag === "Claimed" ? r.job.leaseToken : -1))
        yield* store.settle({
          items: [
            { jobId: given.id, token: t1!, outcome: { _tag: "Abandon", reason: "cancelled" } },
            { jobId: kept.id, token: t2!, outcome: { _tag: "Complete", result: null } },
            { jobId: late.id, token: t3!, outcome: { _tag: "Fail", errorClass: "auth", error: "401" } }
          ],
          now: t0 + 3
        })

        const first = yield* store.purge({ queue: "purge", createdBefore: t0 + 2, limit: 1 })
        const rest = yield* store.purge({ queue: "purge", createdBefore: t0 + 2, states: ["failed", "succeeded"] })

        expect(first).toEqual([given.id])
        expect(rest).toEqual([kept.id, late.id])
      })
    )
  )
})

describe("reads and sweeps over every queue", () => {
  it.live("list, stats, deadLetters and sweep without a queue span every queue of the prefix", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter())
        const store = Context.get(context, RedisStore.RedisStore)
        const now = yield* store.now
        const a = yield* item("span-a")
        const b = yield* item("span-b")
        const c = yield* item("span-c", { maxAttempts: 1 })
        yield* store.submit({ items: [a], now })
        yield* store.submit({ items: [b], now: now + 1 })
        yield* store.submit({ items: [c], now: now + 2 })
        const claimed = yield* store.claim({
          items: [b, c].map((j) => ({ jobId: j.id, owner: "w", leaseMs: 10 })),
          now: now + 3
        })
        const second = claimed.results[1]!
        yield* store.settle({
          items: [
            {
              jobId: c.id,
              token: second._tag === "Claimed" ? second.job.leaseToken : -1,
              outcome: { _tag: "Fail", errorClass: "timeout", error: "t" }
            }
          ],
          now: now + 4
        })

        const listed = yield* store.list({ limit: null })
        const stats = yield* store.stats({ failedSince: now, now: now + 5 })
        const dead = yield* store.deadLetters({})
        const swept = yield* store.sweep({ now: now + 100, republishAfterMs: 0 })

        expect(listed.map((j) => j.id)).toEqual([c.id, b.id, a.id])
        expect(stats.byState).toEqual({ queued: 1, running: 1, succeeded: 0, failed: 1, abandoned: 0 })
        expect(stats.oldestQueuedAt).toEqual({ "0": now })
        expect(stats.failedInWindow).toBe(1)
        expect(dead.jobs.map((j) => j.id)).toEqual([c.id])
        expect(dead.groups).toEqual([
          {
            errorClass: "timeout",
            inputHash: c.inputHash,
            count: 1,
            costCents: 0,
            lastFailedAt: now + 4,
            jobIds: [c.id]
          }
        ])
        expect(swept.requeued.map((j) => j.id)).toEqual([b.id])
        expect(swept.stale.map((j) => j.id)).toEqual([a.id])
      })
    )
  )

  it.live("a dead-letter group of one input spans queues: counts add up, ids merge by latest failure", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter())
        const store = Context.get(context, RedisStore.RedisStore)
        const now = yield* store.now
        const shared = { inputHash: "hash-shared", maxAttempts: 1 }
        const jobs = [
          yield* item("merge-b", shared),
          yield* item("merge-a", shared),
          yield* item("merge-b", shared),
          yield* item("merge-a", { maxAttempts: 1 })
        ]
        // Fail each at its own time: the second and the third at the same instant.
        const failAt = [now + 10, now + 20, now + 20, now + 30]
        for (const [i, job] of jobs.entries()) {
          yield* store.submit({ items: [job], now })
          yield* store.claim({ items: [{ jobId: job.id, owner: "w", leaseMs: 1_000 }], now: failAt[i]! })
          yield* store.charge({
            items: [{ jobId: job.id, callId: "c", token: 1, amountCents: i + 1, settled: true }],
            now: failAt[i]!
          })
          yield* store.settle({
            items: [{ jobId: job.id, token: 1, outcome: { _tag: "Fail", errorClass: "auth", error: "401" } }],
            now: failAt[i]!
          })
        }

        const dead = yield* store.deadLetters({})

        expect(dead.groups).toEqual([
          {
            errorClass: "auth",
            inputHash: "hash-shared",
            count: 3,
            costCents: 6,
            lastFailedAt: now + 20,
            // Equal failure times across queues go by queue name.
            jobIds: [jobs[1]!.id, jobs[2]!.id, jobs[0]!.id]
          },
          {
            errorClass: "auth",
            inputHash: jobs[3]!.inputHash,
            count: 1,
            costCents: 4,
            lastFailedAt: now + 30,
            jobIds: [jobs[3]!.id]
          }
        ])
      })
    )
  )
})

describe("paging, spend and waiting over every queue", () => {
  it.live("pages without a queue visit every job once, ties across queues by queue name; spend and waiting merge", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter())
        const store = Context.get(context, RedisStore.RedisStore)
        const now = yield* store.now
        // Two jobs per queue in one millisecond, three queues, and one later job.
        const jobs: Array<SubmitItem> = []
        for (const queue of ["page-b", "page-a", "page-c"]) {
          const pair = [yield* item(queue), yield* item(queue, { type: "demo.other" })]
          yield* store.submit({ items: pair, now })
          jobs.push(...pair)
        }
        const late = yield* item("page-a", { tenant: "t1" })
        yield* store.submit({ items: [late], now: now + 1 })

        for (const order of ["newest", "oldest"] as const) {
          const whole = (yield* store.list({ limit: null, order })).map((j) => j.id)
          const paged: Array<string> = []
          let after: (typeof jobs)[number]["id"] | undefined
          for (let page = 0; page < 10; page++) {
            const next = yield* store.list({ limit: 2, order, after })
            if (next.length === 0) break
            paged.push(...next.map((j) => j.id))
            after = next.at(-1)!.id
          }
          expect(whole).toHaveLength(7)
          expect(paged).toEqual(whole)
        }
        // Oldest first: the millisecond's ties go queue a, then b, then c, each in insertion order.
        expect((yield* store.list({ limit: null, order: "oldest" })).map((j) => j.queue)).toEqual([
          "page-a",
          "page-a",
          "page-b",
          "page-b",
          "page-c",
          "page-c",
          "page-a"
        ])

        const running = yield* store.claim({ items: [{ jobId: late.id, owner: "w", leaseMs: 1_000 }], now: now + 2 })
        const token = running.results[0]!._tag === "Claimed" ? running.results[0]!.job.leaseToken : -1
        yield* store.charge({ items: [{ jobId: late.id, callId: "c1", token, amountCents: 7, settled: true }] })
        const stats = yield* store.stats({ failedSince: now, now: now + 3 })
        expect(stats.spend).toEqual([
          { queue: "page-a", tenant: "t1", type: "demo.echo", state: "running", costCents: 7, jobs: 1 }
        ])
        const waiting = [...stats.waiting].sort((x, y) => (x.type < y.type ? -1 : 1))
        expect(waiting).toEqual([
          { type: "demo.echo", version: 1, count: 3, oldestDueAt: now },
          { type: "demo.other", version: 1, count: 3, oldestDueAt: now }
        ])
        expect(yield* store.countQueued({ queue: "page-a", upTo: 100 })).toBe(2)
        expect(yield* store.countQueued({ queue: "page-a", tenant: "t1", upTo: 100 })).toBe(0)
        expect(yield* store.countQueued({ queue: "page-b", upTo: 1 })).toBe(1)
      })
    )
  )
})

describe("large batches", () => {
  it.live("a submit of 2,500 items goes out in chunks, in item order, at one store time, one key taken once", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter())
        const store = Context.get(context, RedisStore.RedisStore)
        const items = yield* Effect.forEach(
          Array.from({ length: 2_500 }, (_, i) => i),
          () => item("big")
        )
        // The last item repeats the first one's request key: it sees the job the first chunk made.
        items[0] = { ...items[0]!, requestKey: "same" }
        items[2_499] = { ...items[2_499]!, requestKey: "same", inputHash: items[0]!.inputHash }

        const reply = yield* store.submit({ items })

        expect(reply.results).toHaveLength(2_500)
        expect(reply.results.slice(0, 2_499).every((r, i) => r._tag === "Created" && r.job.id === items[i]!.id)).toBe(
          true
        )
        expect(reply.results[2_499]).toMatchObject({ _tag: "Existing", job: { id: items[0]!.id } })
        expect(
          new Set(reply.results.slice(0, 2_499).map((r) => (r._tag === "Created" ? r.job.createdAt : 0))).size
        ).toBe(1)
        expect((yield* store.stats({ queue: "big", failedSince: 0 })).byState.queued).toBe(2_499)
      })
    )
  )

  it.live("an id given twice in a large batch is refused before any chunk is written", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter())
        const store = Context.get(context, RedisStore.RedisStore)
        const items = yield* Effect.forEach(
          Array.from({ length: 1_500 }, (_, i) => i),
          () => item("twice")
        )
        items[1_400] = { ...items[1_400]!, id: items[3]!.id }

        const error = yield* Effect.flip(store.submit({ items }))

        expect(error).toMatchObject({ _tag: "StoreError", reason: "Constraint" })
        expect(yield* store.list({ queue: "twice" })).toEqual([])
      })
    )
  )
})

describe("routes", () => {
  it.live("an id used in another queue is refused with Constraint, and nothing of the refused submit is left", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter())
        const store = Context.get(context, RedisStore.RedisStore)
        const first = yield* item("route-a")
        yield* store.submit({ items: [first] })
        const fresh = yield* item("route-b")
        const clash = { ...(yield* item("route-b")), id: first.id }

        const error = yield* Effect.flip(store.submit({ items: [fresh, clash] }))

        expect(error).toMatchObject({ _tag: "StoreError", reason: "Constraint" })
        expect(yield* store.queueOf(fresh.id)).toBeUndefined()
        expect(yield* store.queueOf(first.id)).toBe("route-a")
        expect(yield* store.list({ queue: "route-b" })).toEqual([])
        // The refused id can be used later, the clashing one never.
        expect((yield* store.submit({ items: [fresh] })).results[0]!._tag).toBe("Created")
      })
    )
  )

  it.live("a second process (a fresh route cache) finds jobs by id", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const prefix = uniquePrefix("routes")
        yield* Effect.addFinalizer(() => Effect.promise(() => dropPrefix(REDIS_URL, prefix)))
        const one = Context.get(
          yield* Layer.build(RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false })),
          RedisStore.RedisStore
        )
        const two = Context.get(
          yield* Layer.build(RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false })),
          RedisStore.RedisStore
        )
        const job = yield* item("routes")
        yield* one.submit({ items: [job] })

        const claimed = yield* two.claim({ items: [{ jobId: job.id, owner: "two", leaseMs: 1_000 }] })

        expect(claimed.results[0]).toMatchObject({ _tag: "Claimed", job: { id: job.id, queue: "routes" } })
      })
    )
  )
})

describe("job replies", () => {
  it.live("carry the numbers a record holds whatever their stored spelling, and the sign of a zero", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { prefix, store } = yield* storeUnder("spelling")
        const job = yield* item("spelling", { budgetCents: 250 })
        yield* store.submit({ items: [job] })
        // Numbers written in other spellings than the scripts' own (`%.17g`), as a hand edit or another writer might.
        const direct = new Redis(REDIS_URL)
        yield* Effect.promise(async () => {
          await direct.hset(`${prefix}:{spelling}:j:${job.id}`, "ma", "3.0", "bc", "2.5e2", "pg", "-0", "cc", "0.0")
          direct.disconnect()
        })

        const claimed = yield* store.claimNext({
          queue: "spelling",
          max: 1,
          owner: "w",
          leaseMs: 30_000,
          types: [{ type: job.type, version: job.version }]
        })
        expect(claimed.results).toHaveLength(1)
        const held = claimed.results[0]!
        expect(held._tag).toBe("Claimed")
        expect(held.job).toMatchObject({ id: job.id, maxAttempts: 3, budgetCents: 250, attempts: 1, leaseToken: 1 })
        expect(Object.is(held.job.progress, -0)).toBe(true)
        expect(Object.is(held.job.costCents, 0)).toBe(true)
        expect(yield* store.get({ jobId: job.id })).toEqual(held.job)

        const settled = yield* store.settle({
          items: [{ jobId: job.id, token: 1, outcome: { _tag: "Complete", result: { ok: true } } }]
        })
        expect(settled.results[0]).toMatchObject({
          _tag: "Settled",
          job: { state: "succeeded", progress: 1, maxAttempts: 3, budgetCents: 250, result: { ok: true } }
        })
      })
    )
  )
})

describe("the server", () => {
  it.live("checkServer reads persistence and eviction, and warns about a server that keeps nothing on disk", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(adapter())
        const store = Context.get(context, RedisStore.RedisStore)
        const direct = new Redis(REDIS_URL)
        const [appendonly, save] = yield* Effect.promise(async () => {
          const a = (await direct.config("GET", "appendonly")) as Array<string>
          const s = (await direct.config("GET", "save")) as Array<string>
          direct.disconnect()
          return [a[1], s[1]]
        })

        const check = yield* store.checkServer

        expect(check.nodes).toHaveLength(1)
        expect(check.nodes[0]).toMatchObject({ appendonly, save })
        const nothingOnDisk = appendonly === "no" && save === ""
        expect(check.warnings.some((w) => w.includes("keeps nothing on disk"))).toBe(nothingOnDisk)
      })
    )
  )

  it.live("a queued job takes a bounded number of bytes (MEMORY USAGE of every key of the queue)", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { prefix, store } = yield* storeUnder("memory")
        const count = 2_000
        const items: Array<SubmitItem> = []
        for (let i = 0; i < count; i++) {
          const id = yield* makeJobId
          items.push({
            id,
            queue: "memory",
            tenant: "tenant-1",
            type: "summarize",
            version: 1,
            inputHash: "0".repeat(64),
            input: { documentId: `doc-${i}`, model: "small" },
            maxAttempts: 3
          })
        }
        for (let i = 0; i < count; i += 500) yield* store.submit({ items: items.slice(i, i + 500) })

        const bytes = yield* Effect.promise(() => memoryOf(REDIS_URL, prefix))
        const perJob = bytes / count
        console.info(`[memory] ${count} queued jobs: ${bytes} bytes in all, ${perJob.toFixed(0)} bytes per job`)

        expect(perJob).toBeGreaterThan(100)
        expect(perJob).toBeLessThan(2_000)
      })
    )
  )
})

/** The sum of MEMORY USAGE over every key under `prefix`. */
const memoryOf = async (url: string, prefix: string): Promise<number> => {
  const client = new Redis(url)
  try {
    let total = 0
    let cursor = "0"
    do {
      const [next, keys] = await client.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000)
      cursor = next
      const sizes = await Promise.all(keys.map((key) => client.memory("USAGE", key, "SAMPLES", "0")))
      for (const size of sizes) total += Number(size ?? 0)
    } while (cursor !== "0")
    return total
  } finally {
    client.disconnect()
  }
}
