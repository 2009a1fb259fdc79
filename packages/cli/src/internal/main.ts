/**
 * How the `slowcall` executable runs a command line: Node's services, the one redacting logger (`log.ts`), the
 * failure line, and the signals.
 *
 * - A failure prints exactly one line on stderr, `slowcall: <what went wrong>`, and exits with status 1: a command's
 *   own failure (its message), a usage error the parser found (its first line), or a defect.
 * - SIGINT, SIGTERM and SIGHUP interrupt the command, so its scopes close (a server stops taking requests, the worker
 *   hands back its leases, a data directory is unlocked) before the process exits; a second signal during that
 *   shutdown exits at once.
 *
 * @internal
 */
import { HelpDoc, ValidationError } from "@effect/cli"
import { makeRunMain } from "@effect/platform/Runtime"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Cause, Console, Effect, Layer } from "effect"
import { plainConsole } from "./console.js"
import * as Log from "./log.js"

/** The one line a failure is reported with. @internal */
export const lineOf = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (failure._tag === "Some" && ValidationError.isValidationError(failure.value)) {
    const text = HelpDoc.toAnsiText(failure.value.error)
    return text.split("\n").find((line) => line.trim() !== "") ?? "invalid arguments (see --help)"
  }
  const error = failure._tag === "Some" ? failure.value : Cause.squash(cause)
  const message =
    typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
  // An error without a message of its own (a server that could not listen) is named by its tag and causes.
  return (message === "" ? Log.errorText(error) : message).split("\n")[0] ?? ""
}

const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const

/** Exit statuses of a process ended by a signal it did not handle: 128 + the signal's number. */
const signalStatus: Record<(typeof signals)[number], number> = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 }

/** Like `NodeRuntime.runMain`, with SIGHUP handled too and a second signal ending the wait for a graceful stop. */
const runMain = makeRunMain(({ fiber, teardown }) => {
  const keepAlive = setInterval(() => {}, 2 ** 31 - 1)
  let signalled = false
  const onSignal = (signal: (typeof signals)[number]) => {
    if (signalled) {
      process.stderr.write(`slowcall: ${signal} again: exiting without waiting for the shutdown\n`)
      process.exit(signalStatus[signal])
    }
    signalled = true
    fiber.unsafeInterruptAsFork(fiber.id())
  }
  for (const signal of signals) process.on(signal, onSignal)
  fiber.addObserver((exit) => {
    for (const signal of signals) process.removeListener(signal, onSignal)
    clearInterval(keepAlive)
    teardown(exit, (code) => {
      if (signalled || code !== 0) process.exit(code)
    })
  })
})

/**
 * Runs `run(process.argv)` as the process's main program and exits with its status.
 *
 * @internal
 */
export const main = (run: (argv: ReadonlyArray<string>) => Effect.Effect<void, unknown, NodeContext.NodeContext>) => {
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
    Effect.provide(Layer.merge(NodeContext.layer, Log.layer({ format: "text", level: "info" })))
  )
  runMain(program, { disableErrorReporting: true, disablePrettyLogger: true })
}
