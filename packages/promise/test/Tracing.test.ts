import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Tracing } from "@slowcall/otel"
import { describe, expect, it } from "vitest"
import { open } from "../src/index.js"

const reply = { text: "short", usage: { input: 120, output: 7 } }

describe("open({ tracing })", () => {
  it("traces submit, claim, attempt and the model call into the application's provider, with the GenAI attributes", async () => {
    const exporter = new InMemorySpanExporter()
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
    const queue = await open({
      url: "memory:",
      queue: "traced",
      watchIntervalMs: 20,
      tracing: Tracing.layerFromProvider(provider, { serviceName: "promise-test" })
    })
    try {
      const worker = queue.worker({
        handlers: {
          summarize: async (_input: { text: string }, ctx) => {
            const r = await ctx.call(async () => reply, {
              estimateCents: 3,
              cost: () => 2,
              span: {
                system: "anthropic",
                model: "claude-sonnet-4",
                usage: (result) => ({ inputTokens: result.usage.input, outputTokens: result.usage.output })
              }
            })
            return { summary: r.text }
          }
        }
      })
      await worker.start()
      const { id, job } = await queue.submit("summarize", { text: "a long text" })
      const done = await queue.wait(id, { timeoutMs: 10_000 })
      await worker.stop()
      expect(done.state).toBe("succeeded")
      const spans = exporter.getFinishedSpans()
      const one = (name: string) => {
        const found = spans.filter((span) => span.name === name)
        expect(
          found.map((span) => span.name),
          `spans: ${spans.map((s) => s.name)}`
        ).toEqual([name])
        return found[0]!
      }
      const submit = one("slowcall.submit")
      const attempt = one("slowcall.attempt")
      const call = one("slowcall.model_call")
      const traceId = submit.spanContext().traceId
      // The job carries the submit span's traceparent to the worker: one trace from submit to the model call.
      expect(job.traceId).toBe(`00-${traceId}-${submit.spanContext().spanId}-01`)
      expect(attempt.spanContext().traceId).toBe(traceId)
      expect(attempt.parentSpanContext?.spanId).toBe(submit.spanContext().spanId)
      expect(call.parentSpanContext?.spanId).toBe(attempt.spanContext().spanId)
      expect(call.attributes).toMatchObject({
        "gen_ai.system": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 7,
        "slowcall.cost_cents": 2,
        "slowcall.job_id": id
      })
    } finally {
      await queue.close()
      await provider.shutdown()
    }
  })

  it("the call's own usage (which the fleet limiter reads) gives the span's token counts when span.usage is absent", async () => {
    // Arrange
    const exporter = new InMemorySpanExporter()
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
    const queue = await open({
      url: "memory:",
      queue: "traced-usage",
      watchIntervalMs: 20,
      tracing: Tracing.layerFromProvider(provider, { serviceName: "promise-test" })
    })
    try {
      const worker = queue.worker({
        handlers: {
          summarize: async (_input: { text: string }, ctx) => {
            const r = await ctx.call(async () => reply, {
              estimateCents: 3,
              cost: () => 2,
              resource: "anthropic:claude-sonnet-4:key-a",
              tokens: { input: 150, maxOutput: 64 },
              usage: (result) => ({ inputTokens: result.usage.input, outputTokens: result.usage.output }),
              rateLimit: () => ({ requests: { limit: 50, remaining: 49 } }),
              span: { system: "anthropic", model: "claude-sonnet-4" }
            })
            return { summary: r.text }
          }
        }
      })
      // Act
      await worker.start()
      const { id } = await queue.submit("summarize", { text: "a long text" })
      const done = await queue.wait(id, { timeoutMs: 10_000 })
      await worker.stop()
      // Assert
      expect(done.state).toBe("succeeded")
      const calls = exporter.getFinishedSpans().filter((span) => span.name === "slowcall.model_call")
      expect(calls).toHaveLength(1)
      expect(calls[0]?.attributes).toMatchObject({
        "gen_ai.system": "anthropic",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 7
      })
    } finally {
      await queue.close()
      await provider.shutdown()
    }
  })

  it("makes no span without it", async () => {
    const exporter = new InMemorySpanExporter()
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
    const queue = await open({ url: "memory:", queue: "untraced", watchIntervalMs: 20 })
    try {
      const worker = queue.worker({ handlers: { echo: async (input: { n: number }) => input } })
      await worker.start()
      const { id, job } = await queue.submit("echo", { n: 1 })
      expect((await queue.wait(id, { timeoutMs: 10_000 })).state).toBe("succeeded")
      await worker.stop()
      // Without a tracer the trace id is the default one (no traceparent) and the provider saw nothing.
      expect(job.traceId?.startsWith("00-")).toBe(false)
      expect(exporter.getFinishedSpans()).toEqual([])
    } finally {
      await queue.close()
      await provider.shutdown()
    }
  })
})
