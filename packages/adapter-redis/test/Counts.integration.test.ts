/**
 * The queue's job counts per (state, type) (`<prefix>:{<queue>}:n`, see `src/internal/keys.ts`), which `Query.count`
 * reads instead of walking the records when it is asked for a type: they follow every script that creates, moves
 * or deletes jobs (many per script), and the sweep repairs them when they drift (a count written wrong, a field
 * lost) and builds them for a queue stored before they were kept. The test reads the hash itself against the state
 * sets and the records, and asks `Query.count` for the figures a dashboard asks for. Running jobs are in the lease
 * set alone (no state set moves when a job is claimed or settled), so their listings, pages and counts are read from
 * it: the second test pages through them.
 */

import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import * as Client from "@slowcall/core/Client"
import type { JobId, JobState } from "@slowcall/core/Job"
import * as Query from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import { Effect, Layer } from "effect"
import { Redis } from "ioredis"
import * as RedisStore from "../src/RedisStore.js"
import { dropPrefix, REDIS_URL, uniquePrefix } from "./support.js"

const prefix = uniquePrefix("counts")
const queue = "cn"
const base = `${prefix}:{${queue}}:`
const states: ReadonlyArray<JobState> = ["queued", "running", "succeeded", "failed", "abandoned"]
const types = ["even", "odd"]
const tenants = [undefined, "a", "b"]

const layer = Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropPrefix(REDIS_URL, prefix)))).pipe(
  Layer.provideMerge(RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false, pollMs: 60_000 }))
)

const enc = (s: string) => `${s.length}:${s}`

/** The counts as the records in the state sets say they should be. */
const truth = async (redis: Redis): Promise<Record<string, number>> => {
  const out: Record<string, number> = {}
  const add = (field: string) => {
    out[field] = (out[field] ?? 0) + 1
  }
  for (const state of states) {
    // The running jobs are in the lease set alone.
    const set = state === "running" ? `${base}x:l` : `${base}x:s:${state}`
    for (const member of await redis.zrange(set, 0, -1)) {
      const [type, tenant] = await redis.hmget(`${base}j:${member.slice(12)}`, "ty", "tn")
      const total = `${state}:${enc(type!)}`
      add(total)
      add(tenant == null ? `${total}n` : `${total}t${enc(tenant)}`)
    }
  }
  return out
}

const stored = async (redis: Redis): Promise<Record<string, number>> =>
  Object.fromEntries(Object.entries(await redis.hgetall(`${base}n`)).map(([field, n]) => [field, Number(n)]))

/** `Query.count` by type (and state, tenant) against `Query.list` with the same filters. */
const countsAgree = Effect.gen(function* () {
  const query = yield* Query.Query
  for (const type of types) {
    for (const state of [undefined, ...states]) {
      for (const tenant of tenants) {
        const listed = yield* query.list({ queue, type, state, tenant, limit: null })
        const counted = yield* query.count({ queue, type, state, tenant, upTo: 1_000 })
        expect({ type, state, tenant, counted }).toEqual({ type, state, tenant, counted: listed.length })
      }
    }
  }
})

const submitJobs = (n: number, from: number) =>
  Effect.flatMap(Client.make, (client) =>
    client.submitMany(
      Array.from({ length: n }, (_, k) => ({
        queue,
        type: types[(from + k) % 2] ?? "even",
        input: { i: from + k },
        tenant: tenants[(from + k) % 3]
      }))
    )
  )

const heldOf = (results: ReadonlyArray<Store.ClaimResult>) =>
  results.flatMap((r) => (r._tag === "Claimed" ? [{ jobId: r.job.id as JobId, token: r.job.leaseToken }] : []))

