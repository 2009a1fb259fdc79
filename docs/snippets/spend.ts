import * as Handler from "@slowcall/core/Handler"
import { Data, Effect, Schema } from "effect"

// Stand-ins for a provider SDK: a reply that reports its usage, and an error that may report billed usage.
interface Reply {
  readonly text: string
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number }
}
class ProviderError extends Data.TaggedError("ProviderError")<{ readonly billedCents?: number }> {}
declare const generate: (prompt: string) => Effect.Effect<Reply, ProviderError>

// Prices in cents per token (illustrative).
const inputPrice = 0.0003
const outputPrice = 0.0012

// #region handler
export const translate = Handler.make({
  type: "translate",
  version: 1,
  input: Schema.Struct({ text: Schema.String, to: Schema.String }),
  result: Schema.Struct({ text: Schema.String }),
  attempt: { timeoutMs: 45_000, retries: 1 },
  // Expected spend of one attempt, from the input: lets a budget refuse an attempt before any model call.
  estimateCents: (input) => Math.ceil((input.text.length / 4) * (inputPrice + outputPrice) * 2),
  run: (input, ctx) =>
    ctx
      .call({
        // Reserved in the ledger under a fresh call id before the call starts.
        estimateCents: Math.ceil((input.text.length / 4) * (inputPrice + outputPrice) * 2),
        run: generate(`Translate to ${input.to}:\n${input.text}`),
        // Settled on the same call id afterwards: the actual amount.
        cost: (reply) => reply.usage.inputTokens * inputPrice + reply.usage.outputTokens * outputPrice,
        // A timeout the provider billed anyway: settle what the error reports (otherwise the reservation stands).
        costOnError: (error) => error.billedCents
      })
      .pipe(Effect.map((reply) => ({ text: reply.text })))
})
// #endregion handler
