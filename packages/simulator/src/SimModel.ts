/**
 * The simulated model provider. Each call draws a heavy-tailed latency (Pareto) and an outcome from the run's
 * seeded `Random`: success, a retryable server error, a permanent error, a 429 with Retry-After, or a timeout the
 * provider still billed, and, for a billed call, an amount around the caller's estimate (the plan's spread). The
 * provider bills the moment it accepts a call, whatever happens to the caller afterwards, and writes that to the
 * history: this is the ground-truth billing ledger the cost checker compares with the store's charge ledger. When a
 * billed amount reaches the caller (a reply, or an error that names it), that is recorded too: from then on the
 * caller knows what to settle.
 *
 * @since 0.1.0
 */
import { Cause, Data, Effect, Random } from "effect"
import type { History } from "./History.js"
import type { ProviderLimits, Refusal } from "./LimitsProvider.js"
import type { VirtualClock } from "./SimClock.js"

/**
 * A failed model call, shaped like an HTTP error from a vendor SDK (`status`, `headers`) so that the core's
 * normaliser classifies it. `billedCents` is what the provider charged for it.
 *
 * @since 0.1.0
 * @category errors
 */
export class SimModelError extends Data.TaggedError("SimModelError")<{
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly billedCents: number
  readonly message: string
}> {}

/**
 * A successful reply: it names the token the call was made under, so a committed result can be traced to the
 * call that produced it.
 *
 * @since 0.1.0
 * @category models
 */
export interface SimReply {
  readonly token: number
  readonly callId: string
  readonly cents: number
  /** The tokens the call used, when it named a resource (what the provider counts against its limits). */
  readonly usage?: { readonly inputTokens: number; readonly outputTokens: number } | undefined
}

/**
 * How the simulated provider behaves in one run.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelBehaviour {
  readonly medianMs: number
  readonly tailAlpha: number
  /** Per-mille of calls that fail; 0 for a perfect provider. */
  readonly errorRate: number
  readonly priceCents: number
  /** A billed call costs `priceCents` plus a whole number of cents drawn from `-costSpread` to `costSpread` (>= 0). */
  readonly costSpread: number
  /** Heavy tail on (F13): latencies are drawn from the Pareto tail; off: bounded near the median. */
  readonly heavyTail: boolean
  /** Without the heavy tail, no call takes longer than this (the caller's timeout): a slow call is a fault. */
  readonly boundedMaxMs: number
  /** Fixed latency for the first call of each job (targeted scenario "latency = lease - delta"). */
  readonly firstCallLatencyMs?: number | undefined
}

/**
 * What the caller tells the provider: who calls, for which job and token, and how to wait (the caller's process
 * gate: a paused process does not see the reply until it resumes, a crashed one never does).
 *
 * @since 0.1.0
 * @category models
 */
export interface CallRequest {
  readonly who: string
  readonly jobId: string
  readonly token: number
  readonly callId: string
  readonly spentAtStart: number
  readonly budget: number | null
  readonly attemptsAtStart: number
  readonly maxAttempts: number
  readonly gate: Effect.Effect<void>
  /** Called when the call starts (used by targeted scenarios). */
  readonly onStart?: (() => void) | undefined
  /**
   * The caller's own timeout, in true (world) ms: past it the caller stops waiting and sees a `TimeoutException`, as
   * a client library's request timeout does. The provider still bills the call as its outcome says.
   */
  readonly timeoutMs?: number | undefined
  /** The provider resource the call uses and its tokens (input, `max_tokens`): admitted by the provider's limits. */
  readonly resource?: { readonly id: string; readonly inputTokens: number; readonly maxOutput: number } | undefined
}

/**
 * The provider. Invariant: every call it accepts appears once in the history with the amount billed.
 *
 * @since 0.1.0
 * @category models
 */
export interface SimModel {
  readonly call: (request: CallRequest) => Effect.Effect<SimReply, SimModelError | Cause.TimeoutException>
}

