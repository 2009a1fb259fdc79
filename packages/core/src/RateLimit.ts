/**
 * What a provider's reply says about the caller's rate limits, in one typed form: how long it asked the caller to
 * wait (`retry-after`), and per dimension (requests, tokens, input tokens, output tokens) the limit, what remains of
 * it and how long until it resets. One parser for every provider's dialect:
 *
 * - OpenAI: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, resets as Go durations (`1s`, `6m0s`, `200ms`);
 * - Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`, resets as
 *   RFC 3339 times;
 * - both: `retry-after` (seconds or an HTTP date) and `retry-after-ms`;
 * - Gemini, which sends none of these headers: the `RetryInfo` and `QuotaFailure` details of its error body.
 *
 * `Normalize` reads it from an error's response headers (`Normalized.rateLimit`); a model call reads it from a
 * successful reply's headers (`Handler.CallOptions.rateLimit`). The worker's limiter learns limits from it and pauses
 * a resource whose dimension is exhausted until its reset.
 *
 * @since 0.4.0
 */

/**
 * One dimension of a rate limit as the reply reported it. `limit` and `remaining` are counts (requests or tokens)
 * and never negative; `resetMs` is how long after the reply the dimension is full again (never negative). A field
 * the reply did not carry, or carried in a form that does not parse, is absent.
 *
 * @since 0.4.0
 * @category models
 */
export interface Window {
  readonly limit?: number
  readonly remaining?: number
  readonly resetMs?: number
}

/**
 * A reply's rate-limit facts. `retryAfterMs` is present only when the provider said how long to wait
 * (`retry-after-ms`, `retry-after`, Gemini's `RetryInfo`); each dimension only when the reply described it.
 * `tokens` is a combined limit (OpenAI's tokens per minute; Anthropic's most restrictive token limit in effect);
 * `inputTokens` and `outputTokens` are Anthropic's separate limits (and Gemini's input-token quota).
 *
 * @since 0.4.0
 * @category models
 */
export interface RateLimitInfo {
  readonly retryAfterMs?: number
  readonly requests?: Window
  readonly tokens?: Window
  readonly inputTokens?: Window
  readonly outputTokens?: Window
}

/**
 * The dimensions a `RateLimitInfo` may describe.
 *
 * @since 0.4.0
 * @category models
 */
export type Dimension = "requests" | "tokens" | "inputTokens" | "outputTokens"

/**
 * Every dimension, in a fixed order.
 *
 * @since 0.4.0
 * @category models
 */
export const dimensions: ReadonlyArray<Dimension> = ["requests", "tokens", "inputTokens", "outputTokens"]

/**
 * Options of `fromHeaders`. `nowMs` is the current time, needed only for the absolute times (an HTTP-date
 * `retry-after`, Anthropic's RFC 3339 resets); without it the reply's own `Date` header serves, and without either
 * those fields are left out.
 *
 * @since 0.4.0
 * @category models
 */
export interface ParseOptions {
  readonly nowMs?: number | undefined
}

type HeaderGet = (name: string) => string | undefined

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } => typeof u === "object" && u !== null

const text = (v: unknown): string | undefined =>
  typeof v === "string" ? v : typeof v === "number" ? String(v) : undefined

/** Reads headers from a Fetch `Headers`, a `Map`, or a plain record (names in any case, Node's array values). */
const headerGetter = (h: unknown): HeaderGet | undefined => {
  if (!isRecord(h)) return undefined
  const get = (h as { get?: unknown }).get
  if (typeof get === "function") {
    return (name) => text(get.call(h, name) ?? get.call(h, name.toLowerCase()))
  }
  const lower = new Map<string, unknown>()
  for (const [k, v] of Object.entries(h)) lower.set(k.toLowerCase(), Array.isArray(v) ? v[0] : v)
  return (name) => text(lower.get(name.toLowerCase()))
}

const numeric = /^\s*\d+(?:\.\d+)?\s*$/

const count = (s: string | undefined): number | undefined =>
  s !== undefined && numeric.test(s) ? Number(s) : undefined

