/**
 * The demo job types of `slowcall serve --demo`, backed by a simulated model: heavy-tailed latency, occasional
 * 429s (with Retry-After) and timeouts, and a cost per call. Every demo handler declares its estimate, so budgets
 * are enforced before a call, and bills through `ctx.call`, so a reservation is written before each call.
 *
 * @since 0.1.0
 */

import { ErrorClass, isRetryable } from "@slowcall/core/ErrorClass"
import * as Handler from "@slowcall/core/Handler"
import { Duration, Effect, Random, Schema } from "effect"

/**
 * The error the simulated model fails with, shaped like a provider's HTTP error so that `Normalize.normalize`
 * classifies it the way it classifies a real one.
 *
 * @since 0.1.0
 * @category errors
 */
export class SimulatedModelError extends Error {
  readonly status: number | undefined
  readonly code: string | undefined
  readonly headers: Record<string, string>
  readonly body: unknown
  readonly billedCents: number
  constructor(options: {
    readonly message: string
    readonly status?: number | undefined
    readonly code?: string | undefined
    readonly headers?: Record<string, string> | undefined
    readonly body?: unknown
    readonly billedCents?: number | undefined
  }) {
    super(options.message)
    this.name = "SimulatedModelError"
    this.status = options.status
    this.code = options.code
    this.headers = options.headers ?? {}
    this.body = options.body
    this.billedCents = options.billedCents ?? 0
  }
}

/**
 * A provider-shaped error that normalises to `errorClass`. Classes that describe the job system itself rather
 * than a model call (lease and cancel states) fall back to the closest provider failure.
 *
 * @since 0.1.0
 * @category constructors
 */
export const errorFor = (errorClass: ErrorClass): unknown => {
  const message = `simulated ${errorClass}`
  switch (errorClass) {
    case "rate_limited":
      return new SimulatedModelError({ message, status: 429, headers: { "retry-after": "1" } })
    case "overloaded":
      return new SimulatedModelError({
        message,
        status: 529,
        body: { type: "error", error: { type: "overloaded_error", message } }
      })
    case "timeout":
      return new SimulatedModelError({ message: "the model call timed out", code: "ETIMEDOUT" })
    case "network":
      return new SimulatedModelError({ message: "socket hang up", code: "ECONNRESET" })
    case "server_error":
      return new SimulatedModelError({ message, status: 500 })
    case "invalid_request":
      return new SimulatedModelError({ message, status: 400 })
    case "auth":
      return new SimulatedModelError({ message, status: 401 })
    case "quota_exhausted":
      return new SimulatedModelError({
        message,
        status: 429,
        body: { error: { type: "insufficient_quota", code: "insufficient_quota", message } }
      })
    case "content_filtered":
      return new SimulatedModelError({
        message,
        status: 400,
        body: { error: { type: "invalid_request_error", code: "content_filter", message } }
      })
    case "context_length":
      return new SimulatedModelError({
        message,
        status: 400,
        body: { error: { type: "invalid_request_error", code: "context_length_exceeded", message } }
      })
    case "invalid_input":
      return { _tag: "InvalidInput", path: "$", message }
    case "unknown_job_version":
      return { _tag: "UnknownJobVersion", message }
    case "cancelled":
      return new SimulatedModelError({ message, status: 499 })
    case "lease_lost":
      return { _tag: "LeaseLost", message }
    case "lease_expired":
    case "unknown":
      return new SimulatedModelError({ message })
  }
}

/**
 * One draw of the simulated model's latency: log-normal around `medianMs` (sigma 0.8), so most calls are quick and
 * a few take many times the median, like a real provider's tail.
 *
 * @since 0.1.0
 * @category constructors
 */
export const heavyTailedLatency = (medianMs: number): Effect.Effect<number> =>
  Effect.gen(function* () {
    const u1 = Math.max(1e-9, yield* Random.next)
    const u2 = yield* Random.next
    const normal = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2)
    return Math.round(medianMs * Math.exp(0.8 * normal))
  })

interface ModelCall {
  readonly medianMs: number
  readonly timeoutMs: number
  readonly costCents: number
  readonly rateLimitedRate: number
  readonly timeoutRate: number
}

