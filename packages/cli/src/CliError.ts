/**
 * The one error the commands fail with: a message that fits on one line of stderr.
 *
 * @since 0.1.0
 */
import { Data } from "effect"

/**
 * A command failed for a reason the user can act on. `bin.ts` prints `slowcall: <message>` and exits with 1.
 *
 * @since 0.1.0
 * @category errors
 */
export class CliError extends Data.TaggedError("CliError")<{ readonly message: string }> {}
