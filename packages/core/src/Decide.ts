/**
 * The decision rule: should a slow call run inline (sync, streamed to a waiting user) or as a background job?
 * Pure functions of the operation's p99, the timeouts of every hop on the request path and three facts about the
 * caller. Cost is deliberately not an input: a queue does not make a call cheaper; it changes who waits, what
 * happens on failure, and where concurrency is controlled.
 *
 * This module has no Node imports and no effects, so the same code runs in the CLI and in the browser calculator.
 *
 * @since 0.1.0
 */
import { Data, Either } from "effect"

/**
 * One hop on the request path (load balancer or CDN idle timeout, server timeout, client timeout) and the time
 * after which it gives up on a request, in milliseconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface Hop {
  readonly name: string
  readonly timeoutMs: number
}

/**
 * What `decide` needs. `p99Ms` is the p99 of the whole operation **including retries and fallbacks** (see
 * `effectiveP99`). `outlivesSession`: the work continues after the caller's session (a batch, a fan-out).
 * `resultNeededNow`: the caller uses the result in this interaction (false for enrichment, embeddings on upload,
 * summaries for later search).
 *
 * @since 0.1.0
 * @category models
 */
export interface DecideInput {
  readonly p99Ms: number
  readonly hops: ReadonlyArray<Hop>
  readonly userWaiting: boolean
  readonly outlivesSession: boolean
  readonly resultNeededNow: boolean
}

/**
 * The four rules, in the order they are tried.
 *
 * @since 0.1.0
 * @category models
 */
export type Rule = "outlives-session" | "result-later" | "within-2x" | "well-under"

/**
 * `async`: submit a job and deliver the result by polling or push. `sync-stream`: call inline and stream tokens to
 * the waiting user.
 *
 * @since 0.1.0
 * @category models
 */
export type Mode = "async" | "sync-stream"

/**
 * The outcome of `decide`. `ratio` is `p99Ms / shortestHop.timeoutMs`; `marginMs` is `T/2 - p99Ms` (positive: how
 * far under the async threshold the call stays; zero or negative: how far over it is). `reasons[0]` is a
 * one-sentence explanation of the decision; the rest state the numbers it rests on.
 *
 * @since 0.1.0
 * @category models
 */
export interface Decision {
  readonly mode: Mode
  readonly rule: Rule
  readonly p99Ms: number
  readonly shortestHop: Hop
  readonly ratio: number
  readonly marginMs: number
  readonly reasons: ReadonlyArray<string>
}

/**
 * `decide` was given no hop timeouts. Without the shortest hop there is no threshold, so no decision is made.
 *
 * @since 0.1.0
 * @category errors
 */
export class NoHops extends Data.TaggedError("NoHops")<{}> {
  override get message() {
    return "no hop timeouts given: name at least one hop on the request path (for example lb=60s)"
  }
}

/**
 * A number given to `decide` or `effectiveP99` that cannot describe a latency or timeout (negative, NaN,
 * infinite, a zero timeout, no samples).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidDecideInput extends Data.TaggedError("InvalidDecideInput")<{
  readonly field: string
  readonly reason: string
}> {
  override get message() {
    return `invalid ${this.field}: ${this.reason}`
  }
}

/**
 * Renders milliseconds the way a person writes them: `1500ms`, `45s`, `2m`, `1m30s`, `2.5s`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const formatDuration = (ms: number): string => {
  if (!Number.isFinite(ms)) return String(ms)
  const sign = ms < 0 ? "-" : ""
  const a = Math.abs(ms)
  if (a < 1_000) return `${sign}${round(a, 1)}ms`
  if (a < 60_000) return `${sign}${round(a / 1_000, 2)}s`
  const minutes = Math.floor(a / 60_000)
  const seconds = round((a - minutes * 60_000) / 1_000, 1)
  return seconds === 0 ? `${sign}${minutes}m` : `${sign}${minutes}m${seconds}s`
}

const round = (n: number, digits: number): number => {
  const f = 10 ** digits
  return Math.round(n * f) / f
}

const units: { readonly [unit: string]: number } = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }

const bareNumber = /^\d+(?:\.\d+)?$/

/**
 * Text that is not a duration. A bare number is one of them: it has no unit, and reading `45` as milliseconds when
 * seconds were meant gives the opposite advice, so the reader is asked instead. `message` is the one line to show:
 * `45 what? (45s, 45000ms)` for a bare number, the accepted forms otherwise.
 *
 * @since 0.3.0
 * @category errors
 */
export class InvalidDuration extends Data.TaggedError("InvalidDuration")<{
  readonly text: string
  /** `no-unit`: a number without a unit; `malformed`: anything else that is not a duration. */
  readonly reason: "no-unit" | "malformed"
}> {
  override get message() {
    const text = this.text.trim()
    return this.reason === "no-unit"
      ? `${text} what? (${text}s, ${round(Number(text) * 1_000, 3)}ms)`
      : `${JSON.stringify(text)} is not a duration (45s, 1500ms, 2m, 1m30s)`
  }
}

