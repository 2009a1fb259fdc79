/**
 * The `slowcall` executable: the command tree run by `internal/main.ts` (one failure line, one redacting logger,
 * graceful stop on SIGINT, SIGTERM and SIGHUP).
 *
 * Conventions every command keeps:
 * - A failure prints exactly one line on stderr, `slowcall: <what went wrong>`, and exits with status 1: a command's
 *   own failure (its message), a usage error the parser found (its first line), or a defect. Commands print no error
 *   themselves; the parser's own error printing is replaced by this line.
 * - Colour only on a terminal: escape sequences are removed from what goes to a stream that is not a TTY, and from
 *   everything when `NO_COLOR` is set (to anything but the empty string).
 * - Log lines go to stderr through one logger that redacts them (`Redact.redact`), each line once.
 * - What a command does not need is not loaded: the server, the adapters and their drivers are imported by the
 *   commands that use them, so `--help` and the HTTP client commands start fast.
 *
 * @since 0.1.0
 */
import type { NodeContext } from "@effect/platform-node/NodeContext"
import { simulateCommand } from "@slowcall/simulator/Command"
import type { Effect } from "effect"
import { adviseCommand } from "./Advise.js"
import * as Cli from "./Cli.js"
import { main } from "./internal/main.js"

main(
  Cli.make([adviseCommand, simulateCommand]) as (
    argv: ReadonlyArray<string>
  ) => Effect.Effect<void, unknown, NodeContext>
)
