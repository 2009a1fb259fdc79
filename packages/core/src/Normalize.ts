/**
 * Error normalisation: any thrown value (HTTP responses from fetch wrappers and vendor SDKs, Node and undici
 * network errors, aborts and timeouts, Effect causes) becomes one stable `ErrorClass`, a retry hint and redacted
 * evidence. Retry decisions, dead-letter groups and dashboards read the class, never a vendor string.
 *
 * @since 0.1.0
 */
import { Cause, Effect } from "effect"
import type { ErrorClass } from "./ErrorClass.js"
import { policy } from "./ErrorClass.js"
import { withNow } from "./internal/now.js"
import * as RateLimit from "./RateLimit.js"
import * as Redact from "./Redact.js"

/**
 * The normalised view of a failure. `retryable` always equals `policy(errorClass).retryable`; `retryAfterMs` is
 * present only when the server said how long to wait (Retry-After, retry-after-ms, or a vendor retry delay) and is
 * never negative; `evidence` is redacted and at most `maxEvidenceLength` characters.
 *
 * @since 0.1.0
 * @category models
 */
export interface Normalized {
  readonly errorClass: ErrorClass
  readonly retryable: boolean
  readonly retryAfterMs?: number
  readonly status?: number
  /**
   * What the failed reply said about the caller's rate limits (its `retry-after`, and per dimension the limit, what
   * remains and when it resets: see `RateLimit`), when it said anything: the response headers of OpenAI and
   * Anthropic errors, the error details of Gemini's.
   *
   * @since 0.4.0
   */
  readonly rateLimit?: RateLimit.RateLimitInfo
  readonly evidence: string
}

/**
 * Options of `normalize`. `nowMs` is the current time, needed only to turn a Retry-After HTTP-date into a delay;
 * without it the response's own `Date` header serves, and without either the date hint is dropped.
 *
 * @since 0.1.0
 * @category models
 */
export interface NormalizeOptions {
  readonly nowMs?: number
}

/**
 * The longest evidence string `normalize` and `truncate` produce.
 *
 * @since 0.1.0
 * @category models
 */
export const maxEvidenceLength = 2_000

type Rec = { readonly [key: string]: unknown }

const isRecord = (u: unknown): u is Rec => typeof u === "object" && u !== null
const str = (u: unknown): string | undefined => (typeof u === "string" && u.length > 0 ? u : undefined)

// ---------------------------------------------------------------------------------------------------------------
// Redaction
// ---------------------------------------------------------------------------------------------------------------

/**
 * Removes credentials from a string: every secret format of `Redact.ts` (keys and tokens of the main model and cloud
 * providers, credentials in URLs, JWTs, private keys, and the values of fields and headers named like keys,
 * passwords, secrets, tokens or authorization). What remains keeps its shape, so evidence stays readable.
 * Idempotent. The same function as `Redact.redact`, kept here because evidence is built here.
 *
 * @since 0.1.0
 * @category combinators
 */
export const redact: (s: string) => string = Redact.redact

/**
 * Cuts a string to at most `max` characters (default `maxEvidenceLength`), marking the cut with an ellipsis.
 *
 * @since 0.1.0
 * @category combinators
 */
export const truncate = (s: string, max: number = maxEvidenceLength): string =>
  s.length <= max ? s : `${s.slice(0, Math.max(0, max - 1))}…`

// ---------------------------------------------------------------------------------------------------------------
// Vendor bodies
// ---------------------------------------------------------------------------------------------------------------

interface Verdict {
  readonly errorClass: ErrorClass
  readonly detail: string
  /** What the body says about rate limits (Gemini's `RetryInfo` and `QuotaFailure` details). */
  readonly rateLimit?: RateLimit.RateLimitInfo
  readonly status?: number
}

/**
 * Anthropic answers an account without credit with a 400 invalid_request_error and the first messages; an account at
 * a spend limit its owner set with a 400 invalid_request_error "You have reached your specified (workspace) API usage
 * limits"; an organisation at its tier's monthly cap with a 429 rate_limit_error "You have reached your API usage
 * limits" (with `details.error_code`, below).
 */
const creditMessage =
  /credit balance is too low|purchase credits|billing details|reached your (?:specified (?:workspace )?)?API usage limits/i

/**
 * Anthropic's spend caps, named by `error.details.error_code` on a 429 whose type is `rate_limit_error` and which
 * carries no `retry-after`: access is paused until the month ends or an operator raises the limit, so it is
 * `quota_exhausted`, never a rate limit to wait out.
 */
