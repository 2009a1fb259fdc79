/**
 * claimNext's statement texts on the server: batches of every size from 1 to 33 run as one statement per
 * power-of-two bucket, each claims exactly its batch, and the server settles on a generic plan for a bucket it runs
 * often instead of planning every execution.
 */
import { it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import { Effect } from "effect"
import { afterAll, describe, expect } from "vitest"
import { makeStatements } from "../src/internal/statements.js"
import { PgDriver } from "../src/PgDriver.js"
import { PgStore } from "../src/PgStore.js"
import { dropSchema, serverStoreLayer, submitOptions, uniqueSchema } from "./support.js"

/** `n` due jobs on `queue`, submitted in one batch. */
const submitDue = (queue: string, n: number) =>
  Effect.gen(function* () {
    const store = yield* PgStore
    const items = yield* Effect.forEach(Array.from({ length: n }), () =>
      Effect.map(makeJobId, (id) => submitOptions(queue, id))
    )
    yield* store.submit({ items })
  })

/** The plan of `text` as it runs, in a transaction rolled back afterwards: nothing it writes stays. */
const explain = (text: string, params: ReadonlyArray<unknown>) =>
  Effect.flatMap(PgDriver, (driver) =>
    Effect.promise(async () => {
      await driver.query("BEGIN")
      try {
        const rows = await driver.query<{ "QUERY PLAN": string }>(`EXPLAIN ANALYZE ${text}`, params)
        return rows.map((row) => row["QUERY PLAN"]).join("\n")
      } finally {
        await driver.query("ROLLBACK")
      }
    })
  )

/** The plan of one settlement completing every job of `claimed` with a null result, as it runs (rolled back). */
const completionPlan = (
  st: ReturnType<typeof makeStatements>,
  claimed: ReadonlyArray<{ readonly job: { readonly id: string; readonly leaseToken: number } }>
) => {
  const ids = claimed.map((r) => r.job.id)
  const none = ids.map(() => null)
  return explain(st.settle, [
    ids,
    claimed.map((r) => r.job.leaseToken),
    ids.map(() => "complete"),
    ids.map(() => "null"),
    none,
    none,
    none,
    none,
    null
  ])
}

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
        yield* submitDue(queue, 600)

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

/**
 * A batch write reads its items and their locked rows as one set. When it joined the two (CTEs `input` and `locked`),
 * the planner guessed their sizes from the pick's LIMIT, chose a nested loop, and compared every item with every row:
 * 262,144 comparisons, two thirds of the time of a claim of 512 jobs.
 */
describe("batch writes on the server", () => {
  const joined = uniqueSchema("claim_join")
  afterAll(() => dropSchema(joined))
  it.layer(serverStoreLayer(joined, { max: 1 }))((it) => {
    it.effect("a claim of 256 jobs and their settlement compare no item with another's row", () =>
      Effect.gen(function* () {
        // Arrange: 256 due jobs.
        const store = yield* PgStore
        const queue = "joined"
        yield* submitDue(queue, 256)
        const st = makeStatements(joined)

        // Act: the claim's plan as it runs, then a real claim and its settlement's plan.
        const claimPlan = yield* explain(st.claimNext(256), [queue, 256, "w", 60_000, null, null, null])
        const claimed = yield* store.claimNext({ queue, max: 256, owner: "w", leaseMs: 60_000 })
        const ids = claimed.results.map((r) => r.job.id)
        const settlePlan = yield* completionPlan(st, claimed.results)

        // Assert: every job claimed, and neither plan filters a join's pairs one by one.
        expect(ids).toHaveLength(256)
        expect(claimPlan).toContain("Update on jobs")
        expect(claimPlan).not.toContain("Rows Removed by Join Filter")
        expect(settlePlan).toContain("Update on jobs")
        expect(settlePlan).not.toContain("Rows Removed by Join Filter")
      })
    )
  })
})

/**
 * With the adapter's session settings (`PgDriver.sessionOptions`), a claim and a settlement on a table of thousands of
 * jobs find their rows by key, with statistics or without. With PostgreSQL's default `random_page_cost` (4), the
 * claim on fresh tables read and sorted every due entry (35 ms for 512 of 10,000 jobs, 17 ms by the claim order),
 * and once the tables had statistics the settlement of 256 scanned `jobs` three times and `attempts` once (92 ms,
 * 15 ms by key).
 */
describe("statements on thousands of jobs", () => {
  const many = uniqueSchema("claim_keys")
  afterAll(() => dropSchema(many))
  it.layer(serverStoreLayer(many, { max: 1 }))((it) => {
    it.effect("a claim walks the claim order without statistics; a settlement finds its rows by key with them", () =>
      Effect.gen(function* () {
        // Arrange: 10,000 due jobs, in batches of 1,000, on tables without statistics.
        const store = yield* PgStore
        const driver = yield* PgDriver
        const queue = "keys"
        for (let batch = 0; batch < 10; batch += 1) yield* submitDue(queue, 1_000)
        const st = makeStatements(many)

        // Act: the plan of a claim of 512 on the fresh tables; then statistics, a real claim of 256, and the plan of
        // its settlement.
        const claimPlan = yield* explain(st.claimNext(512), [queue, 512, "w", 60_000, null, null, null])
        yield* Effect.promise(() =>
          driver.query(`ANALYZE "${many}".jobs, "${many}".queued_entries, "${many}".attempts`)
        )
        const claimed = yield* store.claimNext({ queue, max: 256, owner: "w", leaseMs: 60_000 })
        const ids = claimed.results.map((r) => r.job.id)
        const settlePlan = yield* completionPlan(st, claimed.results)

        // Assert: the claim walks the claim order's index (no sort of the due entries); the settlement reads no
        // table whole.
        expect(ids).toHaveLength(256)
        expect(claimPlan).toContain("Index Scan using queued_entries_claim_order")
        expect(claimPlan).not.toContain("Bitmap Heap Scan on queued_entries")
        expect(settlePlan).toContain("Update on jobs")
        expect(settlePlan).not.toMatch(/Seq Scan on (jobs|attempts)/)
      })
    )
  })
})
