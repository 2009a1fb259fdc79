import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Client, Handler, Store, Transport, Worker } from "@slowcall/core"
import { Effect, Layer, Schema, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { Tracing } from "../src/index.js"

const summarize = Handler.make({
  type: "summarize",
  version: 1,
  input: Schema.Struct({ text: Schema.String }),
  result: Schema.Struct({ summary: Schema.String }),
  attempt: { timeoutMs: 5_000 },
  run: (input, ctx) =>
    ctx
      .call({
        estimateCents: 3,
        run: Effect.succeed({ summary: input.text.slice(0, 2), usage: { input: 120, output: 7 } }),
        cost: () => 2,
        span: {
          system: "openai",
          model: "gpt-4o-mini",
          usage: (reply) => ({ inputTokens: reply.usage.input, outputTokens: reply.usage.output })
        }
      })
      .pipe(Effect.map((reply) => ({ summary: reply.summary })))
})

const run = (exporter: InMemorySpanExporter) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const { job } = yield* client.submit({ queue: "otel-q", type: "summarize", input: { text: "hello" } })
    const done = yield* client.watch(job.id, { intervalMs: 10 }).pipe(
      Stream.filter((j) => j.state === "succeeded"),
      Stream.runHead,
      Effect.flatten
    )
    // The exporter forgets its spans when the provider shuts down with the scope: read them before.
    yield* Effect.sleep("50 millis")
    return { submitted: job, done, spans: exporter.getFinishedSpans() }
  }).pipe(
    Effect.provide(
      Layer.mergeAll(Client.layer, Worker.layer({ queue: "otel-q", handlers: [summarize] })).pipe(
        Layer.provideMerge(Layer.merge(Store.layerMemory, Transport.layerMemory()))
      )
    ),
    Effect.provide(Tracing.layer({ serviceName: "slowcall-test", spanProcessor: new SimpleSpanProcessor(exporter) })),
    Effect.scoped,
    Effect.runPromise
  )

describe("Tracing.layer", () => {
  it("a submit and its worker run are one trace: the worker's spans descend from the submit span", async () => {
    const exporter = new InMemorySpanExporter()
    const { done, spans, submitted } = await run(exporter)
    expect(done.state).toBe("succeeded")
    const byName = (name: string) => spans.filter((span) => span.name === name)
    const [submit] = byName("slowcall.submit")
    const [attempt] = byName("slowcall.attempt")
    const [claim] = byName("slowcall.claim")
    const [call] = byName("slowcall.model_call")
    const [settle] = byName("slowcall.settle")
    if (!submit || !attempt || !claim || !call || !settle) throw new Error(`missing spans: ${spans.map((s) => s.name)}`)
    const traceId = submit.spanContext().traceId
    // The job stores the submit span's traceparent: the worker's spans hang under it.
    expect(submitted.traceId).toBe(`00-${traceId}-${submit.spanContext().spanId}-01`)
    for (const span of [attempt, claim, call, settle]) expect(span.spanContext().traceId).toBe(traceId)
    expect(attempt.parentSpanContext?.spanId).toBe(submit.spanContext().spanId)
    expect(claim.parentSpanContext?.spanId).toBe(submit.spanContext().spanId)
    expect(call.parentSpanContext?.spanId).toBe(attempt.spanContext().spanId)
    expect(settle.parentSpanContext?.spanId).toBe(attempt.spanContext().spanId)
    expect(submit.attributes).toMatchObject({ "slowcall.queue": "otel-q", "slowcall.job_id": submitted.id })
    expect(attempt.attributes).toMatchObject({
      "slowcall.job_id": submitted.id,
      "slowcall.token": 1,
      "slowcall.attempt": 1
    })
    expect(call.attributes).toMatchObject({
      "gen_ai.system": "openai",
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.usage.input_tokens": 120,
      "gen_ai.usage.output_tokens": 7,
      "slowcall.cost_cents": 2,
      "slowcall.job_id": submitted.id,
      "slowcall.token": 1,
      "slowcall.attempt": 1
    })
    expect(settle.attributes).toMatchObject({ "slowcall.decision": "Settle", "slowcall.ended": "Succeeded" })
  })

  it("rejects a blank service name and an empty processor list with a TypeError", () => {
    expect(() =>
      Tracing.layer({ serviceName: " ", spanProcessor: new SimpleSpanProcessor(new InMemorySpanExporter()) })
    ).toThrow(TypeError)
    expect(() => Tracing.layer({ serviceName: "svc", spanProcessor: [] })).toThrow(/span processor/)
    expect(() => Tracing.layerGlobal({ serviceName: "" })).toThrow(TypeError)
  })
})