const spendCapCodes: ReadonlySet<string> = new Set(["enforced_spend_limit_reached", "contract_spend_limit_reached"])

const contextLengthMessage =
  /prompt is too long|maximum context length|context[ _-]length|context window|too many (?:input )?tokens|exceeds the maximum number of tokens|input token count|reduce the length of the messages/i

/**
 * A table's own entry for a key the error supplied, or undefined: a key such as `constructor` or `__proto__` in a
 * provider's body must not find what every object inherits.
 */
const lookup = (table: { readonly [key: string]: ErrorClass }, key: string): ErrorClass | undefined =>
  Object.hasOwn(table, key) ? table[key] : undefined

const openAiCodes: { readonly [code: string]: ErrorClass } = {
  rate_limit_exceeded: "rate_limited",
  tokens: "rate_limited",
  requests: "rate_limited",
  insufficient_quota: "quota_exhausted",
  billing_hard_limit_reached: "quota_exhausted",
  // Hard spend limits an organisation or project owner set: a 429 with one of these codes.
  organization_spend_limit_exceeded: "quota_exhausted",
  project_spend_limit_exceeded: "quota_exhausted",
  context_length_exceeded: "context_length",
  string_above_max_length: "context_length",
  content_filter: "content_filtered",
  content_policy_violation: "content_filtered",
  server_error: "server_error",
  invalid_api_key: "auth",
  model_not_found: "invalid_request",
  invalid_request_error: "invalid_request"
}

const vendorTypes: { readonly [type: string]: ErrorClass } = {
  // Anthropic error types
  overloaded_error: "overloaded",
  rate_limit_error: "rate_limited",
  invalid_request_error: "invalid_request",
  authentication_error: "auth",
  permission_error: "auth",
  api_error: "server_error",
  not_found_error: "invalid_request",
  request_too_large: "invalid_request",
  timeout_error: "timeout",
  billing_error: "quota_exhausted",
  // OpenAI error types
  insufficient_quota: "quota_exhausted",
  server_error: "server_error",
  rate_limit_exceeded: "rate_limited",
  tokens: "rate_limited",
  requests: "rate_limited"
}

const googleStatuses: { readonly [status: string]: ErrorClass } = {
  RESOURCE_EXHAUSTED: "rate_limited",
  INVALID_ARGUMENT: "invalid_request",
  FAILED_PRECONDITION: "invalid_request",
  OUT_OF_RANGE: "invalid_request",
  NOT_FOUND: "invalid_request",
  UNAVAILABLE: "overloaded",
  DEADLINE_EXCEEDED: "timeout",
  PERMISSION_DENIED: "auth",
  UNAUTHENTICATED: "auth",
  INTERNAL: "server_error",
  ABORTED: "server_error",
  UNKNOWN: "server_error",
  CANCELLED: "cancelled"
}

