/**
 * Export slowcall's spans through OpenTelemetry. The core makes its spans (`slowcall.submit`, `slowcall.claim`,
 * `slowcall.attempt`, `slowcall.model_call`, `slowcall.heartbeat`, `slowcall.settle`) with Effect's tracing, and
 * only while a tracer other than Effect's built-in one is installed; each layer here installs one backed by an
 * OpenTelemetry tracer, so the core never depends on OpenTelemetry. Provide the layer where the Client submits and
 * where the Worker starts (the Worker reads its tracer once, at start).
 *
 * @since 0.1.0
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import * as Resource from "@effect/opentelemetry/Resource"
import * as OtelTracer from "@effect/opentelemetry/Tracer"
import type { TracerProvider } from "@opentelemetry/api"
import type { SpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Layer } from "effect"

/**
 * The service that emits the spans (the `service.name` and `service.version` resource attributes).
 *
 * @since 0.1.0
 * @category models
 */
export interface ServiceOptions {
  readonly serviceName: string
  readonly serviceVersion?: string | undefined
}

/**
 * What `layer` takes: the service, and the span processors that receive every ended span (a `BatchSpanProcessor`
 * around an OTLP exporter in production, a `SimpleSpanProcessor` around an `InMemorySpanExporter` in tests).
 *
 * @since 0.1.0
 * @category models
 */
export interface LayerOptions extends ServiceOptions {
  readonly spanProcessor: SpanProcessor | ReadonlyArray<SpanProcessor>
}

/** A resource layer from the service options; a blank service name is a configuration bug, caught here. */
const resource = (options: ServiceOptions) => {
  if (typeof options.serviceName !== "string" || options.serviceName.trim().length === 0) {
    throw new TypeError("@slowcall/otel: serviceName must be a non-empty string")
  }
  return Resource.layer(
    options.serviceVersion === undefined
      ? { serviceName: options.serviceName }
      : { serviceName: options.serviceName, serviceVersion: options.serviceVersion }
  )
}

/**
 * A tracer provider of its own, with the given span processors, installed as Effect's tracer. The provider is
 * shut down (flushing its processors) when the layer's scope closes.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: LayerOptions): Layer.Layer<Resource.Resource> => {
  const processors = Array.isArray(options.spanProcessor) ? options.spanProcessor : [options.spanProcessor]
  if (processors.length === 0) throw new TypeError("@slowcall/otel: give at least one span processor")
  resource(options)
  return NodeSdk.layer(() => ({
    resource:
      options.serviceVersion === undefined
        ? { serviceName: options.serviceName }
        : { serviceName: options.serviceName, serviceVersion: options.serviceVersion },
    spanProcessor: processors as ReadonlyArray<SpanProcessor>
  }))
}

/**
 * Use an OpenTelemetry SDK the application already set up: spans go to `provider` (for example the
 * `NodeTracerProvider` or `BasicTracerProvider` it built, with its own processors and exporters). The provider is
 * the application's: this layer never shuts it down.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromProvider = (provider: TracerProvider, options: ServiceOptions): Layer.Layer<never> =>
  OtelTracer.layer.pipe(
    Layer.provide(Layer.succeed(OtelTracer.OtelTracerProvider, provider)),
    Layer.provide(resource(options))
  )

/**
 * Use the tracer provider registered globally with `@opentelemetry/api` (what `new NodeSDK(...).start()` registers).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerGlobal = (options: ServiceOptions): Layer.Layer<never> =>
  OtelTracer.layerGlobal.pipe(Layer.provide(resource(options)))
