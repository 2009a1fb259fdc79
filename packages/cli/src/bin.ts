/**
 * The `slowcall` executable: runs the command tree with Node's services.
 *
 * Conventions every command keeps:
 * - A failure prints exactly one line on stderr, `slowcall: <what went wrong>`, and exits with status 1: a command's
 *   own failure (its message), a usage error the parser found (its first line), or a defect. Commands print no error
 *   themselves; the parser's own error printing is replaced by this line.
 * - Colour only on a terminal: escape sequences are removed from what goes to a stream that is not a TTY, and from
 *   everything when `NO_COLOR` is set (to anything but the empty string).
 * - Every log line goes through `Redact.logger`, so no secret in a logged error reaches the log.
 *
 * @since 0.1.0
 */
import { HelpDoc, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import * as Redact from "@slowcall/core/Redact"
import { simulateCommand } from "@slowcall/simulator/Command"
import { Cause, Console, Effect, Layer } from "effect"
import { adviseCommand } from "./Advise.js"
import * as Cli from "./Cli.js"
import { plainConsole } from "./internal/console.js"

const run = Cli.make([adviseCommand, simulateCommand]) as (
  argv: ReadonlyArray<string>
) => Effect.Effect<void, unknown, NodeContext.NodeContext>

/** The one line a failure is reported with. */
const lineOf = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (failure._tag === "Some" && ValidationError.isValidationError(failure.value)) {
    const text = HelpDoc.toAnsiText(failure.value.error)
    return text.split("\n").find((line) => line.trim() !== "") ?? "invalid arguments (see --help)"
  }
  const error = failure._tag === "Some" ? failure.value : Cause.squash(cause)
  const message =
    typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
  return message.split("\n")[0] ?? ""
}

const console = plainConsole({ stdout: process.stdout, stderr: process.stderr, env: process.env })

const program = Effect.suspend(() => run(process.argv)).pipe(
  // The parser prints its usage errors through `Console.error` before failing; the one line below replaces them.
  Effect.withConsole({ ...console, error: () => Effect.void }),
  Effect.catchAllCause((cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.void
      : Console.error(`slowcall: ${lineOf(cause)}`).pipe(Effect.zipRight(Effect.failCause(cause)))
  ),
  Effect.withConsole(console),
  Effect.provide(Layer.merge(NodeContext.layer, Redact.layerLogger))
)

NodeRuntime.runMain(program, { disableErrorReporting: true })
