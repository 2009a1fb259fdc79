import { describe, expect, it } from "@effect/vitest"
import * as Plan from "../src/Plan.js"
import * as Report from "../src/Report.js"
import * as Simulate from "../src/Simulate.js"

describe("the text report", () => {
  it("names every fault kind it prints, in the header and in what fired", () => {
    // Arrange
    const report = Simulate.simulate({ seed: 2, runs: 4, jobs: 5, workers: 2, faults: ["F5", "F6", "F10"] })
    // Act
    const text = Report.format(report)
    // Assert
    expect(text.split("\n")[0]).toBe(
      "slowcall simulate: seed 2, 4 runs, 5 jobs x 2 workers, faults: F5 store write fails, " +
        "F6 store write ambiguous, F10 crash at another point"
    )
    const ids = text.match(/\bF\d+\b/g) ?? []
    expect(ids.length).toBeGreaterThan(3)
    for (const match of text.matchAll(/\b(F\d+)\b(.{0,40})/g)) {
      const [, id, after] = match
      expect(after, `${id} is printed with its name`).toMatch(
        new RegExp(`^ ${Plan.faultNames[id as Plan.FaultKind].replace(/[()]/g, "\\$&")}`)
      )
    }
    expect(text).toMatch(/^faults fired: (F\d+ [A-Za-z -]+: \d+(, )?)+$/m)
  })

  it("says all kinds, or none, instead of listing ids", () => {
    const all = Report.format(Simulate.simulate({ seed: 1, runs: 1, jobs: 2, workers: 1, faults: Plan.faultKinds }))
    const none = Report.format(Simulate.simulate({ seed: 1, runs: 1, jobs: 2, workers: 1, faults: [] }))
    expect(all.split("\n")[0]).toMatch(/, faults: all 20 kinds$/)
    expect(none.split("\n")[0]).toMatch(/, faults: none$/)
  })

  it("says why the ledger may differ from what the provider billed, either way", () => {
    expect(Report.costLine(4448, 4454)).toBe(
      "billed 4448c, ledger 4454c (6c more in the ledger: reservations standing for calls whose settlement never " +
        "came, a crash or a lost reply mid-call; each call is checked by I6 and I12)"
    )
    expect(Report.costLine(100, 97)).toBe(
      "billed 100c, ledger 97c (3c less in the ledger: reservations standing for calls whose settlement never came, " +
        "a crash or a lost reply mid-call; each call is checked by I6 and I12)"
    )
    expect(Report.costLine(100, 100)).toBe("billed 100c, ledger 100c (equal)")
    const report = Simulate.simulate({ seed: 1, runs: 2, jobs: 3, workers: 1, faults: [] })
    expect(Report.format(report)).toContain(`\ncost: ${Report.costLine(report.billedCents, report.ledgerCents)}\n`)
  })

  it("every fault kind has a name", () => {
    for (const kind of Plan.faultKinds) expect(Plan.faultNames[kind]).toMatch(/^[a-z][A-Za-z -]+$/)
    expect(Plan.faultLabel("F6")).toBe("F6 store write ambiguous")
    expect(Plan.faultLabel("F99")).toBe("F99")
  })
})
