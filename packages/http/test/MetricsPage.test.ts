/**
 * The real `/metrics` page of a running server, after a worker in the same process ran jobs through it (successes
 * with billed calls, a dead letter, a delivery of a type no worker here handles) and the fleet's limits kept resources
 * busy (a permit, a wait, a debt, a 429's pause, a spend cap's and a cap learned from a 429), is valid Prometheus text:
 * `promtool check metrics` finds nothing to say. promtool is required under CI (`.ci/run` installs it).
 */
import { execFileSync, spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Handler from "@slowcall/core/Handler"
import * as Limiter from "@slowcall/core/Limiter"
import { Query } from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Layer, Schema } from "effect"
import { post } from "./contract.js"
import { type Running, start } from "./harness.js"

const work = Handler.make({
  type: "test.work",
  version: 1,
  input: Schema.Struct({ n: Schema.Number, fail: Schema.optional(Schema.Boolean) }),
  result: Schema.Struct({ doubled: Schema.Number }),
  estimateCents: 2,
  attempt: { timeoutMs: 5_000 },
  run: (input, ctx) =>
    ctx.call({
      estimateCents: 2,
      run: input.fail
        ? Effect.fail({ status: 400, message: "the model refused the request" })
        : Effect.succeed({ doubled: input.n * 2 }).pipe(Effect.delay("5 millis")),
      cost: () => 1,
      costOnError: () => 1
    })
})

const backend = Worker.layer({ queue: "default", handlers: [work], concurrency: 2, receiveWaitMs: 50 }).pipe(
  Layer.provideMerge(
    Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)
  )
)

/** Every metric name the core's Metrics module defines. */
const known = new Set(
  [...readFileSync(new URL("../../core/src/Metrics.ts", import.meta.url), "utf8").matchAll(/"(slowcall_\w+)"/g)].map(
    (m) => m[1]!
  )
)

const promtool = spawnSync("promtool", ["--version"]).status === 0

