/**
 * Runs the simulator from the command line without the CLI package: `npx tsx packages/simulator/scripts/simulate.ts
 * --seed 1 --runs 200 --json`. It runs the command `slowcall simulate` runs (`@slowcall/simulator/Command`), so the
 * flags, the report and the exit status are the same. `npm run simulate` runs this file from a bundle
 * (scripts/bundled.mjs): the simulator's speed is measured that way.
 *
 * It imports nothing from `@slowcall/cli`: the CLI depends on the simulator, so the simulator may not depend back
 * (scripts/check-cycles.mjs fails on such a package cycle). It keeps the executable's conventions itself (as
 * packages/cli/src/bin.ts does; packages/cli/test/Simulate.test.ts holds the two to the same output): every failure
 * one `slowcall: ...` line on stderr, and no colour on a stream that is not a terminal or with `NO_COLOR` set.
 */
import { HelpDoc, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { simulateCommand } from "@slowcall/simulator/Command"
import * as CommandLine from "@slowcall/simulator/CommandLine"
import { Cause, Console, Effect } from "effect"

// The help of `slowcall simulate`, wrapped the same way.
const cli = CommandLine.run(simulateCommand, {
  name: "slowcall",
  version: "0.1.0",
  width: () => CommandLine.terminalWidth(process.stdout)
})

const escapes = new RegExp(`${String.fromCharCode(27)}\\[[0-9;?]*[ -/]*[@-~]`, "g")
const colour = (stream: { readonly isTTY?: boolean }) => stream.isTTY === true && (process.env.NO_COLOR ?? "") === ""
const plain = (keep: boolean, args: ReadonlyArray<unknown>) =>
  keep ? args : args.map((arg) => (typeof arg === "string" ? arg.replace(escapes, "") : arg))
const base = Effect.runSync(Effect.console)
const console: Console.Console = {
  ...base,
  log: (...args) => base.log(...plain(colour(process.stdout), args)),
  error: (...args) => base.error(...plain(colour(process.stderr), args))
}

/** The one line a failure is reported with: a parser's problem (its first line), or the failure's message. */
const lineOf = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (failure._tag === "Some" && ValidationError.isValidationError(failure.value)) {
    const text = HelpDoc.toAnsiText(failure.value.error).replace(escapes, "")
    return text.split("\n").find((line) => line.trim() !== "") ?? "invalid arguments (see --help)"
  }
  const error = failure._tag === "Some" ? failure.value : Cause.squash(cause)
  const message =
    typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
  return message.split("\n")[0] ?? ""
}

const program = Effect.suspend(() => cli(process.argv)).pipe(
  // The parser prints its usage errors through `Console.error` before failing; the one line below replaces them.
  Effect.withConsole({ ...console, error: () => Effect.void }),
  Effect.catchAllCause((cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.void
      : Console.error(`slowcall: ${lineOf(cause)}`).pipe(Effect.zipRight(Effect.failCause(cause)))
  ),
  Effect.withConsole(console),
  Effect.provide(NodeContext.layer)
)

NodeRuntime.runMain(program, { disableErrorReporting: true })
