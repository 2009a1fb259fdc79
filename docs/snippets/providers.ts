import { createAnthropic } from "@ai-sdk/anthropic"
import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import { Handler } from "@slowcall/core"
import type { ModelCallContext } from "@slowcall/providers"
import {
  ClientTimeout,
  ModelCall,
  Pricing,
  withAiSdk,
  withAnthropic,
  withGemini,
  withOpenAI
} from "@slowcall/providers"
import * as ai from "ai"
import { Schema } from "effect"
import OpenAI from "openai"

declare const ctx: ModelCallContext

// #region wrap
// Retries belong to the job (it knows the budget, the deadline and the lease): none in the SDKs.
const openai = withOpenAI(new OpenAI({ maxRetries: 0 }), ctx)
const anthropic = withAnthropic(new Anthropic({ maxRetries: 0 }), ctx)
const gemini = withGemini(new GoogleGenAI({ apiKey: process.env.GEMINI_API_KEY ?? "" }), ctx)

const reply = await openai.chat.completions.create({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Summarise this ticket" }]
})
const message = await anthropic.messages.create({
  model: "claude-sonnet-4-5",
  max_tokens: 512,
  messages: [{ role: "user", content: "Summarise this ticket" }]
})
// A stream: the reservation settles when it ends, or by what it consumed when it is cut.
const stream = await gemini.models.generateContentStream({
  model: "gemini-2.5-flash",
  contents: "Summarise this ticket"
})
for await (const chunk of stream) process.stdout.write(chunk.text ?? "")
// #endregion wrap

// #region prices
const prices = Pricing.withPrices({
  "gpt-4o": { inputCentsPerMTok: 250, cachedInputCentsPerMTok: 125, outputCentsPerMTok: 1000 },
  "my-finetune": { inputCentsPerMTok: 300, outputCentsPerMTok: 1200 }
})
const priced = withOpenAI(new OpenAI({ maxRetries: 0 }), ctx, {
  prices,
  // serves a model the table lacks; without it such a model is PriceNotFound before the request
  fallbackPrice: { inputCentsPerMTok: 500, outputCentsPerMTok: 1500 }
})
// #endregion prices

// #region timeout
// Without the wrapper, tell a Gemini client timeout from a user abort by the signal you passed.
const controller = new AbortController()
const client = new GoogleGenAI({ apiKey: "...", httpOptions: { timeout: 30_000 } })
try {
  await client.models.generateContent({
    model: "gemini-2.5-flash",
    contents: "hi",
    config: { abortSignal: controller.signal }
  })
} catch (e) {
  const isAbort = e instanceof Error && e.name === "AbortError"
  // aborted by us: a user abort (cancelled); otherwise the SDK's own timer fired (timeout, may have been billed)
  throw isAbort && !controller.signal.aborted ? new ClientTimeout("gemini", { cause: e }) : e
}

// #endregion timeout

// #region limits
// Every call names the resource it uses, provider:model:credential. The credential is a label of the key you pass
// (never the key): calls through two keys are limited apart, calls through one key share its limits.
const keyA = withOpenAI(new OpenAI({ apiKey: process.env.OPENAI_KEY_A, maxRetries: 0 }), ctx, { credential: "key-a" })
// openai:gpt-4.1:key-a, with the prompt's tokens and max_tokens reserved before the request
await keyA.chat.completions.create({ model: "gpt-4.1", max_tokens: 500, messages: [{ role: "user", content: "Hi" }] })

// A provider that limits a model class as one: name the resource yourself.
const sonnet = withAnthropic(new Anthropic({ maxRetries: 0 }), ctx, {
  credential: "key-b",
  resource: ({ credential }) => `anthropic:sonnet:${credential}`
})
// #endregion limits

// #region ai-sdk-stream
const claude = createAnthropic()
const llm = withAiSdk(ai, ctx)
const result = await llm.streamText({
  model: claude("claude-sonnet-4-5"),
  prompt: "Draft a reply to this ticket",
  maxOutputTokens: 1_024
})
// A stream that failed or was cut throws here (a 429 as the provider's own error, with its retry-after), so the
// job retries it by its class; it never passes for a complete answer.
for await (const text of result.textStream) process.stdout.write(text)
// #endregion ai-sdk-stream

// #region ai-sdk-effect
const draft = Handler.make({
  type: "draft",
  version: 1,
  input: Schema.Struct({ ticket: Schema.String }),
  result: Schema.Struct({ text: Schema.String }),
  attempt: { timeoutMs: 60_000 },
  run: (input, ctx) =>
    // A ModelCallContext made from the Effect handler's context: each AI SDK call is one ctx.call of the attempt.
    ModelCall.tryPromise(ctx, async (model) => {
      const { text } = await withAiSdk(ai, model).generateText({
        model: claude("claude-sonnet-4-5"),
        prompt: `Draft a reply to: ${input.ticket}`
      })
      return { text }
    })
})

// #endregion ai-sdk-effect

export { draft, message, priced, reply, sonnet }
