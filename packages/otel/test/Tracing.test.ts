import { trace } from "@opentelemetry/api"
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Client, Handler, Store, Transport, Worker } from "@slowcall/core"
import { Effect, Layer, Schema, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Tracing } from "../src/index.js"

/** How many times the call's `cost` ran, per test. */
let costRuns = 0

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
        cost: () => {
          costRuns++
          return 2
        },
        span: {
          system: "openai",
          model: "gpt-4o-mini",
          usage: (reply) => ({ inputTokens: reply.usage.input, outputTokens: reply.usage.output })
        }
      })
      .pipe(Effect.map((reply) => ({ summary: reply.summary })))
})

/**
 * A job that outlives several heartbeats: a 300 ms lease (100 ms call timeout, 200 ms margin) renewed every 100 ms,
 * and a handler that takes 450 ms.
 */
const slow = Handler.make({
  type: "slow",
  version: 1,
  input: Schema.Struct({}),
  result: Schema.Struct({ done: Schema.Boolean }),
  attempt: { timeoutMs: 100, marginMs: 200 },
  run: () => Effect.as(Effect.sleep("450 millis"), { done: true })
})

/** A call whose cost function throws: the settlement keeps the reservation, the span goes without a cost. */
const badCost = Handler.make({
  type: "badcost",
  version: 1,
  input: Schema.Struct({}),
  result: Schema.Struct({ ok: Schema.Boolean }),
  attempt: { timeoutMs: 5_000 },
  run: (_input, ctx) =>
    ctx.call({
      estimateCents: 3,
      run: Effect.succeed({ ok: true }),
      cost: () => {
        costRuns++
        throw new Error("no price for this model")
      }
    })
})

const run = (
  exporter: InMemorySpanExporter,
  tracing: Layer.Layer<never> = Tracing.layer({
    serviceName: "slowcall-test",
    spanProcessor: new SimpleSpanProcessor(exporter)
  }),
  type: "summarize" | "slow" | "badcost" = "summarize"
) =>
  Effect.gen(function* () {
    const client = yield* Client.Client
    const input = type === "summarize" ? { text: "hello" } : {}
    const { job } = yield* client.submit({ queue: "otel-q", type, input })
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
      Layer.mergeAll(Client.layer, Worker.layer({ queue: "otel-q", handlers: [summarize, slow, badCost] })).pipe(
        Layer.provideMerge(Layer.merge(Store.layerMemory, Transport.layerMemory()))
      )
    ),
    Effect.provide(tracing),
    Effect.scoped,
    Effect.runPromise
  )

/** The checks of one traced summarize job: one trace from the submit, GenAI attributes, the cost computed once. */
const expectOneTrace = (result: Awaited<ReturnType<typeof run>>) => {
  const { done, spans, submitted } = result
  expect(done.state).toBe("succeeded")
  expect(done.costCents).toBe(2)
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
  // The span's cost and the settlement's come from one run of the call's `cost`.
  expect(costRuns).toBe(1)
}

afterEach(() => {
  costRuns = 0
})

describe("Tracing.layer", () => {
  it("a submit and its worker run are one trace: the worker's spans descend from the submit span", async () => {
    const exporter = new InMemorySpanExporter()
    expectOneTrace(await run(exporter))
  })

  it("a job that outlives its first heartbeat gets renewed heartbeat spans under its attempt", async () => {
    const exporter = new InMemorySpanExporter()
    const { done, spans, submitted } = await run(exporter, undefined, "slow")
    expect(done.state).toBe("succeeded")
    const [attempt] = spans.filter((span) => span.name === "slowcall.attempt")
    const beats = spans.filter((span) => span.name === "slowcall.heartbeat")
    if (attempt === undefined) throw new Error(`no attempt span: ${spans.map((s) => s.name)}`)
    expect(beats.length).toBeGreaterThanOrEqual(1)
    for (const beat of beats) {
      expect(beat.parentSpanContext?.spanId).toBe(attempt.spanContext().spanId)
      expect(beat.spanContext().traceId).toBe(attempt.spanContext().traceId)
      expect(beat.attributes).toMatchObject({
        "slowcall.job_id": submitted.id,
        "slowcall.token": 1,
        "slowcall.heartbeat.result": "Renewed"
      })
    }
  })

  it("rejects a blank service name and an empty processor list with a TypeError", () => {
    expect(() =>
      Tracing.layer({ serviceName: " ", spanProcessor: new SimpleSpanProcessor(new InMemorySpanExporter()) })
    ).toThrow(TypeError)
    expect(() => Tracing.layer({ serviceName: "svc", spanProcessor: [] })).toThrow(/span processor/)
    expect(() => Tracing.layerGlobal({ serviceName: "" })).toThrow(TypeError)
  })
})

describe("a cost function that throws while tracing", () => {
  it("runs once; the span has no cost and the settlement keeps the reservation", async () => {
    const exporter = new InMemorySpanExporter()
    const { done, spans } = await run(exporter, undefined, "badcost")
    expect(done.state).toBe("succeeded")
    expect(done.costCents).toBe(3)
    const [call] = spans.filter((span) => span.name === "slowcall.model_call")
    expect(call?.attributes["slowcall.estimate_cents"]).toBe(3)
    expect(call?.attributes).not.toHaveProperty("slowcall.cost_cents")
    expect(costRuns).toBe(1)
  })
})

describe("Tracing.layerFromProvider", () => {
  it("sends the spans to the application's provider and leaves it running after the scope closes", async () => {
    const exporter = new InMemorySpanExporter()
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
    expectOneTrace(await run(exporter, Tracing.layerFromProvider(provider, { serviceName: "slowcall-test" })))
    // The provider is the application's: still exporting once the layer is gone.
    provider.getTracer("after").startSpan("still-open").end()
    expect(exporter.getFinishedSpans().map((span) => span.name)).toContain("still-open")
    await provider.shutdown()
  })
})

describe("Tracing.layerGlobal", () => {
  afterEach(() => {
    trace.disable()
  })

  it("sends the spans to the provider registered with @opentelemetry/api", async () => {
    const exporter = new InMemorySpanExporter()
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
    expect(trace.setGlobalTracerProvider(provider)).toBe(true)
    expectOneTrace(await run(exporter, Tracing.layerGlobal({ serviceName: "slowcall-test" })))
    await provider.shutdown()
  })
})
