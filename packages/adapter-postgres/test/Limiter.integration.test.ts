/**
 * The Limiter on the Postgres adapter: the shared conformance suite on the real server (a fresh schema per run,
 * dropped after) and on PGlite in memory, provided by the same layers as the Store; and a stress run on the server,
 * 16 clients on 16 connections racing for one resource with `maxConcurrent` 4, on the server's own clock.
 */
import { expect, it } from "@effect/vitest"
import { LimiterConformance } from "@slowcall/testing/LimiterConformance"
import { stress } from "@slowcall/testing/LimiterStress"
import { Effect } from "effect"
import { afterAll, describe } from "vitest"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import { DATABASE_URL, dropSchema, holdServer, pgliteStoreLayer, serverStoreLayer, uniqueSchema } from "./support.js"

holdServer()

LimiterConformance({
  name: "postgres server",
  layer: serverStoreLayer(uniqueSchema("lconf")),
  capabilities: { concurrent: true, sharedState: true }
})

LimiterConformance({
  name: "pglite in memory",
  layer: pgliteStoreLayer(),
  capabilities: { concurrent: true, sharedState: false }
})

const stressSchema = uniqueSchema("lstress")

afterAll(() => dropSchema(stressSchema))

describe("the Limiter under contention on the real server", () => {
  it.live(
    "16 clients on their own connections, maxConcurrent 4: never more than 4 permits live",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const setup = yield* PgDriver.acquire({ connectionString: DATABASE_URL, max: 1 })
          yield* PgStore.make(setup, { schema: stressSchema }).migrate
          const clients = yield* Effect.forEach(Array.from({ length: 16 }), () =>
            Effect.map(PgDriver.acquire({ connectionString: DATABASE_URL, max: 1 }), (driver) =>
              PgStore.makeLimiter(driver, { schema: stressSchema })
            )
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
