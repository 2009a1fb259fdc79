/**
 * `Query.replay`, the replay core derives from `Query.list`, `Query.estimates` and `Store.replay`: targets by id or
 * by filter, read and written a page at a time, at most `limit`, with what re-running them is estimated to cost, and
 * a dry run that writes nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type { ErrorClass } from "../src/ErrorClass.js"
import type { Job, JobId } from "../src/Job.js"
import * as QueryModule from "../src/Query.js"
import type { Store } from "../src/Store.js"
import * as StoreModule from "../src/Store.js"
import { claimOne, settleOne, submitItem, submitOne } from "./fixtures.js"

/**
 * A job run once and failed with `errorClass`, one millisecond after the previous one, its attempt charged `cents`
 * (no charge when 0).
 */
const deadLetter = (
  store: Store["Type"],
  errorClass: ErrorClass,
  spec: { readonly type?: string; readonly input?: string; readonly cents?: number } = {}
) =>
  Effect.gen(function* () {
    yield* TestClock.adjust(1)
    const job = yield* submitOne(store, {
      maxAttempts: 1,
      ...(spec.type === undefined ? {} : { type: spec.type }),
      ...(spec.input === undefined ? {} : { input: spec.input })
    })
    yield* claimOne(store, job.id, "w", 1_000)
    if (spec.cents !== undefined && spec.cents > 0) {
      yield* Effect.orDie(
        store.charge({
          items: [{ jobId: job.id, callId: `call-${job.id}`, token: 1, amountCents: spec.cents, settled: true }]
        })
      )
    }
    yield* settleOne(store, job.id, 1, { _tag: "Fail", errorClass, error: errorClass })
    return job
  })

const setup = Effect.gen(function* () {
  const { query, store } = yield* StoreModule.makeMemory
  const replays: Array<number> = []
  const counted: Store["Type"] = {
    ...store,
    replay: (options) =>
      Effect.zipRight(
        Effect.sync(() => replays.push(options.items.length)),
        store.replay(options)
      )
  }
  return { store, query, counted, replays }
})

const states = (t: { readonly query: QueryModule.Query["Type"] }, jobIds: ReadonlyArray<JobId>) =>
  Effect.forEach(jobIds, (jobId) => Effect.map(t.query.get({ jobId }), (job) => job.state))

