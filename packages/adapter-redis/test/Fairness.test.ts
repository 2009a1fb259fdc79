import { describe, expect, it } from "@effect/vitest"
import * as Fairness from "@slowcall/core/Fairness"
import { compose } from "../src/internal/scripts.js"

describe("fair claims on Redis", () => {
  it("the script's decay factors are exactly Fairness.decayFactors", () => {
    const source = compose("claimNextFair")

    const line = /^local FAIR_DECAY = \{ (.*) \}$/m.exec(source)?.[1]

    expect(line?.split(", ").map(Number)).toEqual([...Fairness.decayFactors])
    expect(source).toContain(`local FAIR_STEPS = ${Fairness.defaults.steps}`)
    expect(source).toContain(`local FAIR_FORGET_AFTER = ${Fairness.defaults.forgetAfter}`)
  })
})