/**
 * Parses a duration such as `45s`, `1500ms`, `2m`, `1.5s`, `1m30s` or `1h` into milliseconds. Every duration the
 * CLI and the calculator read goes through here. A number without a unit fails with `InvalidDuration` (reason
 * `no-unit`), never a guess; so does anything else that is not a non-negative duration.
 *
 * @since 0.1.0
 * @category constructors
 */
export const parseDuration = (text: string): Either.Either<number, InvalidDuration> => {
  const t = text.trim().toLowerCase()
  if (bareNumber.test(t)) return Either.left(new InvalidDuration({ text, reason: "no-unit" }))
  if (!/^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$/.test(t))
    return Either.left(new InvalidDuration({ text, reason: "malformed" }))
  let total = 0
  for (const m of t.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) total += Number(m[1]) * units[m[2]!]!
  return Either.right(total)
}

const isLatency = (n: number): boolean => Number.isFinite(n) && n >= 0

/**
 * Applies the decision rule, in order:
 *
 * 1. the work outlives the session -> `async` ("outlives-session"), however fast each item is;
 * 2. the result is not needed now -> `async` ("result-later");
 * 3. with T the shortest hop timeout, `p99Ms >= T / 2` -> `async` ("within-2x"): one bad day from a 504 on a call
 *    the provider completed and billed (exactly T/2 is async);
 * 4. otherwise, with a user waiting -> `sync-stream` ("well-under").
 *
 * When nobody waits and none of the first three rules fired, the decision is `async` under rule "result-later":
 * with no person blocked on the response, the result reaches whoever needs it through the job record just as
 * well, and the job adds retries, durability and one place to cap concurrency at no cost to anyone's wait.
 *
 * Fails with `NoHops` when `hops` is empty, and with `InvalidDecideInput` for a negative or non-finite p99 or a
 * hop timeout that is not a positive finite number.
 *
 * @since 0.1.0
 * @category combinators
 */
export const decide = (input: DecideInput): Either.Either<Decision, NoHops | InvalidDecideInput> => {
  const { hops, outlivesSession, p99Ms, resultNeededNow, userWaiting } = input
  if (!isLatency(p99Ms)) return Either.left(new InvalidDecideInput({ field: "p99Ms", reason: `${p99Ms}` }))
  if (hops.length === 0) return Either.left(new NoHops())
  for (const hop of hops) {
    if (!(Number.isFinite(hop.timeoutMs) && hop.timeoutMs > 0)) {
      return Either.left(
        new InvalidDecideInput({ field: `hop ${hop.name}`, reason: `timeout must be positive, got ${hop.timeoutMs}` })
      )
    }
  }
  const shortestHop = hops.reduce((a, b) => (b.timeoutMs < a.timeoutMs ? b : a))
  const t = shortestHop.timeoutMs
  const half = t / 2
  const ratio = p99Ms / t
  const marginMs = half - p99Ms
  const p99 = formatDuration(p99Ms)
  const hop = `${shortestHop.name} (${formatDuration(t)})`
  const facts = [
    `shortest hop: ${hop}; async threshold T/2 = ${formatDuration(half)}`,
    `p99 ${p99} is ${round(ratio * 100, 1)}% of the shortest hop timeout`,
    marginMs > 0
      ? `margin: ${formatDuration(marginMs)} under T/2`
      : marginMs === 0
        ? "margin: none, the p99 is exactly T/2"
        : `margin: ${formatDuration(-marginMs)} over T/2`
  ]
  const make = (mode: Mode, rule: Rule, why: string): Decision => ({
    mode,
    rule,
    p99Ms,
    shortestHop,
    ratio,
    marginMs,
    reasons: [why, ...facts]
  })
  if (outlivesSession) {
    return Either.right(
      make(
        "async",
        "outlives-session",
        "The work outlives the session, so the batch is the unit of work: run it as jobs however fast each item is."
      )
    )
  }
  if (!resultNeededNow) {
    return Either.right(
      make(
        "async",
        "result-later",
        "The result is needed, but not now: run it as a job and deliver the result when it is ready."
      )
    )
  }
  if (p99Ms >= half) {
    return Either.right(
      make(
        "async",
        "within-2x",
        p99Ms >= t
          ? `The p99 of ${p99} is at or past the shortest hop timeout itself, ${hop}: slow requests already end ` +
              "in a 504 on calls the provider completed and billed, so run it as a job."
          : `The p99 of ${p99} is within 2x of the shortest hop timeout, ${hop}: one bad day away from a 504 ` +
              "on a call the provider completed and billed, so run it as a job."
      )
    )
  }
  if (userWaiting) {
    return Either.right(
      make(
        "sync-stream",
        "well-under",
        `The p99 of ${p99} is under half the shortest hop timeout, ${hop}, by ${formatDuration(marginMs)}, and a ` +
          "user is waiting: call inline and stream the response."
      )
    )
  }
  return Either.right(
    make(
      "async",
      "result-later",
      "Nobody is waiting on this request, so the result can arrive later: run it as a job for retries, durability " +
        "and one place to cap concurrency."
    )
  )
}

