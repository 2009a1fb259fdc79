/**
 * The fields of a billed call that the fleet limiter reads (`resource`, `tokens`, `usage`, `rateLimit`): their types,
 * checked by the compiler (`npm run check`), and what the readers give for a reply. How the worker's limiter uses
 * them is tested with the worker.
 */
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Effect } from "effect"
import type { CallOptions, CallTokens, CallUsage, HandlerContext } from "../src/Handler.js"
import * as RateLimit from "../src/RateLimit.js"

interface Reply {
  readonly text: string
  readonly usage: { readonly prompt: number; readonly completion: number }
  readonly headers: Headers
}

const reply: Reply = {
  text: "hi",
  usage: { prompt: 1_200, completion: 300 },
  headers: new Headers({
    "x-ratelimit-limit-requests": "500",
    "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-reset-requests": "120ms"
  })
}

describe("CallOptions: what the fleet limiter reads", () => {
  it("a call names its resource and its token reservation, and reads usage and rate limits from the reply", () => {
    // Arrange
    const call = {
      estimateCents: 1,
      run: Effect.succeed(reply),
      cost: () => 1,
      resource: "openai:gpt-4.1:key-a",
      tokens: { input: 1_000, maxOutput: 400 },
      usage: (r: Reply) => ({ inputTokens: r.usage.prompt, outputTokens: r.usage.completion }),
      rateLimit: (r: Reply) => RateLimit.fromHeaders(r.headers)
    } satisfies CallOptions<Reply, never, never>
    // Act
    const usage = call.usage(reply)
    const limits = call.rateLimit(reply)
    // Assert
    expect(usage).toEqual({ inputTokens: 1_200, outputTokens: 300 })
    expect(limits).toEqual({ requests: { limit: 500, remaining: 0, resetMs: 120 } })
    expect(RateLimit.waitMs(limits)).toBe(120)
    expectTypeOf<CallOptions<Reply, never, never>["resource"]>().toEqualTypeOf<string | undefined>()
    expectTypeOf<CallOptions<Reply, never, never>["tokens"]>().toEqualTypeOf<CallTokens | undefined>()
    expectTypeOf<CallOptions<Reply, never, never>["usage"]>().toEqualTypeOf<
      ((result: Reply) => CallUsage | undefined) | undefined
    >()
    expectTypeOf<CallOptions<Reply, never, never>["rateLimit"]>().toEqualTypeOf<
      ((result: Reply) => RateLimit.RateLimitInfo | undefined) | undefined
    >()
  })

  it("all four are optional: a call without them is the call it always was", () => {
    const plain: CallOptions<Reply, never, never> = { estimateCents: 1, run: Effect.succeed(reply), cost: () => 1 }
    expect(plain.resource ?? plain.tokens ?? plain.usage ?? plain.rateLimit).toBeUndefined()
    // `ctx.call` takes the same options.
    expectTypeOf<Parameters<HandlerContext["call"]>[0]>().toHaveProperty("resource")
    expectTypeOf<Parameters<HandlerContext["call"]>[0]>().toHaveProperty("usage")
  })

  it("the compiler refuses what the limiter could not count", () => {
    const wrong = (options: CallOptions<Reply, never, never>) => options
    expect(() =>
      wrong({
        estimateCents: 1,
        run: Effect.succeed(reply),
        cost: () => 1,
        // @ts-expect-error token counts are numbers
        tokens: { input: "1000" }
      })
    ).not.toThrow()
    expect(() =>
      wrong({
        estimateCents: 1,
        run: Effect.succeed(reply),
        cost: () => 1,
        // @ts-expect-error usage reads the call's own result type
        usage: (r: { readonly other: number }) => ({ inputTokens: r.other })
      })
    ).not.toThrow()
  })
})
