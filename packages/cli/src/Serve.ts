/**
 * `slowcall serve`: the HTTP API and dashboard over a Store and its Query, and with `--demo` the demo job types with an
 * in-process worker and sweeper. This is what `npm start` runs.
 *
 * Safe to expose: with `--tokens-file` (or `SLOWCALL_TOKENS`) every `/v1` request needs a bearer token, kept only as
 * its sha-256 and mapped to a tenant; without tokens the server binds only to a loopback address unless
 * `--allow-unauthenticated` says otherwise. It answers only the `Host` names of `--allowed-host` (the loopback names,
 * and the address it binds to, by default), and takes writes only as JSON from its own origin.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import { Command, Options } from "@effect/cli"
import { HttpServer } from "@effect/platform"
import * as Metrics from "@slowcall/core/Metrics"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as Worker from "@slowcall/core/Worker"
import * as Auth from "@slowcall/http/Auth"
import * as Server from "@slowcall/http/Server"
import { Config, Console, Effect, Either, Layer, Option } from "effect"
import * as Backend from "./Backend.js"
import { CliError } from "./CliError.js"
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
  /** Accepted tokens (`Auth.parseTokens`); none: the API is open. */
  readonly tokens?: Auth.TokenTable | undefined
  /** Serve without authentication on an address other than loopback. */
  readonly allowUnauthenticated?: boolean | undefined
  /** `Host` names answered besides the defaults (see `allowedHostsFor`); `*` for any. */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  readonly metrics?: "public" | "tenant" | undefined
  readonly maxQueued?: number | undefined
  readonly maxQueuedPerTenant?: number | undefined
}

const loopbackAddresses = new Set(["127.0.0.1", "::1", "localhost", "[::1]"])

/**
 * Whether a bind address is reachable only from this machine.
 *
 * @since 0.3.0
 * @category combinators
 */
