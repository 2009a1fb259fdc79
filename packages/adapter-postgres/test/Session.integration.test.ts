/**
 * The session settings of the driver's connections on the real server: a pool the driver creates runs with JIT off on
 * every connection (the first, and one opened while another is checked out, in and out of a transaction); a pool the
 * caller passes in keeps the server's own setting, and the driver says so once when that setting is JIT on.
 */
import { Effect, Logger } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { makePgDriver } from "../src/internal/driver.js"
import * as PgDriver from "../src/PgDriver.js"
import { DATABASE_URL } from "./support.js"

const jitOf = async (query: (text: string) => Promise<ReadonlyArray<{ jit: string }>>): Promise<string> => {
  const rows = await query("SELECT current_setting('jit') AS jit")
  return rows[0]!.jit
}

/** The server's own JIT setting, as a connection that sets nothing sees it. */
const serverJit = async (): Promise<string> => {
  const client = new pg.Client({ connectionString: DATABASE_URL })
  await client.connect()
  try {
    return (await client.query<{ jit: string }>("SELECT current_setting('jit') AS jit")).rows[0]!.jit
  } finally {
    await client.end()
  }
}

describe("the driver's sessions", () => {
  // First in this file: node-postgres warns of a query sent while another runs once per module instance, and each
  // test file imports its modules afresh, so no earlier pool has used that warning up.
  it("a pool it creates sets JIT off without a statement of its own: node-postgres warns of nothing", async () => {
    const warnings: Array<string> = []
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`)
    process.on("warning", onWarning)
    const driver = makePgDriver({ connectionString: DATABASE_URL, max: 2 })
    try {
      // Fresh connections, each asked at once: a setting sent as a statement on connect would still be running.
      const jits = await Promise.all([1, 2, 3, 4].map(() => jitOf((text) => driver.query(text))))
      expect(jits).toEqual(["off", "off", "off", "off"])
      // A process warning is emitted on the next tick.
      await new Promise((resolve) => setTimeout(resolve, 10))
      expect(warnings).toEqual([])
    } finally {
      process.off("warning", onWarning)
      await driver.close()
    }
  })

  it("a pool it creates runs every connection with JIT off, whatever the server's default", async () => {
    const driver = makePgDriver({ connectionString: DATABASE_URL, max: 2 })
    try {
      expect(await jitOf((text) => driver.query(text))).toBe("off")
      // A second connection: opened while the transaction holds the first.
      const inside = await driver.transaction((tx) =>
        Promise.all([jitOf((text) => tx.query(text)), jitOf((text) => driver.query(text))])
      )
      expect(inside).toEqual(["off", "off"])
    } finally {
      await driver.close()
    }
  })

  it("a pool the caller passes in keeps the server's setting", async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 })
    const driver = makePgDriver({ pool })
    try {
      expect(await jitOf((text) => driver.query(text))).toBe(await serverJit())
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

  it("a pool passed in with JIT on gets one warning that says how to turn it off; one with JIT off gets none", async () => {
    const on = new pg.Pool({ connectionString: DATABASE_URL, max: 1, options: "-c jit=on" })
    const off = new pg.Pool({ connectionString: DATABASE_URL, max: 1, options: "-c jit=off" })
    try {
      expect(await warningsFor(on)).toEqual([PgDriver.jitWarning])
      expect(PgDriver.jitWarning).toContain("-c jit=off")
      expect(await warningsFor(off)).toEqual([])
    } finally {
      await on.end()
      await off.end()
    }
  })
})
