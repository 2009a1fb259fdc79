import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, FiberId, TestClock } from "effect"
import type { ErrorClass } from "../src/ErrorClass.js"
import { LeaseLost } from "../src/Errors.js"
import { maxEvidenceLength, normalize, normalizeWithClock, redact, truncate } from "../src/Normalize.js"

const errno = (code: string, message = `connect ${code}`) => Object.assign(new Error(message), { code })
const fetchFailed = (cause: unknown) => new TypeError("fetch failed", { cause })
const named = (name: string, message = name) => Object.assign(new Error(message), { name })

type Row = readonly [label: string, error: unknown, errorClass: ErrorClass, status?: number]

const statusRows: ReadonlyArray<Row> = [
  ["400", { status: 400, body: "bad" }, "invalid_request", 400],
  ["401", { status: 401 }, "auth", 401],
  ["403", { status: 403 }, "auth", 403],
  ["404", { status: 404 }, "invalid_request", 404],
  ["408", { status: 408 }, "timeout", 408],
  ["409", { status: 409 }, "server_error", 409],
  ["413", { status: 413 }, "invalid_request", 413],
  ["422", { status: 422 }, "invalid_request", 422],
  ["429", { status: 429 }, "rate_limited", 429],
  ["500", { status: 500 }, "server_error", 500],
  ["502", { status: 502 }, "server_error", 502],
  ["503", { status: 503 }, "overloaded", 503],
  ["504", { status: 504 }, "timeout", 504],
  ["529", { status: 529 }, "overloaded", 529],
  ["other 4xx", { status: 418 }, "invalid_request", 418],
  ["other 5xx", { status: 599 }, "server_error", 599],
  ["statusCode (node http)", { statusCode: 503 }, "overloaded", 503],
  ["status as string", { status: "429" }, "rate_limited", 429],
  ["axios response", { message: "Request failed", response: { status: 502, data: "<html>" } }, "server_error", 502],
  ["Effect ResponseError shape", { _tag: "ResponseError", response: { status: 500, headers: {} } }, "server_error", 500]
]

const networkRows: ReadonlyArray<Row> = [
  ["ECONNRESET", errno("ECONNRESET", "read ECONNRESET"), "network"],
  ["ECONNREFUSED", errno("ECONNREFUSED"), "network"],
  ["EAI_AGAIN", errno("EAI_AGAIN", "getaddrinfo EAI_AGAIN api.example.com"), "network"],
  ["ENOTFOUND", errno("ENOTFOUND"), "network"],
  ["EPIPE", errno("EPIPE", "write EPIPE"), "network"],
  ["ETIMEDOUT", errno("ETIMEDOUT"), "timeout"],
  ["UND_ERR_SOCKET", errno("UND_ERR_SOCKET", "other side closed"), "network"],
  ["UND_ERR_CONNECT_TIMEOUT", errno("UND_ERR_CONNECT_TIMEOUT", "Connect Timeout Error"), "timeout"],
  ["UND_ERR_HEADERS_TIMEOUT", errno("UND_ERR_HEADERS_TIMEOUT", "Headers Timeout Error"), "timeout"],
  ["UND_ERR_BODY_TIMEOUT", errno("UND_ERR_BODY_TIMEOUT", "Body Timeout Error"), "timeout"],
  ["UND_ERR_ABORTED", errno("UND_ERR_ABORTED", "Request aborted"), "cancelled"],
  ["fetch failed <- ECONNRESET (nested cause)", fetchFailed(errno("ECONNRESET")), "network"],
  ["fetch failed <- UND_ERR_HEADERS_TIMEOUT", fetchFailed(errno("UND_ERR_HEADERS_TIMEOUT")), "timeout"],
  ["two levels deep", new Error("outer", { cause: fetchFailed(errno("EPIPE")) }), "network"],
  [
    "AggregateError of ECONNREFUSED (happy eyeballs)",
    fetchFailed(new AggregateError([errno("ECONNREFUSED"), errno("ECONNREFUSED")], "connect failed")),
    "network"
  ],
  ["fetch failed with no cause", new TypeError("fetch failed"), "network"],
  ["socket hang up", new Error("socket hang up"), "network"]
]

