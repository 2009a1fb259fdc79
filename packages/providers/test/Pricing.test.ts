import { describe, expect, it } from "vitest"
import * as Pricing from "../src/Pricing.js"

const usage = (over: Partial<Pricing.Usage>): Pricing.Usage => ({
  inputTokens: 0,
  cachedInputTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  ...over
})

describe("Pricing.priceOf", () => {
  it("finds a model by its own name, a dated snapshot by its family, and the longest family first", () => {
    expect(Pricing.priceOf(Pricing.defaults, "gpt-4o")).toBe(Pricing.defaults["gpt-4o"])
    expect(Pricing.priceOf(Pricing.defaults, "gpt-4o-2024-08-06")).toBe(Pricing.defaults["gpt-4o"])
    expect(Pricing.priceOf(Pricing.defaults, "gpt-4o-mini-2024-07-18")).toBe(Pricing.defaults["gpt-4o-mini"])
    expect(Pricing.priceOf(Pricing.defaults, "claude-sonnet-4-5-20250929")).toBe(Pricing.defaults["claude-sonnet-4-5"])
  })

  it("an unknown model is PriceNotFound naming the model, unless a fallback is given", () => {
    const error = (() => {
      try {
        Pricing.priceOf(Pricing.defaults, "gpt-4oo")
      } catch (e) {
        return e
      }
    })()
    expect(error).toBeInstanceOf(Pricing.PriceNotFound)
    expect(error).toMatchObject({ _tag: "PriceNotFound", model: "gpt-4oo" })
    const fallback = { inputCentsPerMTok: 1, outputCentsPerMTok: 2 }
    expect(Pricing.priceOf(Pricing.defaults, "gpt-4oo", fallback)).toBe(fallback)
  })

  it("names that every object inherits are not models", () => {
    expect(() => Pricing.priceOf(Pricing.defaults, "constructor")).toThrow(Pricing.PriceNotFound)
  })
})

describe("Pricing.withPrices and make", () => {
  it("an override replaces its model's price and adds new models, leaving the defaults as they were", () => {
    const before = Pricing.defaults["gpt-4o"]
    const table = Pricing.withPrices({
      "gpt-4o": { inputCentsPerMTok: 1, outputCentsPerMTok: 1 },
      "my-model": { inputCentsPerMTok: 5, outputCentsPerMTok: 6 }
    })
    expect(Pricing.priceOf(table, "gpt-4o")).toEqual({ inputCentsPerMTok: 1, outputCentsPerMTok: 1 })
    expect(Pricing.priceOf(table, "my-model").outputCentsPerMTok).toBe(6)
    expect(Pricing.defaults["gpt-4o"]).toBe(before)
  })

  it("a negative or non-finite price is InvalidPrice", () => {
    expect(() => Pricing.make({ m: { inputCentsPerMTok: -1, outputCentsPerMTok: 1 } })).toThrow(Pricing.InvalidPrice)
    expect(() => Pricing.withPrices({ m: { inputCentsPerMTok: 1, outputCentsPerMTok: Number.NaN } })).toThrow(
      /outputCentsPerMTok/
    )
    expect(() =>
      Pricing.make({ m: { inputCentsPerMTok: 1, outputCentsPerMTok: 1, cachedInputCentsPerMTok: Infinity } })
    ).toThrow(Pricing.InvalidPrice)
  })

  it("every default price is valid", () => {
    expect(Pricing.make(Pricing.defaults)).toEqual(Pricing.defaults)
  })
})

describe("Pricing.costCents", () => {
  it("bills each kind of token at its own rate", () => {
    const price = {
      inputCentsPerMTok: 300,
      cachedInputCentsPerMTok: 30,
      cacheWriteCentsPerMTok: 375,
      outputCentsPerMTok: 1500
    }
    // 1M input x 300 + 2M cached x 30 + 1M writes x 375 + 0.5M output x 1500
    const cents = Pricing.costCents(
      price,
      usage({ inputTokens: 1e6, cachedInputTokens: 2e6, cacheWriteTokens: 1e6, outputTokens: 5e5 })
    )
    expect(cents).toBe(300 + 60 + 375 + 750)
  })

  it("cached and cache-write tokens default to the input rate; bad counts count as zero", () => {
    const price = { inputCentsPerMTok: 100, outputCentsPerMTok: 200 }
    expect(Pricing.costCents(price, usage({ cachedInputTokens: 1e6, cacheWriteTokens: 1e6 }))).toBe(200)
    expect(Pricing.costCents(price, usage({ inputTokens: -5, outputTokens: Number.NaN }))).toBe(0)
  })

  it("rounds to a millionth of a cent", () => {
    expect(Pricing.costCents({ inputCentsPerMTok: 1, outputCentsPerMTok: 1 }, usage({ inputTokens: 3 }))).toBe(0.000003)
    expect(Pricing.costCents({ inputCentsPerMTok: 0.1, outputCentsPerMTok: 1 }, usage({ inputTokens: 1 }))).toBe(0)
  })
})
