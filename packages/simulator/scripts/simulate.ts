/**
 * Runs the simulator from the command line without the CLI package: `npx tsx packages/simulator/scripts/simulate.ts
 * --seed 1 --runs 200 --json`. It takes the flags of `slowcall simulate` and prints the same report with the same exit
 * status (`@slowcall/cli`'s tests hold the two to that). `npm run simulate` runs this file from a bundle
 * (scripts/bundled.mjs): the simulator's speed is measured that way.
 *
 * It imports nothing from `@slowcall/cli`: the CLI depends on the simulator, so the simulator may not depend back
 * (scripts/check-cycles.mjs fails on such a package cycle).
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Command, Options, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import * as Plan from "@slowcall/simulator/Plan"
import * as Report from "@slowcall/simulator/Report"
import * as Simulator from "@slowcall/simulator/Simulate"
import { Cause, Console, Data, Effect, Option } from "effect"

/** A failure the user can act on: printed as `slowcall: <message>`, exit status 1. */
class SimulateError extends Data.TaggedError("SimulateError")<{ readonly message: string }> {}

const parseFaults = (text: string): Effect.Effect<ReadonlyArray<Plan.FaultKind>, SimulateError> => {
  if (text === "all") return Effect.succeed(Plan.faultKinds)
  if (text === "none" || text === "") return Effect.succeed([])
  const kinds = text.split(",").map((s) => s.trim().toUpperCase())
  const unknown = kinds.find((kind) => !(Plan.faultKinds as ReadonlyArray<string>).includes(kind))
  return unknown === undefined
    ? Effect.succeed(kinds as ReadonlyArray<Plan.FaultKind>)
    : Effect.fail(new SimulateError({ message: `unknown fault ${unknown}; known: ${Plan.faultKinds.join(",")}` }))
}

/** The plan of a saved corpus entry, or a one-line error naming the file. */
const planOf = (file: string, text: string): Effect.Effect<Plan.Plan, SimulateError> => {
  const notAPlan = new SimulateError({ message: `${file} is not a saved plan (a corpus entry with a plan)` })
  try {
    const entry = JSON.parse(text) as Partial<Report.CorpusEntry> | null
    return typeof entry?.plan === "object" && entry.plan !== null ? Effect.succeed(entry.plan) : Effect.fail(notAPlan)
  } catch {
    return Effect.fail(notAPlan)
  }
}

const options = {
  seed: Options.integer("seed").pipe(Options.withDescription("seed of the run set"), Options.withDefault(1)),
  runs: Options.integer("runs").pipe(Options.withDescription("number of simulated runs"), Options.withDefault(100)),
  jobs: Options.integer("jobs").pipe(Options.withDescription("jobs per run"), Options.withDefault(20)),
  workers: Options.integer("workers").pipe(Options.withDescription("worker processes per run"), Options.withDefault(4)),
  faults: Options.text("faults").pipe(
    Options.withDescription("fault kinds allowed, e.g. F5,F6,F11 (default all; 'none' for fault-free runs)"),
    Options.withDefault("all")
  ),
  allFaults: Options.boolean("all-faults").pipe(
    Options.withDescription("switch every allowed fault kind on in every run (no swarm subsets)")
  ),
  json: Options.boolean("json").pipe(Options.withDescription("print one JSON object")),
  replay: Options.text("replay").pipe(
    Options.withDescription("replay one saved plan (corpus JSON) once"),
    Options.optional
  ),
  saveCorpus: Options.text("save-corpus").pipe(
    Options.withDescription("directory where shrunk failing plans are written"),
    Options.optional
  )
}

const simulate = Command.make("simulate", options, (flags) =>
  Effect.gen(function* () {
    const faults = yield* parseFaults(flags.faults)
    const replay = Option.getOrUndefined(flags.replay)
    const report =
      replay !== undefined
        ? Simulator.replayPlan(
            yield* Effect.try({
              try: () => readFileSync(replay, "utf8"),
              catch: () => new SimulateError({ message: `cannot read ${replay}` })
            }).pipe(Effect.flatMap((text) => planOf(replay, text)))
          )
        : Simulator.simulate({
            seed: flags.seed,
            runs: flags.runs,
            jobs: flags.jobs,
            workers: flags.workers,
            faults,
            allFaults: flags.allFaults
          })
    if (Option.isSome(flags.saveCorpus)) {
      const dir = flags.saveCorpus.value
      for (const failure of report.failures) {
        const entry = Report.corpusEntry(failure, `slowcall simulate --seed ${flags.seed}`)
        yield* Effect.sync(() => {
          mkdirSync(dir, { recursive: true })
          writeFileSync(join(dir, Report.corpusName(failure)), `${JSON.stringify(entry, null, 2)}\n`)
        })
      }
    }
    yield* Console.log(flags.json ? JSON.stringify(Report.toJson(report)) : Report.format(report))
    if (report.violations.length > 0) {
      return yield* new SimulateError({
        message: `${report.violations.length} invariant violation(s); first: ${report.violations[0]!.invariant}`
      })
    }
  })
).pipe(Command.withDescription("Run the deterministic simulator: faults, invariants, shrinking, replay."))

const cli = Command.run(simulate, { name: "slowcall", version: "0.1.0" })

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