const abortRows: ReadonlyArray<Row> = [
  ["AbortError", named("AbortError", "This operation was aborted"), "cancelled"],
  ["DOMException AbortError", new DOMException("aborted", "AbortError"), "cancelled"],
  ["DOMException TimeoutError", new DOMException("signal timed out", "TimeoutError"), "timeout"],
  ["AbortError caused by a timeout", Object.assign(named("AbortError"), { cause: named("TimeoutError") }), "timeout"],
  ["Effect TimeoutException", new Cause.TimeoutException("slow"), "timeout"],
  ["Effect InterruptedException", new Cause.InterruptedException(), "cancelled"],
  ["Cause.interrupt", Cause.interrupt(FiberId.none), "cancelled"],
  ["Cause.fail wrapping a status", Cause.fail({ status: 429 }), "rate_limited", 429],
  ["Cause.die wrapping ECONNRESET", Cause.die(errno("ECONNRESET")), "network"],
  ["SDK timeout class", named("APIConnectionTimeoutError", "Request timed out."), "timeout"],
  ["SDK connection class", named("APIConnectionError", "Connection error."), "network"],
  ["SDK user abort", named("APIUserAbortError", "Request was aborted."), "cancelled"],
  [
    "LeaseLost",
    new LeaseLost({
      jobId: "0190a0a0-0000-7000-8000-000000000000" as never,
      token: 1,
      currentToken: 2,
      state: "running"
    }),
    "lease_lost"
  ],
  ["InvalidInput tag", { _tag: "InvalidInput", path: "$.x", message: "bad" }, "invalid_input"],
  ["plain Error", new Error("something odd"), "unknown"],
  ["a string", "boom", "unknown"],
  ["undefined", undefined, "unknown"],
  ["null", null, "unknown"],
  ["a number", 42, "unknown"]
]

const openAi = (type: string, code: string | null, message = "m") => ({ error: { type, code, message, param: null } })
const anthropic = (type: string, message = "m") => ({ type: "error", error: { type, message } })
const gemini = (code: number, status: string, message = "m", details?: unknown) => ({
  error: { code, status, message, ...(details ? { details } : {}) }
})

