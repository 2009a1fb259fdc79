/**
 * The `slowcall` command tree and its runner.
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import { dlqCommand } from "./Dlq.js"
import { jobsCommand } from "./Jobs.js"
import { migrateCommand } from "./Migrate.js"
import { serveCommand, tokenCommand } from "./Serve.js"

/**
 * The subcommands this package defines itself; `bin.ts` adds those of other modules.
 *
 * @since 0.1.0
 * @category commands
 */
export const subcommands = [serveCommand, tokenCommand, migrateCommand, jobsCommand, dlqCommand] as const

/**
 * Builds the root `slowcall` command from subcommands, and a runner that takes `process.argv`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <const S extends ReadonlyArray<Command.Command<any, any, any, any>>>(extra: S) => {
  const root = Command.make("slowcall").pipe(
    Command.withDescription("durable background jobs for slow, billed model calls"),
    Command.withSubcommands([...subcommands, ...extra] as unknown as [Command.Command<any, any, any, any>])
  )
  return Command.run(root, { name: "slowcall", version: "0.1.0" })
}
