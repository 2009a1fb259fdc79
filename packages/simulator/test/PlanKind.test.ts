/**
 * The plan kinds of the bench scripts (`bench:sim --by-kind`, `--kind` in `bench.ts` and `opsites.ts`).
 */
import { describe, expect, it } from "@effect/vitest"
import { benchPlans, parseKind, planKind } from "../src/internal/planKind.js"
import { mixSeed } from "../src/internal/prng.js"
import { faultKinds } from "../src/Plan.js"
import { arbitraryFor, planOf } from "../src/Simulate.js"

const arbitrary = arbitraryFor({ seed: 1, runs: 200, jobs: 20, workers: 4, faults: faultKinds, allFaults: true })
const draw = (i: number) => planOf(arbitrary, mixSeed(1, i))

describe("plan kinds", () => {
  it("names a kind in any order and separator, and refuses unknown words", () => {
    expect(parseKind("limits+batches")).toBe("limits, batches")
    expect(parseKind("schedule, limits")).toBe("limits, schedule")
    expect(parseKind("Batches")).toBe("batches")
    expect(parseKind("none")).toBe("none of them")
    expect(parseKind("none of them")).toBe("none of them")
    expect(() => parseKind("limit")).toThrow(/unknown plan kind "limit"/)
    expect(() => parseKind("")).toThrow(/no plan kind/)
  })

  it("keeps the bench's plans in order without a kind, and only the asked kind's with one", () => {
    const first = benchPlans(draw, 30)
    expect(first).toEqual(Array.from({ length: 30 }, (_, i) => draw(i)))
    const kinds = new Set(first.map(planKind))
    expect(kinds.size).toBeGreaterThan(2)

    const limited = benchPlans(draw, 12, "limits, batches")
    expect(limited).toHaveLength(12)
    expect(limited.every((plan) => planKind(plan) === "limits, batches")).toBe(true)
    // The same plans the unfiltered draws give, in the same order.
    const drawn = Array.from({ length: 400 }, (_, i) => draw(i)).filter((plan) => planKind(plan) === "limits, batches")
    expect(limited).toEqual(drawn.slice(0, 12))
  })

  it("fails when the draws do not hold enough plans of the kind", () => {
    expect(() =>
      benchPlans(() => draw(0), 3, planKind(draw(0)) === "none of them" ? "limits" : "none of them")
    ).toThrow(/only 0 plans of kind/)
  })
})
