/**
 * What `slowcall serve` starts: the HTTP API and dashboard over a Store and its Query, and with `--demo` the demo job
 * types with an in-process worker and sweeper. The command (`Serve.ts`) imports this module only when it runs, so
 * the other commands never load the server, the worker or an adapter.
 *
 * A server that cannot start fails with one line saying what failed and what to do (`internal/startup.ts`): the port
 * in use (and by which process), the data directory locked by another process, the database or Redis unreachable.
 * Once it serves, it logs a line per failed attempt, dead letter and abandoned job, and per sweep that recovered
 * expired leases (`internal/observe.ts`); each HTTP request at `--log-level debug`.
 *
 * @since 0.3.0
 */
import { createServer } from "node:http"
import { HttpServer } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Client from "@slowcall/core/Client"
import * as Metrics from "@slowcall/core/Metrics"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Worker from "@slowcall/core/Worker"
import * as Server from "@slowcall/http/Server"
import * as Scheduler from "@slowcall/schedules/Scheduler"
import { Cause, Console, Effect, Either, FiberRef, Layer, LogLevel, Runtime } from "effect"
import * as Backend from "./Backend.js"
import { CliError } from "./CliError.js"
import * as Demo from "./Demo.js"
import * as Observe from "./internal/observe.js"
import * as Retention from "./internal/retention.js"
import * as Startup from "./internal/startup.js"
import type { ServeOptions } from "./Serve.js"

const loopbackAddresses = new Set(["127.0.0.1", "::1", "localhost", "[::1]"])

/**
 * Whether a bind address is reachable only from this machine.
 *
 * @since 0.3.0
 * @category combinators
 */
export const isLoopback = (host: string): boolean => loopbackAddresses.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host)

/**
 * Refuses a configuration that would expose an open API: no tokens, an address other than loopback, and no
 * `--allow-unauthenticated`.
 *
 * @since 0.3.0
 * @category combinators
 */
export const exposure = (options: ServeOptions): Either.Either<void, CliError> =>
  options.tokens === undefined && !isLoopback(options.host) && options.allowUnauthenticated !== true
    ? Either.left(
        new CliError({
          message:
            `refusing to serve ${options.host} without authentication: give --tokens-file (or SLOWCALL_TOKENS), ` +
            "or --allow-unauthenticated to open the API to anyone who can reach it"
        })
      )
    : Either.right(undefined)

/**
 * The `Host` names the server answers: the loopback names, the bind address itself when it is a specific one, and
 * every `--allowed-host` (`*` alone: any).
 *
 * @since 0.3.0
 * @category combinators
 */
export const allowedHostsFor = (options: Pick<ServeOptions, "host" | "allowedHosts">): ReadonlyArray<string> | "*" => {
  const extra = options.allowedHosts ?? []
  if (extra.includes("*")) return "*"
  const bound =
    options.host === "0.0.0.0" || options.host === "::"
      ? []
      : [options.host.includes(":") ? `[${options.host}]` : options.host]
  return [...new Set([...Server.defaultAllowedHosts, ...bound, ...extra])]
}

/**
 * The Node HTTP server of `serve`: at `--log-level debug` each request is logged when its response ends (method,
 * path, status, duration); at other levels nothing is attached to it.
 */
const nodeServer = (options: ServeOptions) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const runtime = yield* Effect.runtime<never>()
      const debug = LogLevel.lessThanEqual(yield* FiberRef.get(FiberRef.currentMinimumLogLevel), LogLevel.Debug)
      const log = Runtime.runFork(runtime)
      const make = () => {
        const server = createServer()
        if (debug) {
          server.on("request", (request, response) => {
            const started = performance.now()
            response.once("close", () => {
              const ms = Math.round(performance.now() - started)
              log(
                Effect.logDebug(`${request.method} ${request.url} ${response.statusCode} ${ms} ms`).pipe(
                  Effect.annotateLogs({ method: request.method, path: request.url, status: response.statusCode, ms })
                )
              )
            })
          })
        }
        return server
      }
      return NodeHttpServer.layer(make, { port: options.port, host: options.host })
    })
  )

/**
 * The handlers `serve --demo` runs: the demo types, and `demo.model` when `--demo-model-url` names its model server.
 * Without `--demo`, none.
 *
 * @since 0.6.0
 * @category combinators
 */
export const demoHandlers = (options: Pick<ServeOptions, "demo" | "demoModelUrl">) =>
  options.demo
    ? [...Demo.handlers, ...(options.demoModelUrl === undefined ? [] : [Demo.model(options.demoModelUrl)])]
    : []

