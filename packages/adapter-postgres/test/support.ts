/**
 * Test support: the server's URL, a fresh schema per test file (dropped when the layer is torn down), layers per
 * seam, submit items, and single-item shorthands over the batch verbs.
 */
import { randomBytes } from "node:crypto"
import type { Job, JobId } from "@slowcall/core/Job"
import type { SubmitItem } from "@slowcall/core/Protocol"
import type { Reply } from "@slowcall/core/Store"
import { Effect, Layer } from "effect"
import pg from "pg"
import { afterAll, beforeAll, expect, it } from "vitest"
import * as PgDriver from "../src/PgDriver.js"
import * as PgStore from "../src/PgStore.js"
import { entryMismatches } from "./entries.js"

export { entryMismatches }

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** A schema name no other test file uses. */
export const uniqueSchema = (prefix: string): string => `${prefix}_${randomBytes(5).toString("hex")}`

/** A store-level submit item of a `t` job with input `{ text: "doc" }` and three attempts, on `queue`. */
export const submitOptions = (queue: string, id: JobId, extra: Partial<SubmitItem> = {}): SubmitItem => ({
  id,
  queue,
  type: "t",
  version: 1,
  inputHash: `h-${id}`,
  input: { text: "doc" },
  maxAttempts: 3,
  ...extra
})

/** The only result of a one-item batch reply. */
export const only = <A>(reply: Reply<A>): A => {
  if (reply.results.length !== 1) throw new Error(`expected one result, got ${reply.results.length}`)
  return reply.results[0]!
}

/** Submits one item and returns the created (or existing) job; a reused key is a test failure. */
export const submitOne = (store: PgStore.PgStoreService, item: SubmitItem): Effect.Effect<Job, unknown> =>
  Effect.flatMap(store.submit({ items: [item], now: undefined }), (reply) => {
    const outcome = only(reply)
    return outcome._tag === "KeyReused" ? Effect.die(new Error("request key reused")) : Effect.succeed(outcome.job)
  })

/** Drops a schema on the test server (used after each file). */
export const dropSchema = async (schema: string): Promise<void> => {
  const client = new pg.Client({ connectionString: DATABASE_URL })
  client.on("error", () => {})
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
}

const dropOnRelease = (schema: string) =>
  Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropSchema(schema))))

/**
 * The whole adapter (`PgStore.layer`: PgDriver, PgStore, Store, Query, PgTransport, Transport) on the server, on a
 * fresh schema that is dropped when the layer's scope closes.
 */
export const serverLayer = (
  schema: string,
  options: Omit<Parameters<typeof PgStore.layer>[0], "schema" | "connectionString"> = {}
) =>
  dropOnRelease(schema).pipe(Layer.provideMerge(PgStore.layer({ connectionString: DATABASE_URL, schema, ...options })))

/**
 * The Store seam only (PgDriver, PgStore, Store, Query; no transport) on the server, on a fresh schema that is
 * dropped when the layer's scope closes.
 */
export const serverStoreLayer = (schema: string, options: Omit<PgDriver.PgDriverOptions, "connectionString"> = {}) =>
  dropOnRelease(schema).pipe(Layer.provideMerge(keptServerStoreLayer(schema, options)))

/**
 * `serverStoreLayer` without the drop: the schema outlives the layer, for a check that reads what a property left
 * (`entriesHoldAfter`, which drops it after the file).
 */
export const keptServerStoreLayer = (
  schema: string,
  options: Omit<PgDriver.PgDriverOptions, "connectionString"> = {}
) =>
  PgStore.layerFromDriver({ schema }).pipe(
    Layer.provideMerge(PgDriver.layer({ connectionString: DATABASE_URL, ...options }))
  )

/** The Store seam only (PgDriver, PgStore, Store, Query; no transport) on PGlite in memory. */
export const pgliteStoreLayer = () => PgStore.layerFromDriver().pipe(Layer.provideMerge(PgDriver.layerPglite()))

/**
 * One test file of this package restarts the server. Files that use the server hold a shared advisory lock for
 * their whole run and the restarting file takes it exclusively, so a restart never lands in the middle of another
 * file's tests. A waiting connection killed by the restart simply tries again.
 */
const GATE = 0x5c4c0001

const holdGate = async (mode: "shared" | "exclusive"): Promise<pg.Client> => {
  const deadline = Date.now() + 55_000
  while (true) {
    const client = new pg.Client({ connectionString: DATABASE_URL })
    client.on("error", () => {})
    try {
      await client.connect()
      await client.query(mode === "shared" ? "SELECT pg_advisory_lock_shared($1)" : "SELECT pg_advisory_lock($1)", [
        GATE
      ])
      return client
    } catch (error) {
      await client.end().catch(() => {})
      if (Date.now() > deadline) throw error
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }
}

/** Registers hooks that keep the server from being restarted while this file runs. */
export const holdServer = (mode: "shared" | "exclusive" = "shared"): void => {
  let client: pg.Client | undefined
  beforeAll(async () => {
    client = await holdGate(mode)
  }, 60_000)
  afterAll(async () => {
    await client?.end().catch(() => {})
  })
}

/**
 * Registers, after the tests registered before it in the file, a test that every job `schema` holds has its entry
 * and nothing else (`entryMismatches`), with jobs queued, running and finished among them so the check is not
 * vacuous; and drops the schema after the file.
 */
export const entriesHoldAfter = (schema: string): void => {
  afterAll(() => dropSchema(schema))
  it("the entries of every job the tests above left agree with its row (migration 0015's invariant)", async () => {
    const client = new pg.Client({ connectionString: DATABASE_URL })
    client.on("error", () => {})
    await client.connect()
    try {
      const driver = { query: async (sql: string) => (await client.query(sql)).rows as Array<Record<string, unknown>> }
      const states = await client.query<{ state: string }>(`SELECT DISTINCT state FROM "${schema}".jobs ORDER BY 1`)
      expect(states.rows.map((row) => row.state)).toEqual(expect.arrayContaining(["queued", "running", "succeeded"]))
      expect(await entryMismatches(driver, schema)).toEqual([])
    } finally {
      await client.end()
    }
  })
}