export const isLoopback = (host: string): boolean => loopbackAddresses.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host)

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
 * Everything `serve` starts, as one layer: the server, and in demo mode a worker, a sweeper and the metrics poll,
 * all closed gracefully with the scope (the worker hands back its leases).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: ServeOptions): Layer.Layer<HttpServer.HttpServer, unknown> => {
  const server = Server.layerNode({
    jobTypes: options.jobTypes,
    // The demo's handlers run in this process, so the server checks their versions and inputs at submit.
    handlers: options.demo ? [...Demo.handlers] : [],
    queue: options.queue,
    port: options.port,
    host: options.host,
    maxBodyBytes: options.maxBodyBytes,
    tokens: options.tokens,
    allowedHosts: allowedHostsFor(options),
    metrics: options.metrics,
    maxQueued: options.maxQueued,
    maxQueuedPerTenant: options.maxQueuedPerTenant
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
      yield* exposure(options)
      const context = yield* Layer.build(layer(options))
      const server = yield* Effect.provide(HttpServer.HttpServer, context)
      const address = server.address
      const url =
        address._tag === "TcpAddress"
          ? `http://${address.hostname === "0.0.0.0" || address.hostname === "::" ? "127.0.0.1" : address.hostname}:${address.port}`
          : `unix:${address.path}`
      yield* Console.log(`slowcall is serving ${url}/ on ${Backend.describe(options)}`)
      yield* Console.log(
        options.tokens === undefined
          ? "authentication: off (anyone who can reach this address can use the API)"
          : `authentication: bearer tokens for ${new Set(options.tokens.map((entry) => entry.tenant)).size} tenant(s)`
      )
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
 * The token table of `--tokens-file` or `SLOWCALL_TOKENS` (the file wins), or none; a malformed one is a `CliError`.
 *
 * @since 0.3.0
 * @category constructors
 */
export const loadTokens = (
  file: Option.Option<string>,
  env: Option.Option<string>
): Either.Either<Auth.TokenTable | undefined, CliError> => {
  const source = Option.isSome(file) ? `--tokens-file ${file.value}` : "SLOWCALL_TOKENS"
  let text: string
  if (Option.isSome(file)) {
    try {
      text = readFileSync(file.value, "utf8")
    } catch (error) {
      return Either.left(new CliError({ message: `${source}: cannot read it (${(error as Error).message})` }))
    }
  } else if (Option.isSome(env)) {
    text = env.value
  } else {
    return Either.right(undefined)
  }
  return Either.match(Auth.parseTokens(text), {
    onLeft: (problem) => Either.left(new CliError({ message: `${source}: ${problem}` })),
    onRight: (table) =>
      table.length === 0
        ? Either.left(new CliError({ message: `${source}: no tokens in it` }))
        : Either.right<Auth.TokenTable | undefined>(table)
  })
}

/**
 * `slowcall serve [--demo] [--port N] [--host H] [--redis-url URL | --database-url URL | --data-dir DIR | --memory]
 * [--sqs-queue-url URL [--sqs-endpoint URL]] [--tokens-file F]
 * [--allowed-host H]... [--allow-unauthenticated] [--metrics public|tenant] [--max-queued N]
 * [--max-queued-per-tenant N] [--job-type T]... [--queue Q] [--concurrency N] [--max-body-bytes N]`.
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
      Options.withDescription("port to listen on (PORT; 0 picks a free one)")
    ),
    host: Options.text("host").pipe(
      Options.withDefault("127.0.0.1"),
      Options.withDescription("address to bind; one other than loopback needs --tokens-file or --allow-unauthenticated")
    ),
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
    schema: Options.text("schema").pipe(
      Options.withDefault("slowcall"),
      Options.withDescription("the Postgres schema of the tables")
    ),
    queue: Options.text("queue").pipe(
      Options.withDefault("default"),
      Options.withDescription("the queue the API submits to and reads from")
    ),
    jobTypes: Options.text("job-type").pipe(
      Options.repeated,
      Options.withDescription("a job type the API accepts (repeatable; --demo adds the demo types)")
    ),
    concurrency: Options.integer("concurrency").pipe(
      Options.withDefault(8),
      Options.withDescription("with --demo: jobs the worker runs at once")
    ),
    maxBodyBytes: Options.integer("max-body-bytes").pipe(
      Options.withDefault(Server.defaultMaxBodyBytes),
      Options.withDescription("largest accepted request body; larger ones get 413")
    ),
    tokensFile: Options.file("tokens-file").pipe(
      Options.optional,
      Options.withDescription(
        "file of '<tenant> sha256:<hash>' lines (from `slowcall token`); without it SLOWCALL_TOKENS, else no auth"
      )
    ),
    allowedHosts: Options.text("allowed-host").pipe(
      Options.repeated,
      Options.withDescription("a Host name to answer besides loopback and the bind address (repeatable; * for any)")
    ),
    allowUnauthenticated: Options.boolean("allow-unauthenticated").pipe(
      Options.withDescription("serve a non-loopback address without tokens: anyone who reaches it can use the API")
    ),
    metrics: Options.choice("metrics", ["public", "tenant"]).pipe(
      Options.optional,
      Options.withDescription("/metrics: tenant (needs a token; default with tokens) or public (default without)")
    ),
    maxQueued: Options.integer("max-queued").pipe(
      Options.optional,
      Options.withDescription("the most queued jobs the queue may hold; more get 429 (default: no bound)")
    ),
    maxQueuedPerTenant: Options.integer("max-queued-per-tenant").pipe(
      Options.optional,
      Options.withDescription("the most queued jobs one tenant may hold (default: no bound)")
    ),
    sqsQueueUrl: Options.text("sqs-queue-url").pipe(
      Options.optional,
      Options.withDescription(
        "an SQS queue for the queue's messages (AWS region and credentials from the SDK's usual sources); the Store stays Postgres, PGlite or Redis"
      )
    ),
    sqsEndpoint: Options.text("sqs-endpoint").pipe(
      Options.optional,
      Options.withDescription("with --sqs-queue-url: the SQS endpoint, for an emulator (default: the region's)")
    )
  },
  (options) =>
    Effect.gen(function* () {
      const tokens = yield* loadTokens(
        options.tokensFile,
        Option.fromNullable(process.env.SLOWCALL_TOKENS).pipe(Option.filter((value) => value.trim() !== ""))
      )
      const sqsQueueUrl = Option.getOrUndefined(options.sqsQueueUrl)
      if (sqsQueueUrl !== undefined && options.memory) {
        return yield* new CliError({ message: "--sqs-queue-url needs a Store that outlives the process, not --memory" })
      }
      const { sqsEndpoint, sqsQueueUrl: _url, ...rest } = options
      return yield* run({
        ...rest,
        sqs:
          sqsQueueUrl === undefined
            ? undefined
            : { queueUrl: sqsQueueUrl, queue: options.queue, endpoint: Option.getOrUndefined(sqsEndpoint) },
        databaseUrl: Option.getOrUndefined(options.databaseUrl),
        redisUrl: Option.getOrUndefined(options.redisUrl),
        tokens,
        metrics: Option.getOrUndefined(options.metrics),
        maxQueued: Option.getOrUndefined(options.maxQueued),
        maxQueuedPerTenant: Option.getOrUndefined(options.maxQueuedPerTenant)
      })
    })
).pipe(Command.withDescription("serve the HTTP API and the dashboard"))

/**
 * `slowcall token [--tenant T]`: a fresh API token, and the line a tokens file keeps for it (its hash, never the
 * token). The token is printed once; keep it where the client reads it (`SLOWCALL_TOKEN`, the dashboard's field).
 *
 * @since 0.3.0
 * @category commands
 */
export const tokenCommand = Command.make(
  "token",
  {
    tenant: Options.text("tenant").pipe(
      Options.withDefault("default"),
      Options.withDescription("the tenant the token speaks for")
    ),
    json: Options.boolean("json").pipe(Options.withDescription("print { tenant, token, line } as JSON"))
  },
  ({ json, tenant }) =>
    Effect.gen(function* () {
      const token = Auth.makeToken()
      const entry = `${tenant} ${Auth.hashToken(token)}`
      if (Either.isLeft(Auth.parseTokens(entry))) {
        return yield* new CliError({
          message: `--tenant ${JSON.stringify(tenant)}: 1 to 200 printable characters, no spaces`
        })
      }
      yield* Console.log(
        json
          ? JSON.stringify({ tenant, token, line: entry })
          : `token (shown once; give it to the client as SLOWCALL_TOKEN or in the dashboard):\n  ${token}\n` +
              `line for the tokens file (slowcall serve --tokens-file FILE):\n  ${entry}`
      )
    })
).pipe(Command.withDescription("make an API token for a tenant and the hash line `serve --tokens-file` reads"))
