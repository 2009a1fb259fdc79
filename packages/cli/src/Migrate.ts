/**
 * `slowcall migrate`: bring the database schema up to date (safe to run from two processes at once).
 *
 * @since 0.1.0
 */

import { mkdirSync } from "node:fs"
import { Command, Options } from "@effect/cli"
import * as PgDriver from "@slowcall/adapter-postgres/PgDriver"
import { migrate } from "@slowcall/adapter-postgres/PgMigrator"
import { Config, Console, Effect, Option } from "effect"
import { CliError } from "./CliError.js"
import { json } from "./Jobs.js"

/**
 * `slowcall migrate [--database-url URL | --data-dir DIR] [--schema NAME] [--json]`.
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
    dataDir: Options.directory("data-dir").pipe(Options.withDefault("./.slowcall")),
    schema: Options.text("schema").pipe(Options.withDefault("slowcall")),
    json
  },
  ({ dataDir, databaseUrl, json, schema }) =>
    Effect.scoped(
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
).pipe(Command.withDescription("create or upgrade the database schema"))