/** A simulated model call: waits, sometimes fails with a 429, sometimes runs past its timeout (and is billed). */
const simulatedCall = <A>(options: ModelCall, reply: () => A): Effect.Effect<A, SimulatedModelError> =>
  Effect.gen(function* () {
    const roll = yield* Random.next
    if (roll < options.rateLimitedRate) {
      yield* Effect.sleep(Duration.millis(50))
      return yield* Effect.fail(
        new SimulatedModelError({ message: "simulated rate limit", status: 429, headers: { "retry-after": "1" } })
      )
    }
    const latency =
      roll < options.rateLimitedRate + options.timeoutRate
        ? options.timeoutMs + 1
        : yield* heavyTailedLatency(options.medianMs)
    if (latency > options.timeoutMs) {
      yield* Effect.sleep(Duration.millis(options.timeoutMs))
      // The provider did the work and billed it; the caller gave up waiting.
      return yield* Effect.fail(
        new SimulatedModelError({
          message: `the model call timed out after ${options.timeoutMs} ms`,
          code: "ETIMEDOUT",
          billedCents: options.costCents
        })
      )
    }
    yield* Effect.sleep(Duration.millis(latency))
    return reply()
  })

const billedOnError = (error: SimulatedModelError) => (error.billedCents > 0 ? error.billedCents : undefined)

/** The classes a `failWith` job is retried for, as the policy table says (`lease_expired` is simulated as `unknown`). */
const retriedClasses = ErrorClass.literals.filter(
  (errorClass) => isRetryable(errorClass) && errorClass !== "lease_expired"
)

/**
 * `demo.echo`: input `{ text, latencyMs?, failWith?, failTimes?, costCents? }`, result `{ echo: text }`. It fails
 * with `failWith` on the first `failTimes` attempts of the job (counted over its whole life, so a replayed dead
 * letter can then succeed; without `failTimes` it fails forever). A successful call is charged `costCents` (default
 * 1), which is also its declared estimate; a failed one is charged as its error class says
 * (`ErrorClass.defaultCostOnError`: nothing for `rate_limited` or `auth`, the estimate for `timeout`).
 *
 * @since 0.1.0
 * @category handlers
 */
export const echo = Handler.make({
  type: "demo.echo",
  version: 1,
  input: Schema.Struct({
    text: Schema.String.annotations({ description: "the text the result echoes" }),
    latencyMs: Schema.optional(
      Schema.Int.pipe(Schema.between(0, 600_000)).annotations({
        description: "how long the call takes, in ms (default: a heavy-tailed draw around 200 ms)"
      })
    ),
    failWith: Schema.optional(
      ErrorClass.annotations({
        description:
          "make the call fail with an error of this class, shaped like a provider's. Retried up to maxAttempts: " +
          `${retriedClasses.join(", ")}; any other class ends the job in failed at once (lease_expired is ` +
          "simulated as an unknown failure)"
      })
    ),
    failTimes: Schema.optional(
      Schema.Int.pipe(Schema.nonNegative()).annotations({
        description:
          "fail only the first N attempts of the job, counted over its whole life (a replayed dead letter can " +
          "then succeed); without it every attempt fails"
      })
    ),
    costCents: Schema.optional(
      Schema.Number.pipe(Schema.nonNegative()).annotations({
        description:
          "what a successful call costs in cents, also its estimate (default 1); a failed call is charged as " +
          "its error class says (nothing for rate_limited or auth, the estimate for timeout)"
      })
    )
  }).annotations({
    description: "demo.echo: echoes `text`, and fails on purpose as `failWith` and `failTimes` say",
    examples: [
      { text: "hello" },
      { text: "rate limited twice, then succeeds", failWith: "rate_limited", failTimes: 2 },
      { text: "a dead letter: refused credentials are not retried", failWith: "auth" },
      { text: "slow and dear", latencyMs: 5_000, costCents: 25 }
    ]
  }),
  result: Schema.Struct({ echo: Schema.String }),
  estimateCents: (input) => input.costCents ?? 1,
  attempt: { timeoutMs: 30_000 },
  run: (input, ctx) =>
    ctx.call({
      estimateCents: input.costCents ?? 1,
      cost: () => input.costCents ?? 1,
      run: Effect.gen(function* () {
        const latency = input.latencyMs ?? (yield* heavyTailedLatency(200))
        const steps = Math.max(1, Math.min(10, Math.floor(latency / 200)))
        for (let step = 1; step <= steps; step++) {
          yield* Effect.sleep(Duration.millis(latency / steps))
          yield* ctx.progress(step / steps)
        }
        const failing = input.failWith !== undefined && (input.failTimes === undefined || ctx.token <= input.failTimes)
        if (failing) return yield* Effect.fail(errorFor(input.failWith!))
        return { echo: input.text }
      })
    })
})

