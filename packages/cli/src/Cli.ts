/**
 * The `slowcall` command tree and its runner.
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import * as CommandLine from "@slowcall/simulator/CommandLine"
import { batchesCommand } from "./Batches.js"
import { dlqCommand } from "./Dlq.js"
import { jobsCommand } from "./Jobs.js"
import { migrateCommand } from "./Migrate.js"
import { resourcesCommand } from "./Resources.js"
import { schedulesCommand } from "./Schedules.js"
import { serveCommand, tokenCommand } from "./Serve.js"

/**
 * The subcommands this package defines itself; `bin.ts` adds those of other modules.
 *
 * @since 0.1.0
 * @category commands
 */
export const subcommands = [
  serveCommand,
  tokenCommand,
  migrateCommand,
  jobsCommand,
  batchesCommand,
  dlqCommand,
  resourcesCommand,
  schedulesCommand
] as const

/**
 * The root `slowcall` command over this package's subcommands and `extra`.
 *
 * @since 0.3.0
 * @category constructors
 */
export const root = <const S extends ReadonlyArray<Command.Command<any, any, any, any>>>(extra: S) =>
  Command.make("slowcall").pipe(
    Command.withDescription("durable background jobs for slow, billed model calls"),
    Command.withSubcommands([...subcommands, ...extra] as unknown as [Command.Command<any, any, any, any>])
  )

/**
 * Builds the root `slowcall` command from subcommands, and a runner that takes `process.argv`. Help is the one of
 * `@slowcall/simulator/CommandLine`: written from the commands' descriptions, wrapped to the terminal's width (80
 * columns when stdout is not a terminal, or `width` when given).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <const S extends ReadonlyArray<Command.Command<any, any, any, any>>>(
  extra: S,
  options: { readonly width?: () => number } = {}
) =>
  CommandLine.run(root(extra), {
    name: "slowcall",
    version: "0.1.0",
    width: options.width ?? (() => CommandLine.terminalWidth(process.stdout))
  })
