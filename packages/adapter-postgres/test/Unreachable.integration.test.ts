/**
 * A Postgres server that cannot be reached when a service starts: building the layers fails with a StoreError (the
 * store's own queries fail) instead of waiting for the transport's listening connection, and a listener made while
 * the server was unreachable starts delivering once it is back.
 */
import * as FaultProxy from "@slowcall/testing/FaultProxy"
import { Effect, Exit, Layer } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makePgDriver } from "../src/internal/driver.js"
import * as PgStore from "../src/PgStore.js"
import { DATABASE_URL } from "./support.js"

let proxy: FaultProxy.FaultProxy
beforeAll(async () => {
  const url = new URL(DATABASE_URL)
  proxy = await FaultProxy.start({ targetHost: url.hostname, targetPort: Number(url.port || 5432) })
})
afterAll(async () => {
  await proxy.close()
})

describe("an unreachable Postgres server", () => {
  it("PgStore.layer fails with a StoreError instead of waiting for the listener", async () => {
    // Port 1 on this machine refuses every connection.
    const exit = await Effect.runPromiseExit(
      Effect.scoped(
        Layer.build(
          PgStore.layer({ connectionString: "postgres://postgres@127.0.0.1:1/test", connectionTimeoutMs: 1_000 })
        )
      )
    )
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) expect(JSON.stringify(exit.cause)).toContain("StoreError")
  }, 20_000)

  it("a listener made while the server is unreachable returns at once and delivers once the server is back", async () => {
    proxy.setBlackhole(true)
    const driver = makePgDriver({
      connectionString: proxy.url(DATABASE_URL),
      connectionTimeoutMs: 300,
      listenRetryMs: 100
    })
    const channel = `unreachable_${process.pid}_${Date.now()}`
    const got: Array<string> = []
    const notifier = new pg.Client({ connectionString: DATABASE_URL })
    try {
      const unlisten = await driver.listen(channel, (payload) => got.push(payload))
      expect(got).toEqual([])
      proxy.setBlackhole(false)
      await notifier.connect()
      // The listener reconnects in the background: notify until it hears one (bounded: 100 tries, 10 s).
      for (let i = 0; i < 100 && got.length === 0; i++) {
        await notifier.query("SELECT pg_notify($1, 'back')", [channel])
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      expect(got).toContain("back")
      await unlisten()
    } finally {
      proxy.setBlackhole(false)
      await notifier.end().catch(() => {})
      await driver.close()
    }
  }, 20_000)
})