/** Go-style durations as OpenAI's reset headers send them ("1s", "6m0s", "1.5s", "20ms", "1h2m3s"). */
const goDuration = /^\s*(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?\s*$/

/**
 * A Go-style duration (`6m0s`, `1s`, `200ms`, `1h2m3s`, `1.5s`) in milliseconds, or `undefined` when the string is
 * not one.
 *
 * @since 0.4.0
 * @category combinators
 */
export const parseDuration = (s: string): number | undefined => {
  const m = goDuration.exec(s)
  if (!m || (m[1] ?? m[2] ?? m[3] ?? m[4]) === undefined) return undefined
  const part = (x: string | undefined, scale: number) => (x === undefined ? 0 : Number(x) * scale)
  return Math.round(part(m[1], 3_600_000) + part(m[2], 60_000) + part(m[3], 1_000) + part(m[4], 1))
}

const headerNames: ReadonlyArray<{ readonly dimension: Dimension; readonly prefix: string; readonly suffix: string }> =
  [
    { dimension: "requests", prefix: "x-ratelimit-", suffix: "-requests" },
    { dimension: "tokens", prefix: "x-ratelimit-", suffix: "-tokens" },
    { dimension: "requests", prefix: "anthropic-ratelimit-requests-", suffix: "" },
    { dimension: "tokens", prefix: "anthropic-ratelimit-tokens-", suffix: "" },
    { dimension: "inputTokens", prefix: "anthropic-ratelimit-input-tokens-", suffix: "" },
    { dimension: "outputTokens", prefix: "anthropic-ratelimit-output-tokens-", suffix: "" }
  ]

/** `o` without its undefined fields, or `undefined` when none is left. */
const compact = <T extends object>(o: { readonly [K in keyof T]?: T[K] | undefined }): T | undefined => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v
  return Object.keys(out).length === 0 ? undefined : (out as T)
}

/**
 * The rate-limit facts of a reply's headers (a Fetch `Headers`, a `Map` or a plain record), or `undefined` when the
 * headers carry none. Total: never throws; a value that does not parse is left out.
 *
 * - `retryAfterMs`: `retry-after-ms` when numeric, else `retry-after` as seconds or as an HTTP date (measured from
 *   `nowMs` or the `Date` header);
 * - `resetMs`: a Go duration (OpenAI) or an RFC 3339 time (Anthropic, measured as above); a time already past is 0.
 *
 * @since 0.4.0
 * @category constructors
 */
export const fromHeaders = (headers: unknown, options: ParseOptions = {}): RateLimitInfo | undefined => {
  try {
    const get = headerGetter(headers)
    return get === undefined ? undefined : parse(get, options.nowMs)
  } catch {
    // A Headers-like object whose getter throws carries nothing we can read.
    return undefined
  }
}

const parse = (get: HeaderGet, nowMs: number | undefined): RateLimitInfo | undefined => {
  const dateHeader = get("date")
  const now = nowMs ?? (dateHeader !== undefined ? Date.parse(dateHeader) : Number.NaN)
  const untilTime = (at: number): number | undefined =>
    Number.isNaN(at) || Number.isNaN(now) ? undefined : Math.max(0, at - now)
  let retryAfterMs: number | undefined
  const ms = get("retry-after-ms")
  if (ms !== undefined && numeric.test(ms)) retryAfterMs = Math.max(0, Math.round(Number(ms)))
  const ra = get("retry-after")
  if (retryAfterMs === undefined && ra !== undefined) {
    retryAfterMs = numeric.test(ra) ? Math.max(0, Math.round(Number(ra) * 1000)) : untilTime(Date.parse(ra))
  }
  const windows: Partial<Record<Dimension, Window>> = {}
  for (const { dimension, prefix, suffix } of headerNames) {
    const reset = get(`${prefix}reset${suffix}`)
    const window = compact<Window>({
      limit: count(get(`${prefix}limit${suffix}`)),
      remaining: count(get(`${prefix}remaining${suffix}`)),
      resetMs: reset === undefined ? undefined : (parseDuration(reset) ?? untilTime(Date.parse(reset)))
    })
    if (window !== undefined) windows[dimension] = window
  }
  return compact<RateLimitInfo>({ retryAfterMs, ...windows })
}

