/**
 * `/metrics` while the store is down: the population gauges keep their last values (the store cannot be read), so
 * the page says so. `slowcall_store_up` goes to 0 and `slowcall_stats_age_seconds` grows on every scrape of the
 * outage, while `/healthz` answers 503; after recovery they are 1 and 0 again, and the page stays valid for
 * promtool throughout.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { StoreError } from "@slowcall/core/Errors"
import * as Limiter from "@slowcall/core/Limiter"
import { Query } from "@slowcall/core/Query"
import * as StoreModule from "@slowcall/core/Store"
import { Store } from "@slowcall/core/Store"
import * as TransportModule from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Layer } from "effect"
import { post } from "./contract.js"
import { type Running, start } from "./harness.js"

const down = (operation: string) => new StoreError({ reason: "Connection", operation, detail: "injected: store down" })

/** The memory backend whose reads of the clock and of the stats fail while `outage.down` is set. */
const backend = () => {
  const { store, query } = Effect.runSync(StoreModule.makeMemory)
  const outage = { down: false }
  const layer = Layer.mergeAll(
    Layer.succeed(Store, {
      ...store,
      now: Effect.suspend(() => (outage.down ? Effect.fail(down("now")) : store.now))
    }),
    Layer.succeed(Query, {
      ...query,
      stats: (options) => Effect.suspend(() => (outage.down ? Effect.fail(down("stats")) : query.stats(options)))
    }),
    TransportModule.layerMemory(),
    Limiter.layerMemory,
    ScheduleStore.layerMemory
  )
  return { layer, outage }
}

const sample = (page: string, name: string): number => {
  const line = page.split("\n").find((l) => l.startsWith(`${name} `))
  if (line === undefined) throw new Error(`${name} is not on the page`)
  return Number(line.slice(name.length + 1))
}

const promtool = spawnSync("promtool", ["--version"]).status === 0

describe("/metrics while the store is down", () => {
  let server: Running
  const { layer, outage } = backend()
  const scrape = async () => {
    const response = await fetch(`${server.url}/metrics`)
    expect(response.status).toBe(200)
    return response.text()
  }

  beforeAll(async () => {
    server = await start(layer)
    expect((await post(server.url, "/v1/jobs", { type: "test.work", input: { n: 1 } })).status).toBe(202)
  })
  afterAll(() => server?.close())

  it("marks the gauges stale while the store is away, and fresh again after", async () => {
    // Arrange: a scrape with the store up.
    const before = await scrape()
    expect(sample(before, "slowcall_store_up")).toBe(1)
    expect(sample(before, "slowcall_stats_age_seconds")).toBe(0)
    expect(before).toMatch(/^slowcall_jobs\{state="queued"\} 1$/m)

    // Act: the store goes away.
    outage.down = true
    const first = await scrape()
    expect((await fetch(`${server.url}/healthz`)).status).toBe(503)
    // Scrape until the age has grown (bounded; the age is in milliseconds' resolution).
    let later = await scrape()
    for (
      let i = 0;
      i < 100 && sample(later, "slowcall_stats_age_seconds") <= sample(first, "slowcall_stats_age_seconds");
      i++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 10))
      later = await scrape()
    }

    // Assert: down, ageing, the last values kept.
    expect(sample(first, "slowcall_store_up")).toBe(0)
    expect(sample(later, "slowcall_store_up")).toBe(0)
    expect(sample(later, "slowcall_stats_age_seconds")).toBeGreaterThan(sample(first, "slowcall_stats_age_seconds"))
    expect(later).toMatch(/^slowcall_jobs\{state="queued"\} 1$/m)
    if (promtool || process.env.CI === "true") {
      expect(execFileSync("promtool", ["check", "metrics"], { input: later, encoding: "utf8" }).trim()).toBe("")
    }

    // Act: the store is back.
    outage.down = false
    const after = await scrape()

    // Assert
    expect(sample(after, "slowcall_store_up")).toBe(1)
    expect(sample(after, "slowcall_stats_age_seconds")).toBe(0)
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
  })
})

describe("the observability guide's alert rules", () => {
  it.runIf(promtool || process.env.CI === "true")("pass promtool check rules and use the staleness gauges", () => {
    const guide = readFileSync(new URL("../../../docs/guide/observability.md", import.meta.url), "utf8")
    const rules = /```yaml\n(groups:[\s\S]*?)```/.exec(guide)?.[1]
    expect(rules).toContain("slowcall_store_up")
    expect(rules).toContain("slowcall_stats_age_seconds")
    const dir = mkdtempSync(join(tmpdir(), "slowcall-rules-"))
    try {
      writeFileSync(join(dir, "rules.yml"), rules ?? "")
      expect(execFileSync("promtool", ["check", "rules", join(dir, "rules.yml")], { encoding: "utf8" })).toMatch(
        /SUCCESS: 3 rules found/
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