const safetyReasons = new Set(["SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "OTHER_SAFETY"])

const parseJson = (s: string): unknown => {
  const t = s.trim()
  if (!(t.startsWith("{") || t.startsWith("["))) return undefined
  try {
    return JSON.parse(t)
  } catch {
    return undefined
  }
}

/**
 * A response that came back but was withheld: OpenAI's `finish_reason: "content_filter"` or a `refusal`, a
 * Responses API answer incomplete for `content_filter`, Anthropic's `stop_reason: "refusal"` (on the message or a
 * stream's `message_delta`).
 */
const refusalVerdict = (x: Rec): Verdict | undefined => {
  if (Array.isArray(x.choices)) {
    for (const c of x.choices) {
      if (!isRecord(c)) continue
      if (c.finish_reason === "content_filter")
        return { errorClass: "content_filtered", detail: "finish_reason content_filter" }
      const refusal = isRecord(c.message)
        ? str(c.message.refusal)
        : isRecord(c.delta)
          ? str(c.delta.refusal)
          : undefined
      if (refusal !== undefined) return { errorClass: "content_filtered", detail: `refusal: ${refusal}` }
    }
  }
  if (isRecord(x.incomplete_details) && x.incomplete_details.reason === "content_filter") {
    return { errorClass: "content_filtered", detail: "incomplete: content_filter" }
  }
  const stop = str(x.stop_reason) ?? (isRecord(x.delta) ? str(x.delta.stop_reason) : undefined)
  if (stop === "refusal") return { errorClass: "content_filtered", detail: "stop_reason refusal" }
  return undefined
}

const googleVerdict = (x: Rec): Verdict | undefined => {
  const blocked = isRecord(x.promptFeedback) ? str(x.promptFeedback.blockReason) : undefined
  if (blocked !== undefined) return { errorClass: "content_filtered", detail: `prompt blocked: ${blocked}` }
  if (Array.isArray(x.candidates)) {
    for (const c of x.candidates) {
      const reason = isRecord(c) ? str(c.finishReason) : undefined
      if (reason !== undefined && safetyReasons.has(reason)) {
        return { errorClass: "content_filtered", detail: `finishReason ${reason}` }
      }
    }
  }
  return undefined
}

/** The `ErrorInfo` reasons of a Google error's details (`API_KEY_INVALID`, ...). */
const googleReasons = (details: unknown): ReadonlyArray<string> => {
  const reasons: Array<string> = []
  if (Array.isArray(details)) {
    for (const d of details) {
      const reason = isRecord(d) ? str(d.reason) : undefined
      if (reason !== undefined) reasons.push(reason)
    }
  }
  return reasons
}

/**
 * Classifies a vendor error body: OpenAI (`{error:{type,code,message}}`), Anthropic
 * (`{type:"error",error:{type,message}}`), Gemini (`{error:{code,status,message,details}}`), or the inner error
 * object alone (as some SDKs expose it), and Gemini responses blocked for safety.
 */
const vendorVerdict = (body: unknown): Verdict | undefined => {
  const x = typeof body === "string" ? parseJson(body) : body
  if (!isRecord(x)) return undefined
  const blocked = googleVerdict(x) ?? refusalVerdict(x)
  if (blocked) return blocked
  const inner: Rec = isRecord(x.error) ? x.error : x
  const type = str(inner.type)
  const code = str(inner.code)
  const gStatus = str(inner.status)
  const message = str(inner.message) ?? str(x.message) ?? ""
  const numericCode = typeof inner.code === "number" ? inner.code : undefined
  const label = [type, code, gStatus].filter((s) => s !== undefined).join("/")
  const detail = label.length > 0 ? `${label}: ${message}` : message
  const reasons = googleReasons(inner.details)
  const rateLimit = RateLimit.fromGoogleDetails(inner.details)
  const extra = {
    ...(rateLimit === undefined ? {} : { rateLimit }),
    ...(numericCode !== undefined && numericCode >= 100 && numericCode < 600 ? { status: numericCode } : {})
  }

  if ((type === "invalid_request_error" || type === "rate_limit_error") && creditMessage.test(message)) {
    return { errorClass: "quota_exhausted", detail, ...extra }
  }
  const errorCode = isRecord(inner.details) ? str(inner.details.error_code) : undefined
  if (errorCode !== undefined && spendCapCodes.has(errorCode)) {
    return { errorClass: "quota_exhausted", detail: `${detail} (${errorCode})`, ...extra }
  }
  const byCode = code !== undefined ? lookup(openAiCodes, code) : undefined
  if (byCode !== undefined && byCode !== "invalid_request") return { errorClass: byCode, detail, ...extra }
  if (reasons.includes("API_KEY_INVALID") || /api key not valid/i.test(message)) {
    return { errorClass: "auth", detail, ...extra }
  }
  const invalidish =
    type === "invalid_request_error" || gStatus === "INVALID_ARGUMENT" || type === "request_too_large" || !label
  if (invalidish && contextLengthMessage.test(message)) return { errorClass: "context_length", detail, ...extra }
  const byType = type !== undefined ? lookup(vendorTypes, type) : undefined
  if (byType !== undefined) return { errorClass: byType, detail, ...extra }
  const byStatus = gStatus !== undefined ? lookup(googleStatuses, gStatus) : undefined
  if (byStatus !== undefined) return { errorClass: byStatus, detail, ...extra }
  if (byCode !== undefined) return { errorClass: byCode, detail, ...extra }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------------
// HTTP statuses, network codes, names
// ---------------------------------------------------------------------------------------------------------------

const fromStatus = (status: number): ErrorClass | undefined => {
  switch (status) {
    case 400:
    case 404:
    case 405:
    case 410:
    case 413:
    case 415:
    case 422:
      return "invalid_request"
    case 401:
    case 403:
      return "auth"
    case 402:
      return "quota_exhausted"
    case 408:
      return "timeout"
    case 409:
    case 425:
      return "server_error"
    case 429:
      return "rate_limited"
    case 499:
      return "cancelled"
    case 500:
    case 501:
    case 502:
      return "server_error"
    case 503:
    case 529:
      return "overloaded"
    case 504:
    case 524:
      return "timeout"
    default:
      if (status >= 400 && status < 500) return "invalid_request"
      if (status >= 500 && status < 600) return "server_error"
      return undefined
  }
}

const timeoutCodes = new Set([
  "ETIMEDOUT",
  "ESOCKETTIMEDOUT",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "ERR_HTTP2_STREAM_CANCEL_TIMEOUT"
])
const networkCodes = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EAI_AGAIN",
  "ENOTFOUND",
  "EPIPE",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EPROTO",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_DESTROYED",
  "UND_ERR_REQ_CONTENT_LENGTH_MISMATCH",
  "UND_ERR_RES_CONTENT_LENGTH_MISMATCH",
  "ERR_STREAM_PREMATURE_CLOSE",
  "ERR_HTTP2_STREAM_ERROR",
  "ERR_HTTP2_GOAWAY_SESSION"
])
const cancelCodes = new Set(["ABORT_ERR", "UND_ERR_ABORTED"])
const timeoutNames = new Set(["TimeoutError", "TimeoutException", "APIConnectionTimeoutError", "ConnectTimeoutError"])
const cancelNames = new Set(["AbortError", "InterruptedException", "APIUserAbortError", "CancelledError"])
const networkNames = new Set(["APIConnectionError", "FetchError", "SocketError"])
const ownTags: { readonly [tag: string]: ErrorClass } = {
  LeaseLost: "lease_lost",
  InvalidInput: "invalid_input",
  UnknownJobVersion: "unknown_job_version"
}

// ---------------------------------------------------------------------------------------------------------------
// Walking the error
// ---------------------------------------------------------------------------------------------------------------

interface Facts {
  status: number | undefined
  statusText: string | undefined
  headers: Array<unknown>
  bodies: Array<unknown>
  codes: Array<string>
  names: Array<string>
  lines: Array<string>
}

const statusOf = (u: unknown): number | undefined => {
  const n = typeof u === "number" ? u : typeof u === "string" && /^\d{3}$/.test(u) ? Number(u) : undefined
  return n !== undefined && Number.isInteger(n) && n >= 100 && n < 600 ? n : undefined
}

const maxDepth = 6

const constructorName = (e: Error): string | undefined => {
  const ctor: unknown = Object.getPrototypeOf(e)?.constructor
  const n = typeof ctor === "function" ? ctor.name : undefined
  return n !== undefined && n.length > 0 && n !== "Error" ? n : undefined
}

const collect = (root: unknown): Facts => {
  const facts: Facts = {
    status: undefined,
    statusText: undefined,
    headers: [],
    bodies: [],
    codes: [],
    names: [],
    lines: []
  }
  const seen = new Set<unknown>()
  const visit = (u: unknown, depth: number): void => {
    if (depth > maxDepth || seen.has(u)) return
    if (typeof u === "string") {
      facts.lines.push(u)
      facts.bodies.push(u)
      return
    }
    if (!isRecord(u)) {
      if (u !== undefined && u !== null) facts.lines.push(String(u))
      return
    }
    seen.add(u)
    const name = str(u._tag) ?? str(u.name) ?? (u instanceof Error ? u.constructor.name : undefined)
    const tag = str(u._tag)
    if (tag !== undefined && tag !== name) facts.names.push(tag)
    if (name !== undefined) facts.names.push(name)
    // A tagged error may also carry a standard `name` (TimeoutError, AbortError) that says more than its tag.
    const ownName = str(u.name)
    if (ownName !== undefined && ownName !== name) facts.names.push(ownName)
    // OpenAI's error classes leave `name` as "Error": the class itself (APIUserAbortError,
    // APIConnectionTimeoutError, ...) is the only signal, so the constructor's name counts as a name too.
    const ctorName = u instanceof Error ? constructorName(u) : undefined
    if (ctorName !== undefined && ctorName !== name) facts.names.push(ctorName)
    const code = str(u.code) ?? str(u.errno)
    if (code !== undefined) facts.codes.push(code)
    const message = str(u.message)
    // The Gemini SDK keeps the provider's error body as a JSON string in `message`.
    if (message !== undefined && parseJson(message) !== undefined) facts.bodies.push(message)
    const status = statusOf(u.status) ?? statusOf(u.statusCode)
    if (facts.status === undefined && status !== undefined) facts.status = status
    if (facts.statusText === undefined) facts.statusText = str(u.statusText)
    // SDK errors keep the response headers as `headers`; the AI SDK's `APICallError` as `responseHeaders`.
    for (const h of [u.headers, u.responseHeaders]) if (isRecord(h)) facts.headers.push(h)
    const line = [name, code !== undefined && !message?.includes(code) ? `[${code}]` : undefined, message]
      .filter((s) => s !== undefined)
      .join(" ")
    if (line.length > 0 && (message !== undefined || code !== undefined || depth === 0)) facts.lines.push(line)
    // The raw `responseBody` (the AI SDK's `APICallError`) before `data`, its parse, which may have dropped fields
    // such as Anthropic's `error.details`.
    for (const key of ["body", "responseBody", "data", "error"] as const) {
      const b = u[key]
      if (b === undefined || b === null) continue
      facts.bodies.push(b)
      if (typeof b === "string" && parseJson(b) === undefined) facts.lines.push(`body: ${b.slice(0, 500)}`)
    }
    // The thrown value may itself be a vendor body, or an SDK error exposing the inner error's fields.
    facts.bodies.push(u)
    if (isRecord(u.response)) visit(u.response, depth + 1)
    if (u.cause !== undefined) visit(u.cause, depth + 1)
    if (u.reason !== undefined && isRecord(u.reason)) visit(u.reason, depth + 1)
    if (Array.isArray(u.errors)) for (const e of u.errors) visit(e, depth + 1)
    if (isRecord(u.error) && u.error instanceof Error) visit(u.error, depth + 1)
  }
  visit(root, 0)
  return facts
}

const result = (
  errorClass: ErrorClass,
  evidence: string,
  retryAfterMs?: number,
  status?: number,
  rateLimit?: RateLimit.RateLimitInfo
): Normalized => ({
  errorClass,
  retryable: policy(errorClass).retryable,
  ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  ...(status === undefined ? {} : { status }),
  ...(rateLimit === undefined ? {} : { rateLimit }),
  evidence: truncate(redact(evidence))
})

const causeEvidence = (cause: Cause.Cause<unknown>): string => Cause.pretty(cause, { renderErrorCause: true })

/**
 * Maps any failure to its `ErrorClass` with a retry hint and redacted, truncated evidence. Total: never throws;
 * anything unrecognised is `unknown`. The most specific signal wins, in this order:
 *
 * 1. an Effect `Cause` made only of interruptions -> `cancelled` (other causes are squashed and classified);
 * 2. a vendor error body (OpenAI, Anthropic, Gemini; from `body`, `responseBody`, `data`, `error`, a JSON `message`
 *    as the Gemini SDK keeps it, or the value itself, as a string or parsed) -> its class, so a spend cap is
 *    `quota_exhausted`, never `rate_limited`, although its status is 429 (OpenAI `insufficient_quota`,
 *    `billing_hard_limit_reached`, `organization_spend_limit_exceeded`, `project_spend_limit_exceeded`; Anthropic
 *    `rate_limit_error` with `details.error_code` `enforced_spend_limit_reached`); a generic invalid-request body on
 *    401/403 is `auth`; a response the provider withheld (content filter, refusal, safety) is `content_filtered`;
 * 3. the HTTP status (`status`, `statusCode`, `response.status`);
 * 4. timeouts anywhere in the `cause` / `errors` chain (ETIMEDOUT, undici timeouts, TimeoutError,
 *    TimeoutException) -> `timeout`;
 * 5. network codes in the chain (ECONNRESET, ECONNREFUSED, EAI_AGAIN, EPIPE, UND_ERR_SOCKET, ...) -> `network`;
 * 6. aborts and interruptions (AbortError, UND_ERR_ABORTED, APIUserAbortError) -> `cancelled`; slowcall's own
 *    errors by tag.
 *
 * Names are read from `_tag`, `name` and the error's class, since some SDKs (OpenAI) leave `name` as "Error".
 *
 * `rateLimit` is what the reply said about rate limits (`RateLimit.fromHeaders` of the error's `headers` or
 * `responseHeaders`, completed by Gemini's `RetryInfo` and `QuotaFailure` details). `retryAfterMs` is its wait
 * (`RateLimit.waitMs`): `retry-after-ms`, `Retry-After` (seconds or HTTP-date, see `NormalizeOptions`), else the
 * reset of an exhausted limit (`x-ratelimit-reset-*`, `anthropic-ratelimit-*-reset`, where the matching `remaining` is
 * 0), else the vendor retry delay in the body.
 *
 * @since 0.1.0
 * @category constructors
 */
export const normalize = (error: unknown, options: NormalizeOptions = {}): Normalized => {
  try {
    return classifyError(error, options)
  } catch {
    // A getter that throws or a proxy that refuses inspection: keep the failure, classify it as unknown.
    return result("unknown", "unclassifiable error: inspecting it threw")
  }
}

const classifyError = (error: unknown, options: NormalizeOptions): Normalized => {
  if (Cause.isCause(error)) {
    if (Cause.isInterruptedOnly(error)) return result("cancelled", `interrupted\n${causeEvidence(error)}`)
    return normalize(Cause.squash(error), options)
  }
  const facts = collect(error)
  let fromHeaders: RateLimit.RateLimitInfo | undefined
  for (const h of facts.headers) {
    fromHeaders = RateLimit.fromHeaders(h, { nowMs: options.nowMs })
    if (fromHeaders !== undefined) break
  }
  let verdict: Verdict | undefined
  for (const b of facts.bodies) {
    verdict = vendorVerdict(b)
    if (verdict) break
  }
  const status = facts.status ?? verdict?.status
  const rateLimit = RateLimit.merge(fromHeaders, verdict?.rateLimit)
  const retryAfterMs = RateLimit.waitMs(fromHeaders) ?? verdict?.rateLimit?.retryAfterMs
  const evidenceParts: Array<string> = []
  if (status !== undefined) evidenceParts.push(`HTTP ${status}${facts.statusText ? ` ${facts.statusText}` : ""}`)
  if (verdict && verdict.detail.length > 0) evidenceParts.push(verdict.detail)
  for (const line of facts.lines) if (!evidenceParts.includes(line)) evidenceParts.push(line)
  if (retryAfterMs !== undefined) evidenceParts.push(`retry after ${retryAfterMs} ms`)
  const evidence = evidenceParts.length > 0 ? evidenceParts.join("; ") : describe(error)

  const classify = (): ErrorClass => {
    // A generic "invalid request" body on 401/403 (OpenAI sends type invalid_request_error with a bad key) is a
    // credential problem: the status is the more specific signal.
    if (verdict?.errorClass === "invalid_request" && (status === 401 || status === 403)) return "auth"
    // OpenAI answers an overloaded engine with 503 and a generic server_error body.
    if (verdict?.errorClass === "server_error" && (status === 503 || status === 529)) return "overloaded"
    if (verdict) return verdict.errorClass
    const byStatus = status !== undefined ? fromStatus(status) : undefined
    if (byStatus !== undefined) return byStatus
    if (facts.codes.some((c) => timeoutCodes.has(c)) || facts.names.some((n) => timeoutNames.has(n))) {
      return "timeout"
    }
    if (facts.codes.some((c) => networkCodes.has(c)) || facts.names.some((n) => networkNames.has(n))) {
      return "network"
    }
    if (facts.codes.some((c) => cancelCodes.has(c)) || facts.names.some((n) => cancelNames.has(n))) {
      return "cancelled"
    }
    for (const n of facts.names) {
      const own = lookup(ownTags, n)
      if (own !== undefined) return own
    }
    const first = facts.lines[0] ?? ""
    if (/\bfetch failed\b|socket hang up|network error/i.test(first)) return "network"
    if (/\btimed? ?out\b/i.test(first)) return "timeout"
    return "unknown"
  }
  return result(classify(), evidence, retryAfterMs, status, rateLimit)
}

const describe = (u: unknown): string => {
  if (u === undefined) return "undefined"
  try {
    return typeof u === "string" ? u : (JSON.stringify(u) ?? String(u))
  } catch {
    return String(u)
  }
}

/**
 * `normalize` with the current time read from Effect's `Clock`, so a Retry-After HTTP-date becomes a delay
 * measured against the same clock that schedules the retry (a `TestClock` in tests).
 *
 * @since 0.1.0
 * @category constructors
 */
export const normalizeWithClock = (error: unknown): Effect.Effect<Normalized> =>
  withNow((nowMs) => Effect.succeed(normalize(error, { nowMs })))