const bodyRows: ReadonlyArray<Row> = [
  // OpenAI-style
  ["openai rate_limit_exceeded", { status: 429, body: openAi("requests", "rate_limit_exceeded") }, "rate_limited", 429],
  [
    "openai insufficient_quota on 429",
    { status: 429, body: openAi("insufficient_quota", "insufficient_quota") },
    "quota_exhausted",
    429
  ],
  [
    "openai context_length_exceeded",
    { status: 400, body: openAi("invalid_request_error", "context_length_exceeded") },
    "context_length",
    400
  ],
  [
    "openai content_filter",
    { status: 400, body: openAi("invalid_request_error", "content_filter") },
    "content_filtered",
    400
  ],
  [
    "openai content_policy_violation",
    { status: 400, body: openAi("invalid_request_error", "content_policy_violation") },
    "content_filtered",
    400
  ],
  ["openai server_error", { status: 500, body: openAi("server_error", "server_error") }, "server_error", 500],
  ["openai invalid_api_key", { status: 401, body: openAi("invalid_request_error", "invalid_api_key") }, "auth", 401],
  [
    "openai plain invalid_request_error",
    { status: 400, body: openAi("invalid_request_error", null, "Unrecognized request argument") },
    "invalid_request",
    400
  ],
  [
    "openai body as a JSON string",
    { status: 429, body: JSON.stringify(openAi("insufficient_quota", "insufficient_quota")) },
    "quota_exhausted",
    429
  ],
  [
    "openai SDK error (status, error = inner object, headers)",
    Object.assign(new Error("429 You exceeded your current quota"), {
      status: 429,
      headers: { "x-request-id": "req_1" },
      error: { type: "insufficient_quota", code: "insufficient_quota", message: "You exceeded your current quota" }
    }),
    "quota_exhausted",
    429
  ],
  // Anthropic-style
  ["anthropic overloaded_error", { status: 529, body: anthropic("overloaded_error") }, "overloaded", 529],
  ["anthropic rate_limit_error", { status: 429, body: anthropic("rate_limit_error") }, "rate_limited", 429],
  [
    "anthropic invalid_request_error",
    { status: 400, body: anthropic("invalid_request_error", "messages: empty") },
    "invalid_request",
    400
  ],
  [
    "anthropic prompt too long",
    { status: 400, body: anthropic("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum") },
    "context_length",
    400
  ],
  ["anthropic authentication_error", { status: 401, body: anthropic("authentication_error") }, "auth", 401],
  ["anthropic permission_error", { status: 403, body: anthropic("permission_error") }, "auth", 403],
  ["anthropic api_error", { status: 500, body: anthropic("api_error") }, "server_error", 500],
  ["anthropic not_found_error", { status: 404, body: anthropic("not_found_error") }, "invalid_request", 404],
  ["anthropic request_too_large", { status: 413, body: anthropic("request_too_large") }, "invalid_request", 413],
  [
    "anthropic SDK error (status, error = whole body)",
    Object.assign(new Error("529 overloaded"), { status: 529, error: anthropic("overloaded_error", "Overloaded") }),
    "overloaded",
    529
  ],
  ["anthropic body without a status", anthropic("overloaded_error"), "overloaded"],
  // Gemini-style
  ["gemini RESOURCE_EXHAUSTED", { status: 429, body: gemini(429, "RESOURCE_EXHAUSTED") }, "rate_limited", 429],
  [
    "gemini INVALID_ARGUMENT",
    { status: 400, body: gemini(400, "INVALID_ARGUMENT", "bad field") },
    "invalid_request",
    400
  ],
  [
    "gemini INVALID_ARGUMENT over the token limit",
    {
      status: 400,
      body: gemini(
        400,
        "INVALID_ARGUMENT",
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
      )
    },
    "context_length",
    400
  ],
  [
    "gemini invalid API key",
    {
      status: 400,
      body: gemini(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [
        { reason: "API_KEY_INVALID" }
      ])
    },
    "auth",
    400
  ],
  [
    "gemini UNAVAILABLE",
    { status: 503, body: gemini(503, "UNAVAILABLE", "The model is overloaded.") },
    "overloaded",
    503
  ],
  ["gemini DEADLINE_EXCEEDED", { status: 504, body: gemini(504, "DEADLINE_EXCEEDED") }, "timeout", 504],
  ["gemini PERMISSION_DENIED", { status: 403, body: gemini(403, "PERMISSION_DENIED") }, "auth", 403],
  ["gemini UNAUTHENTICATED", { status: 401, body: gemini(401, "UNAUTHENTICATED") }, "auth", 401],
  ["gemini body alone takes its status from error.code", gemini(429, "RESOURCE_EXHAUSTED"), "rate_limited", 429],
  ["gemini finishReason SAFETY", { candidates: [{ finishReason: "SAFETY", content: null }] }, "content_filtered"],
  ["gemini prompt blocked", { promptFeedback: { blockReason: "SAFETY" } }, "content_filtered"],
  ["gemini finishReason STOP is not an error body", { candidates: [{ finishReason: "STOP" }] }, "unknown"]
]

const check = ([, error, errorClass, status]: Row) => {
  const n = normalize(error)
  expect(n.errorClass).toBe(errorClass)
  expect(n.status).toBe(status)
  expect(n.retryable).toBe(
    ["rate_limited", "overloaded", "timeout", "network", "server_error", "lease_expired", "unknown"].includes(
      errorClass
    )
  )
  expect(n.evidence.length).toBeGreaterThan(0)
  expect(n.evidence.length).toBeLessThanOrEqual(maxEvidenceLength)
}

