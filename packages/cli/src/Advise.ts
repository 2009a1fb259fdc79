/**
 * `slowcall advise`: applies the decision rule of `@slowcall/core/Decide` from the command line. Given the
 * operation's p99 (or latency samples plus a retry policy, from which the effective p99 is computed first) and the
 * timeouts of the hops on the request path, it says whether the call should run as a background job or inline with
 * streaming, and why.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import * as Decide from "@slowcall/core/Decide"
import { Console, Data, Effect, Either, Option } from "effect"

/**
 * A usage problem of `advise`: missing or malformed flags, an unreadable samples file. The command fails with this
 * error and prints nothing itself; its message is the one line to show (`slowcall` prints it as
 * `slowcall: <message>` on stderr and exits non-zero).
 *
 * @since 0.1.0
 * @category errors
 */
export class AdviseError extends Data.TaggedError("AdviseError")<{ readonly message: string }> {}

/**
 * The JSON that `advise --json` prints: exactly the fields of issue 6, in this order.
 *
 * @since 0.1.0
 * @category models
 */
export interface AdviseJson {
  readonly mode: Decide.Mode
  readonly rule: Decide.Rule
  readonly p99Ms: number
  readonly shortestHop: { readonly name: string; readonly timeoutMs: number }
  readonly ratio: number
  readonly reasons: ReadonlyArray<string>
}

/**
 * Projects a decision onto the `--json` shape (drops nothing the issue asks for, adds nothing it does not).
 *
 * @since 0.1.0
 * @category combinators
 */
export const toJson = (decision: Decide.Decision): AdviseJson => ({
  mode: decision.mode,
  rule: decision.rule,
  p99Ms: decision.p99Ms,
  shortestHop: { name: decision.shortestHop.name, timeoutMs: decision.shortestHop.timeoutMs },
  ratio: decision.ratio,
  reasons: decision.reasons
})

/**
 * Parses one `--hop` value, `name=duration` (`lb=60s`, `client=90000ms`), into a hop. Fails with the line to
 * print when the value has no name, no `=`, a duration that does not parse (`Decide.parseDuration`: a number
 * without a unit is refused) or a zero timeout.
 *
 * @since 0.1.0
 * @category constructors
 */
export const parseHop = (text: string): Either.Either<Decide.Hop, string> => {
  const eq = text.indexOf("=")
  const name = eq > 0 ? text.slice(0, eq).trim() : ""
  if (name.length === 0) {
    return Either.left(`--hop ${JSON.stringify(text)}: expected <name>=<duration>, for example lb=60s`)
  }
  return Either.match(Decide.parseDuration(text.slice(eq + 1)), {
    onLeft: (error) => Either.left(`--hop ${name}: ${error.message}`),
    onRight: (timeoutMs) =>
      timeoutMs > 0
        ? Either.right({ name, timeoutMs })
        : Either.left(`--hop ${name}: the timeout must be more than 0, for example ${name}=60s`)
  })
}

/**
 * Parses a samples file: one latency in milliseconds per line; blank lines and lines starting with `#` are
 * ignored. Fails with the line to print on the first line that is not a non-negative number.
 *
 * @since 0.1.0
 * @category constructors
 */
export const parseSamples = (file: string, text: string): Either.Either<ReadonlyArray<number>, string> => {
  const samples: Array<number> = []
  const lines = text.split(/\r?\n/)
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim()
    if (line.length === 0 || line.startsWith("#")) continue
    const n = Number(line)
    if (!(Number.isFinite(n) && n >= 0)) {
      return Either.left(`--samples ${file}: line ${i + 1} is not a latency in ms: ${JSON.stringify(line)}`)
    }
    samples.push(n)
  }
  return samples.length === 0 ? Either.left(`--samples ${file}: no latencies in the file`) : Either.right(samples)
}

const duration = (flag: string, text: string): Either.Either<number, string> =>
  Either.mapLeft(Decide.parseDuration(text), (error) => `--${flag}: ${error.message}`)

const optionalDuration = (flag: string, text: Option.Option<string>): Either.Either<number | undefined, string> =>
  Option.match(text, { onNone: () => Either.right(undefined), onSome: (t) => duration(flag, t) })

const options = {
  p99: Options.text("p99").pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription(
      "the p99 of the whole operation, retries and fallbacks included, with its unit (45s, 1500ms, 2m); " +
        "or give --samples"
    ),
    Options.optional
  ),
  hops: Options.text("hop").pipe(
    Options.withPseudoName("NAME=DURATION"),
    Options.withDescription(
      "a hop on the request path and its timeout (lb=60s); one --hop per hop, the shortest decides"
    ),
    Options.atLeast(1)
  ),
  userWaiting: Options.boolean("no-user-waiting", { ifPresent: false, negationNames: ["user-waiting"] }).pipe(
    Options.withDescription("whether a person waits on the response (default: one does, --user-waiting)")
  ),
  outlivesSession: Options.boolean("outlives-session").pipe(
    Options.withDescription("the work continues after the session: a batch or a fan-out")
  ),
  resultLater: Options.boolean("result-later").pipe(
    Options.withDescription("the result is needed, but not in this interaction (enrichment, embeddings)")
  ),
  json: Options.boolean("json").pipe(
    Options.withDescription("print the decision as JSON: mode, rule, p99Ms, shortestHop, ratio, reasons")
  ),
  samples: Options.text("samples").pipe(
    Options.withPseudoName("FILE"),
    Options.withDescription(
      "instead of --p99: a file of single-attempt latencies in milliseconds, one per line, from which the " +
        "effective p99 is simulated (needs --timeout)"
    ),
    Options.optional
  ),
  timeout: Options.text("timeout").pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription("with --samples: the timeout of each attempt, for example 20s"),
    Options.optional
  ),
  retries: Options.integer("retries").pipe(
    Options.withDescription("with --samples: retries after the first attempt"),
    Options.withDefault(0)
  ),
  backoff: Options.text("backoff").pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription("with --samples: base of the full-jitter backoff between attempts (default none)"),
    Options.optional
  ),
  fallbackP99: Options.text("fallback-p99").pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription("with --samples: p99 of the fallback used when retries run out (default none)"),
    Options.optional
  ),
  seed: Options.integer("seed").pipe(
    Options.withDescription("with --samples: seed of the simulation (same seed, same answer)"),
    Options.withDefault(1)
  )
}

