import { describe, expect, it } from "@effect/vitest"
import { StoreError } from "@slowcall/core/Errors"
import type { Store } from "@slowcall/core/Store"
import { Effect } from "effect"
import { OpCount } from "../src/OpCount.js"
import * as Plan from "../src/Plan.js"
import * as Report from "../src/Report.js"
import { runPlan } from "../src/Run.js"
import * as Simulate from "../src/Simulate.js"

/** A planted bug outside production code: the store records one cent less for every settled charge. */
const underCount = (store: Store["Type"]): Store["Type"] => ({
  ...store,
  charge: (options) =>
    store.charge({
      ...options,
      items: options.items.map((item) =>
        item.settled && item.amountCents > 0 ? { ...item, amountCents: item.amountCents - 1 } : item
      )
    })
})

const size = (plan: Plan.Plan): number =>
  plan.tape.length +
  plan.tape.filter((entry) => entry > 0).length +
  plan.events.length +
  plan.faults.length +
  plan.cancels.length +
  plan.resubmits.length

/** A planted bug outside production code: the store refuses every charge settlement for good (a final error). */
const settlementsRefused = (store: Store["Type"]): Store["Type"] => ({
  ...store,
  charge: (options) =>
    options.items.some((item) => item.settled)
      ? Effect.fail(new StoreError({ reason: "Constraint", operation: "charge", detail: "planted: refused for good" }))
      : store.charge(options)
})

/** A planted defect: the store's replay verb dies, which crashes the run's driver in its replay phase. */
const replayDies = (store: Store["Type"]): Store["Type"] => ({
  ...store,
  replay: () => Effect.die(new Error("planted replay defect"))
})

describe("runPlan and stack traces", () => {
  const plan = () => Simulate.planOf(Simulate.arbitraryFor({ seed: 3, runs: 1, jobs: 3, workers: 1, faults: [] }), 3)

  it("a run leaves Error.stackTraceLimit as it found it", () => {
    const before = Error.stackTraceLimit
    const run = runPlan(plan())
    expect(run.outcome).toBe("Done")
    expect(Error.stackTraceLimit).toBe(before)
  })

  it("a crashed run reports its defect with its stack trace, from a replay with the same history", () => {
    const before = Error.stackTraceLimit
    expect(before).toBeGreaterThan(0)
    const first = runPlan(plan(), { decorateStore: replayDies })
    const second = runPlan(plan(), { decorateStore: replayDies })
    expect(first.outcome).toBe("Crashed")
    expect(first.defect).toContain("planted replay defect")
    expect(first.defect).toMatch(/\n\s+at /)
    expect(second.hash).toBe(first.hash)
    expect(Error.stackTraceLimit).toBe(before)
  })
})

