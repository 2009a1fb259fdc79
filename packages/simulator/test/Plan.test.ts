/**
 * What plans draw beyond faults: the handler's shape, the sweeper's settings, billed amounts around the estimate, and
 * the targeted scenarios for late replies, windowed writes and a write that outlives its lease. A run of a fault-free
 * plan with a chain of calls makes exactly that many calls, each settled at what the provider billed.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Plan from "../src/Plan.js"
import * as Simulate from "../src/Simulate.js"

const plans = fc.sample(Plan.arbitrary({ jobs: 4, workers: 3, faults: Plan.faultKinds }), { seed: 9, numRuns: 400 })

describe("plans", () => {
  it("draw handler shapes and sweeper settings within their ranges, the old ones included", () => {
    for (const plan of plans) {
      const handler = plan.handler ?? Plan.oneCall
      const sweeper = plan.sweeper ?? Plan.defaultSweeper
      expect(handler.steps).toBeGreaterThanOrEqual(1)
      expect(handler.steps).toBeLessThanOrEqual(3)
      expect(handler.retries).toBeGreaterThanOrEqual(0)
      expect(handler.retries).toBeLessThanOrEqual(2)
      expect(sweeper.intervalMs).toBeGreaterThanOrEqual(500)
      expect(sweeper.republishAfterMs).toBeLessThanOrEqual(8_000)
    }
    expect(plans.some((p) => (p.handler?.steps ?? 1) > 1 && (p.handler?.retries ?? 0) > 0)).toBe(true)
    expect(plans.some((p) => p.handler?.fallback === true)).toBe(true)
    expect(plans.some((p) => p.handler !== undefined && p.handler.steps === 1 && !p.handler.fallback)).toBe(true)
    expect(plans.some((p) => (p.sweeper?.republishAfterMs ?? 0) < 2_000)).toBe(true)
  })

  it("draw the late-reply and windowed-write scenarios, each on a worker of the plan", () => {
    const late = plans.filter((p) => p.targeted._tag === "LateClaimReply")
    const windowed = plans.filter((p) => p.targeted._tag === "WindowedWrites")
    expect(late.length).toBeGreaterThan(0)
    expect(windowed.length).toBeGreaterThan(0)
    for (const plan of [...late, ...windowed]) {
      const t = plan.targeted as { readonly worker: number }
      expect(t.worker).toBeLessThan(plan.workers)
    }
  })

  it("draw billed amounts around the estimate and the window that outlives a lease", () => {
    const spreads = plans.map((p) => p.model.costSpread ?? 0)
    expect(Math.min(...spreads)).toBe(0)
    expect(Math.max(...spreads)).toBe(6)
    const stale = plans.filter((p) => p.targeted._tag === "StaleWindow")
    expect(new Set(stale.map((p) => (p.targeted as { readonly fate: string }).fate))).toEqual(
      new Set(["crash", "pause", "mute"])
    )
  })

  it("draw a keep-alive below, at and above the handler's worst case, and the Worker's default", () => {
    const kinds = new Set<string>()
    for (const plan of plans) {
      const keepAliveMs = plan.keepAliveMs!
      const worst = Plan.worstCaseMs(plan)
      expect(Number.isSafeInteger(keepAliveMs) && keepAliveMs >= 3).toBe(true)
      expect(Plan.keepAliveShares.map((share) => Plan.keepAliveFor(plan, share))).toContain(keepAliveMs)
      expect(Plan.heldLeaseMs(plan)).toBe(Math.min(worst, keepAliveMs))
      kinds.add(keepAliveMs < worst ? "below" : keepAliveMs === worst ? "at" : "above")
      if (keepAliveMs === 6_000) kinds.add("default")
    }
    expect(kinds).toEqual(new Set(["below", "at", "above", "default"]))
    // A plan saved without one holds the Worker's default, or the worst case when that is shorter.
    const { keepAliveMs: _, ...saved } = plans[0]!
    expect(Plan.heldLeaseMs(saved)).toBe(Math.min(Plan.worstCaseMs(saved), 6_000))
  })

  it("run workers that hold the plan's keep-alive and renew it through calls longer than it", () => {
    const base = fc.sample(Plan.arbitrary({ jobs: 4, workers: 2, faults: [] }), { seed: 6, numRuns: 1 })[0]!
    const plan: Plan.Plan = {
      ...base,
      budgets: [null],
      cancels: [],
      callTimeoutMs: 6_000,
      handler: Plan.oneCall,
      model: { ...base.model, medianMs: 800 },
      keepAliveMs: 200
    }
    const { run, verdict } = Simulate.runAndCheck(plan)
    expect(verdict.violations).toEqual([])
    const leases = run.events.flatMap((e) =>
      e.k === "write" && e.ok && (e.op === "claim" || e.op === "heartbeat") && e.after?.leaseUntil != null
        ? [{ op: e.op, ms: e.after.leaseUntil - e.t }]
        : []
    )
    // Every claim and renewal asks for the 200 ms keep-alive, not the 7 s worst case.
    expect(new Set(leases.map((l) => l.ms))).toEqual(new Set([200]))
    expect(leases.filter((l) => l.op === "heartbeat").length).toBeGreaterThan(4)
    // Calls that outlast the keep-alive several times over still make one call per job, under its first token.
    const calls = run.events.filter((e) => e.k === "call")
    expect(calls.some((c) => c.end - c.t > 600)).toBe(true)
    expect(calls.map((c) => c.token)).toEqual([1, 1, 1, 1])
  })

  it("bill a fault-free run's calls above and below their estimate, each settled at exactly its bill", () => {
    const base = fc.sample(Plan.arbitrary({ jobs: 6, workers: 2, faults: [] }), { seed: 5, numRuns: 1 })[0]!
    const plan: Plan.Plan = {
      ...base,
      budgets: [null],
      cancels: [],
      handler: { steps: 3, retries: 0, fallback: false },
      model: { ...base.model, priceCents: 4, errorRate: 0, costSpread: 3 }
    }
    const { run, verdict } = Simulate.runAndCheck(plan)
    expect(verdict.violations).toEqual([])
    const calls = run.events.filter((e) => e.k === "call")
    const cents = new Set(calls.map((c) => c.cents))
    expect([...cents].some((c) => c > 4)).toBe(true)
    expect([...cents].some((c) => c < 4)).toBe(true)
    const settled = new Map(
      run.events.flatMap((e) =>
        e.k === "write" && e.op === "charge" && e.settled === true ? [[e.callId, e.amount]] : []
      )
    )
    for (const call of calls) expect(settled.get(call.callId)).toBe(call.cents)
    // Every call's amount reached its caller, who settled it.
    expect(run.events.filter((e) => e.k === "reply").length).toBe(calls.filter((c) => c.cents > 0).length)
  })

  it("run a fault-free chain of three calls as three calls per job, under one token each", () => {
    const base = fc.sample(Plan.arbitrary({ jobs: 3, workers: 2, faults: [] }), { seed: 4, numRuns: 1 })[0]!
    const plan: Plan.Plan = {
      ...base,
      budgets: [null],
      cancels: [],
      handler: { steps: 3, retries: 1, fallback: true }
    }
    const { run, verdict } = Simulate.runAndCheck(plan)
    expect(verdict.violations).toEqual([])
    const calls = run.events.filter((e) => e.k === "call")
    const byJob = new Map<string, Array<number>>()
    for (const call of calls) byJob.set(call.jobId, [...(byJob.get(call.jobId) ?? []), call.token])
    expect(byJob.size).toBe(3)
    for (const tokens of byJob.values()) expect(tokens).toEqual([1, 1, 1])
    // Each call is its own entry in the charge ledger.
    expect(new Set(calls.map((c) => c.callId)).size).toBe(9)
  })
})
