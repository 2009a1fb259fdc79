/**
 * The job HTTP server: every endpoint of `Api.ts` as a typed handler over `Client` (submit, read, cancel, replay
 * and watch go through it, so a job submitted over HTTP is exactly the job the same options give in code), plus
 * SSE, Prometheus metrics, health and the dashboard. The handlers live in `internal/`, one module per endpoint
 * group; this module assembles them.
 *
 * Invariants:
 * - A rejected request (400, 401, 403, 405, 413, 415, 421, 422, 429) writes nothing: the gate (host, method,
 *   cross-site, media type), authentication, the body gate and the schema decoding run before the handler, and the
 *   handler's own checks (known type, version and input, the queue's bound) run before its single `Client` write.
 * - A client error is never a 5xx: `503` means the store could not answer now, `500` a store refusal no retry can
 *   change (a bug); neither is an answer to bad input.
 * - With an `authenticate` resolver, every `/v1` request is scoped to the caller's tenant; another tenant's job
 *   answers exactly like an unknown one (`404`).
 * - Views, ETags and SSE event ids are pure functions of the job record, so a client that misses a push recovers
 *   by reading the row.
 *
 * @since 0.1.0
 */

import { createServer } from "node:http"
import { type HttpApi, HttpApiBuilder, HttpRouter, type HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import * as Client from "@slowcall/core/Client"
import type * as Handler from "@slowcall/core/Handler"
import type { Limiter } from "@slowcall/core/Limiter"
import type { Query } from "@slowcall/core/Query"
import type { Store } from "@slowcall/core/Store"
import type { Transport } from "@slowcall/core/Transport"
import type { ScheduleStore } from "@slowcall/schedules/ScheduleStore"
import { type Effect, Layer, type Option } from "effect"
import { SlowcallApi } from "./Api.js"
import * as Auth from "./Auth.js"
import { batchesGroup } from "./internal/batches.js"
import { ServerOptions as ServerOptionsTag } from "./internal/common.js"
import { deadLettersGroup } from "./internal/deadLetters.js"
import { gate, loopbackHosts } from "./internal/gate.js"
import { jobsGroup } from "./internal/jobs.js"
import { authentication, invalidRequests, jsonBody } from "./internal/middleware.js"
import { opsGroup } from "./internal/ops.js"
import { resourcesGroup } from "./internal/resources.js"
import { schedulesGroup } from "./internal/schedules.js"

/**
 * How the server is set up.
 *
 * Which jobs it accepts: `jobTypes` is the registry of job types this deployment runs, and `handlers` the handlers
 * it knows (the same values its workers register). A submit of a type in neither is a `400`, so a typo never
 * becomes a job that no worker will ever claim. For a type the server has handlers for, the version must be one of
 * theirs and the input must decode with that handler's input schema, or the submit is a `400` too. A type that is
 * only in `jobTypes` (the API and its workers deployed apart) is accepted in any version with any JSON input: a job
 * no worker claims then waits queued, and `/v1/stats` (`waiting`), the `slowcall_oldest_waiting_age_seconds` gauge and the
 * dashboard's warning show it. Every other submit default is `Client.defaults`, the same as in code.
 *
 * Who may call it: with `authenticate` (or `tokens`, a token table of `Auth.ts`), every `/v1` request (and
 * `/metrics` unless `metrics` is `"public"`) needs credentials and is scoped to the caller's tenant. Every request's
 * `Host` must be on `allowedHosts` (default the loopback names, any port; `"*"` turns the check off), and a
 * state-changing request must be `application/json` and not come from another site (its `Origin`, or its
 * `Sec-Fetch-Site` when it has no `Origin`); `allowedOrigins` lists other origins allowed to write (a dashboard
 * served elsewhere).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly jobTypes?: ReadonlyArray<string> | undefined
  /** Handlers whose (type, version) and input schema are checked at submit. */
  readonly handlers?: ReadonlyArray<Handler.Handler<any, any, any>> | undefined
  /** The queue jobs are submitted to and read from; default `"default"`. */
  readonly queue?: string | undefined
  /** Largest accepted request body in bytes; default 1 MiB. Larger bodies get `413`, with or without a length. */
  readonly maxBodyBytes?: number | undefined
  /**
   * Resolves the `Authorization` header to a tenant. `None` means the credentials are missing or invalid (`401`).
   * Without a resolver (and without `tokens`) the API is open and jobs have no tenant.
   */
  readonly authenticate?: ((authorization: string | undefined) => Effect.Effect<Option.Option<string>>) | undefined
  /** Bearer tokens by their hashes (`Auth.parseTokens`); the same as `authenticate: Auth.authenticator(tokens)`. */
  readonly tokens?: Auth.TokenTable | undefined
  /**
   * With authentication, the tenants whose tokens may change a resource's limits, pause and resume it (a resource
   * is shared by every tenant), and define, pause, resume or delete a schedule (it makes jobs for whatever tenant it
   * names); any other tenant's change is `403 operator_required`, its reads are answered (of schedules, those whose
   * jobs are its own).
   * Default: none. Without authentication anyone who can reach the server may, as with every other write.
   */
  readonly operators?: ReadonlyArray<string> | undefined
  /** `Host` values answered: names (any port) or `name:port`; default the loopback names; `"*"` for any. */
  readonly allowedHosts?: ReadonlyArray<string> | "*" | undefined
  /** Origins besides this server's own allowed to make state-changing requests (`https://ops.example.com`). */
  readonly allowedOrigins?: ReadonlyArray<string> | undefined
  /**
   * `/metrics`: `"tenant"` (the default with authentication) needs credentials and shows the caller's tenant's
   * population and spend only; `"public"` (the default without) needs none and shows the whole queue and this
   * process's counters, for a scraper on a private network.
   */
  readonly metrics?: "public" | "tenant" | undefined
  /** The most queued jobs the queue may hold; a submit past it answers `429 queue_full`. Default: no bound. */
  readonly maxQueued?: number | undefined
  /** The most queued jobs one tenant may hold in the queue. Default: no bound. */
  readonly maxQueuedPerTenant?: number | undefined
  /** The `Retry-After` of a `429`, in seconds; default 5. */
  readonly queueFullRetryAfterSeconds?: number | undefined
  /** How often an SSE stream reads the job record; default 250 ms. */
  readonly sseIntervalMs?: number | undefined
  /** How often an idle SSE stream sends a keep-alive comment; default 15 s (idle timeouts are often 60 s). */
  readonly sseKeepAliveMs?: number | undefined
  /** Window over which `arrivalsPerMinute` is averaged; default 5 minutes. */
  readonly deadLetterWindowMinutes?: number | undefined
  /** After how long a due job of a type is shown as one no worker claims (the dashboard's warning); default 60 s. */
  readonly unclaimedAfterSeconds?: number | undefined
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
 * Query, a Transport, the backend's `Limiter` (every adapter layer provides one; `Limiter.layerMemory` beside the
 * memory Store) and its `ScheduleStore` (`@slowcall/schedules`: `PgScheduleStore.layer`, `RedisScheduleStore.layer`,
 * or `ScheduleStore.layerMemory`). It builds its own `Client` over them and rewrites decoding failures into the API's `400` body. Serve
 * it with `routerConfig` (as `layer` does), or resource ids longer than 100 characters find no route.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerApi = (
  options: Options
): Layer.Layer<HttpApi.Api, never, Store | Query | Transport | Limiter | ScheduleStore> => {
  const handlers = new Map<string, Array<Handler.Handler<any, any, any>>>()
  for (const handler of options.handlers ?? [])
    handlers.set(handler.type, [...(handlers.get(handler.type) ?? []), handler])
  const authenticate =
    options.authenticate ?? (options.tokens === undefined ? undefined : Auth.authenticator(options.tokens))
  const resolved = Layer.succeed(ServerOptionsTag, {
    jobTypes: new Set([...(options.jobTypes ?? []), ...handlers.keys()]),
    handlers,
    queue: options.queue ?? "default",
    maxBodyBytes: options.maxBodyBytes ?? defaultMaxBodyBytes,
    authenticate,
    operators: new Set(options.operators ?? []),
    allowedHosts: options.allowedHosts ?? loopbackHosts,
    allowedOrigins: (options.allowedOrigins ?? []).map((origin) => origin.toLowerCase().replace(/\/$/, "")),
    metrics: options.metrics ?? (authenticate === undefined ? "public" : "tenant"),
    sseIntervalMs: options.sseIntervalMs ?? 250,
    sseKeepAliveMs: options.sseKeepAliveMs ?? 15_000,
    deadLetterWindowMinutes: options.deadLetterWindowMinutes ?? 5,
    unclaimedAfterSeconds: options.unclaimedAfterSeconds ?? 60
  })
  const client = Client.layerWith({
    maxQueued: options.maxQueued,
    maxQueuedPerTenant: options.maxQueuedPerTenant,
    queueFullRetryAfterMs: (options.queueFullRetryAfterSeconds ?? 5) * 1000
  })
  const dependencies = Layer.mergeAll(authentication, jsonBody, client).pipe(Layer.provideMerge(resolved))
  return HttpApiBuilder.api(SlowcallApi).pipe(
    Layer.provide([jobsGroup, batchesGroup, deadLettersGroup, resourcesGroup, schedulesGroup, opsGroup]),
    Layer.provide(dependencies),
    Layer.merge(invalidRequests),
    Layer.merge(Layer.provide(gate, resolved))
  )
}

