/**
 * @since 0.1.0
 */
export * as AiSdk from "./AiSdk.js"
export { withAiSdk } from "./AiSdk.js"
export * as Anthropic from "./Anthropic.js"
export { withAnthropic } from "./Anthropic.js"
export * as Gemini from "./Gemini.js"
export { withGemini } from "./Gemini.js"
export type { ModelCallContext } from "./ModelCall.js"
export * as ModelCall from "./ModelCall.js"
export { ClientTimeout, InvalidCredentialLabel, InvalidEstimate } from "./ModelCall.js"
export * as OpenAI from "./OpenAI.js"
export { withOpenAI } from "./OpenAI.js"
export * as Pricing from "./Pricing.js"
export { PriceNotFound, withPrices } from "./Pricing.js"
