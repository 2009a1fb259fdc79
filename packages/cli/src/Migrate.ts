/**
 * `slowcall migrate`: bring the database schema up to date (safe to run from two processes at once). On Redis there
 * is no schema (the scripts load themselves): it reads the server's persistence and eviction settings and says
 * whether they can lose jobs.
 *
 * @since 0.1.0
 */

import { mkdirSync } from "node:fs"
import { Command, Options } from "@effect/cli"
import * as PgDriver from "@slowcall/adapter-postgres/PgDriver"
import { migrate } from "@slowcall/adapter-postgres/PgMigrator"
import * as RedisConnection from "@slowcall/adapter-redis/RedisConnection"
import * as RedisStore from "@slowcall/adapter-redis/RedisStore"
import { Config, Console, Effect, Option } from "effect"
import { CliError } from "./CliError.js"
import { json } from "./Jobs.js"

/**
 * `slowcall migrate [--redis-url URL | --database-url URL | --data-dir DIR] [--schema NAME] [--json]`.
 *
 * @since 0.1.0
 * @category commands
 */
export const migrateCommand = Command.make(
  "migrate",
  {
    databaseUrl: Options.text("database-url").pipe(
      Options.withFallbackConfig(Config.string("DATABASE_URL")),
      Options.optional
    ),
    redisUrl: Options.text("redis-url").pipe(
      Options.optional,
      Options.withDescription("check a Redis server's persistence and eviction settings instead")
    ),
    dataDir: Options.directory("data-dir").pipe(Options.withDefault("./.slowcall")),
    schema: Options.text("schema").pipe(Options.withDefault("slowcall")),
    json
  },
  ({ dataDir, databaseUrl, json, redisUrl, schema }) =>
    Option.isSome(redisUrl)
      ? checkRedis(redisUrl.value, json)
      : Effect.scoped(
          Effect.gen(function* () {
            const driver = Option.isSome(databaseUrl)
              ? yield* PgDriver.acquire({
                  connectionString: databaseUrl.value,
                  connectionTimeoutMs: 5_000,
                  queryTimeoutMs: 30_000
                })
              : yield* Effect.sync(() => mkdirSync(dataDir, { recursive: true })).pipe(
                  Effect.zipRight(PgDriver.acquirePglite({ dataDir }))
                )
            const result = yield* migrate(driver, { schema })
            yield* Console.log(
              json
                ? JSON.stringify(result)
                : result.applied.length === 0
                  ? `schema ${result.schema} is up to date`
                  : `applied migration${result.applied.length === 1 ? "" : "s"} ${result.applied.join(", ")} to schema ${result.schema}`
            )
          })
        ).pipe(Effect.mapError((error) => new CliError({ message: `migrate failed: ${error.message}` })))
).pipe(Command.withDescription("create or upgrade the database schema (on Redis: check the server's settings)"))

/** `migrate --redis-url`: nothing to create; the settings of every server and what they can lose. */
const checkRedis = (url: string, json: boolean) =>
  Effect.scoped(
    Effect.gen(function* () {
      const connection = yield* RedisConnection.acquire({ url, commandTimeoutMs: 10_000 })
      const check = yield* RedisStore.make(connection, {}).checkServer
      if (json) return yield* Console.log(JSON.stringify({ backend: "redis", ...check }))
      const lines = [
        "Redis needs no migration: the adapter's scripts load themselves on first use.",
        ...check.nodes.map(
          (node) =>
            `${node.node}: appendonly ${node.appendonly ?? "?"}, appendfsync ${node.appendfsync ?? "?"}, ` +
            `save ${JSON.stringify(node.save ?? "?")}, maxmemory-policy ${node.maxmemoryPolicy ?? "?"}`
        ),
        ...(check.warnings.length === 0
          ? ["These settings keep acknowledged jobs, attempts and charges across a restart."]
          : check.warnings.map((warning) => `warning: ${warning}`))
      ]
      yield* Console.log(lines.join("\n"))
    })
  ).pipe(Effect.mapError((error) => new CliError({ message: `migrate failed: ${error.message}` })))
