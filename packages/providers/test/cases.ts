/**
 * The provider cases: every documented error of OpenAI, Anthropic and Gemini (status, body in the provider's own
 * format, headers), their finish reasons, and the faults around a call (connection reset and refused, a stall past
 * the client's timeout, a user abort, a stream cut or failing mid-way). `Cases.test.ts` plays each row through the
 * real SDK (wrapped by this package) against the fake provider and checks what `normalize` makes of what the SDK
 * threw or returned; `docs/guide/provider-cases.md` is rendered from this table by `renderCases`.
 */
import type { ErrorClass } from "@slowcall/core/ErrorClass"
import type { RateLimitInfo } from "@slowcall/core/RateLimit"
import {
  anthropicError,
  anthropicMessage,
  anthropicStream,
  geminiError,
  geminiResponse,
  geminiStream,
  openAiChat,
  openAiChatStream,
  openAiError,
  openAiResponse
} from "./bodies.js"
import { type Reply, sse } from "./fakeProvider.js"

export type Provider = "openai" | "anthropic" | "gemini"
export type Api = "chat" | "responses" | "messages" | "generateContent"

export type Scenario =
  | { readonly kind: "reply"; readonly reply: Reply; readonly note: string }
  /** Nothing listens on the port. */
  | { readonly kind: "refused" }
  /** The fake never answers; the SDK's own timeout ends the call. */
  | { readonly kind: "timeout" }
  /** The fake never answers; the job's signal aborts the call. */
  | { readonly kind: "abort" }
  /** The fake sends some events and then holds the stream open; the SDK's timeout or the job's signal ends it. */
  | { readonly kind: "stall"; readonly reply: Reply; readonly end: "timeout" | "abort"; readonly note: string }

export interface Case {
  readonly provider: Provider
  readonly api: Api
  readonly stream: boolean
  readonly title: string
  readonly scenario: Scenario
  /** The SDK's error class thrown, or `returned` when the call (or stream) completed. */
  readonly sdk: string
  /** The class `normalize` gives what the SDK threw or returned; absent for a normal return. */
  readonly errorClass?: ErrorClass
  readonly retryAfterMs?: number
  /** What `normalize` reads about the rate limits (`Normalized.rateLimit`), where the row checks it. */
  readonly rateLimit?: RateLimitInfo
  /** The finish reason a returned call reports. */
  readonly finish?: string
  /** A secret the provider echoed that evidence must not show. */
  readonly secret?: string
}

const json = (status: number, body: unknown, headers?: Readonly<Record<string, string>>): Reply =>
  headers === undefined ? { kind: "json", status, body } : { kind: "json", status, body, headers }

const reply = (note: string, r: Reply): Scenario => ({ kind: "reply", reply: r, note })

const openAiKey = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"
const anthropicKey = "sk-ant-api03-ZyXwVuTsRqPoNmLkJiHg0123456789"
const googleKey = "AIzaSyD-0123456789abcdefghijklmnopqrstu"

const openAiRateHeaders = {
  "x-ratelimit-limit-requests": "500",
  "x-ratelimit-remaining-requests": "0",
  "x-ratelimit-reset-requests": "1.5s",
  "x-ratelimit-limit-tokens": "30000",
  "x-ratelimit-remaining-tokens": "29000",
  "x-ratelimit-reset-tokens": "2ms"
}
const anthropicRateHeaders = {
  "anthropic-ratelimit-requests-limit": "50",
  "anthropic-ratelimit-requests-remaining": "0",
  "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:30Z",
  "anthropic-ratelimit-input-tokens-limit": "30000",
  "anthropic-ratelimit-input-tokens-remaining": "0",
  "anthropic-ratelimit-input-tokens-reset": "2026-01-01T00:00:30Z",
  "anthropic-ratelimit-output-tokens-limit": "8000",
  "anthropic-ratelimit-output-tokens-remaining": "8000",
  "request-id": "req_011CTest"
}
const retryInfo = (delay: string) => ({ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: delay })
const quotaFailure = {
  "@type": "type.googleapis.com/google.rpc.QuotaFailure",
  violations: [
    {
      quotaMetric: "generativelanguage.googleapis.com/generate_content_free_tier_requests",
      quotaId: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
    }
  ]
}

const o = (
  title: string,
  rest: Omit<Case, "provider" | "api" | "stream" | "title"> & { api?: Api; stream?: boolean }
): Case => ({
  provider: "openai",
  api: rest.api ?? "chat",
  stream: rest.stream ?? false,
  title,
  ...rest
})
const a = (title: string, rest: Omit<Case, "provider" | "api" | "stream" | "title"> & { stream?: boolean }): Case => ({
  provider: "anthropic",
  api: "messages",
  stream: rest.stream ?? false,
  title,
  ...rest
})
const g = (title: string, rest: Omit<Case, "provider" | "api" | "stream" | "title"> & { stream?: boolean }): Case => ({
  provider: "gemini",
  api: "generateContent",
  stream: rest.stream ?? false,
  title,
  ...rest
})