describe("Query.replay", () => {
  it.effect("without ids: the matching dead letters, oldest first, at most limit, capped when more match", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const a = yield* deadLetter(t.store, "timeout", { cents: 2 })
      yield* deadLetter(t.store, "auth", { cents: 7 })
      const c = yield* deadLetter(t.store, "timeout", { cents: 3 })
      const d = yield* deadLetter(t.store, "timeout")
      const published: Array<Job> = []

      const result = yield* QueryModule.replay(t.counted, t.query, { errorClass: "timeout", limit: 2 }, (jobs) =>
        Effect.sync(() => published.push(...jobs))
      )

      expect(result).toEqual({ matched: 2, replayed: [a.id, c.id], skipped: [], estimatedCents: 5, capped: true })
      expect(published.map((job) => [job.id, job.state])).toEqual([
        [a.id, "queued"],
        [c.id, "queued"]
      ])
      expect(t.replays).toEqual([2])
      expect((yield* t.query.get({ jobId: d.id })).state).toBe("failed")
      // Exactly the rest: not capped.
      const rest = yield* QueryModule.replay(t.counted, t.query, { errorClass: "timeout", limit: 1 })
      expect(rest).toEqual({ matched: 1, replayed: [d.id], skipped: [], estimatedCents: 0, capped: false })
    })
  )

  it.effect("a filter replay reads and writes a page of 500 at a time and publishes each page", () =>
    Effect.gen(function* () {
      const t = yield* setup
      // 1001 dead letters written in one batch per step.
      const items = yield* Effect.forEach(Array.from({ length: 1001 }), () => submitItem({ maxAttempts: 1 }))
      yield* Effect.orDie(t.store.submit({ items }))
      const jobs = items.map((item) => ({ jobId: item.id }))
      yield* Effect.orDie(t.store.claim({ items: jobs.map((j) => ({ ...j, owner: "w", leaseMs: 1_000 })) }))
      yield* Effect.orDie(
        t.store.charge({
          items: jobs.map((j) => ({ ...j, callId: `call-${j.jobId}`, token: 1, amountCents: 1, settled: true }))
        })
      )
      const fail = { _tag: "Fail", errorClass: "timeout", error: "timeout" } as const
      yield* Effect.orDie(t.store.settle({ items: jobs.map((j) => ({ ...j, token: 1, outcome: fail })) }))
      const pages: Array<number> = []

      const result = yield* QueryModule.replay(t.counted, t.query, { errorClass: "timeout" }, (page) =>
        Effect.sync(() => pages.push(page.length))
      )

      expect(result.matched).toBe(1001)
      expect(result.replayed).toEqual(items.map((item) => item.id))
      expect(result).toMatchObject({ skipped: [], estimatedCents: 1001, capped: false })
      expect(t.replays).toEqual([500, 500, 1])
      expect(pages).toEqual([500, 500, 1])
    })
  )

  it.effect("the input hash narrows a filter replay to one input, and explicit ids too", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const x1 = yield* deadLetter(t.store, "timeout", { input: "x" })
      const y = yield* deadLetter(t.store, "timeout", { input: "y" })
      const x2 = yield* deadLetter(t.store, "timeout", { input: "x" })
      const x3 = yield* deadLetter(t.store, "timeout", { input: "x" })

      const byFilter = yield* QueryModule.replay(t.store, t.query, { inputHash: x1.inputHash, limit: 2 })
      const byIds = yield* QueryModule.replay(t.store, t.query, { jobIds: [y.id, x3.id], inputHash: x1.inputHash })

      expect(byFilter).toMatchObject({ matched: 2, replayed: [x1.id, x2.id], capped: true })
      expect(byIds).toMatchObject({ matched: 1, replayed: [x3.id], skipped: [y.id] })
      expect(yield* states(t, [x1.id, y.id, x2.id, x3.id])).toEqual(["queued", "failed", "queued", "queued"])
    })
  )

  it.effect("explicit ids: in the order given, at most limit (capped), filters still apply", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const a = yield* deadLetter(t.store, "timeout", { type: "x", cents: 1 })
      const b = yield* deadLetter(t.store, "auth", { type: "x", cents: 4 })
      const c = yield* deadLetter(t.store, "timeout", { type: "y" })

      const result = yield* QueryModule.replay(t.counted, t.query, {
        jobIds: [c.id, b.id, a.id],
        type: "x",
        limit: 2
      })

      expect(result).toEqual({ matched: 1, replayed: [b.id], skipped: [c.id], estimatedCents: 4, capped: true })
      expect((yield* t.query.get({ jobId: a.id })).state).toBe("failed")
    })
  )

  it.effect("a succeeded job, a queued one, an unknown id and a repeated id are skipped", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const failed = yield* deadLetter(t.store, "timeout")
      const done = yield* submitOne(t.store)
      yield* claimOne(t.store, done.id, "w", 1_000)
      yield* settleOne(t.store, done.id, 1, { _tag: "Complete", result: null })
      const waiting = yield* submitOne(t.store)
      const unknown = (yield* submitOne((yield* StoreModule.makeMemory).store)).id

      const result = yield* QueryModule.replay(t.counted, t.query, {
        jobIds: [failed.id, done.id, waiting.id, unknown, failed.id]
      })

      expect(result.replayed).toEqual([failed.id])
      expect(result.skipped).toEqual([done.id, waiting.id, unknown, failed.id])
      expect(result.matched).toBe(1)
      expect((yield* t.query.get({ jobId: done.id })).state).toBe("succeeded")
    })
  )

  it.effect("a dry run writes nothing and answers what the same call would do", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const a = yield* deadLetter(t.store, "timeout", { cents: 2.5 })
      const b = yield* deadLetter(t.store, "timeout", { cents: 4 })
      const other = yield* deadLetter(t.store, "auth", { cents: 100 })
      const before = yield* t.query.list({ limit: null })

      const byFilter = yield* QueryModule.replay(t.counted, t.query, { errorClass: "timeout", dryRun: true })
      const byIds = yield* QueryModule.replay(t.counted, t.query, {
        jobIds: [b.id, other.id, b.id],
        errorClass: "timeout",
        dryRun: true
      })

      expect(byFilter).toEqual({ matched: 2, replayed: [], skipped: [], estimatedCents: 6.5, capped: false })
      expect(byIds).toEqual({ matched: 1, replayed: [], skipped: [other.id, b.id], estimatedCents: 4, capped: false })
      expect(t.replays).toEqual([])
      expect(yield* t.query.list({ limit: null })).toEqual(before)
      // The real call does what the dry run said.
      const real = yield* QueryModule.replay(t.counted, t.query, { errorClass: "timeout" })
      expect(real).toEqual({ matched: 2, replayed: [a.id, b.id], skipped: [], estimatedCents: 6.5, capped: false })
    })
  )

  it.effect("nothing to replay makes no store call", () =>
    Effect.gen(function* () {
      const t = yield* setup
      yield* deadLetter(t.store, "auth")

      const byFilter = yield* QueryModule.replay(t.counted, t.query, { errorClass: "timeout" })
      const byIds = yield* QueryModule.replay(t.counted, t.query, { jobIds: [] })

      const none = { matched: 0, replayed: [], skipped: [], estimatedCents: 0, capped: false }
      expect(byFilter).toEqual(none)
      expect(byIds).toEqual(none)
      expect(t.replays).toEqual([])
    })
  )
})