describe("normalize", () => {
  const groups = [
    ["HTTP status", statusRows],
    ["network", networkRows],
    ["aborts, timeouts, Effect, own errors", abortRows],
    ["vendor body", bodyRows]
  ] as const
  for (const [group, rows] of groups) {
    for (const row of rows) it(`${group}: ${row[0]}`, () => check(row))
  }

  it("never throws on hostile values", () => {
    const cyclic: Record<string, unknown> = { message: "loop" }
    cyclic.cause = cyclic
    const throwing = Object.defineProperty({}, "message", {
      get() {
        throw new Error("no")
      }
    })
    expect(normalize(cyclic).errorClass).toBe("unknown")
    expect(normalize(throwing)).toMatchObject({ errorClass: "unknown", retryable: true })
  })

  it("a type, code, status or name that is a key every object inherits classes as if the field were absent", () => {
    for (const key of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"]) {
      const bodies = [
        { error: { type: key, message: "odd" } },
        { error: { code: key, message: "odd" } },
        { error: { status: key, message: "odd" } }
      ]
      for (const body of bodies) {
        const n = normalize({ status: 418, body })
        expect(typeof n.errorClass).toBe("string")
        expect(n.errorClass).toBe(normalize({ status: 418, body: { error: { message: "odd" } } }).errorClass)
      }
      const named = Object.assign(new Error("odd"), { name: key })
      expect(normalize(named).errorClass).toBe("unknown")
    }
  })

  it("puts the vendor message and the status in the evidence", () => {
    const n = normalize({ status: 429, body: openAi("requests", "rate_limit_exceeded", "Rate limit reached for gpt") })
    expect(n.evidence).toContain("HTTP 429")
    expect(n.evidence).toContain("Rate limit reached for gpt")
    expect(n.evidence).toContain("rate_limit_exceeded")
  })

  it("puts nested network codes in the evidence", () => {
    expect(normalize(fetchFailed(errno("ECONNRESET", "read ECONNRESET"))).evidence).toMatch(
      /fetch failed.*read ECONNRESET/
    )
  })
})

describe("normalize: Retry-After", () => {
  const headerRows: ReadonlyArray<readonly [string, unknown, number | undefined]> = [
    ["seconds in a plain record", { "Retry-After": "20" }, 20_000],
    ["seconds in a Headers object", new Headers({ "retry-after": "7" }), 7_000],
    ["retry-after-ms wins", { "retry-after-ms": "1500", "retry-after": "2" }, 1_500],
    ["fractional seconds", { "retry-after": "0.5" }, 500],
    ["array value (node IncomingHttpHeaders style)", { "retry-after": ["3"] }, 3_000],
    ["a Map", new Map([["retry-after", "4"]]), 4_000],
    ["garbage", { "retry-after": "soon" }, undefined],
    ["none", {}, undefined]
  ]
  it.each(headerRows)("%s", (_label, headers, expected) => {
    expect(normalize({ status: 429, headers }).retryAfterMs).toBe(expected)
  })

  it("HTTP-date against nowMs", () => {
    const nowMs = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT")
    const headers = { "retry-after": "Wed, 21 Oct 2015 07:28:30 GMT" }
    expect(normalize({ status: 503, headers }, { nowMs }).retryAfterMs).toBe(30_000)
  })

  it("HTTP-date against the response's Date header when no nowMs is given", () => {
    const headers = new Headers({
      "retry-after": "Wed, 21 Oct 2015 07:29:00 GMT",
      date: "Wed, 21 Oct 2015 07:28:00 GMT"
    })
    expect(normalize({ status: 429, headers }).retryAfterMs).toBe(60_000)
  })

  it("HTTP-date in the past is zero, and without any clock it is dropped", () => {
    const headers = { "retry-after": "Wed, 21 Oct 2015 07:28:00 GMT" }
    expect(normalize({ status: 429, headers }, { nowMs: Date.parse("2015-10-22T00:00:00Z") }).retryAfterMs).toBe(0)
    expect(normalize({ status: 429, headers }).retryAfterMs).toBeUndefined()
  })

  it.effect("normalizeWithClock reads Effect's Clock", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2030-01-01T00:00:00Z"))
      const n = yield* normalizeWithClock({ status: 429, headers: { "retry-after": "Tue, 01 Jan 2030 00:00:10 GMT" } })
      expect(n.retryAfterMs).toBe(10_000)
    })
  )

  it("Gemini RetryInfo retryDelay", () => {
    const body = gemini(429, "RESOURCE_EXHAUSTED", "quota", [
      { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "37s" }
    ])
    expect(normalize({ status: 429, body }).retryAfterMs).toBe(37_000)
  })

  it("an SDK error's headers", () => {
    const e = Object.assign(new Error("429"), {
      status: 429,
      headers: { "retry-after": "12" },
      error: anthropic("rate_limit_error")
    })
    expect(normalize(e)).toMatchObject({ errorClass: "rate_limited", retryAfterMs: 12_000, status: 429 })
  })
})