const chatChunk = (delta: unknown, finish: string | null) =>
  sse({
    id: "c",
    object: "chat.completion.chunk",
    created: 1,
    model: "gpt-4o-mini",
    choices: [{ index: 0, delta, finish_reason: finish }]
  })

export const cases: ReadonlyArray<Case> = [
  // ---------------------------------------------------------------- OpenAI
  o("400 invalid_request_error (bad parameter)", {
    scenario: reply(
      "400 type invalid_request_error, param temperature",
      json(
        400,
        openAiError(
          "Invalid value for 'temperature': expected a number <= 2.",
          "invalid_request_error",
          "invalid_value",
          "temperature"
        )
      )
    ),
    sdk: "BadRequestError",
    errorClass: "invalid_request"
  }),
  o("400 context_length_exceeded", {
    scenario: reply(
      "400 code context_length_exceeded",
      json(
        400,
        openAiError(
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
          "invalid_request_error",
          "context_length_exceeded",
          "messages"
        )
      )
    ),
    sdk: "BadRequestError",
    errorClass: "context_length"
  }),
  o("400 string_above_max_length", {
    scenario: reply(
      "400 code string_above_max_length",
      json(
        400,
        openAiError(
          "Invalid 'messages[0].content': string too long.",
          "invalid_request_error",
          "string_above_max_length",
          "messages[0].content"
        )
      )
    ),
    sdk: "BadRequestError",
    errorClass: "context_length"
  }),
  o("400 content_policy_violation", {
    scenario: reply(
      "400 code content_policy_violation",
      json(
        400,
        openAiError(
          "Your request was rejected as a result of our safety system.",
          "invalid_request_error",
          "content_policy_violation"
        )
      )
    ),
    sdk: "BadRequestError",
    errorClass: "content_filtered"
  }),
  o("401 invalid_api_key (the key echoed)", {
    scenario: reply(
      "401 code invalid_api_key, message quotes the key",
      json(
        401,
        openAiError(
          `Incorrect API key provided: ${openAiKey}. You can find your API key at https://platform.openai.com/account/api-keys.`,
          "invalid_request_error",
          "invalid_api_key"
        )
      )
    ),
    sdk: "AuthenticationError",
    errorClass: "auth",
    secret: openAiKey
  }),
  o("401 no API key (generic invalid_request_error body)", {
    scenario: reply(
      "401 type invalid_request_error, code null",
      json(
        401,
        openAiError(
          "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth.",
          "invalid_request_error"
        )
      )
    ),
    sdk: "AuthenticationError",
    errorClass: "auth"
  }),
  o("401 not a member of an organization", {
    scenario: reply(
      "401 type invalid_request_error, code no_organization",
      json(
        401,
        openAiError(
          "You must be a member of an organization to use the API.",
          "invalid_request_error",
          "no_organization"
        )
      )
    ),
    sdk: "AuthenticationError",
    errorClass: "auth"
  }),
  o("403 unsupported country, region or territory", {
    scenario: reply(
      "403 code unsupported_country_region_territory",
      json(
        403,
        openAiError(
          "Country, region, or territory not supported",
          "request_forbidden",
          "unsupported_country_region_territory"
        )
      )
    ),
    sdk: "PermissionDeniedError",
    errorClass: "auth"
  }),
  o("404 model_not_found", {
    scenario: reply(
      "404 code model_not_found",
      json(
        404,
        openAiError(
          "The model `gpt-9` does not exist or you do not have access to it.",
          "invalid_request_error",
          "model_not_found",
          "model"
        )
      )
    ),
    sdk: "NotFoundError",
    errorClass: "invalid_request"
  }),
  o("409 conflict", {
    scenario: reply(
      "409, body without a known type",
      json(409, openAiError("The request conflicts with another in progress.", "conflict_error"))
    ),
    sdk: "ConflictError",
    errorClass: "server_error"
  }),
  o("413 request entity too large", {
    scenario: reply(
      "413 type invalid_request_error",
      json(413, openAiError("Request too large for gpt-4o.", "invalid_request_error", "request_too_large"))
    ),
    sdk: "APIError",
    errorClass: "invalid_request"
  }),
  o("422 unprocessable entity", {
    scenario: reply(
      "422 type invalid_request_error",
      json(
        422,
        openAiError(
          "Unprocessable entity: 'tools[0].function.parameters' is not valid JSON Schema.",
          "invalid_request_error"
        )
      )
    ),
    sdk: "UnprocessableEntityError",
    errorClass: "invalid_request"
  }),
  o("429 requests per minute, retry-after-ms and x-ratelimit-*", {
    scenario: reply(
      "429 type requests, retry-after-ms 1500",
      json(
        429,
        openAiError(
          "Rate limit reached for gpt-4o on requests per min (RPM): Limit 500, Used 500.",
          "requests",
          "rate_limit_exceeded"
        ),
        { ...openAiRateHeaders, "retry-after-ms": "1500", "retry-after": "2" }
      )
    ),
    sdk: "RateLimitError",
    errorClass: "rate_limited",
    retryAfterMs: 1_500
  }),
  o("429 tokens per minute, retry-after seconds", {
    scenario: reply(
      "429 type tokens, retry-after 7",
      json(
        429,
        openAiError("Rate limit reached for gpt-4o on tokens per min (TPM).", "tokens", "rate_limit_exceeded"),
        { ...openAiRateHeaders, "retry-after": "7" }
      )
    ),
    sdk: "RateLimitError",
    errorClass: "rate_limited",
    retryAfterMs: 7_000
  }),
  o("429 with only x-ratelimit-* headers", {
    scenario: reply(
      "429 type requests, no retry-after; requests remaining 0, reset 1.5s",
      json(429, openAiError("Rate limit reached for requests.", "requests", "rate_limit_exceeded"), openAiRateHeaders)
    ),
    sdk: "RateLimitError",
    errorClass: "rate_limited",
    retryAfterMs: 1_500,
    rateLimit: {
      requests: { limit: 500, remaining: 0, resetMs: 1_500 },
      tokens: { limit: 30_000, remaining: 29_000, resetMs: 2 }
    }
  }),
  o("429 insufficient_quota", {
    scenario: reply(
      "429 type insufficient_quota",
      json(
        429,
        openAiError(
          "You exceeded your current quota, please check your plan and billing details.",
          "insufficient_quota",
          "insufficient_quota"
        )
      )
    ),
    sdk: "RateLimitError",
    errorClass: "quota_exhausted"
  }),
  o("429 billing_hard_limit_reached", {
    scenario: reply(
      "429 code billing_hard_limit_reached",
      json(
        429,
        openAiError("Billing hard limit has been reached.", "invalid_request_error", "billing_hard_limit_reached")
      )
    ),
    sdk: "RateLimitError",
    errorClass: "quota_exhausted"
  }),
  o("429 organization_spend_limit_exceeded (a hard spend limit)", {
    scenario: reply(
      "429 code organization_spend_limit_exceeded, no retry-after",
      json(
        429,
        openAiError(
          "You have reached the hard spend limit set for your organization.",
          "invalid_request_error",
          "organization_spend_limit_exceeded"
        )
      )
    ),
    sdk: "RateLimitError",
    errorClass: "quota_exhausted"
  }),
  o("500 server_error", {
    scenario: reply(
      "500 type server_error",
      json(500, openAiError("The server had an error while processing your request. Sorry about that!", "server_error"))
    ),
    sdk: "InternalServerError",
    errorClass: "server_error"
  }),
  o("502 bad gateway (HTML from the edge)", {
    scenario: reply(
      "502, HTML body",
      json(502, "<html><body><h1>502 Bad Gateway</h1></body></html>", { "content-type": "text/html" })
    ),
    sdk: "InternalServerError",
    errorClass: "server_error"
  }),
  o("503 engine overloaded", {
    scenario: reply(
      "503 type server_error",
      json(503, openAiError("The engine is currently overloaded, please try again later.", "server_error"))
    ),
    sdk: "InternalServerError",
    errorClass: "overloaded"
  }),
  o("503 slow down, retry-after", {
    scenario: reply(
      "503 retry-after 30",
      json(503, openAiError("Please reduce your request rate.", "server_error", "slow_down"), { "retry-after": "30" })
    ),
    sdk: "InternalServerError",
    errorClass: "overloaded",
    retryAfterMs: 30_000
  }),
  o("504 gateway timeout", {
    scenario: reply("504 type timeout", json(504, openAiError("Gateway timeout.", "timeout"))),
    sdk: "InternalServerError",
    errorClass: "timeout"
  }),
  o("client timeout (stall)", {
    scenario: { kind: "timeout" },
    sdk: "APIConnectionTimeoutError",
    errorClass: "timeout"
  }),
  o("user abort", { scenario: { kind: "abort" }, sdk: "APIUserAbortError", errorClass: "cancelled" }),
  o("connection reset", {
    scenario: reply("socket destroyed before a reply", { kind: "reset" }),
    sdk: "APIConnectionError",
    errorClass: "network"
  }),
  o("connection refused", { scenario: { kind: "refused" }, sdk: "APIConnectionError", errorClass: "network" }),
  o("finish_reason length", {
    scenario: reply("200, finish_reason length", json(200, openAiChat({ finish: "length" }))),
    sdk: "returned",
    finish: "length"
  }),
  o("finish_reason content_filter", {
    scenario: reply(
      "200, finish_reason content_filter",
      json(200, openAiChat({ finish: "content_filter", content: null }))
    ),
    sdk: "returned",
    finish: "content_filter",
    errorClass: "content_filtered"
  }),
  o("refusal", {
    scenario: reply(
      "200, message.refusal set",
      json(200, openAiChat({ content: null, refusal: "I can't help with that." }))
    ),
    sdk: "returned",
    finish: "stop",
    errorClass: "content_filtered"
  }),
  o("stream: finish_reason length", {
    stream: true,
    scenario: reply("SSE, last chunk finish_reason length", {
      kind: "sse",
      events: [
        chatChunk({ role: "assistant", content: "Hi" }, null),
        chatChunk({}, "length"),
        openAiChatStream({ usage: true }).events.at(-1)!,
        sse("[DONE]")
      ]
    }),
    sdk: "returned",
    finish: "length"
  }),
  o("stream: finish_reason content_filter", {
    stream: true,
    scenario: reply("SSE, last chunk finish_reason content_filter", {
      kind: "sse",
      events: [chatChunk({ role: "assistant", content: "Hi" }, null), chatChunk({}, "content_filter"), sse("[DONE]")]
    }),
    sdk: "returned",
    finish: "content_filter",
    errorClass: "content_filtered"
  }),
  o("stream: error event mid-stream", {
    stream: true,
    scenario: reply("SSE chunk, then data: {error: server_error}", {
      kind: "sse",
      events: [
        chatChunk({ role: "assistant", content: "Hi" }, null),
        sse({
          error: {
            message: "The server had an error while processing your request.",
            type: "server_error",
            param: null,
            code: null
          }
        })
      ]
    }),
    sdk: "APIError",
    errorClass: "server_error"
  }),
  o("stream: connection cut mid-stream", {
    stream: true,
    scenario: reply("SSE chunks, then the socket is destroyed", {
      kind: "sse",
      events: openAiChatStream({ usage: false }).events,
      after: "cut"
    }),
    sdk: "TypeError",
    errorClass: "network"
  }),
  o("stream: stall mid-stream, the job aborts", {
    stream: true,
    scenario: {
      kind: "stall",
      reply: { kind: "sse", events: openAiChatStream({ usage: false }).events, after: "hold" },
      end: "abort",
      note: "SSE chunks, then silence (the SDK's timeout stops at the headers); the job's signal aborts"
    },
    sdk: "DOMException",
    errorClass: "cancelled"
  }),
  o("stream: 429 before the first event", {
    stream: true,
    scenario: reply(
      "429 type tokens, retry-after 3",
      json(429, openAiError("Rate limit reached.", "tokens", "rate_limit_exceeded"), { "retry-after": "3" })
    ),
    sdk: "RateLimitError",
    errorClass: "rate_limited",
    retryAfterMs: 3_000
  }),
  o("responses: 429 rate limit", {
    api: "responses",
    scenario: reply(
      "429 type requests, retry-after 4",
      json(429, openAiError("Rate limit reached.", "requests", "rate_limit_exceeded"), { "retry-after": "4" })
    ),
    sdk: "RateLimitError",
    errorClass: "rate_limited",
    retryAfterMs: 4_000
  }),
  o("responses: 400 context_length_exceeded", {
    api: "responses",
    scenario: reply(
      "400 code context_length_exceeded",
      json(
        400,
        openAiError(
          "Your input exceeds the context window of this model.",
          "invalid_request_error",
          "context_length_exceeded",
          "input"
        )
      )
    ),
    sdk: "BadRequestError",
    errorClass: "context_length"
  }),
  o("responses: incomplete, max_output_tokens", {
    api: "responses",
    scenario: reply("200, status incomplete, reason max_output_tokens", json(200, openAiResponse("incomplete"))),
    sdk: "returned",
    finish: "max_output_tokens"
  }),
  // ---------------------------------------------------------------- Anthropic
  a("400 invalid_request_error", {
    scenario: reply(
      "400 type invalid_request_error",
      json(
        400,
        anthropicError("invalid_request_error", 'messages: roles must alternate between "user" and "assistant"')
      )
    ),
    sdk: "BadRequestError",
    errorClass: "invalid_request"
  }),
  a("400 prompt is too long", {
    scenario: reply(
      "400 type invalid_request_error, prompt too long",
      json(400, anthropicError("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"))
    ),
    sdk: "BadRequestError",
    errorClass: "context_length"
  }),
  a("400 credit balance is too low", {
    scenario: reply(
      "400 type invalid_request_error, low credit",
      json(
        400,
        anthropicError(
          "invalid_request_error",
          "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."
        )
      )
    ),
    sdk: "BadRequestError",
    errorClass: "quota_exhausted"
  }),
  a("400 a spend limit the owner set", {
    scenario: reply(
      "400 type invalid_request_error, specified API usage limits reached",
      json(
        400,
        anthropicError(
          "invalid_request_error",
          "You have reached your specified API usage limits. You will regain access on 2026-10-01 at 00:00 UTC."
        )
      )
    ),
    sdk: "BadRequestError",
    errorClass: "quota_exhausted"
  }),
  a("401 authentication_error (the key echoed)", {
    scenario: reply(
      "401 type authentication_error, message quotes the key",
      json(401, anthropicError("authentication_error", `invalid x-api-key: ${anthropicKey}`))
    ),
    sdk: "AuthenticationError",
    errorClass: "auth",
    secret: anthropicKey
  }),
  a("401 secret in an escaped JSON string", {
    scenario: reply(
      "401, body with an api_key field (the SDK stringifies the body)",
      json(401, {
        type: "error",
        error: { type: "authentication_error", message: "invalid credentials", api_key: 'p4ss"w0rd-value' }
      })
    ),
    sdk: "AuthenticationError",
    errorClass: "auth",
    secret: "w0rd-value"
  }),
  a("402 billing_error", {
    scenario: reply(
      "402 type billing_error",
      json(402, anthropicError("billing_error", "Your account has a billing issue."))
    ),
    sdk: "PaymentRequiredError",
    errorClass: "quota_exhausted"
  }),
  a("403 permission_error", {
    scenario: reply(
      "403 type permission_error",
      json(
        403,
        anthropicError("permission_error", "Your API key does not have permission to use the specified resource.")
      )
    ),
    sdk: "PermissionDeniedError",
    errorClass: "auth"
  }),
  a("404 not_found_error", {
    scenario: reply("404 type not_found_error", json(404, anthropicError("not_found_error", "model: claude-9"))),
    sdk: "NotFoundError",
    errorClass: "invalid_request"
  }),
  a("413 request_too_large", {
    scenario: reply(
      "413 type request_too_large",
      json(413, anthropicError("request_too_large", "Request exceeds the maximum allowed number of bytes."))
    ),
    sdk: "ContentTooLargeError",
    errorClass: "invalid_request"
  }),
  a("429 rate_limit_error, retry-after and anthropic-ratelimit-*", {
    scenario: reply(
      "429 type rate_limit_error, retry-after 12",
      json(
        429,
        anthropicError("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
        { ...anthropicRateHeaders, "retry-after": "12" }
      )
    ),
    sdk: "RateLimitError",
    errorClass: "rate_limited",
    retryAfterMs: 12_000
  }),
  a("429 with only anthropic-ratelimit-* headers", {
    scenario: reply(
      "429 type rate_limit_error, no retry-after; requests remaining 0, reset 20 s after the Date header",
      json(429, anthropicError("rate_limit_error", "Number of requests has exceeded your per-minute rate limit."), {
        ...anthropicRateHeaders,
        date: "Thu, 01 Jan 2026 00:00:10 GMT"
      })
    ),
    sdk: "RateLimitError",
    errorClass: "rate_limited",
    retryAfterMs: 20_000,
    rateLimit: {
      requests: { limit: 50, remaining: 0, resetMs: 20_000 },
      inputTokens: { limit: 30_000, remaining: 0, resetMs: 20_000 },
      outputTokens: { limit: 8_000, remaining: 8_000 }
    }
  }),
  a("429 enforced_spend_limit_reached (the tier's monthly spend cap)", {
    scenario: reply(
      "429 type rate_limit_error, details.error_code enforced_spend_limit_reached, no retry-after",
      json(
        429,
        {
          type: "error",
          error: {
            type: "rate_limit_error",
            message:
              "You have reached your API usage limits: your organization has crossed its monthly API usage threshold, set based on your organization's API tier. You will regain access on 2026-09-01 at 00:00 UTC.",
            details: { error_code: "enforced_spend_limit_reached" }
          },
          request_id: "req_018EeWyXxfu5pfWkrYcMdjWG"
        },
        { "request-id": "req_018EeWyXxfu5pfWkrYcMdjWG" }
      )
    ),
    // The SDK has its own subclass of RateLimitError for it.
    sdk: "EnforcedSpendLimitReachedError",
    errorClass: "quota_exhausted"
  }),
  a("500 api_error", {
    scenario: reply("500 type api_error", json(500, anthropicError("api_error", "Internal server error"))),
    sdk: "InternalServerError",
    errorClass: "server_error"
  }),
  a("504 timeout_error", {
    scenario: reply("504 type timeout_error", json(504, anthropicError("timeout_error", "Request timed out"))),
    sdk: "GatewayTimeoutError",
    errorClass: "timeout"
  }),
  a("529 overloaded_error", {
    scenario: reply("529 type overloaded_error", json(529, anthropicError("overloaded_error", "Overloaded"))),
    sdk: "OverloadedError",
    errorClass: "overloaded"
  }),
  a("client timeout (stall)", {
    scenario: { kind: "timeout" },
    sdk: "APIConnectionTimeoutError",
    errorClass: "timeout"
  }),
  a("user abort", { scenario: { kind: "abort" }, sdk: "APIUserAbortError", errorClass: "cancelled" }),
  a("connection reset", {
    scenario: reply("socket destroyed before a reply", { kind: "reset" }),
    sdk: "APIConnectionError",
    errorClass: "network"
  }),
  a("connection refused", { scenario: { kind: "refused" }, sdk: "APIConnectionError", errorClass: "network" }),
  a("stop_reason max_tokens", {
    scenario: reply("200, stop_reason max_tokens", json(200, anthropicMessage("max_tokens"))),
    sdk: "returned",
    finish: "max_tokens"
  }),
  a("stop_reason refusal", {
    scenario: reply("200, stop_reason refusal", json(200, anthropicMessage("refusal"))),
    sdk: "returned",
    finish: "refusal",
    errorClass: "content_filtered"
  }),
  a("stream: overloaded_error event mid-stream", {
    stream: true,
    scenario: reply("SSE message_start, then event: error overloaded_error", {
      kind: "sse",
      events: [
        ...anthropicStream({ end: false }).slice(0, 2),
        sse(anthropicError("overloaded_error", "Overloaded"), "error")
      ]
    }),
    sdk: "APIError",
    errorClass: "overloaded"
  }),
  a("stream: stop_reason max_tokens", {
    stream: true,
    scenario: reply("SSE ending with message_delta stop_reason max_tokens", {
      kind: "sse",
      events: [
        ...anthropicStream({ end: false }),
        sse(
          {
            type: "message_delta",
            delta: { stop_reason: "max_tokens", stop_sequence: null },
            usage: { output_tokens: 200 }
          },
          "message_delta"
        ),
        sse({ type: "message_stop" }, "message_stop")
      ]
    }),
    sdk: "returned",
    finish: "max_tokens"
  }),
  a("stream: stop_reason refusal", {
    stream: true,
    scenario: reply("SSE ending with message_delta stop_reason refusal", {
      kind: "sse",
      events: [
        ...anthropicStream({ end: false }),
        sse(
          {
            type: "message_delta",
            delta: { stop_reason: "refusal", stop_sequence: null },
            usage: { output_tokens: 3 }
          },
          "message_delta"
        ),
        sse({ type: "message_stop" }, "message_stop")
      ]
    }),
    sdk: "returned",
    finish: "refusal",
    errorClass: "content_filtered"
  }),
  a("stream: connection cut mid-stream", {
    stream: true,
    scenario: reply("SSE events, then the socket is destroyed", {
      kind: "sse",
      events: anthropicStream({ end: false }),
      after: "cut"
    }),
    sdk: "TypeError",
    errorClass: "network"
  }),
  a("stream: stall mid-stream, the job aborts", {
    stream: true,
    scenario: {
      kind: "stall",
      reply: { kind: "sse", events: anthropicStream({ end: false }), after: "hold" },
      end: "abort",
      note: "SSE events, then silence (the SDK's timeout stops at the headers); the job's signal aborts"
    },
    sdk: "DOMException",
    errorClass: "cancelled"
  }),
  a("stream: 529 before the first event", {
    stream: true,
    scenario: reply("529 type overloaded_error", json(529, anthropicError("overloaded_error", "Overloaded"))),
    sdk: "OverloadedError",
    errorClass: "overloaded"
  }),
  // ---------------------------------------------------------------- Gemini
  g("400 INVALID_ARGUMENT", {
    scenario: reply(
      "400 status INVALID_ARGUMENT",
      json(
        400,
        geminiError(400, "INVALID_ARGUMENT", 'Invalid JSON payload received. Unknown name "foo": Cannot find field.')
      )
    ),
    sdk: "ApiError",
    errorClass: "invalid_request"
  }),
  g("400 API key not valid (ErrorInfo API_KEY_INVALID)", {
    scenario: reply(
      "400 INVALID_ARGUMENT, ErrorInfo reason API_KEY_INVALID",
      json(
        400,
        geminiError(400, "INVALID_ARGUMENT", `API key not valid. Please pass a valid API key. key=${googleKey}`, [
          {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            reason: "API_KEY_INVALID",
            domain: "googleapis.com",
            metadata: { service: "generativelanguage.googleapis.com" }
          }
        ])
      )
    ),
    sdk: "ApiError",
    errorClass: "auth",
    secret: googleKey
  }),
  g("400 input token count exceeds the maximum", {
    scenario: reply(
      "400 INVALID_ARGUMENT, token count",
      json(
        400,
        geminiError(
          400,
          "INVALID_ARGUMENT",
          "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
        )
      )
    ),
    sdk: "ApiError",
    errorClass: "context_length"
  }),
  g("400 FAILED_PRECONDITION (location or billing)", {
    scenario: reply(
      "400 status FAILED_PRECONDITION",
      json(400, geminiError(400, "FAILED_PRECONDITION", "User location is not supported for the API use."))
    ),
    sdk: "ApiError",
    errorClass: "invalid_request"
  }),
  g("401 UNAUTHENTICATED", {
    scenario: reply(
      "401 status UNAUTHENTICATED",
      json(401, geminiError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials."))
    ),
    sdk: "ApiError",
    errorClass: "auth"
  }),
  g("403 PERMISSION_DENIED", {
    scenario: reply(
      "403 status PERMISSION_DENIED",
      json(403, geminiError(403, "PERMISSION_DENIED", "You do not have permission to access the tuned model."))
    ),
    sdk: "ApiError",
    errorClass: "auth"
  }),
  g("404 NOT_FOUND", {
    scenario: reply(
      "404 status NOT_FOUND",
      json(404, geminiError(404, "NOT_FOUND", "models/gemini-9 is not found for API version v1beta."))
    ),
    sdk: "ApiError",
    errorClass: "invalid_request"
  }),
  g("409 ABORTED (concurrency conflict)", {
    scenario: reply(
      "409 status ABORTED",
      json(409, geminiError(409, "ABORTED", "The operation was aborted due to a concurrency conflict."))
    ),
    sdk: "ApiError",
    errorClass: "server_error"
  }),
  g("413 payload too large", {
    scenario: reply(
      "413 status INVALID_ARGUMENT",
      json(413, geminiError(413, "INVALID_ARGUMENT", "Request payload size exceeds the limit: 20971520 bytes."))
    ),
    sdk: "ApiError",
    errorClass: "invalid_request"
  }),
  g("429 RESOURCE_EXHAUSTED, RetryInfo 37s", {
    scenario: reply(
      "429 RESOURCE_EXHAUSTED, QuotaFailure and RetryInfo retryDelay 37s",
      json(
        429,
        geminiError(
          429,
          "RESOURCE_EXHAUSTED",
          "You exceeded your current quota, please check your plan and billing details.",
          [quotaFailure, retryInfo("37s")]
        )
      )
    ),
    sdk: "ApiError",
    errorClass: "rate_limited",
    retryAfterMs: 37_000,
    rateLimit: { retryAfterMs: 37_000, requests: { remaining: 0 } }
  }),
  g("429 RESOURCE_EXHAUSTED, RetryInfo 1.5s", {
    scenario: reply(
      "429 RESOURCE_EXHAUSTED, RetryInfo retryDelay 1.5s",
      json(
        429,
        geminiError(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).", [retryInfo("1.5s")])
      )
    ),
    sdk: "ApiError",
    errorClass: "rate_limited",
    retryAfterMs: 1_500
  }),
  g("429 without RetryInfo", {
    scenario: reply(
      "429 RESOURCE_EXHAUSTED, no details",
      json(429, geminiError(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."))
    ),
    sdk: "ApiError",
    errorClass: "rate_limited"
  }),
  g("500 INTERNAL", {
    scenario: reply("500 status INTERNAL", json(500, geminiError(500, "INTERNAL", "An internal error has occurred."))),
    sdk: "ApiError",
    errorClass: "server_error"
  }),
  g("503 UNAVAILABLE (model overloaded)", {
    scenario: reply(
      "503 status UNAVAILABLE",
      json(503, geminiError(503, "UNAVAILABLE", "The model is overloaded. Please try again later."))
    ),
    sdk: "ApiError",
    errorClass: "overloaded"
  }),
  g("504 DEADLINE_EXCEEDED", {
    scenario: reply(
      "504 status DEADLINE_EXCEEDED",
      json(504, geminiError(504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."))
    ),
    sdk: "ApiError",
    errorClass: "timeout"
  }),
  g("client timeout (stall): the wrapper's ClientTimeout", {
    scenario: { kind: "timeout" },
    sdk: "ClientTimeout",
    errorClass: "timeout"
  }),
  g("user abort", { scenario: { kind: "abort" }, sdk: "DOMException", errorClass: "cancelled" }),
  g("connection reset", {
    scenario: reply("socket destroyed before a reply", { kind: "reset" }),
    sdk: "TypeError",
    errorClass: "network"
  }),
  g("connection refused", { scenario: { kind: "refused" }, sdk: "TypeError", errorClass: "network" }),
  g("finishReason MAX_TOKENS", {
    scenario: reply("200, finishReason MAX_TOKENS", json(200, geminiResponse("MAX_TOKENS"))),
    sdk: "returned",
    finish: "MAX_TOKENS"
  }),
  g("finishReason SAFETY", {
    scenario: reply("200, finishReason SAFETY", json(200, geminiResponse("SAFETY"))),
    sdk: "returned",
    finish: "SAFETY",
    errorClass: "content_filtered"
  }),
  g("finishReason PROHIBITED_CONTENT", {
    scenario: reply("200, finishReason PROHIBITED_CONTENT", json(200, geminiResponse("PROHIBITED_CONTENT"))),
    sdk: "returned",
    finish: "PROHIBITED_CONTENT",
    errorClass: "content_filtered"
  }),
  g("prompt blocked (promptFeedback.blockReason SAFETY)", {
    scenario: reply(
      "200, no candidates, promptFeedback blockReason SAFETY",
      json(200, {
        promptFeedback: { blockReason: "SAFETY" },
        usageMetadata: { promptTokenCount: 10, totalTokenCount: 10 },
        modelVersion: "gemini-2.5-flash"
      })
    ),
    sdk: "returned",
    finish: "SAFETY",
    errorClass: "content_filtered"
  }),
  g("stream: finishReason SAFETY", {
    stream: true,
    scenario: reply("SSE chunks, the last with finishReason SAFETY", {
      kind: "sse",
      events: [
        ...geminiStream({ end: false }),
        sse({
          candidates: [{ content: { role: "model", parts: [{ text: "" }] }, finishReason: "SAFETY", index: 0 }],
          usageMetadata: { promptTokenCount: 600, candidatesTokenCount: 9, totalTokenCount: 609 },
          modelVersion: "gemini-2.5-flash"
        })
      ]
    }),
    sdk: "returned",
    finish: "SAFETY",
    errorClass: "content_filtered"
  }),
  g("stream: 429 before the first chunk", {
    stream: true,
    scenario: reply(
      "429 RESOURCE_EXHAUSTED, RetryInfo 20s",
      json(429, geminiError(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted.", [retryInfo("20s")]))
    ),
    sdk: "ApiError",
    errorClass: "rate_limited",
    retryAfterMs: 20_000
  }),
  g("stream: stall mid-stream, the SDK's timeout fires", {
    stream: true,
    scenario: {
      kind: "stall",
      reply: { kind: "sse", events: geminiStream({ end: false }), after: "hold" },
      end: "timeout",
      note: "SSE chunks, then silence; the SDK's timeout covers the body"
    },
    sdk: "ClientTimeout",
    errorClass: "timeout"
  }),
  g("stream: stall mid-stream, the job aborts", {
    stream: true,
    scenario: {
      kind: "stall",
      reply: { kind: "sse", events: geminiStream({ end: false }), after: "hold" },
      end: "abort",
      note: "SSE chunks, then silence; the job's signal aborts"
    },
    sdk: "DOMException",
    errorClass: "cancelled"
  }),
  g("stream: connection cut mid-stream", {
    stream: true,
    scenario: reply("SSE chunks, then the socket is destroyed", {
      kind: "sse",
      events: geminiStream({ end: false }),
      after: "cut"
    }),
    sdk: "TypeError",
    errorClass: "network"
  })
]

const providerNames: Record<Provider, string> = { openai: "OpenAI", anthropic: "Anthropic", gemini: "Gemini" }
const apiNames: Record<Api, string> = {
  chat: "chat.completions.create",
  responses: "responses.create",
  messages: "messages.create",
  generateContent: "models.generateContent"
}

const scenarioText = (s: Scenario): string => {
  switch (s.kind) {
    case "reply":
      return s.note
    case "refused":
      return "nothing listens on the port"
    case "timeout":
      return "no reply; the SDK's timeout fires"
    case "abort":
      return "no reply; the job's signal aborts"
    case "stall":
      return s.note
  }
}

const cell = (s: string): string => s.replace(/\|/g, "\\|")

/** A Markdown table with its columns padded, as the repository's formatter writes them. */
const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths = header.map((h, i) => Math.max(3, h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)]
}

/** The Markdown page of the table: one section per provider, one row per case. */
export const renderCases = (rows: ReadonlyArray<Case>): string => {
  const out: Array<string> = [
    "# Provider cases",
    "",
    "<!-- Generated from packages/providers/test/cases.ts by Cases.test.ts: UPDATE_PROVIDER_CASES=1 npx vitest run packages/providers/test/Cases.test.ts -->",
    "",
    "Each row is played through the real SDK (`openai`, `@anthropic-ai/sdk`, `@google/genai`), wrapped by",
    "`@slowcall/providers`, against a local fake provider that answers as the provider documents. What the SDK threw",
    "(or returned) goes to `normalize` from `@slowcall/core`; the test checks the class, the retry delay, and that no",
    "echoed secret survives in the evidence. A row with class `-` is a normal return.",
    "",
    `${rows.length} cases.`,
    ""
  ]
  for (const p of ["openai", "anthropic", "gemini"] as const) {
    const mine = rows.filter((r) => r.provider === p)
    out.push(`## ${providerNames[p]} (${mine.length})`, "")
    const header = ["call", "case", "the fake answers", "the SDK", "class", "retry after", "finish"]
    const body = mine.map((r) => [
      `\`${apiNames[r.api]}\`${r.stream ? " (stream)" : ""}`,
      cell(r.title),
      cell(scenarioText(r.scenario)),
      r.sdk === "returned" ? "returns" : `\`${r.sdk}\``,
      r.errorClass ? `\`${r.errorClass}\`` : "-",
      r.retryAfterMs === undefined ? "" : `${r.retryAfterMs} ms`,
      r.finish ?? ""
    ])
    out.push(...table(header, body))
    out.push("")
  }
  return `${out.join("\n").trimEnd()}\n`
}