const summarizeCost = (text: string) => 2 + Math.ceil(text.length / 2000)

/**
 * `demo.summarize`: input `{ text, maxWords? }`, result `{ summary, words }`. A slow call (median 1.5 s, long
 * tail, 20 s timeout) with 5% 429s and 3% billed timeouts; costs 2¢ plus 1¢ per 2,000 characters.
 *
 * @since 0.1.0
 * @category handlers
 */
export const summarize = Handler.make({
  type: "demo.summarize",
  version: 1,
  input: Schema.Struct({
    text: Schema.String.annotations({
      description: "the text to summarise; the call costs 2 cents plus 1 per 2,000 characters"
    }),
    maxWords: Schema.optional(
      Schema.Int.pipe(Schema.between(1, 500)).annotations({ description: "the most words in the summary (default 12)" })
    )
  }).annotations({
    description: "demo.summarize: a slow call (median 1.5 s) with 5% rate limits and 3% billed timeouts",
    examples: [{ text: "The quick brown fox jumps over the lazy dog.", maxWords: 4 }]
  }),
  result: Schema.Struct({ summary: Schema.String, words: Schema.Int }),
  estimateCents: (input) => summarizeCost(input.text),
  attempt: { timeoutMs: 20_000 },
  run: (input, ctx) =>
    ctx.call({
      estimateCents: summarizeCost(input.text),
      cost: () => summarizeCost(input.text),
      costOnError: billedOnError,
      run: simulatedCall(
        {
          medianMs: 1500,
          timeoutMs: 20_000,
          costCents: summarizeCost(input.text),
          rateLimitedRate: 0.05,
          timeoutRate: 0.03
        },
        () => {
          const words = input.text.split(/\s+/).filter((word) => word.length > 0)
          const summary = words.slice(0, input.maxWords ?? 12).join(" ")
          return { summary: words.length > (input.maxWords ?? 12) ? `${summary}…` : summary, words: words.length }
        }
      )
    })
})

const embedCost = (texts: ReadonlyArray<string>) => Math.max(1, Math.ceil(texts.length / 4))

/** A deterministic 8-dimensional unit vector per text: the same text always embeds the same. */
const embedOne = (text: string): Array<number> => {
  const v = new Array<number>(8).fill(0)
  for (let i = 0; i < text.length; i++) v[i % 8]! += ((text.charCodeAt(i) * 2654435761) % 1000) / 1000 - 0.5
  const norm = Math.sqrt(v.reduce((sum, x) => sum + x * x, 0)) || 1
  return v.map((x) => Math.round((x / norm) * 1e4) / 1e4)
}

/**
 * `demo.embed`: input `{ texts: string[] }` (1 to 256), result `{ dimensions: 8, vectors }`. A fast call (median
 * 150 ms, 5 s timeout) with 3% 429s and 1% billed timeouts; costs 1¢ per 4 texts.
 *
 * @since 0.1.0
 * @category handlers
 */
