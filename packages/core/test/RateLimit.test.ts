import { describe, expect, it } from "@effect/vitest"
import { normalize } from "../src/Normalize.js"
import { fromGoogleDetails, fromHeaders, merge, parseDuration, waitMs } from "../src/RateLimit.js"

// The example of OpenAI's rate-limit guide (platform.openai.com/docs/guides/rate-limits, "Rate limits in headers").
const openAiGuide = {
  "x-ratelimit-limit-requests": "60",
  "x-ratelimit-limit-tokens": "150000",
  "x-ratelimit-remaining-requests": "59",
  "x-ratelimit-remaining-tokens": "149984",
  "x-ratelimit-reset-requests": "1s",
  "x-ratelimit-reset-tokens": "6m0s"
}

// A recorded Anthropic reply's headers (200 OK from /v1/messages): every limit full, its resets at or just before
// the reply's Date.
const anthropicRecorded = {
  date: "Thu, 21 Aug 2025 12:41:00 GMT",
  "anthropic-ratelimit-input-tokens-limit": "80000",
  "anthropic-ratelimit-input-tokens-remaining": "80000",
  "anthropic-ratelimit-input-tokens-reset": "2025-08-21T12:40:59Z",
  "anthropic-ratelimit-output-tokens-limit": "16000",
  "anthropic-ratelimit-output-tokens-remaining": "16000",
  "anthropic-ratelimit-output-tokens-reset": "2025-08-21T12:41:00Z",
  "anthropic-ratelimit-requests-limit": "1000",
  "anthropic-ratelimit-requests-remaining": "999",
  "anthropic-ratelimit-requests-reset": "2025-08-21T12:40:59Z",
  "anthropic-ratelimit-tokens-limit": "96000",
  "anthropic-ratelimit-tokens-remaining": "96000",
  "anthropic-ratelimit-tokens-reset": "2025-08-21T12:40:59Z",
  "request-id": "req_011CSLsW7mFqvHHnzrKdKjAE"
}

describe("RateLimit.parseDuration: OpenAI's reset durations", () => {
  const rows: ReadonlyArray<readonly [string, number | undefined]> = [
    ["1s", 1_000],
    ["6m0s", 360_000],
    ["200ms", 200],
    ["12ms", 12],
    ["1.5s", 1_500],
    ["1h2m3s", 3_723_000],
    ["2m", 120_000],
    ["", undefined],
    ["soon", undefined],
    ["2026-01-01T00:00:00Z", undefined]
  ]
  for (const [input, ms] of rows) it(JSON.stringify(input), () => expect(parseDuration(input)).toBe(ms))
})

describe("RateLimit.fromHeaders", () => {
  it("OpenAI: limits, remaining and resets of requests and tokens", () => {
    // Act
    const info = fromHeaders(new Headers(openAiGuide))
    // Assert
    expect(info).toEqual({
      requests: { limit: 60, remaining: 59, resetMs: 1_000 },
      tokens: { limit: 150_000, remaining: 149_984, resetMs: 360_000 }
    })
  })

  it("Anthropic: four dimensions, RFC 3339 resets measured from the Date header (a past reset is 0)", () => {
    expect(fromHeaders(anthropicRecorded)).toEqual({
      requests: { limit: 1000, remaining: 999, resetMs: 0 },
      tokens: { limit: 96_000, remaining: 96_000, resetMs: 0 },
      inputTokens: { limit: 80_000, remaining: 80_000, resetMs: 0 },
      outputTokens: { limit: 16_000, remaining: 16_000, resetMs: 0 }
    })
  })

  it("Anthropic: nowMs, when given, measures the resets instead of the Date header", () => {
    const headers = {
      "anthropic-ratelimit-requests-remaining": "0",
      "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:30Z",
      date: "Thu, 01 Jan 2026 00:00:20 GMT"
    }
    expect(fromHeaders(headers)?.requests).toEqual({ remaining: 0, resetMs: 10_000 })
    expect(fromHeaders(headers, { nowMs: Date.parse("2026-01-01T00:00:00Z") })?.requests).toEqual({
      remaining: 0,
      resetMs: 30_000
    })
    // Neither: the absolute time cannot become a delay and is left out.
    const { date: _date, ...undated } = headers
    expect(fromHeaders(undated)?.requests).toEqual({ remaining: 0 })
  })

  it("retry-after: seconds, fractional seconds, an HTTP date; retry-after-ms wins", () => {
    expect(fromHeaders({ "retry-after": "12" })).toEqual({ retryAfterMs: 12_000 })
    expect(fromHeaders({ "retry-after": "0.5" })).toEqual({ retryAfterMs: 500 })
    expect(
      fromHeaders({ "retry-after": "Wed, 21 Oct 2015 07:28:30 GMT" }, { nowMs: Date.parse("2015-10-21T07:28:00Z") })
    ).toEqual({ retryAfterMs: 30_000 })
    expect(fromHeaders({ "retry-after-ms": "1500", "retry-after": "2" })).toEqual({ retryAfterMs: 1_500 })
  })

  it("Node's header records (arrays, any case) and a Map read the same", () => {
    expect(fromHeaders({ "Retry-After": ["3"], "X-RateLimit-Remaining-Requests": "0" })).toEqual({
      retryAfterMs: 3_000,
      requests: { remaining: 0 }
    })
    expect(fromHeaders(new Map([["retry-after", "4"]]))).toEqual({ retryAfterMs: 4_000 })
  })

  it("nothing to say, or nothing that parses: undefined", () => {
    expect(fromHeaders({ "content-type": "application/json" })).toBeUndefined()
    expect(fromHeaders({ "retry-after": "soon", "x-ratelimit-remaining-tokens": "many" })).toBeUndefined()
    expect(fromHeaders(undefined)).toBeUndefined()
    expect(fromHeaders("retry-after: 3")).toBeUndefined()
    const throwing = {
      get: () => {
        throw new Error("no")
      }
    }
    expect(fromHeaders(throwing)).toBeUndefined()
  })
})