/**
 * Everything `serve` starts, as one layer: the server, with `--schedules` a Scheduler (the due ticks of the store's
 * schedules become jobs), with `--retention` the purge of old finished jobs, and in demo mode a worker, a sweeper and
 * the metrics poll,
 * all closed gracefully with the scope (the worker hands back its leases). The worker and the sweeper write through
 * an observed Store, which logs their failures and recoveries.
 *
 * @since 0.3.0
 * @category layers
 */
export const layer = (options: ServeOptions): Layer.Layer<HttpServer.HttpServer, unknown> => {
  const handlers = demoHandlers(options)
  const server = Server.layer({
    jobTypes: options.jobTypes,
    // The demo's handlers run in this process, so the server checks their versions and inputs at submit.
    handlers,
    queue: options.queue,
    maxBodyBytes: options.maxBodyBytes,
    tokens: options.tokens,
    operators: options.operators,
    allowedHosts: allowedHostsFor(options),
    metrics: options.metrics,
    maxQueued: options.maxQueued,
    maxQueuedPerTenant: options.maxQueuedPerTenant
  }).pipe(Layer.provideMerge(nodeServer(options)))
  const background = options.demo
    ? Layer.mergeAll(
        Worker.layer({ queue: options.queue, handlers, concurrency: options.concurrency }),
        Sweeper.layer({ queue: options.queue, intervalMs: 2_000, republishAfterMs: 10_000 }),
        Layer.scopedDiscard(Metrics.poll({ queue: options.queue, intervalMs: 5_000 }))
      ).pipe(Layer.provide(Observe.layer))
    : Layer.empty
  // Every process may run one: a tick's key makes one job however many schedulers see it due.
  const scheduler = options.schedules ? Scheduler.layer().pipe(Layer.provide(Client.layer)) : Layer.empty
  // Every process may run it too: the stores' purges skip what another one is deleting.
  const retention =
    options.retentionMs === undefined
      ? Layer.empty
      : Retention.layer({ queue: options.queue, retentionMs: options.retentionMs })
  return Layer.mergeAll(server, background, scheduler, retention).pipe(Layer.provide(Backend.layer(options)))
}

/** The lines that say the server is up: on stdout as text, or one log entry with `--log-format json`. */
const banner = (options: ServeOptions, url: string) => {
  const auth =
    options.tokens === undefined
      ? "off (anyone who can reach this address can use the API)"
      : `bearer tokens for ${new Set(options.tokens.map((entry) => entry.tenant)).size} tenant(s)`
  const store = Backend.describe(options)
  if (options.logFormat === "json") {
    return Effect.logInfo(`slowcall is serving ${url}/ on ${store}`).pipe(
      Effect.annotateLogs({
        url,
        store,
        authentication: options.tokens === undefined ? "off" : "tokens",
        ...(options.demo
          ? {
              demoJobTypes: demoHandlers(options)
                .map((h) => h.type)
                .join(",")
            }
          : {})
      })
    )
  }
  const lines = [`slowcall is serving ${url}/ on ${store}`, `authentication: ${auth}`]
  if (options.demo) {
    lines.push(
      `demo job types: ${demoHandlers(options)
        .map((h) => h.type)
        .join(", ")}. Try:\n` +
        `  curl -s -X POST ${url}/v1/jobs -H 'content-type: application/json' -d '{"type":"demo.echo","input":{"text":"hello"}}'`
    )
  }
  return Console.log(lines.join("\n"))
}

/**
 * Starts everything, says where it serves, and runs until interrupted (Ctrl-C, SIGTERM or SIGHUP closes it
 * gracefully). A start that fails fails with one `CliError` line (`internal/startup.ts`).
 *
 * @since 0.3.0
 * @category constructors
 */
export const run = (options: ServeOptions) =>
  Effect.scoped(
    Effect.gen(function* () {
      yield* exposure(options)
      const context = yield* Layer.build(layer(options)).pipe(
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.fail(
                Startup.describe(Cause.squash(cause), {
                  port: options.port,
                  host: options.host,
                  databaseUrl: options.databaseUrl,
                  redisUrl: options.redisUrl,
                  dataDir: options.dataDir,
                  memory: options.memory,
                  sqsQueueUrl: options.sqs?.queueUrl
                })
              )
        )
      )
      const server = yield* Effect.provide(HttpServer.HttpServer, context)
      const address = server.address
      const url =
        address._tag === "TcpAddress"
          ? `http://${address.hostname === "0.0.0.0" || address.hostname === "::" ? "127.0.0.1" : address.hostname}:${address.port}`
          : `unix:${address.path}`
      yield* banner(options, url)
      return yield* Effect.never
    })
  )
