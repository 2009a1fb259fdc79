import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import type { ModelCallContext } from "@slowcall/providers"
import { ClientTimeout, Pricing, withAnthropic, withGemini, withOpenAI } from "@slowcall/providers"
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

export { message, priced, reply }
