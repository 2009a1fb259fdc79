/**
 * A simulated model provider for the examples: seeded latency with a heavy tail, occasional rate limits and
 * server errors shaped like a vendor's HTTP errors (so `Normalize` classifies them), and a price per call. It
 * reads time and randomness only through Effect's `Clock` and `Random`, so a seeded run prints the same story.
 */
import { Data, Effect, Random } from "effect"

/** A failed call, shaped like what an HTTP client for a model API throws. */
export class ModelHttpError extends Data.TaggedError("ModelHttpError")<{
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: unknown
  readonly message: string
}> {}

export interface ModelOptions {
  /** Typical latency of a call, in ms. */
  readonly medianMs: number
  /** Share of calls in the slow tail (between 0 and 1) and how much slower they are. */
  readonly tailRate?: number
  readonly tailFactor?: number
  /** Share of calls answered 429 with a Retry-After, and 529 overloaded. */
  readonly rateLimitRate?: number
  readonly overloadRate?: number
  /** Price of one call in cents. */
  readonly centsPerCall: number
}

export interface Reply {
  readonly text: string
  readonly latencyMs: number
  readonly costCents: number
}

/** Draws one latency: the median scaled by a factor in [0.5, 1.5), or by `tailFactor` for tail calls. */
export const drawLatency = (options: ModelOptions): Effect.Effect<number> =>
  Effect.gen(function* () {
    const jitter = 0.5 + (yield* Random.next)
    const tail = (yield* Random.next) < (options.tailRate ?? 0)
    return Math.round(options.medianMs * jitter * (tail ? (options.tailFactor ?? 1) : 1))
  })

/** One billed call that answers `answer(prompt)` after a simulated latency, or fails like a vendor would. */
export const call = (
  options: ModelOptions,
  prompt: string,
  answer: (prompt: string) => string
): Effect.Effect<Reply, ModelHttpError> =>
  Effect.gen(function* () {
    const roll = yield* Random.next
    if (roll < (options.rateLimitRate ?? 0)) {
      yield* Effect.sleep(5)
      return yield* new ModelHttpError({
        status: 429,
        headers: { "retry-after-ms": "40" },
        body: { error: { type: "requests", code: "rate_limit_exceeded", message: "Rate limit reached" } },
        message: "429 Rate limit reached"
      })
    }
    if (roll < (options.rateLimitRate ?? 0) + (options.overloadRate ?? 0)) {
      yield* Effect.sleep(5)
      return yield* new ModelHttpError({
        status: 529,
        headers: {},
        body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } },
        message: "529 Overloaded"
      })
    }
    const latencyMs = yield* drawLatency(options)
    yield* Effect.sleep(latencyMs)
    return { text: answer(prompt), latencyMs, costCents: options.centsPerCall }
  })