describe("Redis job counts", () => {
  it.scopedLive(
    "follow every script that moves jobs, and the sweep repairs them when they drift",
    () =>
      Effect.gen(function* () {
        const store = yield* Store.Store
        const redisStore = yield* RedisStore.RedisStore
        const redis = new Redis(REDIS_URL)
        yield* Effect.addFinalizer(() => Effect.sync(() => redis.disconnect()))
        const check = Effect.gen(function* () {
          expect(yield* Effect.promise(() => stored(redis))).toEqual(yield* Effect.promise(() => truth(redis)))
        })

        yield* submitJobs(60, 0)
        expect(yield* Effect.promise(() => redis.hget(`${base}m`, "nc"))).toBe("1")
        yield* check
        // Claims and settles of every kind, many jobs per script.
        for (let round = 0; round < 3; round++) {
          const held = heldOf((yield* store.claimNext({ queue, max: 12, owner: "w", leaseMs: 30_000 })).results)
          yield* check
          yield* store.settle({
            items: held.map((h, k) => ({
              ...h,
              outcome: [
                { _tag: "Complete" as const, result: { k } },
                { _tag: "Retry" as const, delayMs: 0, errorClass: "server_error" as const, error: "again" },
                { _tag: "Fail" as const, errorClass: "invalid_input" as const, error: "no" },
                { _tag: "Abandon" as const, reason: "cancelled" as const }
              ][k % 4]!
            }))
          })
          yield* check
        }
        // Leases that end come back through the sweep; cancels, replays and purges move jobs too.
        const lapsed = heldOf((yield* store.claimNext({ queue, max: 5, owner: "w", leaseMs: 1 })).results)
        expect(lapsed.length).toBe(5)
        yield* Effect.sleep("5 millis")
        yield* store.sweep({ queue, republishAfterMs: 60_000 })
        yield* check
        const queued = yield* Effect.promise(() => redis.zrange(`${base}x:s:queued`, 0, 3))
        yield* store.cancel({ items: queued.map((m) => ({ jobId: m.slice(12) as JobId })) })
        yield* check
        const failed = yield* Effect.promise(() => redis.zrange(`${base}x:s:failed`, 0, 1))
        expect(failed.length).toBe(2)
        yield* store.replay({ items: failed.map((m) => ({ jobId: m.slice(12) as JobId })) })
        yield* check
        yield* redisStore.purge({ queue, createdBefore: Number.MAX_SAFE_INTEGER, limit: 5 })
        yield* check
        yield* countsAgree

        // A count written wrong, a cell lost and a field no script writes: the counts lie until the next sweep.
        const wrong = `queued:${enc("even")}`
        yield* Effect.promise(() => redis.hincrby(`${base}n`, wrong, 7))
        yield* Effect.promise(() => redis.hdel(`${base}n`, `succeeded:${enc("odd")}t${enc("a")}`))
        yield* Effect.promise(() => redis.hset(`${base}n`, "garbage", "3"))
        const before = yield* Effect.promise(() => truth(redis))
        const query = yield* Query.Query
        const listedEven = (yield* query.list({ queue, type: "even", state: "queued", limit: null })).length
        expect(yield* query.count({ queue, type: "even", state: "queued", upTo: 1_000 })).toBe(listedEven + 7)
        yield* store.sweep({ queue, republishAfterMs: 60_000 })
        expect(yield* Effect.promise(() => stored(redis))).toEqual(before)
        yield* countsAgree

        // Two types' counts moved against each other (every total still adds up): the per-type check finds it.
        yield* Effect.promise(() =>
          redis
            .multi()
            .hincrby(`${base}n`, `succeeded:${enc("even")}`, 1)
            .hincrby(`${base}n`, `succeeded:${enc("odd")}`, -1)
            .exec()
        )
        yield* store.sweep({ queue, republishAfterMs: 60_000 })
        yield* check

        // A queue stored before the counts were kept: counts by type walk the records until a sweep builds them.
        yield* Effect.promise(() => redis.multi().del(`${base}n`).hdel(`${base}m`, "nc").exec())
        yield* countsAgree
        yield* submitJobs(6, 100)
        yield* store.sweep({ queue, republishAfterMs: 60_000 })
        expect(yield* Effect.promise(() => redis.hget(`${base}m`, "nc"))).toBe("1")
        yield* check
        yield* countsAgree
      }).pipe(Effect.provide(layer)),
    60_000
  )

  it.scopedLive(
    "running jobs are listed from the lease set, page by page, in either order, per tenant and across queues",
    () =>
      Effect.gen(function* () {
        const store = yield* Store.Store
        const query = yield* Query.Query
        const hex = (n: number) => randomBytes(n).toString("hex")
        const id = () => `${hex(4)}-${hex(2)}-7${hex(2).slice(1)}-8${hex(2).slice(1)}-${hex(6)}` as JobId
        const at = (yield* store.now) - 10_000
        const items = (q: string, n: number) =>
          Array.from({ length: n }, (_, k) => ({
            id: id(),
            queue: q,
            tenant: k % 2 === 0 ? null : "a",
            type: types[k % 2] ?? "even",
            version: 1,
            inputHash: `h${k}`,
            input: { k },
            maxAttempts: 3
          }))
        // Equal createdAt within a queue and across the two: ties go by insertion, then by queue name.
        yield* store.submit({ items: [...items("ra", 12), ...items("rb", 12)], now: at })
        yield* store.submit({ items: items("ra", 6), now: at + 1 })
        const claimed = new Map<string, { readonly queue: string; readonly tenant: string | null }>()
        for (const [q, max] of [
          ["ra", 14],
          ["rb", 7]
        ] as const) {
          const reply = yield* store.claimNext({ queue: q, max, owner: "w", leaseMs: 600_000, now: at + 2 })
          for (const r of reply.results) {
            if (r._tag === "Claimed") claimed.set(r.job.id, { queue: r.job.queue, tenant: r.job.tenant })
          }
        }
        expect(claimed.size).toBe(21)
        for (const q of ["ra", undefined]) {
          for (const tenant of [undefined, "a"]) {
            for (const order of ["newest", "oldest"] as const) {
              const full = yield* query.list({ queue: q, state: "running", tenant, order, limit: null })
              const expected = [...claimed].flatMap(([jobId, job]) =>
                (q === undefined || job.queue === q) && (tenant === undefined || job.tenant === tenant) ? [jobId] : []
              )
              expect(expected.length).toBeGreaterThan(0)
              expect(new Set(full.map((j) => j.id))).toEqual(new Set(expected))
              expect(full.length).toBe(expected.length)
              const times = full.map((j) => j.createdAt)
              expect(times).toEqual([...times].sort((a, b) => (order === "newest" ? b - a : a - b)))
              expect(yield* query.count({ queue: q, state: "running", tenant, upTo: 1_000 })).toBe(full.length)
              const paged: Array<string> = []
              let after: JobId | undefined
              while (true) {
                const page = yield* query.list({ queue: q, state: "running", tenant, order, limit: 2, after })
                if (page.length === 0) break
                paged.push(...page.map((j) => j.id))
                after = page[page.length - 1]!.id
              }
              expect(paged).toEqual(full.map((j) => j.id))
            }
          }
        }
      }).pipe(Effect.provide(layer)),
    60_000
  )
})
