/**
 * The index sets that say which priorities, tenants and (type, version) pairs have queued jobs (`x:p`, `x:tp:`,
 * `x:w`, `x:tw:`, and the fair-claim `x:np` and `x:ft`) hold exactly the members whose source sets have jobs, after
 * claim, claimNext (plain and fair), heartbeat and settle scripts that each move many jobs at once. A member left
 * behind is invisible to the readers (they skip empty sources), so the model-based property cannot see it; this test
 * reads the sets themselves.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Client from "@slowcall/core/Client"
import type { JobId } from "@slowcall/core/Job"
import * as Store from "@slowcall/core/Store"
import { Effect, Layer } from "effect"
import { Redis } from "ioredis"
import * as RedisStore from "../src/RedisStore.js"
import { dropPrefix, REDIS_URL, uniquePrefix } from "./support.js"

const prefix = uniquePrefix("indexes")
const queue = "ix"
const base = `${prefix}:{${queue}}:`

const layer = Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropPrefix(REDIS_URL, prefix)))).pipe(
  Layer.provideMerge(RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false, pollMs: 60_000 }))
)

const enc = (s: string) => `${s.length}:${s}`

const keysUnder = async (redis: Redis, start: string): Promise<Array<string>> => {
  const out: Array<string> = []
  let cursor = "0"
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${start}*`, "COUNT", 1000)
    cursor = next
    out.push(...keys)
  } while (cursor !== "0")
  return out
}

/** Every index set against the members its sources say it should have. */
const checkIndexes = async (redis: Redis, tenants: ReadonlyArray<string>) => {
  const sorted = (xs: Iterable<string>) => [...xs].sort()
  const rest = (keys: Array<string>, start: string, end = "") =>
    keys.map((k) => k.slice(start.length, k.length - end.length))
  const zmembers = (key: string) => redis.zrange(key, 0, -1).then(sorted)
  const smembers = (key: string) => redis.smembers(key).then(sorted)
  const ready = rest(await keysUnder(redis, `${base}x:r:`), `${base}x:r:`)
  expect(await zmembers(`${base}x:p`)).toEqual(sorted(ready))
  const waiting = rest(await keysUnder(redis, `${base}x:wq:`), `${base}x:wq:`)
  expect(await smembers(`${base}x:w`)).toEqual(sorted(waiting))
  const codes: Array<string> = []
  for (const t of tenants) {
    const tenantReady = (await keysUnder(redis, `${base}x:tr:`)).filter((k) => k.endsWith(`:${enc(t)}`))
    const prios = rest(tenantReady, `${base}x:tr:`, `:${enc(t)}`)
    expect(await zmembers(`${base}x:tp:${enc(t)}`)).toEqual(sorted(prios))
    if (prios.length > 0) codes.push(`t${t}`)
    const pairs = rest(await keysUnder(redis, `${base}x:twq:${enc(t)}`), `${base}x:twq:${enc(t)}`)
    expect(await smembers(`${base}x:tw:${enc(t)}`)).toEqual(sorted(pairs))
  }
  if ((await redis.hget(`${base}m`, "fx")) === "1") {
    const noTenant = rest(await keysUnder(redis, `${base}x:nr:`), `${base}x:nr:`)
    expect(await zmembers(`${base}x:np`)).toEqual(sorted(noTenant))
    if (noTenant.length > 0) codes.push("n")
    expect(await smembers(`${base}x:ft`)).toEqual(sorted(codes))
  }
}

describe("Redis index sets", () => {
  it.scoped(
    "follow their sources after scripts that move many jobs each",
    () =>
      Effect.gen(function* () {
        const client = yield* Client.make
        const store = yield* Store.Store
        const redis = new Redis(REDIS_URL)
        yield* Effect.addFinalizer(() => Effect.sync(() => redis.disconnect()))
        const tenants = ["a", "b"]
        const tenantOf = (i: number) => [undefined, "a", "b"][i % 3]
        yield* client.submitMany(
          Array.from({ length: 90 }, (_, i) => ({
            queue,
            type: i % 2 === 0 ? "even" : "odd",
            input: { i },
            tenant: tenantOf(i),
            priority: [0, 5, 9][Math.floor(i / 3) % 3]!
          }))
        )
        const check = Effect.promise(() => checkIndexes(redis, tenants))
        yield* check
        // Each settle mixes every kind: some jobs leave for good, some come back queued at their priority.
        const settleAll = (held: ReadonlyArray<{ jobId: JobId; token: number }>) =>
          store.settle({
            items: held.map((h, k) => ({
              ...h,
              outcome: [
                { _tag: "Complete" as const, result: null },
                { _tag: "Retry" as const, delayMs: 0, errorClass: "server_error" as const, error: "again" },
                { _tag: "Fail" as const, errorClass: "invalid_input" as const, error: "no" },
                { _tag: "Release" as const }
              ][k % 4]!
            }))
          })
        const heldOf = (results: ReadonlyArray<Store.ClaimResult>) =>
          results.flatMap((r) => (r._tag === "Claimed" ? [{ jobId: r.job.id, token: r.job.leaseToken }] : []))
        for (const fair of [undefined, {}]) {
          for (let round = 0; round < 4; round++) {
            const claimed = yield* store.claimNext({ queue, max: 25, owner: "w", leaseMs: 30_000, fair })
            const held = heldOf(claimed.results)
            expect(held.length).toBeGreaterThan(0)
            yield* check
            yield* store.heartbeat({ items: held.map((h) => ({ ...h, leaseMs: 60_000, progress: 0.5 })) })
            yield* check
            yield* settleAll(held)
            yield* check
          }
        }
        // Named claims of what is still queued, then their settles, until nothing is left.
        while (true) {
          const queued = yield* Effect.promise(() => redis.zrange(`${base}x:s:queued`, 0, 29))
          if (queued.length === 0) break
          const claimed = yield* store.claim({
            items: queued.map((m) => ({ jobId: m.slice(12) as JobId, owner: "w", leaseMs: 30_000 }))
          })
          const held = heldOf(claimed.results)
          yield* check
          yield* store.settle({
            items: held.map((h) => ({ ...h, outcome: { _tag: "Complete" as const, result: null } }))
          })
          yield* check
        }
        expect(yield* Effect.promise(() => redis.exists(`${base}x:p`, `${base}x:w`, `${base}x:ft`))).toBe(0)
      }).pipe(Effect.provide(layer)),
    60_000
  )
})