describe("redact", () => {
  const rows: ReadonlyArray<readonly [string, string, string]> = [
    ["openai key", "key sk-proj-abcDEF1234567890xyz used", "sk-proj-abcDEF1234567890xyz"],
    ["anthropic key", "sk-ant-api03-AAAAbbbbCCCC_dddd-eeee", "api03-AAAAbbbbCCCC"],
    ["google key", "AIzaSyA1234567890abcdefghijklmnopqrstu", "SyA1234567890abcdefghijklmnopqrstu"],
    ["key= query param", "GET https://x.googleapis.com/v1/models?alt=sse&key=secretvalue123", "secretvalue123"],
    ["api_key= query param", "https://api.example.com/x?api_key=zzz999&y=1", "zzz999"],
    ["bearer token", "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9"],
    ["authorization header line", "Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"],
    ["authorization in JSON", '{"headers":{"authorization":"Token abc123456"}}', "abc123456"],
    ["x-api-key header", "x-api-key: my-secret-key-value", "my-secret-key-value"],
    ["aws access key id", "AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"]
  ]
  it.each(rows)("%s", (_label, input, secret) => {
    const out = redact(input)
    expect(out).not.toContain(secret)
    expect(out).toContain("[redacted]")
  })

  it("keeps ordinary text and is idempotent", () => {
    const s = "HTTP 429: Rate limit reached for gpt-4o in organization org-123 on tokens per min"
    expect(redact(s)).toBe(s)
    const secret = "Authorization: Bearer sk-abcdefghijklmnop ?key=xyz"
    expect(redact(redact(secret))).toBe(redact(secret))
  })

  it("is applied to evidence, including headers and bodies", () => {
    const n = normalize({
      status: 401,
      headers: { authorization: "Bearer sk-live-abcdefghijkl" },
      body: "invalid key sk-live-abcdefghijkl for https://h/v1?key=AIzaSyA1234567890abcdefghijk",
      message: "Authorization: Bearer sk-live-abcdefghijkl"
    })
    expect(n.errorClass).toBe("auth")
    expect(n.evidence).not.toContain("abcdefghijkl")
    expect(n.evidence).not.toContain("1234567890abcdefghijk")
  })
})

describe("truncate", () => {
  it("caps evidence at 2,000 characters", () => {
    const n = normalize({ status: 500, body: "x".repeat(10_000), message: "y".repeat(10_000) })
    expect(n.evidence.length).toBe(maxEvidenceLength)
    expect(n.evidence.endsWith("…")).toBe(true)
    expect(truncate("short")).toBe("short")
    expect(truncate("abcdef", 4)).toBe("abc…")
  })
})

describe("normalize: Effect exits", () => {
  it.effect("an interrupted fiber's cause is cancelled", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.fork(Effect.never)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(normalize(exit.cause).errorClass).toBe("cancelled")
    })
  )

  it.effect("Effect.timeout's failure is a timeout", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.fork(Effect.exit(Effect.timeout(Effect.never, "1 second")))
      yield* TestClock.adjust("2 seconds")
      const exit = yield* Fiber.join(fiber)
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(normalize(exit.cause).errorClass).toBe("timeout")
    })
  )
})

