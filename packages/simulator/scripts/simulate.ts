/**
 * Runs the simulator from the command line without the CLI package: `npx tsx packages/simulator/scripts/simulate.ts
 * --seed 1 --runs 200 --json`. It runs the command `slowcall simulate` runs (`@slowcall/simulator/Command`), so the
 * flags, the report and the exit status are the same. `npm run simulate` runs this file from a bundle
 * (scripts/bundled.mjs): the simulator's speed is measured that way.
 *
 * It imports nothing from `@slowcall/cli`: the CLI depends on the simulator, so the simulator may not depend back
 * (scripts/check-cycles.mjs fails on such a package cycle).
 */
import { Command, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { simulateCommand } from "@slowcall/simulator/Command"
import { Cause, Console, Effect } from "effect"

const cli = Command.run(simulateCommand, { name: "slowcall", version: "0.1.0" })

const program = Effect.suspend(() => cli(process.argv)).pipe(
  Effect.catchAllCause((cause) => {
    const failure = Cause.failureOption(cause)
    // The parser has printed the problem and the usage already.
    if (failure._tag === "Some" && ValidationError.isValidationError(failure.value)) return Effect.failCause(cause)
    if (Cause.isInterruptedOnly(cause)) return Effect.void
    const error = failure._tag === "Some" ? failure.value : Cause.squash(cause)
    const message =
      typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
    return Console.error(`slowcall: ${message.split("\n")[0]}`).pipe(Effect.zipRight(Effect.failCause(cause)))
  }),
  Effect.provide(NodeContext.layer)
)

NodeRuntime.runMain(program, { disableErrorReporting: true })