describe("RateLimit.fromGoogleDetails: Gemini's 429 details", () => {
  const details = [
    {
      "@type": "type.googleapis.com/google.rpc.QuotaFailure",
      violations: [
        {
          quotaMetric: "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count",
          quotaId: "GenerateContentInputTokensPerModelPerMinute-FreeTier",
          quotaDimensions: { model: "gemini-2.5-flash", location: "global" },
          quotaValue: "250000"
        },
        {
          quotaMetric: "generativelanguage.googleapis.com/generate_content_free_tier_requests",
          quotaId: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
          quotaValue: "10"
        },
        {
          quotaMetric: "generativelanguage.googleapis.com/generate_content_free_tier_requests",
          quotaId: "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
          quotaValue: "250"
        }
      ]
    },
    { "@type": "type.googleapis.com/google.rpc.Help", links: [{ description: "Learn more", url: "https://ai.dev" }] },
    { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "24s" }
  ]

  it("RetryInfo is the wait; each per-minute quota is an exhausted dimension with its limit; per-day is left out", () => {
    expect(fromGoogleDetails(details)).toEqual({
      retryAfterMs: 24_000,
      inputTokens: { limit: 250_000, remaining: 0 },
      requests: { limit: 10, remaining: 0 }
    })
  })

  it("nothing to say: undefined", () => {
    expect(fromGoogleDetails(undefined)).toBeUndefined()
    expect(
      fromGoogleDetails([{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID" }])
    ).toBeUndefined()
  })
})

describe("RateLimit.waitMs and merge", () => {
  it("retry-after first, else the longest reset among exhausted dimensions, else nothing", () => {
    expect(waitMs({ retryAfterMs: 3_000, requests: { remaining: 0, resetMs: 60_000 } })).toBe(3_000)
    expect(waitMs({ requests: { remaining: 0, resetMs: 90_000 }, tokens: { remaining: 0, resetMs: 250 } })).toBe(90_000)
    expect(waitMs({ requests: { remaining: 12, resetMs: 6_000 } })).toBeUndefined()
    expect(waitMs({ requests: { remaining: 0 } })).toBeUndefined()
    expect(waitMs(undefined)).toBeUndefined()
  })

  it("merge keeps the primary's fields and fills the rest from the secondary", () => {
    expect(
      merge(
        { requests: { remaining: 0 }, tokens: { limit: 5 } },
        { retryAfterMs: 7, requests: { limit: 10, remaining: 3 }, inputTokens: { remaining: 0 } }
      )
    ).toEqual({
      retryAfterMs: 7,
      requests: { limit: 10, remaining: 0 },
      tokens: { limit: 5 },
      inputTokens: { remaining: 0 }
    })
    expect(merge(undefined, { retryAfterMs: 1 })).toEqual({ retryAfterMs: 1 })
    expect(merge({ retryAfterMs: 1 }, undefined)).toEqual({ retryAfterMs: 1 })
  })
})

describe("normalize: rateLimit on a failed reply", () => {
  it("an OpenAI 429's headers", () => {
    const error = Object.assign(new Error("429 Rate limit reached"), {
      status: 429,
      headers: new Headers({ ...openAiGuide, "x-ratelimit-remaining-requests": "0", "retry-after": "1" })
    })
    expect(normalize(error)).toMatchObject({
      errorClass: "rate_limited",
      retryAfterMs: 1_000,
      rateLimit: {
        retryAfterMs: 1_000,
        requests: { limit: 60, remaining: 0, resetMs: 1_000 },
        tokens: { limit: 150_000, remaining: 149_984, resetMs: 360_000 }
      }
    })
  })

  it("the AI SDK's APICallError keeps them as responseHeaders", () => {
    const error = Object.assign(new Error("Too Many Requests"), {
      name: "AI_APICallError",
      statusCode: 429,
      responseHeaders: { "retry-after": "2", "anthropic-ratelimit-requests-remaining": "0" },
      responseBody: JSON.stringify({
        type: "error",
        error: { type: "rate_limit_error", message: "Number of requests has exceeded your per-minute rate limit." }
      })
    })
    expect(normalize(error)).toMatchObject({
      errorClass: "rate_limited",
      retryAfterMs: 2_000,
      rateLimit: { retryAfterMs: 2_000, requests: { remaining: 0 } }
    })
  })

  it("Gemini: from the body's details", () => {
    const body = JSON.stringify({
      error: {
        code: 429,
        status: "RESOURCE_EXHAUSTED",
        message: "You exceeded your current quota, please check your plan and billing details.",
        details: [
          {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            violations: [{ quotaId: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", quotaValue: "15" }]
          },
          { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "37s" }
        ]
      }
    })
    expect(normalize(new Error(body))).toMatchObject({
      errorClass: "rate_limited",
      retryAfterMs: 37_000,
      rateLimit: { retryAfterMs: 37_000, requests: { limit: 15, remaining: 0 } }
    })
  })

  it("absent when the reply said nothing about limits", () => {
    expect(normalize({ status: 500, headers: { "content-type": "text/plain" } }).rateLimit).toBeUndefined()
  })
})

describe("normalize: spend caps are quota_exhausted, never rate_limited", () => {
  // Anthropic's tier spend cap: a 429 of type rate_limit_error, no retry-after, `details.error_code`.
  const anthropicSpendCap = {
    type: "error",
    error: {
      type: "rate_limit_error",
      message:
        "You have reached your API usage limits: your organization has crossed its monthly API usage threshold, set based on your organization's API tier. You will regain access on 2026-09-01 at 00:00 UTC.",
      details: { error_code: "enforced_spend_limit_reached" }
    },
    request_id: "req_018EeWyXxfu5pfWkrYcMdjWG"
  }

  it("Anthropic enforced_spend_limit_reached (429 rate_limit_error)", () => {
    expect(normalize({ status: 429, error: anthropicSpendCap })).toMatchObject({
      errorClass: "quota_exhausted",
      retryable: false
    })
    // The code alone, with a message that does not say so, decides as well.
    const coded = { ...anthropicSpendCap, error: { ...anthropicSpendCap.error, message: "Rate limited." } }
    expect(normalize({ status: 429, error: coded }).errorClass).toBe("quota_exhausted")
  })

  it("Anthropic: a spend limit the owner set (400 invalid_request_error)", () => {
    const body = {
      type: "error",
      error: {
        type: "invalid_request_error",
        message: "You have reached your specified workspace API usage limits. You will regain access on 2026-10-01."
      }
    }
    expect(normalize({ status: 400, error: body }).errorClass).toBe("quota_exhausted")
  })

  it("OpenAI insufficient_quota and hard spend limits (429)", () => {
    const openAi = (code: string) => ({
      status: 429,
      error: { message: "You exceeded your current quota.", type: code, code, param: null }
    })
    for (const code of ["insufficient_quota", "organization_spend_limit_exceeded", "project_spend_limit_exceeded"]) {
      expect(normalize(openAi(code)).errorClass, code).toBe("quota_exhausted")
    }
  })

  it("an ordinary 429 with retry-after stays rate_limited with its delay", () => {
    const body = {
      type: "error",
      error: { type: "rate_limit_error", message: "Number of request tokens has exceeded your per-minute rate limit." }
    }
    expect(normalize({ status: 429, headers: { "retry-after": "12" }, error: body })).toMatchObject({
      errorClass: "rate_limited",
      retryable: true,
      retryAfterMs: 12_000
    })
  })
})
