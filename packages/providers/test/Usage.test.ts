import { describe, expect, it } from "vitest"
import { messageUsage } from "../src/Anthropic.js"
import { geminiUsage } from "../src/Gemini.js"
import { chatUsage, responseUsage } from "../src/OpenAI.js"

const none = { inputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0 }

describe("usage in the form Pricing bills", () => {
  it("OpenAI chat: cached tokens are taken out of prompt_tokens", () => {
    expect(
      chatUsage({
        prompt_tokens: 100,
        completion_tokens: 20,
        total_tokens: 120,
        prompt_tokens_details: { cached_tokens: 30 }
      })
    ).toEqual({ inputTokens: 70, cachedInputTokens: 30, cacheWriteTokens: 0, outputTokens: 20 })
    expect(chatUsage(null)).toEqual(none)
    expect(chatUsage(undefined)).toEqual(none)
  })

  it("OpenAI responses: cache reads and writes are taken out of input_tokens", () => {
    expect(
      responseUsage({
        input_tokens: 50,
        input_tokens_details: { cached_tokens: 10, cache_write_tokens: 15 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 2 },
        total_tokens: 55
      })
    ).toEqual({ inputTokens: 25, cachedInputTokens: 10, cacheWriteTokens: 15, outputTokens: 5 })
    expect(responseUsage(null)).toEqual(none)
  })

  it("Anthropic: cache reads and writes are their own counts; nulls count as zero", () => {
    expect(
      messageUsage({ input_tokens: 10, cache_read_input_tokens: 20, cache_creation_input_tokens: 30, output_tokens: 4 })
    ).toEqual({ inputTokens: 10, cachedInputTokens: 20, cacheWriteTokens: 30, outputTokens: 4 })
    expect(messageUsage({ input_tokens: 3, cache_read_input_tokens: null, output_tokens: 1 })).toEqual({
      inputTokens: 3,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: 1
    })
    expect(messageUsage(undefined)).toEqual(none)
  })

  it("Gemini: cached tokens come out of promptTokenCount, thinking tokens are output", () => {
    expect(
      geminiUsage({ promptTokenCount: 90, cachedContentTokenCount: 40, candidatesTokenCount: 7, thoughtsTokenCount: 3 })
    ).toEqual({ inputTokens: 50, cachedInputTokens: 40, cacheWriteTokens: 0, outputTokens: 10 })
    expect(geminiUsage(undefined)).toEqual(none)
  })

  it("a cached count larger than the prompt never makes input negative", () => {
    expect(geminiUsage({ promptTokenCount: 5, cachedContentTokenCount: 9 }).inputTokens).toBe(0)
  })
})