type Parsed = Command.Command.ParseConfig<typeof options>

const fail = (message: string): Effect.Effect<never, AdviseError> => Effect.fail(new AdviseError({ message }))

const orFail = <A>(e: Either.Either<A, string>): Effect.Effect<A, AdviseError> =>
  Either.match(e, { onLeft: fail, onRight: Effect.succeed })

const effectiveFromSamples = (input: Parsed, file: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs
      .readFileString(file)
      .pipe(Effect.catchAll((e) => fail(`--samples ${file}: cannot read the file (${e.message})`)))
    const samples = yield* orFail(parseSamples(file, text))
    const timeoutText = yield* Option.match(input.timeout, {
      onNone: () => fail("--samples needs --timeout <duration>: the per-attempt timeout"),
      onSome: Effect.succeed
    })
    const timeoutMs = yield* orFail(duration("timeout", timeoutText))
    const backoffMs = yield* orFail(optionalDuration("backoff", input.backoff))
    const fallbackP99Ms = yield* orFail(optionalDuration("fallback-p99", input.fallbackP99))
    const result = yield* Either.match(
      Decide.effectiveP99({
        samples,
        timeoutMs,
        retries: input.retries,
        seed: input.seed,
        ...(backoffMs === undefined ? {} : { backoffMs }),
        ...(fallbackP99Ms === undefined ? {} : { fallbackP99Ms })
      }),
      { onLeft: (e) => fail(e.message), onRight: Effect.succeed }
    )
    const note =
      `effective p99 ${Decide.formatDuration(result.p99Ms)} (p50 ${Decide.formatDuration(result.p50Ms)}) from ` +
      `${samples.length} samples, timeout ${Decide.formatDuration(timeoutMs)}, ${input.retries} retries` +
      `${backoffMs === undefined ? "" : `, backoff ${Decide.formatDuration(backoffMs)}`}` +
      `${fallbackP99Ms === undefined ? "" : `, fallback p99 ${Decide.formatDuration(fallbackP99Ms)}`}; ` +
      `all attempts timed out in ${(result.timeoutRate * 100).toFixed(2)}% of ${result.trials} trials ` +
      `(seed ${input.seed})`
    return { p99Ms: result.p99Ms, note }
  })

const run = (input: Parsed) =>
  Effect.gen(function* () {
    const hops: Array<Decide.Hop> = []
    for (const h of input.hops) hops.push(yield* orFail(parseHop(h)))
    const { note, p99Ms } = yield* Option.match(input.samples, {
      onSome: (file) =>
        Option.isSome(input.p99) ? fail("give either --p99 or --samples, not both") : effectiveFromSamples(input, file),
      onNone: () =>
        Option.match(input.p99, {
          onNone: () => fail("advise needs --p99 <duration> (or --samples FILE --timeout <duration>)"),
          onSome: (text) => Effect.map(orFail(duration("p99", text)), (ms) => ({ p99Ms: ms, note: undefined }))
        })
    })
    const decision = yield* Either.match(
      Decide.decide({
        p99Ms,
        hops,
        userWaiting: input.userWaiting,
        outlivesSession: input.outlivesSession,
        resultNeededNow: !input.resultLater
      }),
      { onLeft: (e) => fail(e.message), onRight: Effect.succeed }
    )
    const reasons = note === undefined ? decision.reasons : [...decision.reasons, note]
    if (input.json) {
      yield* Console.log(JSON.stringify(toJson({ ...decision, reasons }), null, 2))
    } else {
      yield* Console.log(decision.reasons[0])
    }
  })

/**
 * The `advise` command:
 * `slowcall advise --p99 <dur> --hop <name>=<dur> [--hop ...] [--user-waiting | --no-user-waiting]
 * [--outlives-session] [--result-later] [--json]`, or `--samples FILE --timeout <dur> [--retries N]
 * [--backoff <dur>] [--fallback-p99 <dur>] [--seed N]` instead of `--p99`. Prints one sentence (or, with
 * `--json`, the `AdviseJson` object) on stdout. `--hop` is required (the parser refuses a run without one); every
 * other usage problem is an `AdviseError` failure whose message is one line, so the process exits non-zero. A user is assumed to be waiting unless
 * `--no-user-waiting` is given.
 *
 * @since 0.1.0
 * @category commands
 */
export const adviseCommand = Command.make("advise", options, run).pipe(
  Command.withDescription(
    "say whether a slow call should run as a background job or inline with streaming, from its p99 and the " +
      "timeouts of the hops on the request path. Durations need a unit: 45s, 1500ms, 2m."
  )
)