/**
 * The host names the server answers for unless `allowedHosts` says otherwise: the loopback names, on any port.
 *
 * @since 0.3.0
 * @category constructors
 */
export const defaultAllowedHosts: ReadonlyArray<string> = loopbackHosts

/**
 * The router settings the API needs: a path parameter (a resource id of up to 200 characters, each `/` in it sent as
 * `%2F`) may be up to 600 characters, where the router's default stops at 100.
 *
 * @since 0.4.0
 * @category layers
 */
export const routerConfig: Layer.Layer<never> = HttpRouter.setRouterConfig({ maxParamLength: 600 })

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
  Store | Query | Transport | Limiter | ScheduleStore | HttpServer.HttpServer | HttpRouter.HttpRouter.DefaultServices
> => HttpApiBuilder.serve().pipe(Layer.provide(layerApi(options)), Layer.provide(routerConfig))

/**
 * The API on a Node HTTP server listening on `port` (0 picks a free one) and `host` (default 127.0.0.1). Read the
 * bound address from `HttpServer.HttpServer` once the layer is built.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNode = (
  options: Options & { readonly port: number; readonly host?: string | undefined }
): Layer.Layer<HttpServer.HttpServer, unknown, Store | Query | Transport | Limiter | ScheduleStore> =>
  layer(options).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host: options.host ?? "127.0.0.1" }))
  )
