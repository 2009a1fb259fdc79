import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as Handler from "@slowcall/core/Handler"
import * as Limiter from "@slowcall/core/Limiter"
import * as RateLimit from "@slowcall/core/RateLimit"
import { Effect, Schema } from "effect"

const resource = "openai:gpt-4.1:key-a"

// #region define
// Once, at deploy time or from an operator's tool: the same values for every worker and the dashboard.
export const define = Effect.gen(function* () {
  const limiter = yield* Limiter.Limiter
  yield* limiter.define({
    items: [
      {
        resource,
        limits: {
          maxConcurrent: 16,
          requestsPerMinute: 500,
          inputTokensPerMinute: 200_000,
          outputTokensPerMinute: 40_000,
          // 25% of every dimension kept for jobs of priority 1 and above.
          priorityShare: { minPriority: 1, share: 0.25 }
        }
      }
    ]
  })
})
// #endregion define

// #region declare
// What a handler declares: the resource of its calls (here on the handler, for every call that names none), the
// tokens each call reserves, the usage that corrects the reservation, and what the reply said about the limits.
interface Reply {
  readonly text: string
  readonly usage: { readonly input_tokens: number; readonly output_tokens: number }
  readonly headers: Record<string, string>
}
declare const complete: (prompt: string, maxTokens: number) => Effect.Effect<Reply, unknown>

export const summarize = Handler.make({
  type: "summarize",
  version: 1,
  input: Schema.Struct({ text: Schema.String }),
  result: Schema.String,
  attempt: { timeoutMs: 60_000 },
  resource,
  run: ({ text }, ctx) =>
    Effect.map(
      ctx.call({
        estimateCents: 2,
        // resource: "openai:gpt-4.1:key-b" would override the handler's for this call.
        tokens: { input: Math.ceil(text.length / 4), maxOutput: 1_024 },
        usage: (reply) => ({ inputTokens: reply.usage.input_tokens, outputTokens: reply.usage.output_tokens }),
        rateLimit: (reply) => RateLimit.fromHeaders(reply.headers),
        cost: (reply) => (reply.usage.input_tokens * 2 + reply.usage.output_tokens * 8) / 10_000,
        run: complete(text, 1_024)
      }),
      (reply) => reply.text
    )
})
// #endregion declare

// #region call
// Around one model call: acquire (one request, the input estimate and max_tokens), call, release with the usage.
export const around = <A, E>(call: Effect.Effect<A, E>, holder: { readonly jobId: string; readonly token: number }) =>
  Effect.gen(function* () {
    const limiter = yield* Limiter.Limiter
    const callId = `${holder.jobId}:${holder.token}:1`
    const acquired = yield* limiter.apply({
      items: [
        {
          _tag: "Acquire",
          resource,
          callId,
          holder,
          leaseMs: 60_000,
          cost: { requests: 1, inputTokens: 1_500, outputTokens: 1_024 }
        }
      ]
    })
    const verdict = acquired.results[0]!
    if (verdict._tag !== "Granted") return { _tag: "NotNow" as const, verdict }
    const result = yield* call
    yield* limiter.apply({
      items: [
        {
          _tag: "Release",
          resource,
          callId,
          holder,
          reached: true,
          usage: { inputTokens: 1_380, outputTokens: 212 }
        }
      ]
    })
    return { _tag: "Done" as const, result }
  })
// #endregion call

// #region layers
// The Postgres layers provide the Limiter beside the Store: nothing else to wire.
export const app = define.pipe(Effect.provide(PgStore.layerPglite()))
// #endregion layers
