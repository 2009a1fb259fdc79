import { execFileSync, spawnSync } from "node:child_process"
import { Effect, Metric } from "effect"
import { describe, expect, it } from "vitest"
import * as Metrics from "../src/Metrics.js"

const page = Effect.runSync(
  Effect.gen(function* () {
    yield* Metric.update(Metrics.queueWaitSeconds, 0.007)
    yield* Metric.update(Metrics.queueWaitSeconds, 4)
    yield* Metric.update(Metrics.attemptDurationSeconds, 0.12)
    yield* Metric.update(Metrics.modelCallDurationSeconds, 0.09)
    yield* Metric.increment(Metrics.modelCalls)
    return yield* Metrics.prometheus
  })
)

const promtool = spawnSync("promtool", ["--version"]).status === 0

describe("Metrics.prometheus", () => {
  it("gives every metric a HELP and a TYPE line, and histograms cumulative buckets, _sum and _count", () => {
    const lines = page.trim().split("\n")
    const names = new Set(lines.filter((l) => !l.startsWith("#")).map((l) => l.split(/[{ ]/)[0]!))
    for (const name of names) {
      const base = name.replace(/_(bucket|sum|count)$/, "")
      const family = lines.some((l) => l === `# TYPE ${name} counter` || l.startsWith(`# TYPE ${name} `)) ? name : base
      expect(lines.some((l) => l.startsWith(`# HELP ${family} `))).toBe(true)
      expect(lines.some((l) => l.startsWith(`# TYPE ${family} `))).toBe(true)
    }
    expect(lines).toContain("# TYPE slowcall_queue_wait_seconds histogram")
    const buckets = lines
      .filter((l) => l.startsWith("slowcall_queue_wait_seconds_bucket"))
      .map((l) => ({ le: /le="([^"]+)"/.exec(l)![1]!, count: Number(l.split(" ")[1]) }))
    expect(buckets.at(-1)?.le).toBe("+Inf")
    expect(buckets.length).toBe(Metrics.durationBucketsSeconds.length + 1)
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.count).toBeGreaterThanOrEqual(buckets[i - 1]!.count)
    const count = Number(lines.find((l) => l.startsWith("slowcall_queue_wait_seconds_count"))!.split(" ")[1])
    expect(buckets.at(-1)!.count).toBe(count)
    expect(count).toBeGreaterThanOrEqual(2)
    expect(buckets.find((b) => b.le === "0.01")!.count).toBeGreaterThanOrEqual(1)
    expect(
      Number(lines.find((l) => l.startsWith("slowcall_queue_wait_seconds_sum"))!.split(" ")[1])
    ).toBeGreaterThanOrEqual(4.007)
  })

  // promtool is required under CI (installed by .ci/run); elsewhere the check runs only where it is installed.
  it.runIf(promtool || process.env.CI === "true")("passes promtool check metrics", () => {
    const out = execFileSync("promtool", ["check", "metrics"], { input: page, encoding: "utf8" })
    expect(out.trim()).toBe("")
  })
})
