import * as Handler from "@slowcall/core/Handler"
import { Effect, Schema } from "effect"

// A handler shared by the snippets that need one; its call stands in for a provider SDK.
export const summarize = Handler.make({
  type: "summarize",
  version: 1,
  input: Schema.Struct({ text: Schema.String }),
  result: Schema.Struct({ summary: Schema.String }),
  attempt: { timeoutMs: 60_000, retries: 1 },
  estimateCents: 2,
  run: (input, ctx) =>
    ctx.call({
      estimateCents: 2,
      run: Effect.succeed({ summary: input.text.slice(0, 40) }),
      cost: () => 1
    })
})
