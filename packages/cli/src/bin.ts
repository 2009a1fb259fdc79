/**
 * The `slowcall` executable: runs the command tree with Node's services. A failure prints one line on stderr
 * (`slowcall: <message>`) and exits with status 1; usage errors are explained by the parser and also exit 1. Every
 * log line goes through `Redact.logger`, so no secret in a logged error reaches the log.
 *
 * @since 0.1.0
 */
import { ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import * as Redact from "@slowcall/core/Redact"
import { simulateCommand } from "@slowcall/simulator/Command"
import { Cause, Console, Effect, Layer } from "effect"
import { adviseCommand } from "./Advise.js"
import * as Cli from "./Cli.js"

const run = Cli.make([adviseCommand, simulateCommand]) as (
  argv: ReadonlyArray<string>
) => Effect.Effect<void, unknown, NodeContext.NodeContext>

const program = Effect.suspend(() => run(process.argv)).pipe(
  Effect.catchAllCause((cause) => {
    const failure = Cause.failureOption(cause)
    if (failure._tag === "Some" && ValidationError.isValidationError(failure.value)) {
      // The parser has printed the problem and the usage already.
      return Effect.failCause(cause)
    }
    if (Cause.isInterruptedOnly(cause)) return Effect.void
    const error = failure._tag === "Some" ? failure.value : Cause.squash(cause)
    const message =
      typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
    return Console.error(`slowcall: ${message.split("\n")[0]}`).pipe(Effect.zipRight(Effect.failCause(cause)))
  }),
  Effect.provide(Layer.merge(NodeContext.layer, Redact.layerLogger))
)

NodeRuntime.runMain(program, { disableErrorReporting: true })