describe("GET /metrics of a running server", () => {
  let server: Running
  let page = ""

  beforeAll(async () => {
    server = await start(backend)
    const submitted: Array<string> = []
    for (const input of [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4, fail: true }]) {
      const response = await post(server.url, "/v1/jobs", { type: "test.work", input })
      expect(response.status).toBe(202)
      submitted.push(((await response.json()) as { id: string }).id)
    }
    // No worker here handles demo.echo: it stays queued, so the age gauges have a sample.
    expect((await post(server.url, "/v1/jobs", { type: "demo.echo", input: {} })).status).toBe(202)
    const settled = () =>
      server.run(
        Effect.flatMap(Query, (query) => query.list({ limit: null })).pipe(
          Effect.map((jobs) => jobs.filter((job) => job.type === "test.work" && job.state !== "queued")),
          Effect.map((jobs) => jobs.filter((job) => job.state !== "running").length)
        )
      )
    for (let i = 0; i < 200 && (await settled()) < submitted.length; i++) await new Promise((r) => setTimeout(r, 25))
    expect(await settled()).toBe(submitted.length)
    // The fleet's limits on three resources: a permit held, a wait, a 429 with a reset and a spend cap; on the third,
    // a 429 on one of three calls in flight teaches the fleet a cap of 2 below the declared 4.
    await server.run(
      Effect.flatMap(Limiter.Limiter, (limiter) =>
        Effect.zipRight(
          limiter.define({
            items: [
              { resource: "openai:gpt-4.1:org/key-a", limits: { maxConcurrent: 1, outputTokensPerMinute: 600 } },
              { resource: "anthropic:sonnet:key-b", limits: { requestsPerMinute: 50 } },
              { resource: "google:gemini-2.5:key-c", limits: { maxConcurrent: 4 } }
            ]
          }),
          limiter.apply({
            items: [
              {
                _tag: "Acquire",
                resource: "openai:gpt-4.1:org/key-a",
                callId: "c1",
                holder: { jobId: "j1", token: 1 },
                leaseMs: 60_000,
                cost: { outputTokens: 500 }
              },
              {
                _tag: "Acquire",
                resource: "openai:gpt-4.1:org/key-a",
                callId: "c2",
                holder: { jobId: "j2", token: 1 },
                leaseMs: 60_000
              },
              {
                _tag: "Pause",
                resource: "openai:gpt-4.1:org/key-a",
                kind: "rate_limited",
                until: Date.now() + 600_000,
                reason: "429"
              },
              {
                _tag: "Pause",
                resource: "anthropic:sonnet:key-b",
                kind: "quota_exhausted",
                until: null,
                reason: "cap"
              },
              ...["g1", "g2", "g3"].map((id) => ({
                _tag: "Acquire" as const,
                resource: "google:gemini-2.5:key-c",
                callId: id,
                holder: { jobId: id, token: 1 },
                leaseMs: 60_000
              })),
              {
                _tag: "Release",
                resource: "google:gemini-2.5:key-c",
                callId: "g3",
                holder: { jobId: "g3", token: 1 },
                reached: true,
                rateLimited: true
              }
            ]
          })
        )
      )
    )
    const response = await fetch(`${server.url}/metrics`)
    expect(response.status).toBe(200)
    page = await response.text()
  })
  afterAll(() => server?.close())

  it("has the population gauges, counters and duration histograms with values, in seconds", () => {
    expect(page).toMatch(/^slowcall_jobs\{state="succeeded"\} 3$/m)
    expect(page).toMatch(/^slowcall_jobs\{state="failed"\} 1$/m)
    expect(page).toMatch(/^# TYPE slowcall_oldest_queued_age_seconds gauge$/m)
    expect(page).toMatch(/^slowcall_oldest_queued_age_seconds\{priority="0"\} \d/m)
    expect(page).toMatch(/^slowcall_oldest_waiting_age_seconds\{type="demo.echo",version="1"\} \d/m)
    expect(page).toMatch(/^slowcall_model_calls_total \d+$/m)
    expect(page).toMatch(/^slowcall_dead_letter_arrivals_total [1-9]/m)
    for (const histogram of [
      "slowcall_queue_wait_seconds",
      "slowcall_attempt_duration_seconds",
      "slowcall_model_call_duration_seconds"
    ]) {
      expect(page).toContain(`# TYPE ${histogram} histogram`)
      expect(page).toMatch(new RegExp(`^${histogram}_count [1-9]`, "m"))
      expect(page).toMatch(new RegExp(`^${histogram}_bucket\\{le="\\+Inf"\\} [1-9]`, "m"))
    }
    // The per-resource metrics, from the store, with their HELP text.
    const key = 'resource="openai:gpt-4.1:org/key-a"'
    expect(page).toMatch(new RegExp(`^slowcall_resource_permits_in_use\\{${key}\\} 1$`, "m"))
    expect(page).toMatch(new RegExp(`^slowcall_resource_max_concurrent\\{${key}\\} 1$`, "m"))
    // The cap learned from the 429 beside the declared one; none where nothing was learned.
    expect(page).toMatch(/^slowcall_resource_max_concurrent\{resource="google:gemini-2.5:key-c"\} 4$/m)
    expect(page).toMatch(/^slowcall_resource_learned_concurrent\{resource="google:gemini-2.5:key-c"\} 2$/m)
    expect(page).not.toContain(`slowcall_resource_learned_concurrent{${key}}`)
    expect(page).toMatch(
      /^slowcall_resource_bucket_capacity\{dimension="outputTokens",resource="openai:gpt-4.1:org\/key-a"\} 10$/m
    )
    expect(page).toMatch(
      /^slowcall_resource_bucket_level\{dimension="outputTokens",resource="openai:gpt-4.1:org\/key-a"\} -4\d\d(\.\d+)?$/m
    )
    expect(page).toMatch(/^slowcall_resource_paused\{kind="rate_limited",resource="openai:gpt-4.1:org\/key-a"\} 1$/m)
    expect(page).toMatch(/^slowcall_resource_paused\{kind="quota_exhausted",resource="anthropic:sonnet:key-b"\} 1$/m)
    expect(page).toMatch(
      /^slowcall_resource_waits_total\{reason="concurrency",resource="openai:gpt-4.1:org\/key-a"\} 1$/m
    )
    expect(page).toMatch(
      /^slowcall_resource_pauses_total\{kind="quota_exhausted",resource="anthropic:sonnet:key-b"\} 1$/m
    )
    expect(page).toContain("# TYPE slowcall_resource_grants_total counter")
    expect(page).toContain(
      "# HELP slowcall_resource_waits_total calls told to wait for capacity (throttled), per reason"
    )
    // No metric name carries an abbreviated unit.
    expect(page).not.toMatch(/^slowcall_\w*_ms[{ ]/m)
  })

  it("the observability guide describes every metric the core defines, and only those", () => {
    const guide = readFileSync(new URL("../../../docs/guide/observability.md", import.meta.url), "utf8")
    const onPage = new Set([...page.matchAll(/^# TYPE (slowcall_\w+) /gm)].map((m) => m[1]!))
    const inGuide = new Set([...guide.matchAll(/`(slowcall_\w+?)(?:\{[^`]*\})?`/g)].map((m) => m[1]!))
    expect(onPage.size).toBeGreaterThanOrEqual(10)
    for (const name of onPage) expect(inGuide, name).toContain(name)
    // The page shows only the metrics touched so far; the guide may name the others, but only ones the core defines.
    for (const name of inGuide) expect(known, name).toContain(name)
    for (const name of known) expect(inGuide, name).toContain(name)
  })

  it("the provider-limits guide gives each resource metric's type and HELP text as the page has them", () => {
    const guide = readFileSync(new URL("../../../docs/guide/provider-limits.md", import.meta.url), "utf8")
    const rows = [...guide.matchAll(/^\| `(slowcall_resource_\w+)` +\| (\w+) +\| [^|]+\| (.+?) +\|$/gm)]
    const onPage = [...page.matchAll(/^# HELP (slowcall_resource_\w+) (.+)$/gm)].map((m) => [m[1]!, m[2]!])
    expect(onPage.length).toBe(11)
    expect(rows.map((m) => [m[1]!, m[3]!]).sort()).toEqual(onPage.sort())
    for (const m of rows) expect(page, m[1]).toContain(`# TYPE ${m[1]} ${m[2]}`)
  })

  // Required under CI (installed by .ci/run): a missing promtool fails there instead of skipping.
  it.runIf(promtool || process.env.CI === "true")("passes promtool check metrics", () => {
    const out = execFileSync("promtool", ["check", "metrics"], { input: page, encoding: "utf8" })
    expect(out.trim()).toBe("")
  })
})
