/**
 * `slowcall serve`: the HTTP API and dashboard over a Store and its Query, and with `--demo` the demo job types with an
 * in-process worker and sweeper. This is what `npm start` runs. This module is the command (its options, parsed
 * without loading anything heavy); what it starts is `Serving.ts`, imported when the command runs.
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
import * as Auth from "@slowcall/http/Auth"
import { Config, Console, Effect, Either, Option } from "effect"
import type * as Backend from "./Backend.js"
import { CliError } from "./CliError.js"
import * as Log from "./internal/log.js"
import * as Retention from "./internal/retention.js"

/**
 * What `serve` runs.
 *
 * @since 0.1.0
 * @category models
 */
export interface ServeOptions extends Backend.BackendOptions {
  readonly demo: boolean
  /** Run a Scheduler in this process: the due ticks of the store's schedules become jobs. */
  readonly schedules?: boolean | undefined
  /** With `demo`: the model server `demo.model` calls (`Demo.model`); without it there is no `demo.model`. */
  readonly demoModelUrl?: string | undefined
  readonly port: number
  readonly host: string
  readonly queue: string
  readonly jobTypes: ReadonlyArray<string>
  readonly concurrency: number
  readonly maxBodyBytes?: number | undefined
  /** Accepted tokens (`Auth.parseTokens`); none: the API is open. */
  readonly tokens?: Auth.TokenTable | undefined
  /** With tokens: the tenants whose tokens may change resources (`Server.Options.operators`). */
  readonly operators?: ReadonlyArray<string> | undefined
  /** Serve without authentication on an address other than loopback. */
  readonly allowUnauthenticated?: boolean | undefined
  /** `Host` names answered besides the defaults (see `Serving.allowedHostsFor`); `*` for any. */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  readonly metrics?: "public" | "tenant" | undefined
  readonly maxQueued?: number | undefined
  readonly maxQueuedPerTenant?: number | undefined
  /** `json`: the start is announced by a log entry instead of text on stdout. */
  readonly logFormat?: "text" | "json" | undefined
  /**
   * `--retention`: finished jobs of `queue` (succeeded, failed, abandoned) created this long ago are deleted for good,
   * with their attempts, charges and request keys; undefined (the default, `off`) keeps them.
   */
  readonly retentionMs?: number | undefined
}

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
 * `slowcall serve [--demo [--demo-model-url URL]] [--schedules] [--port N] [--host H] [--redis-url URL |
 * --database-url URL | --data-dir DIR | --memory] [--sqs-queue-url URL [--sqs-endpoint URL]] [--tokens-file F]
 * [--operator TENANT]...
 * [--allowed-host H]... [--allow-unauthenticated] [--metrics public|tenant] [--max-queued N]
 * [--max-queued-per-tenant N] [--job-type T]... [--queue Q] [--concurrency N] [--max-body-bytes N]
 * [--retention DURATION|off] [--log-level debug|info|warn|error] [--log-format text|json]`. Runs `Serving.run`, loaded when the command runs.
 *
 * @since 0.1.0
 * @category commands
 */
export const serveCommand = Command.make(
  "serve",
  {
    demo: Options.boolean("demo").pipe(Options.withDescription("run the demo job types with a worker in-process")),
    schedules: Options.boolean("schedules").pipe(
      Options.withDescription(
        "run a scheduler: due ticks of the store's schedules become jobs (any number of processes may; one job a tick)"
      )
    ),
    demoModelUrl: Options.text("demo-model-url").pipe(
      Options.optional,
      Options.withDescription(
        "with --demo: add demo.model, one billed call per attempt to the model server at this URL"
      )
    ),
    port: Options.integer("port").pipe(
      Options.withFallbackConfig(Config.integer("PORT")),
      Options.withDefault(8787),
      Options.withDescription("port to listen on; 0 picks a free one")
    ),
    host: Options.text("host").pipe(
      Options.withDefault("127.0.0.1"),
      Options.withDescription("address to bind; one other than loopback needs --tokens-file or --allow-unauthenticated")
    ),
    databaseUrl: Options.text("database-url").pipe(
      Options.withFallbackConfig(Config.string("DATABASE_URL")),
      Options.optional,
      Options.withDescription("Postgres server; without it (and without --redis-url), embedded PGlite")
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
      Options.withDescription("a job type the API accepts, run by workers elsewhere; --demo adds the demo types")
    ),
    concurrency: Options.integer("concurrency").pipe(
      Options.withDefault(8),
      Options.withDescription("with --demo: jobs the worker runs at once")
    ),
    maxBodyBytes: Options.integer("max-body-bytes").pipe(
      Options.optional,
      Options.withDescription("largest accepted request body in bytes (default 1 MiB); larger ones get 413")
    ),
    tokensFile: Options.file("tokens-file").pipe(
      Options.optional,
      Options.withDescription(
        "file of '<tenant> sha256:<hash>' lines (from `slowcall token`); without it SLOWCALL_TOKENS, else no auth"
      )
    ),
    allowedHosts: Options.text("allowed-host").pipe(
      Options.repeated,
      Options.withDescription("a Host name to answer besides loopback and the bind address; * for any")
    ),
    operators: Options.text("operator").pipe(
      Options.withPseudoName("TENANT"),
      Options.repeated,
      Options.withDescription(
        "with tokens: a tenant whose tokens may change resources and schedules (repeat for several)"
      )
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
    ),
    retention: Options.text("retention").pipe(
      Options.withFallbackConfig(Config.string("SLOWCALL_RETENTION")),
      Options.withDefault("off"),
      Options.withDescription(
        "delete the queue's finished jobs (succeeded, dead letters, abandoned) this long after they were created, " +
          "e.g. 7d, 12h, 30m; off (the default) keeps them"
      )
    ),
    logLevel: Options.choiceWithValue("log-level", [
      ["debug", "debug"],
      ["info", "info"],
      ["warn", "warn"],
      ["warning", "warn"],
      ["error", "error"]
    ] as const).pipe(
      Options.withDefault("info" as const),
      Options.withDescription(
        "least severe line logged to stderr: error (dead letters), warn (also failed attempts, recovered leases), " +
          "info (the default), debug (also every request)"
      )
    ),
    logFormat: Options.choice("log-format", ["text", "json"]).pipe(
      Options.withDefault("text" as const),
      Options.withDescription("log lines as text, or one JSON object per line (the start announced as one too)")
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
      const { demoModelUrl, logLevel, maxBodyBytes, retention, sqsEndpoint, sqsQueueUrl: _url, ...rest } = options
      const retentionMs = Retention.parse(retention)
      if ("problem" in retentionMs) return yield* new CliError({ message: `--retention ${retentionMs.problem}` })
      if (Option.isSome(demoModelUrl) && !options.demo) {
        return yield* new CliError({ message: "--demo-model-url adds a demo job type: give --demo with it" })
      }
      const Serving = yield* Effect.promise(() => import("./Serving.js"))
      return yield* Serving.run({
        ...rest,
        maxBodyBytes: Option.getOrUndefined(maxBodyBytes),
        retentionMs: retentionMs.ms,
        demoModelUrl: Option.getOrUndefined(demoModelUrl),
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
      }).pipe(Effect.provide(Log.layer({ format: options.logFormat, level: logLevel })))
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
