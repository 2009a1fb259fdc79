/**
 * Plays every row of `cases.ts` through the real SDK, wrapped by this package, against the fake provider, and checks
 * what `normalize` makes of what the SDK threw or returned. Also keeps docs/guide/provider-cases.md equal to the
 * table (UPDATE_PROVIDER_CASES=1 rewrites it).
 */
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import { normalize, redact } from "@slowcall/core/Normalize"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withAnthropic } from "../src/Anthropic.js"
import { withGemini } from "../src/Gemini.js"
import { withOpenAI } from "../src/OpenAI.js"
import { type Case, cases, renderCases } from "./cases.js"
import { type FakeProvider, refusedUrl, startFakeProvider } from "./fakeProvider.js"
import { recordingContext } from "./recordingContext.js"

const keys = {
  openai: "sk-proj-client0123456789abcdefghij",
  anthropic: "sk-ant-api03-client0123456789abcdef",
  gemini: "AIzaSyClient0123456789abcdefghijklmno"
}

let fake: FakeProvider
let refused: string
beforeAll(async () => {
  fake = await startFakeProvider()
  refused = await refusedUrl()
})
afterAll(() => fake.close())

interface Outcome {
  readonly thrown?: unknown
  /** What carries the finish reason: the response, or the stream's chunk that reported it. */
  readonly returned?: unknown
  readonly finish?: string | undefined
}

const lastWith = <T>(items: ReadonlyArray<T>, pick: (t: T) => string | null | undefined) => {
  let found: { item: T; value: string } | undefined
  for (const item of items) {
    const value = pick(item)
    if (typeof value === "string") found = { item, value }
  }
  return found
}

type Rec = Record<string, any>

const play = async (row: Case): Promise<Outcome> => {
  const base = row.scenario.kind === "refused" ? refused : fake.url
  const sc = row.scenario
  const timeout = sc.kind === "timeout" || (sc.kind === "stall" && sc.end === "timeout") ? 150 : 5_000
  if (sc.kind === "reply" || sc.kind === "stall") fake.reply(sc.reply)
  else fake.reply({ kind: "stall" })
  const ctx = recordingContext()
  const before = fake.requests.length
  if (row.scenario.kind === "abort") {
    void (async () => {
      while (fake.requests.length === before) await new Promise((r) => setTimeout(r, 5))
      ctx.abort()
    })()
  }
  const messages = [{ role: "user" as const, content: "hello" }]
  const drain = async (s: AsyncIterable<unknown>) => {
    const chunks: Array<unknown> = []
    for await (const c of s) {
      chunks.push(c)
      // A stalled stream the job gives up on: abort once the first chunk arrived.
      if (sc.kind === "stall" && sc.end === "abort" && chunks.length === 1) ctx.abort()
    }
    return chunks as Array<Rec>
  }
  try {
    switch (row.provider) {
      case "openai": {
        const client = new OpenAI({ apiKey: keys.openai, baseURL: `${base}/v1`, maxRetries: 0, timeout })
        const calls = withOpenAI(client, ctx)
        if (row.api === "responses") {
          const r = await calls.responses.create({ model: "gpt-4.1", input: "hello" })
          return { returned: r, finish: r.status === "incomplete" ? (r.incomplete_details?.reason ?? "") : r.status }
        }
        if (row.stream) {
          const chunks = await drain(await calls.chat.completions.create({ model: "gpt-4o", messages, stream: true }))
          const f = lastWith(chunks, (c) => c.choices?.[0]?.finish_reason)
          return { returned: f?.item, ...(f ? { finish: f.value } : {}) }
        }
        const r = await calls.chat.completions.create({ model: "gpt-4o", messages })
        return { returned: r, finish: r.choices[0]?.finish_reason ?? "" }
      }
      case "anthropic": {
        const client = new Anthropic({ apiKey: keys.anthropic, baseURL: base, maxRetries: 0, timeout })
        const calls = withAnthropic(client, ctx)
        const params = { model: "claude-sonnet-4-5", max_tokens: 100, messages }
        if (row.stream) {
          const chunks = await drain(await calls.messages.create({ ...params, stream: true }))
          const f = lastWith(chunks, (c) => c.delta?.stop_reason)
          return { returned: f?.item, ...(f ? { finish: f.value } : {}) }
        }
        const r = await calls.messages.create(params)
        return { returned: r, finish: r.stop_reason ?? "" }
      }
      case "gemini": {
        const client = new GoogleGenAI({ apiKey: keys.gemini, httpOptions: { baseUrl: base, timeout } })
        const calls = withGemini(client, ctx)
        const params = { model: "gemini-2.5-flash", contents: "hello" }
        const finishOf = (c: Rec) => c.candidates?.[0]?.finishReason ?? c.promptFeedback?.blockReason
        if (row.stream) {
          const chunks = await drain(await calls.models.generateContentStream(params))
          const f = lastWith(chunks, finishOf)
          return { returned: f?.item, ...(f ? { finish: f.value } : {}) }
        }
        const r = await calls.models.generateContent(params)
        return { returned: r, finish: finishOf(r as unknown as Rec) ?? "" }
      }
    }
  } catch (e) {
    return { thrown: e }
  } finally {
    await ctx.idle()
  }
}

