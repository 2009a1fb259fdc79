/**
 * Prices of model calls: a table from model name to the price of a million tokens (input, cached input, cache
 * writes, output), in US cents, and the cost of a call from the usage the provider reported. The wrappers read the
 * model's price before the call, so a model with no price fails (`PriceNotFound`) before any money is spent.
 *
 * @since 0.1.0
 */

/**
 * The price of a million tokens of a model, in US cents. `cachedInputCentsPerMTok` (tokens read from a prompt cache)
 * and `cacheWriteCentsPerMTok` (tokens written to one, Anthropic) default to the input price. All are finite and
 * never negative (`withPrices` and `make` check it).
 *
 * @since 0.1.0
 * @category models
 */
export interface Price {
  readonly inputCentsPerMTok: number
  readonly outputCentsPerMTok: number
  readonly cachedInputCentsPerMTok?: number
  readonly cacheWriteCentsPerMTok?: number
}

/**
 * Token counts of one call, split by how they are billed. `inputTokens` excludes cached and cache-write tokens
 * (each provider reports the split differently; the wrappers bring them to this form). Output tokens include
 * reasoning or thinking tokens, which every provider bills as output.
 *
 * @since 0.1.0
 * @category models
 */
export interface Usage {
  readonly inputTokens: number
  readonly cachedInputTokens: number
  readonly cacheWriteTokens: number
  readonly outputTokens: number
}

/**
 * Model name to price. A name matches exactly, or as the longest entry that is a prefix of it followed by `-`, so a
 * dated snapshot (`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`) finds its family's price and `gpt-4o-mini`
 * never takes `gpt-4o`'s.
 *
 * @since 0.1.0
 * @category models
 */
export type PriceTable = Readonly<Record<string, Price>>

/**
 * No price for a model: neither the table nor a fallback has one. Raised before the call, so nothing was spent.
 *
 * @since 0.1.0
 * @category errors
 */
export class PriceNotFound extends Error {
  readonly _tag = "PriceNotFound"
  constructor(readonly model: string) {
    super(`no price for model "${model}": add it with Pricing.withPrices or pass a fallback price`)
    this.name = "PriceNotFound"
  }
}

/**
 * A price that cannot be right: negative, not finite, or not a number. Raised where the table is built.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidPrice extends Error {
  readonly _tag = "InvalidPrice"
  constructor(
    readonly model: string,
    readonly field: string
  ) {
    super(`price of "${model}": ${field} must be a finite number >= 0`)
    this.name = "InvalidPrice"
  }
}

const cents = (usdPerMTok: number): number => Math.round(usdPerMTok * 100 * 1000) / 1000

const usd = (input: number, cachedInput: number, output: number, cacheWrite?: number): Price => ({
  inputCentsPerMTok: cents(input),
  cachedInputCentsPerMTok: cents(cachedInput),
  outputCentsPerMTok: cents(output),
  ...(cacheWrite === undefined ? {} : { cacheWriteCentsPerMTok: cents(cacheWrite) })
})

/**
 * List prices of current models (standard tier, prompts up to 200k tokens where the price has tiers), as the
 * providers publish them. Prices change: pass your own with `withPrices`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaults: PriceTable = {
  // OpenAI
  "gpt-5": usd(1.25, 0.125, 10),
  "gpt-5-mini": usd(0.25, 0.025, 2),
  "gpt-5-nano": usd(0.05, 0.005, 0.4),
  "gpt-4.1": usd(2, 0.5, 8),
  "gpt-4.1-mini": usd(0.4, 0.1, 1.6),
  "gpt-4.1-nano": usd(0.1, 0.025, 0.4),
  "gpt-4o": usd(2.5, 1.25, 10),
  "gpt-4o-mini": usd(0.15, 0.075, 0.6),
  o3: usd(2, 0.5, 8),
  "o4-mini": usd(1.1, 0.275, 4.4),
  // Anthropic (cache writes at the 5-minute rate)
  "claude-opus-4-1": usd(15, 1.5, 75, 18.75),
  "claude-opus-4": usd(15, 1.5, 75, 18.75),
  "claude-sonnet-4-5": usd(3, 0.3, 15, 3.75),
  "claude-sonnet-4": usd(3, 0.3, 15, 3.75),
  "claude-haiku-4-5": usd(1, 0.1, 5, 1.25),
  "claude-3-5-haiku": usd(0.8, 0.08, 4, 1),
  // Google Gemini
  "gemini-2.5-pro": usd(1.25, 0.125, 10),
  "gemini-2.5-flash": usd(0.3, 0.03, 2.5),
  "gemini-2.5-flash-lite": usd(0.1, 0.01, 0.4),
  "gemini-2.0-flash": usd(0.1, 0.025, 0.4)
}

const checkPrice = (model: string, p: Price): Price => {
  const fields = [
    ["inputCentsPerMTok", p.inputCentsPerMTok],
    ["outputCentsPerMTok", p.outputCentsPerMTok],
    ["cachedInputCentsPerMTok", p.cachedInputCentsPerMTok ?? 0],
    ["cacheWriteCentsPerMTok", p.cacheWriteCentsPerMTok ?? 0]
  ] as const
  for (const [field, v] of fields) {
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new InvalidPrice(model, field)
  }
  return p
}

/**
 * A price table from entries, each checked (`InvalidPrice` for a negative or non-finite price).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (entries: PriceTable): PriceTable => {
  const out: Record<string, Price> = {}
  for (const [model, p] of Object.entries(entries)) out[model] = checkPrice(model, p)
  return out
}

/**
 * `base` (the defaults unless given) with `overrides` on top: an override replaces the whole price of its model,
 * and a new model is added. Neither table is changed.
 *
 * @since 0.1.0
 * @category combinators
 */
export const withPrices = (overrides: PriceTable, base: PriceTable = defaults): PriceTable => ({
  ...base,
  ...make(overrides)
})

/**
 * The price of `model`: its own entry, else the longest entry that prefixes it up to a `-`, else `fallback`, else
 * `PriceNotFound`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const priceOf = (table: PriceTable, model: string, fallback?: Price): Price => {
  if (Object.hasOwn(table, model)) return table[model]!
  let best: string | undefined
  for (const name of Object.keys(table)) {
    if (model.startsWith(`${name}-`) && (best === undefined || name.length > best.length)) best = name
  }
  if (best !== undefined) return table[best]!
  if (fallback !== undefined) return checkPrice(model, fallback)
  throw new PriceNotFound(model)
}

/**
 * The cost in cents of `usage` at `price`: each kind of token at its own rate. Never negative; counts that are not
 * finite positive numbers count as zero.
 *
 * @since 0.1.0
 * @category combinators
 */
export const costCents = (price: Price, usage: Usage): number => {
  const n = (x: number) => (Number.isFinite(x) && x > 0 ? x : 0)
  const total =
    n(usage.inputTokens) * price.inputCentsPerMTok +
    n(usage.cachedInputTokens) * (price.cachedInputCentsPerMTok ?? price.inputCentsPerMTok) +
    n(usage.cacheWriteTokens) * (price.cacheWriteCentsPerMTok ?? price.inputCentsPerMTok) +
    n(usage.outputTokens) * price.outputCentsPerMTok
  // Rounded to a millionth of a cent, so a sum of many calls does not gather floating-point dust.
  return Math.round(total) / 1_000_000
}
