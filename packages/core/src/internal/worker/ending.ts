/**
 * How an attempt's handler ended, as the outcome decision (`outcome.ts`) and the stored evidence see it: its input
 * decoded and its result encoded by the handler's schemas (a synchronous schema at once, in the caller's step), a returned
 * value checked to be storable JSON, a failure normalised, and every message redacted and truncated.
 *
 * @internal
 */
import { Cause, Effect, Either, Exit, Option, ParseResult, Schema } from "effect"
import * as Canonical from "../../Canonical.js"
import * as Handler from "../../Handler.js"
import * as Normalize from "../../Normalize.js"
import type { Ended } from "./outcome.js"

/** At most this many issues of a parse error are kept as evidence; the rest are counted. */
const maxIssues = 10

/**
 * A parse error as evidence: one line per issue, `path: message` (`(value)` for the value itself), at most
 * `maxIssues` of them and a count of the rest; short enough to read, unlike the schema's whole tree.
 */
const formatParseError = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const lines = issues
    .slice(0, maxIssues)
    .map((issue) => `${issue.path.length === 0 ? "(value)" : issue.path.map(String).join(".")}: ${issue.message}`)
  if (issues.length > maxIssues) lines.push(`and ${issues.length - maxIssues} more`)
  return evidenceOf(lines.join("\n"))
}

/** Redacted, truncated evidence. @internal */
export const evidenceOf = (text: string): string => Normalize.truncate(Normalize.redact(text))

/** A schema step's failure as evidence: the parse error, or the defect a throwing transformation left. @internal */
export const formatSchemaCause = (cause: Cause.Cause<ParseResult.ParseError>): string => {
  const failure = Cause.failureOption(cause)
  return Option.isSome(failure) ? formatParseError(failure.value) : evidenceOf(Cause.pretty(cause))
}

/**
 * Runs a schema parse in the calling fiber and continues with `f` of its exit. The parser settles a fully synchronous
 * schema at once and returns an `Either`: then `f` is called right here; a schema with
 * effectful transformations returns an effect, which runs in this fiber (its Clock, logger and tracer), once, before
 * `f`. A throw while the parser is built or run is a defect of the exit, never a crash of the attempt. Called inside a
 * step of the fiber (a `suspend`): a synchronous parse runs where it is called.
 */
export const withSchema = <A, B, R>(
  parse: (value: any) => Effect.Effect<A, ParseResult.ParseError>,
  value: unknown,
  f: (exit: Exit.Exit<A, ParseResult.ParseError>) => Effect.Effect<B, never, R>
): Effect.Effect<B, never, R> => {
  let result: Effect.Effect<A, ParseResult.ParseError>
  try {
    result = parse(value)
  } catch (defect) {
    return f(Exit.die(defect))
  }
  if (Either.isEither(result)) {
    const settled = result as Either.Either<A, ParseResult.ParseError>
    return f(Either.isRight(settled) ? Exit.succeed(settled.right) : Exit.fail(settled.left))
  }
  return Effect.flatMap(Effect.exit(result), f)
}

/** The handler's estimate for this input; a throwing estimate function is a handler bug, reported as such. */
export const estimateEither = <R>(
  handler: Handler.Handler<any, any, R>,
  input: unknown
): Either.Either<number | undefined, string> => {
  try {
    return Either.right(Handler.estimateFor(handler, input))
  } catch (error) {
    return Either.left(evidenceOf(`estimate failed: ${error instanceof Error ? error.message : String(error)}`))
  }
}

/** A returned value as the decision sees it: encoded by the result schema, then checked to be storable JSON. */
const succeededOf = (encoded: Exit.Exit<unknown, ParseResult.ParseError>): Ended => {
  if (Exit.isFailure(encoded)) {
    const error = `result does not match the handler's result schema: ${formatSchemaCause(encoded.cause)}`
    return { _tag: "Unstorable", error }
  }
  const result = Canonical.validateJson(encoded.value)
  if (Either.isLeft(result)) {
    const error = evidenceOf(`result is not storable JSON at ${result.left.path}: ${result.left.message}`)
    return { _tag: "Unstorable", error }
  }
  return { _tag: "Succeeded", result: result.right }
}

/**
 * How the handler ended, for the decision (the result encoded and checked, or the failure normalised), handed to `f`.
 */
export const endedOf = <R>(
  handler: Handler.Handler<any, any, R>,
  exit: Exit.Exit<unknown, unknown>,
  f: (ended: Ended) => Effect.Effect<void>
): Effect.Effect<void> => {
  if (Exit.isSuccess(exit))
    return withSchema(Schema.encode(handler.result), exit.value, (encoded) => f(succeededOf(encoded)))
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure) && failure.value instanceof Handler.BudgetExceeded) {
    return f({ _tag: "BudgetExceeded", error: failure.value.message })
  }
  if (Option.isSome(failure) && failure.value instanceof Handler.DeadlineExceeded) {
    return f({ _tag: "DeadlineExceeded", error: failure.value.message })
  }
  return Effect.flatMap(
    Normalize.normalizeWithClock(Option.isSome(failure) ? failure.value : exit.cause),
    (normalized) => f({ _tag: "Failed", normalized })
  )
}
