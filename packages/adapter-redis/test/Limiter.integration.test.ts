/**
 * The Limiter on the Redis adapter: the shared conformance suite on the machine's Redis server (a fresh key prefix,
 * its keys deleted afterwards), provided by the same layer as the Store; and a stress run, 16 clients on 16
 * connections racing for one resource with `maxConcurrent` 4, on the server's own clock.
 */
import { expect, it } from "@effect/vitest"
import { LimiterConformance } from "@slowcall/testing/LimiterConformance"
import { stress } from "@slowcall/testing/LimiterStress"
import { Effect } from "effect"
import { afterAll, describe } from "vitest"
import * as RedisConnection from "../src/RedisConnection.js"
import * as RedisStore from "../src/RedisStore.js"
import { dropPrefix, REDIS_URL, storeLayer, uniquePrefix } from "./support.js"

LimiterConformance({
  name: "redis server",
  layer: storeLayer(uniquePrefix("lconf")),
  capabilities: { concurrent: true, sharedState: true }
})

const stressPrefix = uniquePrefix("lstress")

afterAll(() => dropPrefix(REDIS_URL, stressPrefix))

describe("the Limiter under contention on the real server", () => {
  it.live(
    "16 clients on their own connections, maxConcurrent 4: never more than 4 permits live",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const clients = yield* Effect.forEach(Array.from({ length: 16 }), () =>
            Effect.map(RedisConnection.acquire({ url: REDIS_URL, prefix: stressPrefix }), RedisStore.makeLimiter)
          )

          const result = yield* stress({ clients, resource: "openai:gpt-4.1:stress", maxConcurrent: 4, rounds: 12 })

          expect(result.grants).toBe(16 * 12)
          expect(result.waits).toBeGreaterThan(0)
          expect(result.maxHeldByClients).toBeLessThanOrEqual(4)
          expect(result.maxSeenByStore).toBeLessThanOrEqual(4)
        })
      ),
    120_000
  )
})
