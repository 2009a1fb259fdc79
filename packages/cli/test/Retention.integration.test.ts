/**
 * `slowcall serve --retention` on each store that keeps jobs (embedded PGlite, a Postgres server, Redis): a finished
 * job older than the retention goes for good, with its request key, while a younger one stays; a bad duration is
 * refused before anything starts.
 */

import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { dropPrefix } from "../../adapter-redis/test/support.js"
import { serve, slowcall, stopAll } from "./processes.js"

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379/2"
const suffix = randomBytes(4).toString("hex")
const dir = mkdtempSync(join(tmpdir(), "slowcall-retention-"))
const pgSchema = `retention_${suffix}`
const redisPrefix = `sctest:retention:${suffix}`

afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
  await dropPrefix(REDIS_URL, redisPrefix)
  const { default: pg } = await import("pg")
  const client = new pg.Client({ connectionString: DATABASE_URL })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`)
  await client.end()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const submit = async (url: string, key: string) => {
  const response = await fetch(`${url}/v1/jobs`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify({ type: "demo.echo", input: { text: key, latencyMs: 10, costCents: 1 } })
  })
  expect(response.status).toBe(202)
  return ((await response.json()) as { id: string }).id
}

const status = async (url: string, id: string) => {
  const response = await fetch(`${url}/v1/jobs/${id}`)
  return response.status === 404 ? "gone" : ((await response.json()) as { state: string }).state
}

const until = async (what: string, test: () => Promise<boolean>, timeoutMs = 20_000) => {
  const end = Date.now() + timeoutMs
  while (Date.now() < end) {
    if (await test()) return
    await sleep(100)
  }
  throw new Error(`waited for ${what}`)
}

const stores = [
  { name: "embedded PGlite", args: ["--data-dir", join(dir, "data")] },
  { name: "a Postgres server", args: ["--database-url", DATABASE_URL, "--schema", pgSchema] },
  { name: "Redis", args: ["--redis-url", REDIS_URL, "--schema", redisPrefix] }
] as const

describe("slowcall serve --retention", () => {
  for (const store of stores) {
    it(`on ${store.name}: an old finished job and its key go, a young one stays`, { timeout: 120_000 }, async () => {
      const server = await serve(["--demo", "--port", "0", "--retention", "4s", ...store.args])
      try {
        const old = await submit(server.url, `old-${suffix}`)
        await until("the old job to succeed", async () => (await status(server.url, old)) === "succeeded")
        await sleep(2_500)
        const young = await submit(server.url, `young-${suffix}`)
        await until("the young job to succeed", async () => (await status(server.url, young)) === "succeeded")
        // Past its 4 s (a pass each second): the old job is deleted, the young one (about 2 s old) is not yet.
        await until("the old job to be purged", async () => (await status(server.url, old)) === "gone")
        expect(await status(server.url, young)).toBe("succeeded")
        expect(server.stderr()).toMatch(/retention: purged 1 finished jobs created before/)
        // Its key is free again: the same key makes a new job, which runs.
        const again = await submit(server.url, `old-${suffix}`)
        expect(again).not.toBe(old)
        await until("the new job to succeed", async () => (await status(server.url, again)) === "succeeded")
      } finally {
        await server.stop()
      }
    })
  }

  it("refuses a duration it cannot read, before it starts anything", async () => {
    const result = await slowcall(["serve", "--memory", "--port", "0", "--retention", "7 fortnights"])
    expect(result.code).not.toBe(0)
    expect(result.stderr + result.stdout).toContain(
      '--retention "7 fortnights": a duration of at least 1s such as 90s, 30m, 12h, 7d or 2w, or off'
    )
  })
})
