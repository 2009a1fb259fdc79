/**
 * The console the `slowcall` executable writes through: colour (ANSI escape sequences, as `@effect/cli` writes its
 * help with) only where it can be seen. A stream that is not a terminal gets none, and with `NO_COLOR` set to
 * anything but the empty string no stream gets any.
 *
 * @internal
 */
import { type Console, Effect } from "effect"

// ESC, then a control sequence: parameters, intermediates, one final byte. Built from a string so the pattern names
// the escape character without holding it.
const escapes = new RegExp(`${String.fromCharCode(27)}\\[[0-9;?]*[ -/]*[@-~]`, "g")

/** Text without ANSI escape sequences. @internal */
export const stripAnsi = (text: string): string => text.replace(escapes, "")

/** Whether colour may go to a stream. @internal */
export const colourFor = (
  stream: { readonly isTTY?: boolean | undefined },
  env: Readonly<Record<string, string | undefined>>
): boolean => stream.isTTY === true && (env.NO_COLOR ?? "") === ""

const plainArgs = (colour: boolean, args: ReadonlyArray<unknown>): ReadonlyArray<unknown> =>
  colour ? args : args.map((arg) => (typeof arg === "string" ? stripAnsi(arg) : arg))

/**
 * `base` with colour removed from what goes to a stream that may not show it: `log`, `info`, `debug` and `trace`
 * go to stdout, `error` and `warn` to stderr, in the Effect methods and in `unsafe` alike.
 *
 * @internal
 */
export const plainConsole = (
  options: {
    readonly stdout: { readonly isTTY?: boolean | undefined }
    readonly stderr: { readonly isTTY?: boolean | undefined }
    readonly env: Readonly<Record<string, string | undefined>>
  },
  base: Console.Console = Effect.runSync(Effect.console)
): Console.Console => {
  const out = colourFor(options.stdout, options.env)
  const err = colourFor(options.stderr, options.env)
  const unsafe = base.unsafe
  const plainUnsafe: globalThis.Console = Object.assign(Object.create(unsafe) as globalThis.Console, {
    log: (...args: Array<unknown>) => unsafe.log(...plainArgs(out, args)),
    info: (...args: Array<unknown>) => unsafe.info(...plainArgs(out, args)),
    debug: (...args: Array<unknown>) => unsafe.debug(...plainArgs(out, args)),
    trace: (...args: Array<unknown>) => unsafe.trace(...plainArgs(out, args)),
    error: (...args: Array<unknown>) => unsafe.error(...plainArgs(err, args)),
    warn: (...args: Array<unknown>) => unsafe.warn(...plainArgs(err, args))
  })
  return {
    ...base,
    log: (...args) => base.log(...plainArgs(out, args)),
    info: (...args) => base.info(...plainArgs(out, args)),
    debug: (...args) => base.debug(...plainArgs(out, args)),
    trace: (...args) => base.trace(...plainArgs(out, args)),
    error: (...args) => base.error(...plainArgs(err, args)),
    warn: (...args) => base.warn(...plainArgs(err, args)),
    unsafe: plainUnsafe
  }
}