/** What one run's provider keeps between calls. */
interface ModelState {
  readonly behaviour: ModelBehaviour
  readonly history: History
  readonly clock: VirtualClock
  /** Jobs called at least once (the first call of a job may have a fixed latency). */
  readonly seen: Set<string>
  /**
   * A run's failures take few distinct values; each is made once and then reused (errors are immutable values), as
   * an error's construction captures a stack trace, which cost more than the rest of the call.
   */
  readonly failures: Map<string, SimModelError | Cause.TimeoutException>
  /** The provider's own limits per resource, when the plan has them. */
  readonly limits: ProviderLimits | undefined
}

const failure = <E extends SimModelError | Cause.TimeoutException>(m: ModelState, key: string, make: () => E): E => {
  let error = m.failures.get(key)
  if (error === undefined) {
    error = make()
    m.failures.set(key, error)
  }
  return error as E
}

const modelError = (
  m: ModelState,
  status: number,
  headers: Readonly<Record<string, string>>,
  billedCents: number,
  message: string
) =>
  failure(m, `${status}|${billedCents}|${message}`, () => new SimModelError({ status, headers, billedCents, message }))

/** A call's latency from a uniform draw `u` (the job's first call may have a fixed one). */
const latency = (m: ModelState, jobId: string, u: number): number => {
  const behaviour = m.behaviour
  if (!m.seen.has(jobId)) {
    m.seen.add(jobId)
    if (behaviour.firstCallLatencyMs !== undefined) return behaviour.firstCallLatencyMs
  }
  const pareto = behaviour.medianMs * (1 - u) ** (-1 / behaviour.tailAlpha)
  return Math.round(
    behaviour.heavyTail
      ? Math.min(pareto, behaviour.medianMs * 200)
      : Math.min(pareto, 3 * behaviour.medianMs, behaviour.boundedMaxMs)
  )
}

const outcomes = ["retryable", "permanent", "rate_limited", "timeout_billed"] as const

