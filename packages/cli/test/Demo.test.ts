import { describe, expect, it } from "@effect/vitest"
import { ErrorClass } from "@slowcall/core/ErrorClass"
import { normalize } from "@slowcall/core/Normalize"
import { Effect, Random } from "effect"
import * as Demo from "../src/Demo.js"

describe("Demo", () => {
  it("failWith produces an error that normalises to the requested class", () => {
    // lease_expired is recorded by the store, never raised by a model: the closest provider failure stands in.
    const provider = ErrorClass.literals.filter((c) => c !== "lease_expired")
    for (const errorClass of provider) {
      expect(normalize(Demo.errorFor(errorClass)).errorClass, errorClass).toBe(errorClass)
    }
    expect(normalize(Demo.errorFor("lease_expired")).errorClass).toBe("unknown")
    expect(normalize(Demo.errorFor("rate_limited")).retryAfterMs).toBe(1000)
  })

  it.effect("latency is heavy tailed and reproducible under a seeded Random", () =>
    Effect.gen(function* () {
      const draw = Effect.replicateEffect(Demo.heavyTailedLatency(200), 2000)
      const a = yield* Effect.withRandom(draw, Random.make(7))
      const b = yield* Effect.withRandom(draw, Random.make(7))
      expect(a).toEqual(b)
      const sorted = [...a].sort((x, y) => x - y)
      const median = sorted[1000]!
      const p99 = sorted[1980]!
      expect(median).toBeGreaterThan(150)
      expect(median).toBeLessThan(260)
      // A long tail: the 99th percentile is several times the median.
      expect(p99 / median).toBeGreaterThan(4)
    })
  )

  it("each demo handler declares its estimate and its type", () => {
    expect(Demo.handlers.map((h) => h.type)).toEqual(["demo.echo", "demo.summarize", "demo.embed"])
    const [echo, summarize, embed] = Demo.handlers
    expect(typeof echo.estimateCents === "function" && echo.estimateCents({ text: "x" })).toBe(1)
    expect(typeof echo.estimateCents === "function" && echo.estimateCents({ text: "x", costCents: 7 })).toBe(7)
    expect(typeof summarize.estimateCents === "function" && summarize.estimateCents({ text: "y".repeat(4001) })).toBe(5)
    expect(typeof embed.estimateCents === "function" && embed.estimateCents({ texts: ["a", "b", "c", "d", "e"] })).toBe(
      2
    )
  })
})
