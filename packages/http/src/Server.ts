/**
 * The job HTTP server: every endpoint of `Api.ts` as a typed handler over `Client` (submit, read, cancel, replay
 * and watch go through it, so a job submitted over HTTP is exactly the job the same options give in code), plus
 * SSE, Prometheus metrics, health and the dashboard. The handlers live in `internal/`, one module per endpoint
 * group; this module assembles them.
 *
 * Invariants:
 * - A rejected request (400, 401, 413, 422) writes nothing: authentication, the body gate and the schema decoding
 *   run before the handler, and the handler's own checks run before its single `Client` write.
 * - With an `authenticate` resolver, every `/v1` request is scoped to the caller's tenant; another tenant's job
 *   answers exactly like an unknown one (`404`).
 * - Views, ETags and SSE event ids are pure functions of the job record, so a client that misses a push recovers
 *   by reading the row.
 *
 * @since 0.1.0
 */

import { createServer } from "node:http"
import { type HttpApi, HttpApiBuilder, type HttpRouter, type HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import * as Client from "@slowcall/core/Client"
import type { Query } from "@slowcall/core/Query"
import type { Store } from "@slowcall/core/Store"
import type { Transport } from "@slowcall/core/Transport"
import { type Effect, Layer, type Option } from "effect"
import { SlowcallApi } from "./Api.js"
import { ServerOptions as ServerOptionsTag } from "./internal/common.js"
import { deadLettersGroup } from "./internal/deadLetters.js"
import { jobsGroup } from "./internal/jobs.js"
import { authentication, invalidRequests, jsonBody } from "./internal/middleware.js"
import { opsGroup } from "./internal/ops.js"

/**
 * How the server is set up. `jobTypes` is the registry of job types this deployment runs: a submit of any other
 * type is a `400`, so a typo never becomes a job that no worker will ever claim. Every other submit default is
 * `Client.defaults`, the same as in code.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly jobTypes: ReadonlyArray<string>
  /** The queue jobs are submitted to and read from; default `"default"`. */
  readonly queue?: string | undefined
  /** Largest accepted request body in bytes; default 1 MiB. Larger bodies get `413`. */
  readonly maxBodyBytes?: number | undefined
  /**
   * Resolves the `Authorization` header to a tenant. `None` means the credentials are missing or invalid (`401`).
   * Without a resolver the API is open and jobs have no tenant.
   */
  readonly authenticate?: ((authorization: string | undefined) => Effect.Effect<Option.Option<string>>) | undefined
  /** How often an SSE stream reads the job record; default 250 ms. */
  readonly sseIntervalMs?: number | undefined
  /** Window over which `arrivalsPerMinute` is averaged; default 5 minutes. */
  readonly deadLetterWindowMinutes?: number | undefined
}

/**
 * The resolved options (every default applied), available to handlers.
 *
 * @since 0.1.0
 * @category services
 */
export const ServerOptions = ServerOptionsTag

/**
 * @since 0.1.0
 * @category services
 */
export type ServerOptions = ServerOptionsTag

/**
 * The default body limit: 1 MiB.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultMaxBodyBytes = 1024 * 1024

/**
 * The API implementation as a layer: provide it to `HttpApiBuilder.serve()` (see `layer`) together with a Store, its
 * Query and a Transport. It builds its own `Client` over them and rewrites decoding failures into the API's `400`
 * body.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerApi = (options: Options): Layer.Layer<HttpApi.Api, never, Store | Query | Transport> => {
  const resolved = Layer.succeed(ServerOptionsTag, {
    jobTypes: new Set(options.jobTypes),
    queue: options.queue ?? "default",
    maxBodyBytes: options.maxBodyBytes ?? defaultMaxBodyBytes,
    authenticate: options.authenticate,
    sseIntervalMs: options.sseIntervalMs ?? 250,
    deadLetterWindowMinutes: options.deadLetterWindowMinutes ?? 5
  })
  const dependencies = Layer.mergeAll(authentication, jsonBody, Client.layer).pipe(Layer.provideMerge(resolved))
  return HttpApiBuilder.api(SlowcallApi).pipe(
    Layer.provide([jobsGroup, deadLettersGroup, opsGroup]),
    Layer.provide(dependencies),
    Layer.merge(invalidRequests)
  )
}

/**
 * The API served by whatever `HttpServer` is provided (Node, Bun, a test server).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options
): Layer.Layer<
  never,
  never,
  Store | Query | Transport | HttpServer.HttpServer | HttpRouter.HttpRouter.DefaultServices
> => HttpApiBuilder.serve().pipe(Layer.provide(layerApi(options)))

/**
 * The API on a Node HTTP server listening on `port` (0 picks a free one) and `host` (default 127.0.0.1). Read the
 * bound address from `HttpServer.HttpServer` once the layer is built.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNode = (
  options: Options & { readonly port: number; readonly host?: string | undefined }
): Layer.Layer<HttpServer.HttpServer, unknown, Store | Query | Transport> =>
  layer(options).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host: options.host ?? "127.0.0.1" }))
  )