export const embed = Handler.make({
  type: "demo.embed",
  version: 1,
  input: Schema.Struct({
    texts: Schema.Array(Schema.String)
      .pipe(Schema.minItems(1), Schema.maxItems(256))
      .annotations({ description: "1 to 256 texts to embed; the call costs 1 cent per 4 texts" })
  }).annotations({
    description: "demo.embed: a fast call (median 150 ms) with 3% rate limits and 1% billed timeouts",
    examples: [{ texts: ["first", "second"] }]
  }),
  result: Schema.Struct({ dimensions: Schema.Int, vectors: Schema.Array(Schema.Array(Schema.Number)) }),
  estimateCents: (input) => embedCost(input.texts),
  attempt: { timeoutMs: 5_000 },
  run: (input, ctx) =>
    ctx.call({
      estimateCents: embedCost(input.texts),
      cost: () => embedCost(input.texts),
      costOnError: billedOnError,
      run: simulatedCall(
        {
          medianMs: 150,
          timeoutMs: 5_000,
          costCents: embedCost(input.texts),
          rateLimitedRate: 0.03,
          timeoutRate: 0.01
        },
        () => ({ dimensions: 8, vectors: input.texts.map(embedOne) })
      )
    })
})

/**
 * Every demo handler, in the order the dashboard lists them.
 *
 * @since 0.1.0
 * @category handlers
 */
export const handlers = [echo, summarize, embed] as const

/**
 * The reply of the model server `demo.model` calls: what it billed for the call.
 *
 * @since 0.6.0
 * @category models
 */
export const ModelReply = Schema.Struct({ costCents: Schema.Number.pipe(Schema.nonNegative()) })

/**
 * The result of `demo.model`: what the call cost, and the lease token of the attempt that made it (so a result
 * written under a stale lease can be told from the last holder's).
 *
 * @since 0.6.0
 * @category models
 */
export const ModelResult = Schema.Struct({ costCents: Schema.Number, token: Schema.Int })

/**
 * `demo.model`: input `{ text, costCents? }`, result `{ costCents, token }`. Each attempt makes one call to the model
 * server at `url` (`serve --demo --demo-model-url URL`): a `POST` of `{ jobId, token, attempt, pid, text,
 * costCents }` that the server bills on receipt and answers with what it billed. The call is reserved at its
 * estimate (`costCents`, default 1) before it is sent and settled at the billed amount; a call that fails after it
 * was sent (a timeout, a reset) is charged its estimate, since the server may have billed it. This is the job type
 * the chaos harness runs, so that the server's ledger, keyed by job and lease token, can be set against the Store's
 * spend.
 *
 * @since 0.6.0
 * @category handlers
 */
export const model = (url: string) =>
  Handler.make({
    type: "demo.model",
    version: 1,
    input: Schema.Struct({
      text: Schema.String.annotations({ description: "the prompt sent to the model server" }),
      costCents: Schema.optional(
        Schema.Int.pipe(Schema.between(0, 10_000)).annotations({
          description: "what the model server bills for one call, also its estimate (default 1)"
        })
      )
    }).annotations({
      description: "demo.model: one billed call to the model server of --demo-model-url per attempt",
      examples: [{ text: "hello", costCents: 2 }]
    }),
    result: ModelResult,
    estimateCents: (input) => input.costCents ?? 1,
    attempt: { timeoutMs: 5_000 },
    run: (input, ctx) =>
      ctx
        .call({
          estimateCents: input.costCents ?? 1,
          cost: (reply) => reply.costCents,
          costOnError: () => input.costCents ?? 1,
          run: Effect.tryPromise({
            try: async (signal) => {
              const response = await fetch(url, {
                method: "POST",
                headers: { "content-type": "application/json" },
                body: JSON.stringify({
                  jobId: ctx.jobId,
                  token: ctx.token,
                  attempt: ctx.attempt,
                  pid: process.pid,
                  text: input.text,
                  costCents: input.costCents ?? 1
                }),
                signal: AbortSignal.any([signal, AbortSignal.timeout(5_000)])
              })
              if (!response.ok) {
                throw new SimulatedModelError({
                  message: `model server answered ${response.status}`,
                  status: response.status
                })
              }
              return Schema.decodeUnknownSync(ModelReply)(await response.json())
            },
            catch: (error) =>
              error instanceof SimulatedModelError
                ? error
                : new SimulatedModelError({
                    message: `the model call failed: ${(error as Error).message}`,
                    code: (error as Error).name === "TimeoutError" ? "ETIMEDOUT" : "ECONNRESET"
                  })
          })
        })
        .pipe(Effect.map((reply) => ({ costCents: reply.costCents, token: ctx.token })))
  })