describe("normalize: the shapes the provider SDKs really throw", () => {
  // Stand-ins with the SDKs' own traits: OpenAI's classes keep `name` "Error"; Gemini's ApiError keeps the body as a
  // JSON string in `message`. packages/providers runs the real SDKs against a fake provider.
  class APIUserAbortError extends Error {}
  class APIConnectionTimeoutError extends Error {}
  class ApiError extends Error {
    constructor(
      message: string,
      readonly status: number
    ) {
      super(message)
      this.name = "ApiError"
    }
  }

  it("reads the class name when `name` is the generic Error", () => {
    expect(new APIUserAbortError("Request was aborted.").name).toBe("Error")
    expect(normalize(new APIUserAbortError("Request was aborted.")).errorClass).toBe("cancelled")
    expect(normalize(new APIConnectionTimeoutError("Request timed out.")).errorClass).toBe("timeout")
  })

  it("parses a JSON body kept in `message`: Google status mapping and RetryInfo", () => {
    const body = {
      error: {
        code: 429,
        message: "Resource has been exhausted",
        status: "RESOURCE_EXHAUSTED",
        details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "37s" }]
      }
    }
    const n = normalize(new ApiError(JSON.stringify(body), 429))
    expect(n).toMatchObject({ errorClass: "rate_limited", retryAfterMs: 37_000, status: 429 })
    const unavailable = { error: { code: 503, message: "The model is overloaded.", status: "UNAVAILABLE" } }
    expect(normalize(new ApiError(JSON.stringify(unavailable), 503)).errorClass).toBe("overloaded")
  })

  it("a generic invalid_request body on 401 or 403 is auth", () => {
    const body = { error: { message: "You didn't provide an API key.", type: "invalid_request_error", code: null } }
    expect(normalize({ status: 401, error: body.error }).errorClass).toBe("auth")
    expect(normalize({ status: 403, error: body.error }).errorClass).toBe("auth")
    expect(normalize({ status: 400, error: body.error }).errorClass).toBe("invalid_request")
  })

  it("Anthropic's 400 'credit balance is too low' is quota_exhausted", () => {
    const body = {
      type: "error",
      error: {
        type: "invalid_request_error",
        message: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing."
      }
    }
    expect(normalize({ status: 400, error: body }).errorClass).toBe("quota_exhausted")
  })
})

describe("normalize: rate-limit reset headers when there is no Retry-After", () => {
  it("OpenAI: the longest reset among exhausted limits, as a Go duration", () => {
    const headers = new Headers({
      "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-requests": "1m30s",
      "x-ratelimit-remaining-tokens": "0",
      "x-ratelimit-reset-tokens": "250ms"
    })
    expect(normalize({ status: 429, headers }).retryAfterMs).toBe(90_000)
  })

  it("a limit that is not exhausted says nothing", () => {
    const headers = { "x-ratelimit-remaining-requests": "12", "x-ratelimit-reset-requests": "6s" }
    expect(normalize({ status: 429, headers }).retryAfterMs).toBeUndefined()
  })

  it("Anthropic: an RFC 3339 reset against nowMs or the Date header", () => {
    const headers = {
      "anthropic-ratelimit-input-tokens-remaining": "0",
      "anthropic-ratelimit-input-tokens-reset": "2026-01-01T00:00:30Z"
    }
    expect(normalize({ status: 429, headers }, { nowMs: Date.parse("2026-01-01T00:00:00Z") }).retryAfterMs).toBe(30_000)
    const dated = { ...headers, date: "Thu, 01 Jan 2026 00:00:20 GMT" }
    expect(normalize({ status: 429, headers: dated }).retryAfterMs).toBe(10_000)
    expect(normalize({ status: 429, headers }).retryAfterMs).toBeUndefined()
  })

  it("Retry-After wins over the reset headers", () => {
    const headers = { "retry-after": "3", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m" }
    expect(normalize({ status: 429, headers }).retryAfterMs).toBe(3_000)
  })
})