const constructorName = (e: unknown): string =>
  typeof e === "object" && e !== null ? (Object.getPrototypeOf(e)?.constructor?.name ?? "") : typeof e

describe("provider cases: what the real SDKs throw, classified by normalize", () => {
  it("the table covers every provider with at least 60 rows", () => {
    expect(cases.length).toBeGreaterThanOrEqual(60)
    for (const p of ["openai", "anthropic", "gemini"])
      expect(cases.filter((c) => c.provider === p).length).toBeGreaterThan(15)
    const titles = cases.map((c) => `${c.provider}/${c.title}`)
    expect(new Set(titles).size).toBe(titles.length)
  })

  for (const row of cases) {
    it(`${row.provider} ${row.api}${row.stream ? " stream" : ""}: ${row.title}`, async () => {
      // Act
      const out = await play(row)
      // Assert
      if (row.sdk === "returned") {
        expect(out.thrown, String(out.thrown)).toBeUndefined()
        expect(out.finish).toBe(row.finish)
        if (row.errorClass !== undefined) expect(normalize(out.returned).errorClass).toBe(row.errorClass)
        return
      }
      expect(out.thrown, "the SDK threw").toBeDefined()
      expect(constructorName(out.thrown)).toBe(row.sdk)
      const n = normalize(out.thrown)
      expect(n.errorClass, n.evidence).toBe(row.errorClass)
      expect(n.retryAfterMs).toBe(row.retryAfterMs)
      if (row.rateLimit !== undefined) expect(n.rateLimit).toEqual(row.rateLimit)
      for (const key of [...Object.values(keys), ...(row.secret === undefined ? [] : [row.secret])]) {
        expect(n.evidence).not.toContain(key)
      }
      if (row.secret !== undefined) {
        expect(n.evidence).toContain("[redacted]")
        // The SDK's message written into a JSON log line (its quotes escaped) keeps the secret out as well.
        const message = (out.thrown as { message?: unknown }).message
        expect(redact(JSON.stringify({ log: JSON.stringify({ message }) }))).not.toContain(row.secret)
      }
    })
  }
})

describe("docs/guide/provider-cases.md", () => {
  const file = join(import.meta.dirname, "..", "..", "..", "docs", "guide", "provider-cases.md")
  it("is what the table renders", () => {
    const rendered = renderCases(cases)
    if (process.env.UPDATE_PROVIDER_CASES === "1") writeFileSync(file, rendered)
    expect(readFileSync(file, "utf8")).toBe(rendered)
  })
})
