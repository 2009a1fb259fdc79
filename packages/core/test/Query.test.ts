/**
 * `Query.replay`, the filtered replay core derives from `Query.list` and `Store.replay`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type { ErrorClass } from "../src/ErrorClass.js"
import type { Job } from "../src/Job.js"
import * as QueryModule from "../src/Query.js"
import type { Store } from "../src/Store.js"
import * as StoreModule from "../src/Store.js"
import { claimOne, settleOne, submitOne } from "./fixtures.js"

/** A job run once and failed with `errorClass`, one millisecond after the previous one. */
const deadLetter = (store: Store["Type"], errorClass: ErrorClass, spec: { readonly type?: string } = {}) =>
  Effect.gen(function* () {
    yield* TestClock.adjust(1)
    const job = yield* submitOne(store, { maxAttempts: 1, ...spec })
    yield* claimOne(store, job.id, "w", 1_000)
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

const ids = (jobs: ReadonlyArray<Job>) => jobs.map((job) => job.id)

describe("Query.replay", () => {
  it.effect("without ids: the matching dead letters, oldest first, at most limit", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const a = yield* deadLetter(t.store, "timeout")
      yield* deadLetter(t.store, "auth")
      const c = yield* deadLetter(t.store, "timeout")
      const d = yield* deadLetter(t.store, "timeout")

      const result = yield* QueryModule.replay(t.counted, t.query, { errorClass: "timeout", limit: 2 })

      expect(result.replayed).toEqual([a.id, c.id])
      expect(result.skipped).toEqual([])
      expect(result.jobs.map((job) => [job.id, job.state])).toEqual([
        [a.id, "queued"],
        [c.id, "queued"]
      ])
      expect(t.replays).toEqual([2])
      expect((yield* t.query.get({ jobId: d.id })).state).toBe("failed")
    })
  )

  it.effect("explicit ids: in the order given, at most limit, filters still apply", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const a = yield* deadLetter(t.store, "timeout", { type: "x" })
      const b = yield* deadLetter(t.store, "auth", { type: "x" })
      const c = yield* deadLetter(t.store, "timeout", { type: "y" })

      const result = yield* QueryModule.replay(t.counted, t.query, {
        jobIds: [c.id, b.id, a.id],
        type: "x",
        limit: 2
      })

      expect(result).toEqual({ replayed: [b.id], skipped: [c.id], jobs: [yield* t.query.get({ jobId: b.id })] })
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
      expect(ids(result.jobs)).toEqual([failed.id])
      expect((yield* t.query.get({ jobId: done.id })).state).toBe("succeeded")
    })
  )

  it.effect("nothing to replay makes no store call", () =>
    Effect.gen(function* () {
      const t = yield* setup
      yield* deadLetter(t.store, "auth")

      const byFilter = yield* QueryModule.replay(t.counted, t.query, { errorClass: "timeout" })
      const byIds = yield* QueryModule.replay(t.counted, t.query, { jobIds: [] })

      expect(byFilter).toEqual({ replayed: [], skipped: [], jobs: [] })
      expect(byIds).toEqual({ replayed: [], skipped: [], jobs: [] })
      expect(t.replays).toEqual([])
    })
  )
})
