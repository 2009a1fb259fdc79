/**
 * `slowcall migrate`: bring the database schema up to date (safe to run from two processes at once). On Redis there
 * is no schema (the scripts load themselves): it reads the server's persistence and eviction settings and says
 * what they can lose: through a crash of Redis, through a crash of the machine (`appendfsync everysec`: up to a
 * second of acknowledged jobs; `always`: nothing), or always (no append-only file, eviction).
 *
 * @since 0.1.0
 */

import { mkdirSync } from "node:fs"
import { Command, Options } from "@effect/cli"
import { Config, Console, Effect, Option } from "effect"
import { CliError } from "./CliError.js"

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
      Options.optional,
      Options.withDescription("the Postgres server to migrate; without it, embedded PGlite under --data-dir")
    ),
    redisUrl: Options.text("redis-url").pipe(
      Options.optional,
      Options.withDescription("check this Redis server's persistence and eviction settings instead (no schema)")
    ),
    dataDir: Options.directory("data-dir").pipe(
      Options.withDefault("./.slowcall"),
      Options.withDescription("the embedded PGlite directory, created if missing")
    ),
    schema: Options.text("schema").pipe(
      Options.withDefault("slowcall"),
      Options.withDescription("the Postgres schema that holds the tables")
    ),
    json: Options.boolean("json").pipe(
      Options.withDescription("print the result as JSON: { schema, applied }, or the Redis settings and warnings")
    )
  },
  ({ dataDir, databaseUrl, json, redisUrl, schema }) =>
    Option.isSome(redisUrl)
      ? checkRedis(redisUrl.value, json)
      : Effect.scoped(
          Effect.gen(function* () {
            // The adapter (and its drivers) are loaded by the command that needs them, not by every command.
            const [PgDriver, { migrate }] = yield* Effect.promise(() =>
              Promise.all([
                import("@slowcall/adapter-postgres/PgDriver"),
                import("@slowcall/adapter-postgres/PgMigrator")
              ])
            )
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
      const [RedisConnection, RedisStore] = yield* Effect.promise(() =>
        Promise.all([import("@slowcall/adapter-redis/RedisConnection"), import("@slowcall/adapter-redis/RedisStore")])
      )
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
        ...check.durability,
        ...check.warnings.map((warning) => `warning: ${warning}`)
      ]
      yield* Console.log(lines.join("\n"))
    })
  ).pipe(Effect.mapError((error) => new CliError({ message: `migrate failed: ${error.message}` })))
