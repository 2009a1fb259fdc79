/**
 * `slowcall serve`: the HTTP API and dashboard over a Store and its Query, and with `--demo` the demo job types with an
 * in-process worker and sweeper. This is what `npm start` runs.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import { HttpServer } from "@effect/platform"
import * as Metrics from "@slowcall/core/Metrics"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Worker from "@slowcall/core/Worker"
import * as Server from "@slowcall/http/Server"
import { Config, Console, Effect, Layer, Option } from "effect"
import * as Backend from "./Backend.js"
import * as Demo from "./Demo.js"

/**
 * What `serve` runs.
 *
 * @since 0.1.0
 * @category models
 */
export interface ServeOptions extends Backend.BackendOptions {
  readonly demo: boolean
  readonly port: number
  readonly host: string
  readonly queue: string
  readonly jobTypes: ReadonlyArray<string>
  readonly concurrency: number
  readonly maxBodyBytes?: number | undefined
}

/**
 * Everything `serve` starts, as one layer: the server, and in demo mode a worker, a sweeper and the metrics poll,
 * all closed gracefully with the scope (the worker hands back its leases).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: ServeOptions): Layer.Layer<HttpServer.HttpServer, unknown> => {
  const jobTypes = [...new Set([...options.jobTypes, ...(options.demo ? Demo.handlers.map((h) => h.type) : [])])]
  const server = Server.layerNode({
    jobTypes,
    queue: options.queue,
    port: options.port,
    host: options.host,
    maxBodyBytes: options.maxBodyBytes
  })
  const background = options.demo
    ? Layer.mergeAll(
        Worker.layer({ queue: options.queue, handlers: [...Demo.handlers], concurrency: options.concurrency }),
        Sweeper.layer({ queue: options.queue, intervalMs: 2_000, republishAfterMs: 10_000 }),
        Layer.scopedDiscard(Metrics.poll({ queue: options.queue, intervalMs: 5_000 }))
      )
    : Layer.empty
  return Layer.merge(server, background).pipe(Layer.provide(Backend.layer(options)))
}

/**
 * Starts everything, prints the URL, and runs until interrupted (Ctrl-C closes it gracefully).
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = (options: ServeOptions) =>
  Effect.scoped(
    Effect.gen(function* () {
      const context = yield* Layer.build(layer(options))
      const server = yield* Effect.provide(HttpServer.HttpServer, context)
      const address = server.address
      const url =
        address._tag === "TcpAddress"
          ? `http://${address.hostname === "0.0.0.0" || address.hostname === "::" ? "127.0.0.1" : address.hostname}:${address.port}`
          : `unix:${address.path}`
      yield* Console.log(`slowcall is serving ${url}/ on ${Backend.describe(options)}`)
      if (options.demo) {
        yield* Console.log(
          `demo job types: ${Demo.handlers.map((h) => h.type).join(", ")}. Try:\n` +
            `  curl -s -X POST ${url}/v1/jobs -H 'content-type: application/json' -d '{"type":"demo.echo","input":{"text":"hello"}}'`
        )
      }
      return yield* Effect.never
    })
  )

/**
 * `slowcall serve [--demo] [--port N] [--host H] [--redis-url URL | --database-url URL | --data-dir DIR | --memory]`.
 *
 * @since 0.1.0
 * @category commands
 */
export const serveCommand = Command.make(
  "serve",
  {
    demo: Options.boolean("demo").pipe(Options.withDescription("run the demo job types with a worker in-process")),
    port: Options.integer("port").pipe(
      Options.withFallbackConfig(Config.integer("PORT")),
      Options.withDefault(8787),
      Options.withDescription("port to listen on (PORT)")
    ),
    host: Options.text("host").pipe(Options.withDefault("127.0.0.1")),
    databaseUrl: Options.text("database-url").pipe(
      Options.withFallbackConfig(Config.string("DATABASE_URL")),
      Options.optional,
      Options.withDescription("Postgres server (DATABASE_URL); without it, embedded PGlite")
    ),
    redisUrl: Options.text("redis-url").pipe(
      Options.optional,
      Options.withDescription("Redis server: the Store, Query and Transport on Redis, keys under the --schema prefix")
    ),
    dataDir: Options.directory("data-dir").pipe(
      Options.withDefault("./.slowcall"),
      Options.withDescription("where embedded PGlite keeps its files")
    ),
    memory: Options.boolean("memory").pipe(Options.withDescription("keep everything in memory (lost on exit)")),
    schema: Options.text("schema").pipe(Options.withDefault("slowcall")),
    queue: Options.text("queue").pipe(Options.withDefault("default")),
    jobTypes: Options.text("job-type").pipe(
      Options.repeated,
      Options.withDescription("a job type the API accepts (repeatable; --demo adds the demo types)")
    ),
    concurrency: Options.integer("concurrency").pipe(Options.withDefault(8)),
    maxBodyBytes: Options.integer("max-body-bytes").pipe(
      Options.withDefault(Server.defaultMaxBodyBytes),
      Options.withDescription("largest accepted request body; larger ones get 413")
    )
  },
  (options) =>
    run({
      ...options,
      databaseUrl: Option.getOrUndefined(options.databaseUrl),
      redisUrl: Option.getOrUndefined(options.redisUrl)
    })
).pipe(Command.withDescription("serve the HTTP API and the dashboard"))
