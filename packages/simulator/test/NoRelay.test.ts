import { describe, expect, it } from "@effect/vitest"
import type { Transport } from "@slowcall/core/Transport"
import { Effect } from "effect"
import * as fc from "fast-check"
import * as Plan from "../src/Plan.js"
import * as Simulate from "../src/Simulate.js"

/**
 * A planted bug outside production code, the effect of mutant M16 on the wire: every receive hides the message for a
 * quarter of what the worker asked, and visibility extensions are dropped.
 */
const visibilityNotExtended = (transport: Transport["Type"]): Transport["Type"] => ({
  ...transport,
  receive: (options) =>
    transport.receive({ ...options, visibilityMs: Math.max(1, Math.floor(options.visibilityMs / 4)) }),
  extend: () => Effect.void
})

/**
 * No-relay worlds with slow calls (longer than a quarter lease) that often fail with a retryable error, one per base
 * plan: whether a given world strands a job under the planted bug depends on its draws, so the claims below are made
 * over the set (every world for what must always hold, at least one for the loss).
 */
const slowAndFlaky: ReadonlyArray<Plan.Plan> = [1, 2, 3, 4, 5, 6].map((seed) => {
  const base = fc.sample(Plan.arbitrary({ jobs: 8, workers: 3, faults: Plan.faultKinds }), { seed, numRuns: 1 })[0]!
  return Plan.noRelay(
    {
      ...base,
      faults: ["F14", "F16"],
      callTimeoutMs: 1_000,
      handler: Plan.oneCall,
      sweeper: Plan.defaultSweeper,
      maxAttempts: 3,
      budgets: [null],
      cancels: [],
      resubmits: [],
      submitAt: [0],
      model: { medianMs: 700, tailAlpha: 2, errorRate: 500, priceCents: 1 },
      // Eight single jobs: no batch items beside them, no schedule's ticks.
      batches: [],
      schedule: null
    },
    Plan.faultKinds
  )
})

describe("no-relay worlds", () => {
  it("keep only the fault kinds under which a correct worker never needs the relay", () => {
    const plans = fc.sample(Plan.arbitrary({ jobs: 4, workers: 2, faults: Plan.faultKinds }), { seed: 5, numRuns: 200 })
    const noRelay = plans.filter(Plan.isNoRelay)
    expect(noRelay.length).toBeGreaterThan(10)
    expect(noRelay.length).toBeLessThan(plans.length)
    for (const plan of noRelay) {
      expect(plan.faults).toContain("F16")
      expect(plan.faults.every((kind) => Plan.noRelayFaults.includes(kind))).toBe(true)
      expect(plan.events).toEqual([])
      expect(plan.targeted).toEqual({ _tag: "None" })
      expect(plan.handler).toEqual(Plan.oneCall)
    }
  })

  it("are never generated when redrive is not allowed or every fault kind is forced on", () => {
    const without = fc.sample(Plan.arbitrary({ jobs: 4, workers: 2, faults: ["F5", "F14"] }), { seed: 5, numRuns: 50 })
    const forced = fc.sample(Plan.arbitrary({ jobs: 4, workers: 2, faults: Plan.faultKinds, allFaults: true }), {
      seed: 5,
      numRuns: 50
    })
    expect([...without, ...forced].some(Plan.isNoRelay)).toBe(false)
  })

  it("lose nothing with a correct worker", () => {
    for (const plan of slowAndFlaky) {
      const report = Simulate.replayPlan(plan)
      expect(report.violations).toEqual([])
      expect(report.acknowledged).toBe(8)
      expect(report.terminal).toBe(8)
    }
  })

  it("lose a job (I5) when the worker lets its message return while it still works", () => {
    const reports = slowAndFlaky.map((plan) => Simulate.replayPlan(plan, { decorateTransport: visibilityNotExtended }))
    const losing = reports.filter((report) => report.lost > 0)
    expect(losing.length).toBeGreaterThan(0)
    // Every world that lost a job says so on the invariant, and none loses one silently.
    for (const report of reports) {
      expect(report.violations.some((v) => v.invariant === "I5")).toBe(report.lost > 0)
    }
  })

  it("hide the same bug when the relay is on: the sweeper republishes the stranded job", () => {
    for (const plan of slowAndFlaky) {
      const report = Simulate.replayPlan({ ...plan, relay: true }, { decorateTransport: visibilityNotExtended })
      expect(report.violations.filter((v) => v.invariant === "I5")).toEqual([])
      expect(report.lost).toBe(0)
    }
  })
})