/** Parses protobuf-JSON durations as Google's RetryInfo sends them ("37s", "1.5s", "250ms"). */
const parseGoogleDuration = (s: string): number | undefined => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$/.exec(s)
  if (!m) return undefined
  return Math.round(Number(m[1]) * (m[2] === "ms" ? 1 : 1000))
}

/** The dimension a Gemini per-minute quota names (`GenerateContentInputTokensPerModelPerMinute-FreeTier`, ...). */
const googleDimension = (quota: string): Dimension | undefined => {
  if (!/per ?minute/i.test(quota)) return undefined
  if (/input.?tokens?/i.test(quota)) return "inputTokens"
  if (/output.?tokens?/i.test(quota)) return "outputTokens"
  if (/tokens?/i.test(quota)) return "tokens"
  if (/requests?/i.test(quota)) return "requests"
  return undefined
}

/**
 * The rate-limit facts of a Google API error's `details` (Gemini's 429 `RESOURCE_EXHAUSTED`): `RetryInfo.retryDelay`
 * as `retryAfterMs`, and each per-minute `QuotaFailure` violation as its dimension, exhausted (`remaining: 0`), with
 * `quotaValue` as its `limit`. A per-day quota is not a per-minute window and is left out. `undefined` when the
 * details carry neither.
 *
 * @since 0.4.0
 * @category constructors
 */
export const fromGoogleDetails = (details: unknown): RateLimitInfo | undefined => {
  if (!Array.isArray(details)) return undefined
  let retryAfterMs: number | undefined
  const windows: Partial<Record<Dimension, Window>> = {}
  for (const d of details) {
    if (!isRecord(d)) continue
    if (typeof d.retryDelay === "string") retryAfterMs = parseGoogleDuration(d.retryDelay) ?? retryAfterMs
    if (!Array.isArray(d.violations)) continue
    for (const v of d.violations) {
      if (!isRecord(v)) continue
      const quota = `${text(v.quotaId) ?? ""} ${text(v.quotaMetric) ?? ""}`
      const dimension = googleDimension(quota)
      if (dimension !== undefined) {
        windows[dimension] = compact<Window>({ limit: count(text(v.quotaValue)), remaining: 0 }) ?? { remaining: 0 }
      }
    }
  }
  return compact<RateLimitInfo>({ retryAfterMs, ...windows })
}

/**
 * `primary` with what it lacks taken from `secondary`: `retryAfterMs`, and each dimension's fields.
 *
 * @since 0.4.0
 * @category combinators
 */
export const merge = (
  primary: RateLimitInfo | undefined,
  secondary: RateLimitInfo | undefined
): RateLimitInfo | undefined => {
  if (primary === undefined) return secondary
  if (secondary === undefined) return primary
  const out: { -readonly [K in keyof RateLimitInfo]: RateLimitInfo[K] } = {
    ...secondary,
    ...primary
  }
  for (const d of dimensions) {
    const a = primary[d]
    const b = secondary[d]
    if (a !== undefined && b !== undefined) out[d] = { ...b, ...a }
  }
  return out
}

/**
 * How long the reply asks the caller to wait before the next request: `retryAfterMs` when the provider said so,
 * else the longest reset among the exhausted dimensions (`remaining` 0 with a known `resetMs`), else `undefined`
 * (nothing is exhausted, or nothing says until when).
 *
 * @since 0.4.0
 * @category combinators
 */
export const waitMs = (info: RateLimitInfo | undefined): number | undefined => {
  if (info === undefined) return undefined
  if (info.retryAfterMs !== undefined) return info.retryAfterMs
  let wait: number | undefined
  for (const d of dimensions) {
    const w = info[d]
    if (w?.remaining === 0 && w.resetMs !== undefined && (wait === undefined || w.resetMs > wait)) wait = w.resetMs
  }
  return wait
}
