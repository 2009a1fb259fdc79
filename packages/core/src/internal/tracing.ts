/**
 * Trace propagation between a submit and the attempts of its job. The job record has one `traceId` field; when a
 * submit runs under a real tracer it stores there the W3C `traceparent` of its `slowcall.submit` span
 * (`00-<32 hex trace id>-<16 hex span id>-01`), so the worker's spans of that job become children of the submit span
 * in the same trace. A bare 32-hex trace id (the default when no tracer was installed at submit: the job id without
 * dashes) still joins the trace, under a parent span id derived from the trace id itself. Any other string (a
 * caller's own correlation id) gives no parent: the worker's spans then start their own trace and carry the string
 * as the `slowcall.trace_id` attribute.
 *
 * Effect's built-in tracer exports nothing, so spans made for it would reach no one: `activeTracer` is
 * `undefined` there (and when tracing is disabled), and every span of slowcall is made only when it is defined.
 *
 * @internal
 */
import { Context, Effect, Either, Exit, FiberRef, Option, Tracer } from "effect"
import type { CallOptions } from "../Handler.js"
import type { Job } from "../Job.js"

const builtIn: Tracer.Tracer = Effect.runSync(Effect.tracer)

const noTracer: Effect.Effect<Tracer.Tracer | undefined> = Effect.succeed(undefined)

/**
 * The tracer spans go to, or `undefined` when tracing is off or only Effect's built-in tracer is installed.
 *
 * @internal
 */
export const activeTracer: Effect.Effect<Tracer.Tracer | undefined> = Effect.withFiberRuntime((fiber) => {
  // The fiber's own tracer is the one `Effect.tracer` reads (its default services' Tracer).
  if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return noTracer
  const tracer = fiber.currentTracer
  return tracer === builtIn ? noTracer : Effect.succeed(tracer)
})

const traceparentPattern = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/
const traceIdPattern = /^[0-9a-f]{32}$/
const zeroTrace = "0".repeat(32)
const zeroSpan = "0".repeat(16)

/**
 * The W3C `traceparent` of a span: version 00, its trace and span ids, and the sampled flag.
 *
 * @internal
 */
export const traceparentOf = (span: Tracer.AnySpan): string =>
  `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`

/**
 * The parent span a stored trace id names: a `traceparent` gives its trace and span; a bare 32-hex trace id gives
 * that trace under a span id taken from its last 16 digits; anything else (or all-zero ids, invalid in W3C) gives
 * `undefined`.
 *
 * @internal
 */
export const parentOf = (traceId: string | null): Tracer.ExternalSpan | undefined => {
  if (traceId === null) return undefined
  const full = traceparentPattern.exec(traceId)
  if (full !== null) {
    const [, trace, span, flags] = full as unknown as [string, string, string, string]
    if (trace === zeroTrace || span === zeroSpan) return undefined
    return Tracer.externalSpan({ traceId: trace, spanId: span, sampled: (Number.parseInt(flags, 16) & 1) === 1 })
  }
  if (traceIdPattern.test(traceId) && traceId !== zeroTrace) {
    const span = traceId.slice(16)
    return span === zeroSpan ? undefined : Tracer.externalSpan({ traceId, spanId: span })
  }
  return undefined
}

/**
 * Record a span that already happened (a batched claim or heartbeat, seen per job), from `startMs` to `endMs` on the
 * worker's clock, with its attributes; `failed` ends it with an error status.
 *
 * @internal
 */
export const record = (options: {
  readonly tracer: Tracer.Tracer
  readonly name: string
  readonly parent: Tracer.AnySpan | undefined
  readonly startMs: number
  readonly endMs: number
  readonly attributes: Readonly<Record<string, unknown>>
  readonly failure?: unknown
}): void => {
  const span = options.tracer.span(
    options.name,
    options.parent === undefined ? Option.none() : Option.some(options.parent),
    Context.empty(),
    [],
    BigInt(Math.round(options.startMs)) * 1_000_000n,
    "internal"
  )
  for (const [key, value] of Object.entries(options.attributes)) span.attribute(key, value)
  const end = BigInt(Math.round(Math.max(options.startMs, options.endMs))) * 1_000_000n
  span.end(end, options.failure === undefined ? Exit.void : Exit.fail(options.failure))
}

/**
 * A model call in its `slowcall.model_call` span: the job, token, attempt and call id, the GenAI attributes the call
 * declares (`gen_ai.system`, `gen_ai.request.model`, and on success `gen_ai.usage.input_tokens` / `output_tokens` from
 * its `span.usage`, else the call's own `usage`), and on success `slowcall.cost_cents`, the actual cost its `cost` gives (through `costOf`, so the cost
 function runs once for the span and the settlement together).
 *
 * @internal
 */
export const modelCall = <A, E, R>(
  run: Effect.Effect<A, E, R>,
  info: {
    readonly call: CallOptions<A, any, any>
    readonly callId: string
    readonly job: Job
    readonly token: number
    /** The call's `cost` of a result, computed once and shared with the settlement. */
    readonly costOf: (result: A) => Either.Either<number, unknown>
  }
): Effect.Effect<A, E, R> => {
  const { call, job } = info
  const attributes: Record<string, unknown> = {
    "slowcall.job_id": job.id,
    "slowcall.token": info.token,
    "slowcall.attempt": job.attempts - job.attemptsBase,
    "slowcall.call_id": info.callId,
    "slowcall.estimate_cents": call.estimateCents
  }
  if (call.span?.system !== undefined) attributes["gen_ai.system"] = call.span.system
  if (call.span?.model !== undefined) attributes["gen_ai.request.model"] = call.span.model
  const annotated = Effect.tap(run, (result) => {
    const after: Record<string, unknown> = {}
    try {
      const usage = (call.span?.usage ?? call.usage)?.(result)
      if (usage?.inputTokens !== undefined) after["gen_ai.usage.input_tokens"] = usage.inputTokens
      if (usage?.outputTokens !== undefined) after["gen_ai.usage.output_tokens"] = usage.outputTokens
    } catch {
      // A usage reader that throws only loses the token counts of the span.
    }
    // The same cost the settlement then writes: `costOf` runs the call's `cost` once per result.
    const cost = info.costOf(result)
    if (Either.isRight(cost)) after["slowcall.cost_cents"] = Math.max(0, cost.right)
    // A failing cost function is reported by the settlement; the span goes without a cost.
    return Effect.annotateCurrentSpan(after)
  })
  return Effect.withSpan(annotated, "slowcall.model_call", { captureStackTrace: false, kind: "client", attributes })
}