/**
 * Input of `effectiveP99`. `samples` are observed latencies of one attempt in milliseconds; an attempt whose
 * sample exceeds `timeoutMs` is a timeout that costs `timeoutMs`. Up to `retries` more attempts follow, each after
 * a full-jitter backoff drawn from `[0, backoffMs * 2^(k-1)]` before retry `k` (the formula of `Retry.backoff`,
 * default base 0). When every attempt timed out, the fallback's latency `fallbackP99Ms` is added if given.
 * `seed` makes the result reproducible; `trials` defaults to 10,000.
 *
 * @since 0.1.0
 * @category models
 */
export interface EffectiveP99Input {
  readonly samples: ReadonlyArray<number>
  readonly timeoutMs: number
  readonly retries: number
  readonly backoffMs?: number
  readonly fallbackP99Ms?: number
  readonly seed: number
  readonly trials?: number
}

/**
 * The simulated end-to-end latency of the operation. `timeoutRate` is the share of trials in which every attempt
 * timed out (served by the fallback when one is given, failed otherwise); their latency is the time spent before
 * giving up plus the fallback's.
 *
 * @since 0.1.0
 * @category models
 */
export interface EffectiveP99 {
  readonly p50Ms: number
  readonly p99Ms: number
  readonly timeoutRate: number
  readonly trials: number
}

/**
 * The `q`-quantile (0..1) of `samples` by the nearest-rank method: the smallest sample such that at least
 * `q * n` samples are less than or equal to it. Always one of the samples; `NaN` for no samples. Does not modify
 * its input.
 *
 * @since 0.1.0
 * @category combinators
 */
export const percentile = (samples: ReadonlyArray<number>, q: number): number => {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  return nearestRank(sorted, q)
}

const nearestRank = (sorted: ReadonlyArray<number>, q: number): number => {
  const clamped = Math.min(1, Math.max(0, q))
  const rank = Math.max(1, Math.ceil(clamped * sorted.length))
  return sorted[rank - 1]!
}

/**
 * A small seeded generator (mulberry32) returning floats in [0, 1). Kept local so the module runs in a browser
 * without Effect's runtime; the same seed always yields the same sequence.
 */
const prng = (seed: number): (() => number) => {
  let a = Math.floor(seed) >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

/**
 * The effective p50 and p99 of an operation under a retry and fallback policy, by seeded Monte Carlo over
 * attempts: each trial draws attempt latencies from `samples`, turns samples over the timeout into timeouts that
 * cost the full timeout plus backoff, and adds the fallback when retries run out. Deterministic: the same input
 * (seed included) always gives the same answer. Fails with `InvalidDecideInput` for no samples, a negative or
 * non-finite sample, a timeout that is not positive, or negative retries, backoff, fallback or trials.
 *
 * @since 0.1.0
 * @category combinators
 */
export const effectiveP99 = (input: EffectiveP99Input): Either.Either<EffectiveP99, InvalidDecideInput> => {
  const { samples, seed, timeoutMs } = input
  const retries = Math.floor(input.retries)
  const backoffMs = input.backoffMs ?? 0
  const trials = Math.floor(input.trials ?? 10_000)
  const bad = (field: string, reason: string) => Either.left(new InvalidDecideInput({ field, reason }))
  if (samples.length === 0) return bad("samples", "no latency samples")
  if (!samples.every(isLatency)) return bad("samples", "every sample must be a finite, non-negative number of ms")
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) return bad("timeoutMs", `must be positive, got ${timeoutMs}`)
  if (!(Number.isFinite(retries) && retries >= 0)) return bad("retries", `must be 0 or more, got ${input.retries}`)
  if (!isLatency(backoffMs)) return bad("backoffMs", `must be 0 or more, got ${backoffMs}`)
  if (input.fallbackP99Ms !== undefined && !isLatency(input.fallbackP99Ms)) {
    return bad("fallbackP99Ms", `must be 0 or more, got ${input.fallbackP99Ms}`)
  }
  if (!(Number.isFinite(trials) && trials >= 1)) return bad("trials", `must be 1 or more, got ${input.trials}`)
  if (!Number.isFinite(seed)) return bad("seed", `must be a finite number, got ${seed}`)

  const random = prng(seed)
  const totals = new Array<number>(trials)
  let exhausted = 0
  for (let i = 0; i < trials; i++) {
    let total = 0
    let done = false
    for (let attempt = 0; attempt <= retries && !done; attempt++) {
      if (attempt > 0) total += random() * backoffMs * 2 ** (attempt - 1)
      const sample = samples[Math.floor(random() * samples.length)]!
      if (sample > timeoutMs) {
        total += timeoutMs
      } else {
        total += sample
        done = true
      }
    }
    if (!done) {
      exhausted++
      total += input.fallbackP99Ms ?? 0
    }
    totals[i] = total
  }
  totals.sort((a, b) => a - b)
  return Either.right({
    p50Ms: nearestRank(totals, 0.5),
    p99Ms: nearestRank(totals, 0.99),
    timeoutRate: exhausted / trials,
    trials
  })
}
