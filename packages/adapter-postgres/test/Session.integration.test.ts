/**
 * The session settings of the driver's connections on the real server: a pool the driver creates runs every
 * connection with the adapter's settings (`PgDriver.sessionOptions`: JIT off, `random_page_cost` 1.1; the first
 * connection, and one opened while another is checked out, in and out of a transaction) without a statement of their
 * own; a pool the caller passes in keeps its own settings, and the driver says once what they should be when they are
 * not as good. PGlite the driver opens gets the planner setting too; one passed in keeps its own.
 */
import { PGlite } from "@electric-sql/pglite"
import { Effect, Logger } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { makePgDriver, makePgliteDriver } from "../src/internal/driver.js"
import * as PgDriver from "../src/PgDriver.js"
import { DATABASE_URL } from "./support.js"

type Settings = { readonly jit: string; readonly randomPageCost: string }

const settingsOf = async (
  query: (text: string) => Promise<ReadonlyArray<Record<string, string>>>
): Promise<Settings> => {
  const rows = await query("SELECT current_setting('jit') AS jit, current_setting('random_page_cost') AS rpc")
  return { jit: rows[0]!.jit!, randomPageCost: rows[0]!.rpc! }
}

/** The server's own settings, as a connection that sets nothing sees them. */
const serverSettings = async (): Promise<Settings> => {
  const client = new pg.Client({ connectionString: DATABASE_URL })
  await client.connect()
  try {
    return await settingsOf(async (text) => (await client.query(text)).rows)
  } finally {
    await client.end()
  }
}

const adapters: Settings = { jit: "off", randomPageCost: "1.1" }

describe("the driver's sessions", () => {
  // First in this file: node-postgres warns of a query sent while another runs once per module instance, and each
  // test file imports its modules afresh, so no earlier pool has used that warning up.
  it("a pool it creates sets its settings without a statement of its own: node-postgres warns of nothing", async () => {
    const warnings: Array<string> = []
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`)
    process.on("warning", onWarning)
    const driver = makePgDriver({ connectionString: DATABASE_URL, max: 2 })
    try {
      // Fresh connections, each asked at once: a setting sent as a statement on connect would still be running.
      const settings = await Promise.all([1, 2, 3, 4].map(() => settingsOf((text) => driver.query(text))))
      expect(settings).toEqual([adapters, adapters, adapters, adapters])
      // A process warning is emitted on the next tick.
      await new Promise((resolve) => setTimeout(resolve, 10))
      expect(warnings).toEqual([])
    } finally {
      process.off("warning", onWarning)
      await driver.close()
    }
  })

  it("a pool it creates runs every connection with the adapter's settings, whatever the server's defaults", async () => {
    expect(await serverSettings()).not.toEqual(adapters)
    const driver = makePgDriver({ connectionString: DATABASE_URL, max: 2 })
    try {
      expect(await settingsOf((text) => driver.query(text))).toEqual(adapters)
      // A second connection: opened while the transaction holds the first.
      const inside = await driver.transaction((tx) =>
        Promise.all([settingsOf((text) => tx.query(text)), settingsOf((text) => driver.query(text))])
      )
      expect(inside).toEqual([adapters, adapters])
    } finally {
      await driver.close()
    }
  })

  it("a pool the caller passes in keeps the server's settings", async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 })
    const driver = makePgDriver({ pool })
    try {
      expect(await settingsOf((text) => driver.query(text))).toEqual(await serverSettings())
    } finally {
      await driver.close()
      await pool.end()
    }
  })

  /**
   * The warnings `PgDriver.acquire` logs for `pool`, read once a query through the driver has answered (the check runs
   * beside the start; it has answered by then, or gives up in at most the bounded wait).
   */
  const warningsFor = async (pool: pg.Pool): Promise<ReadonlyArray<string>> => {
    const lines: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      if (logLevel._tag === "Warning") lines.push(String(Array.isArray(message) ? message[0] : message))
    })
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const driver = yield* PgDriver.acquire({ pool })
          yield* Effect.promise(() => driver.query("SELECT 1"))
          for (let i = 0; i < 100 && lines.length === 0; i++) yield* Effect.sleep(10)
        })
      ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    )
    return lines
  }

  it("a pool passed in gets one warning that names what to change; one with the adapter's settings gets none", async () => {
    const pools = {
      both: new pg.Pool({ connectionString: DATABASE_URL, max: 1, options: "-c jit=on -c random_page_cost=4" }),
      planner: new pg.Pool({ connectionString: DATABASE_URL, max: 1, options: "-c jit=off -c random_page_cost=2" }),
      adapters: new pg.Pool({ connectionString: DATABASE_URL, max: 1, options: PgDriver.sessionOptions })
    }
    try {
      const both = PgDriver.poolSettingsProblem({ jit: "on", randomPageCost: 4 })
      expect(both).toContain("jit = on and random_page_cost = 4")
      expect(both).toContain(PgDriver.sessionOptions)
      expect(await warningsFor(pools.both)).toEqual([both])
      const planner = PgDriver.poolSettingsProblem({ jit: "off", randomPageCost: 2 })
      expect(planner).toContain("runs with random_page_cost = 2:")
      expect(await warningsFor(pools.planner)).toEqual([planner])
      expect(await warningsFor(pools.adapters)).toEqual([])
    } finally {
      await Promise.all(Object.values(pools).map((pool) => pool.end()))
    }
  })

  it("settings as good as the adapter's are no problem: JIT off and a random_page_cost of 1.1 or lower", () => {
    expect(PgDriver.sessionOptions).toBe("-c jit=off -c random_page_cost=1.1")
    expect(PgDriver.poolSettingsProblem({ jit: "off", randomPageCost: 1.1 })).toBeUndefined()
    expect(PgDriver.poolSettingsProblem({ jit: "off", randomPageCost: 1 })).toBeUndefined()
    expect(PgDriver.poolSettingsProblem({ jit: "on", randomPageCost: 1 })).toContain("runs with jit = on:")
  })
})

describe("PGlite's session", () => {
  const randomPageCost = async (db: { query: (text: string) => Promise<Array<Record<string, string>>> }) =>
    (await db.query("SELECT current_setting('random_page_cost') AS rpc"))[0]!.rpc

  it("a database the driver opens plans with random_page_cost 1.1; one passed in keeps its own", async () => {
    const owned = await makePgliteDriver({})
    const passed = new PGlite()
    const shared = await makePgliteDriver({ db: passed })
    try {
      expect(await randomPageCost(owned)).toBe("1.1")
      expect(await randomPageCost(shared)).toBe("4")
    } finally {
      await owned.close()
      await shared.close()
      await passed.close()
    }
  })
})
