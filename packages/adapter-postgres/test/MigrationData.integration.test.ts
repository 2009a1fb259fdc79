/**
 * Migrations on a live database: a schema at the previous version holding jobs in every state (with attempt rows and
 * ledger rows) is migrated to the current one; every row survives unchanged, the new structures hold what the rows
 * say, and every verb works afterwards. On the real server and on PGlite.
 *
 * The rows are written by today's statements into a schema at the current version, then copied as they are into a
 * schema at the previous one (the three tables' columns are the same at both), so the arrangement does not depend on
 * which statements the previous version ran.
 */
import { expect, it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import { Effect } from "effect"
import { afterAll, describe } from "vitest"
import { type Driver, makePgDriver, makePgliteDriver } from "../src/internal/driver.js"
import * as PgMigrator from "../src/PgMigrator.js"
import * as PgStore from "../src/PgStore.js"
import { DATABASE_URL, dropSchema, entryMismatches, holdServer, only, submitOptions, uniqueSchema } from "./support.js"

holdServer()

/** The migration under test: the schema is first brought to the version before it. */
const VERSION = 15

const serverSchema = uniqueSchema("migrate_live")
const serverSource = uniqueSchema("migrate_src")
afterAll(() => Promise.all([dropSchema(serverSchema), dropSchema(serverSource)]))

const backends = [
  {
    name: "server",
    schema: serverSchema,
    source: serverSource,
    driver: () => Promise.resolve(makePgDriver({ connectionString: DATABASE_URL }))
  },
  { name: "pglite", schema: "slowcall", source: "slowcall_source", driver: () => makePgliteDriver({}) }
] as const

/** The indexes of jobs, by name. */
const jobIndexes = (driver: Driver, schema: string) =>
  Effect.promise(async () =>
    (
      await driver.query<{ readonly name: string }>(
        "SELECT indexname AS name FROM pg_indexes WHERE schemaname = $1 AND tablename = 'jobs' ORDER BY indexname",
        [schema]
      )
    ).map((row) => row.name)
  )

/** Every row of the three tables, in a fixed order, as the server returns them. */
const dump = (driver: Driver, schema: string) =>
  Effect.promise(async () => ({
    jobs: await driver.query(`SELECT * FROM "${schema}".jobs ORDER BY seq`),
    attempts: await driver.query(`SELECT * FROM "${schema}".attempts ORDER BY job_id, token`),
    charges: await driver.query(`SELECT * FROM "${schema}".charges ORDER BY seq`)
  }))

const tokenOf = (result: { readonly _tag: string; readonly job?: { readonly leaseToken: number } }): number => {
  if (result._tag !== "Claimed" || result.job === undefined) throw new Error(`expected Claimed, got ${result._tag}`)
  return result.job.leaseToken
}

for (const backend of backends) {
  describe(`migration ${VERSION} on a live database: ${backend.name}`, () => {
    it.live("jobs in every state survive unchanged, and every verb works after", () =>
      Effect.gen(function* () {
        // Arrange: a job in each state with its attempts and charges, copied into a schema at the previous version.
        const driver = yield* Effect.promise(backend.driver)
        const schema = backend.schema
        yield* PgMigrator.migrate(driver, { schema: backend.source })
        const source = PgStore.make(driver, { schema: backend.source })
        const q = "live"
        const ids: Record<string, JobId> = {}
        for (const name of ["queued", "running", "succeeded", "failed", "abandoned", "expired"]) {
          ids[name] = yield* makeJobId
        }
        const now = yield* source.now
        const past = now - 120_000
        yield* source.submit({
          items: Object.values(ids).map((id) => submitOptions(q, id, { maxAttempts: 2 })),
          now: past
        })
        const claims = yield* source.claim({
          items: ["running", "succeeded", "failed", "expired"].map((name) => ({
            jobId: ids[name]!,
            owner: "w",
            leaseMs: name === "expired" ? 1_000 : 600_000
          })),
          now: past
        })
        const [running, succeeded, failed] = claims.results.map(tokenOf)
        yield* source.charge({
          items: [
            { jobId: ids.running!, callId: "r1", token: running!, amountCents: 4, settled: false },
            { jobId: ids.succeeded!, callId: "s1", token: succeeded!, amountCents: 2.5, settled: true }
          ],
          now: past
        })
        yield* source.settle({
          items: [
            { jobId: ids.succeeded!, token: succeeded!, outcome: { _tag: "Complete", result: { ok: 1 } } },
            { jobId: ids.failed!, token: failed!, outcome: { _tag: "Fail", errorClass: "auth", error: "401" } }
          ],
          now: past
        })
        yield* source.cancel({ items: [{ jobId: ids.abandoned! }], now: past })
        const earlier = PgMigrator.migrations().filter((m) => m.version < VERSION)
        yield* PgMigrator.migrate(driver, { schema, migrations: earlier })
        yield* Effect.promise(async () => {
          for (const table of ["jobs", "attempts", "charges"]) {
            await driver.query(`INSERT INTO "${schema}".${table} SELECT * FROM "${backend.source}".${table}`)
          }
          for (const table of ["jobs", "charges"]) {
            await driver.query(
              `SELECT setval(pg_get_serial_sequence('"${schema}".${table}', 'seq'), (SELECT max(seq) FROM "${schema}".${table}))`
            )
          }
        })
        const store = PgStore.make(driver, { schema })
        const indexesBefore = yield* jobIndexes(driver, schema)
        const before = yield* dump(driver, schema)

        // Act: the migration, then every verb.
        const migrated = yield* PgMigrator.migrate(driver, { schema })
        const after = yield* dump(driver, schema)
        const mismatchesAfter = yield* Effect.promise(() => entryMismatches(driver, schema))
        const indexesAfter = yield* jobIndexes(driver, schema)
        const fresh = yield* makeJobId
        const submitted = only(yield* store.submit({ items: [submitOptions(q, fresh)] }))
        const beat = only(
          yield* store.heartbeat({ items: [{ jobId: ids.running!, token: running!, leaseMs: 600_000 }] })
        )
        const charged = only(
          yield* store.charge({
            items: [{ jobId: ids.running!, callId: "r1", token: running!, amountCents: 3, settled: true }]
          })
        )
        const settled = only(
          yield* store.settle({
            items: [{ jobId: ids.running!, token: running!, outcome: { _tag: "Complete", result: null } }]
          })
        )
        const swept = yield* store.sweep({})
        const next = yield* store.claimNext({ queue: q, max: 10, owner: "w2", leaseMs: 600_000 })
        const replayed = only(yield* store.replay({ items: [{ jobId: ids.failed! }] }))
        const cancelled = only(yield* store.cancel({ items: [{ jobId: ids.failed! }] }))
        const purged = yield* store.purge({ queue: q, createdBefore: now })
        const left = yield* dump(driver, schema)
        const mismatchesLeft = yield* Effect.promise(() => entryMismatches(driver, schema))
        const constraints = yield* Effect.promise(() =>
          driver.query<{ readonly name: string }>(
            `SELECT conname AS name FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
             WHERE n.nspname = $1 AND conname IN ('jobs_seq_key', 'charges_seq_key', 'attempts_job_id_fkey',
               'charges_job_id_fkey')`,
            [schema]
          )
        )
        yield* Effect.promise(() => driver.close())

        // Assert
        expect(migrated.applied).toEqual([VERSION])
        expect(before.jobs.map((j) => j.state)).toEqual([
          "queued",
          "running",
          "succeeded",
          "failed",
          "abandoned",
          "running"
        ])
        expect(after).toEqual(before)
        expect(mismatchesAfter).toEqual([])
        expect(mismatchesLeft).toEqual([])
        // Only the indexes whose columns never change are left on jobs, so its updates can be HOT.
        expect(indexesBefore).toContain("jobs_claim_order")
        expect(indexesAfter).toEqual(["jobs_batch", "jobs_pkey", "jobs_queue_created", "jobs_request_key"])
        expect(constraints).toEqual([])
        expect(submitted._tag).toBe("Created")
        expect(beat._tag).toBe("Renewed")
        expect(charged).toEqual({ _tag: "Charged", costCents: 3 })
        expect(settled._tag).toBe("Settled")
        expect(swept.requeued.map((j) => j.id)).toEqual([ids.expired])
        expect(next.results.map((r) => r.job.id)).toEqual([ids.queued, fresh, ids.expired])
        expect(replayed._tag).toBe("Replayed")
        expect(cancelled._tag).toBe("Cancelled")
        // Finished before the cutoff: succeeded, abandoned, the just-settled running one and the cancelled replay.
        expect([...purged].sort()).toEqual([ids.succeeded, ids.abandoned, ids.running, ids.failed].sort())
        const kept = new Set(left.jobs.map((j) => j.id))
        expect([...kept].sort()).toEqual([ids.queued, ids.expired, fresh].sort())
        expect(left.attempts.every((a) => kept.has(a.job_id))).toBe(true)
        expect(left.charges.every((c) => kept.has(c.job_id))).toBe(true)
      })
    )
  })
}
