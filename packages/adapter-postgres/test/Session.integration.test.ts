/**
 * The session settings of the driver's connections on the real server: a pool the driver creates runs with JIT off on
 * every connection (the first, and one opened while another is checked out, in and out of a transaction); a pool the
 * caller passes in keeps the server's own setting.
 */
import pg from "pg"
import { describe, expect, it } from "vitest"
import { makePgDriver } from "../src/internal/driver.js"
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
})