describe("simulate", () => {
  it("holds every invariant on the real worker and reproduces the same history hash", () => {
    const options = { seed: 11, runs: 4, jobs: 6, workers: 2, faults: Plan.faultKinds }
    const first = Simulate.simulate(options)
    const second = Simulate.simulate(options)
    expect(first.violations).toEqual([])
    expect(first.acknowledged).toBeGreaterThan(0)
    expect(first.terminal).toBe(first.acknowledged)
    expect(first.lost).toBe(0)
    expect(first.determinism).toBe("ok")
    expect(second.historyHash).toBe(first.historyHash)
    const json = Report.toJson(first)
    for (const field of [
      "seed",
      "runs",
      "jobs",
      "submitted",
      "acknowledged",
      "terminal",
      "lost",
      "duplicateGenerations",
      "staleWrites",
      "billedCents",
      "ledgerCents",
      "violations",
      "coverage",
      "historyHash"
    ]) {
      expect(json).toHaveProperty(field)
    }
  })

  it("a supervisor counts the run's fibers and Effect operations and changes nothing the run does", () => {
    const options = { seed: 5, runs: 1, jobs: 6, workers: 2, faults: Plan.faultKinds, allFaults: true }
    const plan = Simulate.planOf(Simulate.arbitraryFor(options), 5)
    const plain = Simulate.runAndCheck(plan)
    const first = new OpCount()
    const watched = Simulate.runAndCheck(plan, { supervisor: first })
    const second = new OpCount()
    Simulate.runAndCheck(plan, { supervisor: second })
    expect(watched.run.hash).toBe(plain.run.hash)
    expect(watched.verdict.violations).toEqual(plain.verdict.violations)
    // Every scheduler step runs at least one operation, and the Worker and Sweeper fork fibers of their own.
    expect(first.ops).toBeGreaterThan(plain.run.steps)
    expect(first.fibers).toBeGreaterThan(options.workers)
    // The count is a property of the code and the plan, not of the machine.
    expect(second.ops).toBe(first.ops)
    expect(second.fibers).toBe(first.fibers)
  })

  it("shrinks a planted failure and reproduces it from the printed replay line in one run", () => {
    const options = {
      seed: 5,
      runs: 3,
      jobs: 3,
      workers: 2,
      faults: Plan.faultKinds,
      decorateStore: underCount,
      shrinkBudget: 40,
      stopOnFailure: true
    }
    const report = Simulate.simulate(options)
    const failure = report.failures[0]
    expect(failure?.invariants).toContain("I6")
    if (failure === undefined) return
    const arbitrary = Simulate.arbitraryFor(options)
    const original = Simulate.planOf(arbitrary, failure.runSeed)
    expect(size(failure.plan)).toBeLessThan(size(original))
    expect(failure.determinism).toBe("ok")

    const line = Report.replayLine(failure)
    const match = /seed (\d+), path "([\d:]*)"/.exec(line)
    expect(match).not.toBeNull()
    const replayed = Simulate.replayPath(arbitrary, Number(match![1]), match![2]!, { decorateStore: underCount })
    expect(replayed?.runs).toBe(1)
    expect(replayed?.plan).toEqual(failure.plan)
    expect(replayed?.verdict.violations.map((v) => v.invariant)).toContain("I6")

    const fromCorpus = Simulate.replayPlan(Report.corpusEntry(failure, "test").plan, { decorateStore: underCount })
    expect(fromCorpus.violations.map((v) => v.invariant)).toContain("I6")
    expect(Simulate.replayPlan(failure.plan).violations).toEqual([])
  })
  it("I12: amounts that reached live workers but never reached the ledger are reported, per call", () => {
    const base = Simulate.planOf(Simulate.arbitraryFor({ seed: 8, runs: 1, jobs: 3, workers: 2, faults: [] }), 8)
    const plan: Plan.Plan = {
      ...base,
      budgets: [null],
      cancels: [],
      model: { ...base.model, priceCents: 2, errorRate: 0, costSpread: 2 }
    }
    const clean = Simulate.runAndCheck(plan)
    expect(clean.verdict.violations).toEqual([])
    const { run, verdict } = Simulate.runAndCheck(plan, { decorateStore: settlementsRefused })
    // Every call billed above its 2-cent estimate is left at the estimate while its worker lives on.
    const above = run.events.filter((e) => e.k === "call" && e.cents > 2)
    expect(above.length).toBeGreaterThan(0)
    const i12 = verdict.violations.filter((v) => v.invariant === "I12")
    expect(i12.length).toBe(Math.min(5, above.length))
    expect(i12[0]?.message).toMatch(/unsettled while w\d\.\d lived on$/)
  })

  it("the targeted stale window holds an outcome write in the store until the job was claimed again", () => {
    const options = { seed: 11, runs: 40, jobs: 6, workers: 3, faults: Plan.faultKinds }
    const arbitrary = Simulate.arbitraryFor(options)
    let outlived = 0
    for (let i = 0; i < options.runs && outlived === 0; i++) {
      const plan = Simulate.planOf(arbitrary, options.seed + i)
      const { verdict } = Simulate.runAndCheck({
        ...plan,
        maxAttempts: 5,
        targeted: { _tag: "StaleWindow", extraMs: 100, fate: "crash" }
      })
      expect(verdict.violations).toEqual([])
      outlived += verdict.coverage.writeOutlivedLease
    }
    expect(outlived).toBeGreaterThan(0)
  })

  it("a hunt given stopOn passes failing runs that break other invariants and stops at the first that breaks one", () => {
    const options = {
      seed: 5,
      runs: 6,
      jobs: 3,
      workers: 2,
      faults: Plan.faultKinds,
      decorateStore: underCount,
      shrink: false,
      stopOnFailure: true
    }
    const plain = Simulate.simulate(options)
    expect(plain.firstFailureRun).not.toBeNull()
    expect(plain.runs).toBe(plain.firstFailureRun)
    // Hunting for an invariant the planted bug never breaks: every run is made, none is stopped at or shrunk.
    const other = Simulate.simulate({ ...options, stopOn: ["I4"] })
    expect(other.runs).toBe(options.runs)
    expect(other.failures).toEqual([])
    expect(other.firstFailureRun).toBe(plain.firstFailureRun)
    expect(other.violations.some((v) => v.invariant === "I6")).toBe(true)
    // Hunting for the one it breaks: the same stop as a plain hunt.
    const named = Simulate.simulate({ ...options, stopOn: ["I6"] })
    expect(named.runs).toBe(plain.runs)
    expect(named.failures[0]?.invariants).toContain("I6")
  })
})
