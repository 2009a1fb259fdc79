/**
 * Runs `slowcall simulate` without the rest of the CLI: `npx tsx packages/simulator/scripts/simulate.ts --seed 1
 * --runs 200 --json`. Same command, same output, same exit status as `slowcall simulate ...`. `npm run simulate`
 * runs this file from a bundle (scripts/bundled.mjs): the simulator's speed is measured that way.
 */
import { Command, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { simulateCommand } from "@slowcall/cli/Simulate"
import { Cause, Console, Effect } from "effect"

const cli = Command.run(simulateCommand, { name: "slowcall", version: "0.1.0" })

const program = Effect.suspend(() => cli(process.argv)).pipe(
  Effect.catchAllCause((cause) => {
    // The parser has printed the problem and the usage already.
    if (Cause.failureOption(cause).pipe((f) => f._tag === "Some" && ValidationError.isValidationError(f.value))) {
      return Effect.failCause(cause)
    }
    if (Cause.isInterruptedOnly(cause)) return Effect.void
    const error = Cause.squash(cause)
    const message =
      typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
    return Console.error(`slowcall: ${message.split("\n")[0]}`).pipe(Effect.zipRight(Effect.failCause(cause)))
  }),
  Effect.provide(NodeContext.layer)
)

NodeRuntime.runMain(program, { disableErrorReporting: true })