// One generator function for every call of every run (why in scripts/check-generators.mjs).
const call = Effect.fnUntraced(function* (m: ModelState, request: CallRequest) {
  const { behaviour, clock } = m
  const ms = latency(m, request.jobId, yield* Random.next)
  // One draw for both: the error roll (0 to 999) and, for an error, its kind (0 to 3).
  const draw = yield* Random.nextIntBetween(0, 4000)
  const roll = draw >> 2
  const kindRoll = draw & 3
  const spread = behaviour.costSpread
  const price =
    spread === 0 ? behaviour.priceCents : behaviour.priceCents + (yield* Random.nextIntBetween(-spread, spread + 1))
  const outcome: "ok" | "retryable" | "permanent" | "rate_limited" | "timeout_billed" =
    roll >= behaviour.errorRate ? "ok" : outcomes[kindRoll]!
  const cents = outcome === "ok" || outcome === "timeout_billed" ? Math.max(0, price) : 0
  // A paused process sends nothing: the request leaves when it runs again (and never, once it crashed).
  const asked = clock.now
  // The tokens a call on a resource uses: its input as estimated, an output of 1 to `max_tokens`.
  const resource = m.limits === undefined ? undefined : request.resource
  const output = resource === undefined ? 0 : yield* Random.nextIntBetween(1, resource.maxOutput + 1)
  yield* request.gate
  const start = clock.now
  request.onStart?.()
  /** Ends the provider's work on the call when its caller cuts the request (a call on a resource only). */
  let cut: (() => void) | undefined
  if (resource !== undefined) {
    const refused = m.limits!.admit(resource.id, request.callId, start, resource.inputTokens, resource.maxOutput)
    if (refused !== undefined) return yield* refusal(m, request, asked, start, refused)
    // The provider is through with the call when it answers or its caller stops waiting (its timeout, or the request
    // cut when the caller interrupts it), whatever becomes of the caller afterwards.
    const busyMs = request.timeoutMs !== undefined && ms > request.timeoutMs ? request.timeoutMs : ms
    const unused = outcome === "ok" ? resource.maxOutput - output : resource.maxOutput
    let busy = true
    const through = (at: number): void => {
      if (!busy) return
      busy = false
      m.limits!.done(resource.id, request.callId, at, unused)
    }
    const timer = clock.schedule(busyMs, () => through(start + busyMs))
    cut = () => {
      timer.cancel()
      through(clock.now)
    }
  }
  m.history.push({
    k: "call",
    t: start,
    asked,
    end: start + ms,
    who: request.who,
    jobId: request.jobId,
    token: request.token,
    callId: request.callId,
    cents,
    outcome,
    spentAtStart: request.spentAtStart,
    budget: request.budget,
    attemptsAtStart: request.attemptsAtStart,
    maxAttempts: request.maxAttempts
  })
  const timedOut = request.timeoutMs !== undefined && ms > request.timeoutMs
  yield* cut === undefined
    ? clock.sleepMillis(timedOut ? request.timeoutMs! : ms)
    : Effect.onInterrupt(clock.sleepMillis(timedOut ? request.timeoutMs! : ms), () => Effect.sync(cut!))
  yield* request.gate
  if (timedOut) {
    const message = `the call took longer than ${request.timeoutMs} ms`
    return yield* failure(m, message, () => new Cause.TimeoutException(message))
  }
  // The answer reaches the caller (its process runs): a billed amount in it is now the caller's to settle.
  if (cents > 0) {
    m.history.push({ k: "reply", t: clock.now, who: request.who, jobId: request.jobId, callId: request.callId, cents })
  }
  switch (outcome) {
    case "ok":
      return resource === undefined
        ? ({ token: request.token, callId: request.callId, cents } satisfies SimReply)
        : ({
            token: request.token,
            callId: request.callId,
            cents,
            usage: { inputTokens: resource.inputTokens, outputTokens: output }
          } satisfies SimReply)
    case "retryable":
      return yield* modelError(m, 503, {}, 0, "overloaded")
    case "permanent":
      return yield* modelError(m, 400, {}, 0, "bad request")
    case "rate_limited":
      return yield* modelError(m, 429, { "retry-after": "1" }, 0, "rate limited")
    case "timeout_billed":
      return yield* modelError(m, 504, {}, cents, "timed out")
  }
})

/** A call the provider's limits refused: recorded as a call billed nothing, answered a 429 at once. */
const refusal = (
  m: ModelState,
  request: CallRequest,
  asked: number,
  start: number,
  refused: Refusal
): Effect.Effect<never, SimModelError> => {
  const quota = refused.retryAfterSeconds === null
  m.history.push({
    k: "call",
    t: start,
    asked,
    end: start,
    who: request.who,
    jobId: request.jobId,
    token: request.token,
    callId: request.callId,
    cents: 0,
    outcome: quota ? "quota" : "limited",
    spentAtStart: request.spentAtStart,
    budget: request.budget,
    attemptsAtStart: request.attemptsAtStart,
    maxAttempts: request.maxAttempts
  })
  return Effect.flatMap(request.gate, () =>
    Effect.fail(
      quota
        ? modelError(m, 429, {}, 0, spendCapBody)
        : modelError(
            m,
            429,
            { "retry-after": String(refused.retryAfterSeconds) },
            0,
            `rate limited by the provider: retry after ${refused.retryAfterSeconds} s`
          )
    )
  )
}

/** A spend-cap 429 as OpenAI words it (`insufficient_quota`): `quota_exhausted`, never a rate limit to wait out. */
const spendCapBody = JSON.stringify({
  error: { type: "insufficient_quota", code: "insufficient_quota", message: "You exceeded your current quota." }
})

/**
 * A provider for one run.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  behaviour: ModelBehaviour,
  history: History,
  clock: VirtualClock,
  limits?: ProviderLimits | undefined
): SimModel => {
  const m: ModelState = { behaviour, history, clock, seen: new Set(), failures: new Map(), limits }
  return { call: (request) => call(m, request) }
}
