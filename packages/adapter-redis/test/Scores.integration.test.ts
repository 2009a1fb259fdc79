/**
 * The scores of the queue's sorted sets are whole milliseconds when every time comes from the server's clock: store
 * time is `TIME` in whole ms (lua/includes/base.lua says why), so Redis keeps a small set's scores as integers
 * instead of text parsed on every comparison. And sets written when store time had a microsecond fraction (a live
 * database written by earlier versions) are still read right: the same scale, compared as numbers, each job's
 * scores made whole by its next move.
 */
import { describe, expect, it } from "@effect/vitest"
import type { JobId } from "@slowcall/core/Job"
import * as Store from "@slowcall/core/Store"
import { Effect, Layer } from "effect"
import { Redis } from "ioredis"
import * as RedisStore from "../src/RedisStore.js"
import { dropPrefix, item, REDIS_URL, uniquePrefix } from "./support.js"

const prefix = uniquePrefix("scores")

const layer = Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropPrefix(REDIS_URL, prefix)))).pipe(
  Layer.provideMerge(RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false, pollMs: 60_000 }))
)

/** Every score of every sorted set of `queue`, as the server writes it: `{ key, member, score }`. */
const scoresOf = async (redis: Redis, queue: string) => {
  const out: Array<{ key: string; member: string; score: string }> = []
  let cursor = "0"
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:{${queue}}:*`, "COUNT", 1000)
    cursor = next
    for (const key of keys) {
      if ((await redis.type(key)) !== "zset") continue
      const raw = await redis.zrange(key, 0, -1, "WITHSCORES")
      for (let i = 0; i < raw.length; i += 2) out.push({ key, member: raw[i]!, score: raw[i + 1]! })
    }
  } while (cursor !== "0")
  return out
}

/** Waits `ms` of real time, so no two writes to one job fall in one store millisecond (`Protocol.bump` would then
 * step its `updatedAt` by a microsecond, a fraction the dead-letter and last-touch sets would take). */
const pause = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

const heldOf = (results: ReadonlyArray<Store.ClaimResult>) =>
  results.flatMap((r) => (r._tag === "Claimed" ? [{ jobId: r.job.id, token: r.job.leaseToken }] : []))

describe("Redis sorted-set scores", () => {
  it.scoped(
    "are whole milliseconds after submits, claims, heartbeats, settles and a sweep at server time",
    () =>
      Effect.gen(function* () {
        const store = yield* Store.Store
        const redis = new Redis(REDIS_URL)
        yield* Effect.addFinalizer(() => Effect.sync(() => redis.disconnect()))
        const queue = "whole"
        const start = yield* store.now
        const items = yield* Effect.forEach(
          Array.from({ length: 40 }, (_, i) => i),
          (i) =>
            item(queue, {
              tenant: [undefined, "a", "b"][i % 3],
              priority: [0, 5][i % 2]!,
              delayMs: i % 5 === 0 ? 1 : undefined,
              deadlineAt: i % 4 === 0 ? start + 3_600_000 : undefined,
              requestKey: i % 7 === 0 ? `key-${i}` : undefined
            })
        )
        yield* store.submit({ items })
        for (let round = 0; round < 3; round++) {
          yield* pause(3)
          const claimed = yield* store.claimNext({
            queue,
            max: 12,
            owner: "w",
            leaseMs: 30_000,
            fair: round === 1 ? {} : undefined
          })
          const held = heldOf(claimed.results)
          expect(held.length).toBeGreaterThan(0)
          yield* pause(3)
          yield* store.heartbeat({ items: held.map((h) => ({ ...h, leaseMs: 60_000 })) })
          yield* pause(3)
          yield* store.settle({
            items: held.map((h, k) => ({
              ...h,
              outcome: [
                { _tag: "Complete" as const, result: null },
                { _tag: "Retry" as const, delayMs: 5, errorClass: "server_error" as const, error: "again" },
                { _tag: "Fail" as const, errorClass: "invalid_input" as const, error: "no" },
                { _tag: "Release" as const }
              ][k % 4]!
            }))
          })
        }
        // A lease that ends, taken back by the sweeper.
        yield* pause(3)
        const short = heldOf((yield* store.claimNext({ queue, max: 2, owner: "w", leaseMs: 1 })).results)
        expect(short.length).toBe(2)
        yield* pause(5)
        const swept = yield* store.sweep({ queue })
        expect(swept.requeued.length).toBe(2)
        yield* pause(3)
        expect(heldOf((yield* store.claimNext({ queue, max: 3, owner: "w", leaseMs: 30_000 })).results).length).toBe(3)
        const scores = yield* Effect.promise(() => scoresOf(redis, queue))
        const sets = new Set(scores.map((s) => s.key.slice(`${prefix}:{${queue}}:`.length).split(":")[1]))
        // The lease, ready, visible, state, deadline, last-touch, dead-letter, request-key and waiting sets.
        for (const set of ["l", "r", "v", "s", "dq", "tt", "dl", "fa", "k", "wq", "p"]) expect(sets).toContain(set)
        expect(scores.filter((s) => !/^-?\d+$/.test(s.score))).toEqual([])
        expect(Number.isInteger(yield* store.now)).toBe(true)
      }).pipe(Effect.provide(layer)),
    60_000
  )

  it.scoped(
    "written with fractional store times by earlier versions are read right, and made whole as jobs move",
    () =>
      Effect.gen(function* () {
        const store = yield* Store.Store
        const redis = new Redis(REDIS_URL)
        yield* Effect.addFinalizer(() => Effect.sync(() => redis.disconnect()))
        const queue = "old"
        const base = `${prefix}:{${queue}}:`
        const start = yield* store.now
        // What earlier versions wrote: store time from `TIME` to the microsecond. A job whose lease ended a minute
        // ago, and two queued jobs due 150.25 and 450.75 ms from now.
        const old = start - 60_000 + 0.125
        const lapsed = yield* item(queue)
        yield* store.submit({ items: [lapsed], now: old })
        const claimed = yield* store.claim({
          items: [{ jobId: lapsed.id, owner: "old", leaseMs: 1_000 }],
          now: old + 0.5
        })
        expect(heldOf(claimed.results).length).toBe(1)
        const early = yield* item(queue, { delayMs: 60_150.125 })
        const late = yield* item(queue, { delayMs: 60_450.625 })
        yield* store.submit({ items: [late, early], now: old })
        const oldLease = yield* Effect.promise(() => redis.zscore(`${base}x:l`, `000000000001${lapsed.id}`))
        expect(Number(oldLease)).toBe(old + 1_000.5)
        const fractional = (yield* Effect.promise(() => scoresOf(redis, queue))).filter((s) => !/^-?\d+$/.test(s.score))
        expect(fractional.length).toBeGreaterThan(0)
        // Now at server time: one job due between the two old ones, then a claim once all are due.
        const between = yield* item(queue, { delayMs: 300 })
        yield* store.submit({ items: [between] })
        yield* pause(600)
        const taken = yield* store.claimNext({ queue, max: 10, owner: "new", leaseMs: 30_000 })
        const ids: Array<JobId> = taken.results.map((r) => r.job.id)
        expect(ids).toEqual([lapsed.id, early.id, between.id, late.id])
        const leases = yield* Effect.promise(() => redis.zrange(`${base}x:l`, 0, -1, "WITHSCORES"))
        expect(leases.length).toBe(8)
        for (let i = 1; i < leases.length; i += 2) expect(leases[i]).toBe(String(taken.now + 30_000))
        // Settled, every job's scores are whole but the times it keeps from before (createdAt in the state sets).
        yield* pause(3)
        yield* store.settle({
          items: heldOf(taken.results).map((h) => ({ ...h, outcome: { _tag: "Complete" as const, result: null } }))
        })
        const left = (yield* Effect.promise(() => scoresOf(redis, queue))).filter((s) => !/^-?\d+$/.test(s.score))
        expect(left.map((s) => s.key.slice(base.length)).sort()).toEqual([
          "x:s:succeeded",
          "x:s:succeeded",
          "x:s:succeeded"
        ])
      }).pipe(Effect.provide(layer)),
    60_000
  )
})
