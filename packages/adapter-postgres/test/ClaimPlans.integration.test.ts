/**
 * claimNext's statement texts on the server: batches of every size from 1 to 33 run as one statement per
 * power-of-two bucket, each claims exactly its batch, and the server settles on a generic plan for a bucket it runs
 * often instead of planning every execution.
 */
import { it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import { Effect } from "effect"
import { afterAll, describe, expect } from "vitest"
import { PgDriver } from "../src/PgDriver.js"
import { PgStore } from "../src/PgStore.js"
import { dropSchema, serverStoreLayer, submitOptions, uniqueSchema } from "./support.js"

const schema = uniqueSchema("claim_plans")
afterAll(() => dropSchema(schema))

describe("claimNext statements on the server", () => {
  it.layer(serverStoreLayer(schema, { max: 1 }))((it) => {
    it.effect("one statement per power-of-two bucket, each batch claimed exactly, generic plans kept", () =>
      Effect.gen(function* () {
        // Arrange: 600 due jobs on one connection.
        const store = yield* PgStore
        const driver = yield* PgDriver
        const queue = "plans"
        const items = yield* Effect.forEach(Array.from({ length: 600 }), () =>
          Effect.map(makeJobId, (id) => submitOptions(queue, id))
        )
        yield* store.submit({ items })

        // Act: a batch of every size from 1 to 33.
        const claimed: Array<number> = []
        for (let max = 1; max <= 33; max += 1) {
          const reply = yield* store.claimNext({ queue, max, owner: "w", leaseMs: 60_000 })
          claimed.push(reply.results.length)
        }
        const prepared = yield* Effect.promise(() =>
          driver.query<{ readonly generic: number; readonly custom: number }>(
            `SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements
             WHERE statement LIKE '/* slowcall:claimNext %' ORDER BY generic_plans + custom_plans DESC`
          )
        )

        // Assert: every batch claimed in full; buckets 1, 2, 4, 8, 16, 32 and 64 only; bucket 32 (sizes 17 to 32)
        // runs on a generic plan after the server's first custom ones.
        expect(claimed).toEqual(Array.from({ length: 33 }, (_, k) => k + 1))
        expect(prepared).toHaveLength(7)
        expect(prepared[0]!.generic + prepared[0]!.custom).toBe(16)
        expect(prepared[0]!.generic).toBeGreaterThan(prepared[0]!.custom)
      })
    )
  })
})
