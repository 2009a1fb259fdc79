/**
 * The `simulate` command (`slowcall simulate`, and `npm run simulate` through the simulator's own script): run the
 * deterministic simulator over a run set and report. Exit status 0 when every invariant holds, 1 otherwise.
 * `--replay FILE` runs one saved plan (a corpus entry) once. It lives beside the simulator so that the CLI and the
 * script share one definition without the simulator depending on the CLI.
 *
 * @since 0.2.0
 */
import { Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { Console, Data, Effect, Option } from "effect"
import type * as Plan from "./Plan.js"
import type * as Report from "./Report.js"
import type * as Simulator from "./Simulate.js"

/** The simulator itself, loaded when the command runs: `slowcall --help` and the other commands never load it. */
const load = () => Promise.all([import("./Plan.js"), import("./Report.js"), import("./Simulate.js")])

/**
 * A failure the user can act on; the command line prints `slowcall: <message>` and exits with status 1.
 *
 * @since 0.2.0
 * @category errors
 */
export class SimulateError extends Data.TaggedError("SimulateError")<{ readonly message: string }> {}

const parseFaults = (text: string, known: ReadonlyArray<Plan.FaultKind>): ReadonlyArray<Plan.FaultKind> => {
  if (text === "all") return known
  if (text === "none" || text === "") return []
  const kinds = text.split(",").map((s) => s.trim().toUpperCase())
  for (const kind of kinds) {
    if (!(known as ReadonlyArray<string>).includes(kind)) {
      throw new Error(`unknown fault ${kind}; known: ${known.join(",")}`)
    }
  }
  return kinds as ReadonlyArray<Plan.FaultKind>
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
  seed: Options.integer("seed").pipe(
    Options.withDescription("seed of the run set: the same seed and flags give the same report"),
    Options.withDefault(1)
  ),
  runs: Options.integer("runs").pipe(Options.withDescription("number of simulated runs"), Options.withDefault(100)),
  jobs: Options.integer("jobs").pipe(Options.withDescription("jobs submitted per run"), Options.withDefault(20)),
  workers: Options.integer("workers").pipe(Options.withDescription("worker processes per run"), Options.withDefault(4)),
  faults: Options.text("faults").pipe(
    Options.withPseudoName("KINDS"),
    Options.withDescription(
      "fault kinds a run may switch on, by id (F5,F6,F11; the report names each), 'all', or 'none' for fault-free runs"
    ),
    Options.withDefault("all")
  ),
  allFaults: Options.boolean("all-faults").pipe(
    Options.withDescription("switch every allowed fault kind on in every run (no swarm subsets)")
  ),
  json: Options.boolean("json").pipe(Options.withDescription("print the report as one JSON object")),
  replay: Options.text("replay").pipe(
    Options.withPseudoName("FILE"),
    Options.withDescription("run one saved plan (a corpus entry's JSON) once, instead of a run set"),
    Options.optional
  ),
  saveCorpus: Options.text("save-corpus").pipe(
    Options.withPseudoName("DIR"),
    Options.withDescription("write each failure's shrunk plan to this directory, to replay with --replay"),
    Options.optional
  )
}

/**
 * The `simulate` command. Invariant: the same flags print the same report (same historyHash) on every machine.
 *
 * @since 0.1.0
 * @category commands
 */
export const simulateCommand = Command.make("simulate", options, (flags) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const [Plan, Report, Simulator] = yield* Effect.promise(load)
    const faults = yield* Effect.try({
      try: () => parseFaults(flags.faults, Plan.faultKinds),
      catch: (error) => new SimulateError({ message: (error as Error).message })
    })
    let report: Simulator.Report
    if (Option.isSome(flags.replay)) {
      const file = flags.replay.value
      const text = yield* fs
        .readFileString(file)
        .pipe(Effect.mapError(() => new SimulateError({ message: `cannot read ${file}` })))
      report = Simulator.replayPlan(yield* planOf(file, text))
    } else {
      report = Simulator.simulate({
        seed: flags.seed,
        runs: flags.runs,
        jobs: flags.jobs,
        workers: flags.workers,
        faults,
        allFaults: flags.allFaults
      })
    }
    if (Option.isSome(flags.saveCorpus)) {
      for (const failure of report.failures) {
        yield* fs
          .makeDirectory(flags.saveCorpus.value, { recursive: true })
          .pipe(
            Effect.zipRight(
              fs.writeFileString(
                `${flags.saveCorpus.value}/${Report.corpusName(failure)}`,
                `${JSON.stringify(Report.corpusEntry(failure, `slowcall simulate --seed ${flags.seed}`), null, 2)}\n`
              )
            ),
            Effect.orDie
          )
      }
    }
    yield* Console.log(flags.json ? JSON.stringify(Report.toJson(report)) : Report.format(report))
    if (report.violations.length > 0) {
      return yield* new SimulateError({
        message: `${report.violations.length} invariant violation(s); first: ${report.violations[0]!.invariant}`
      })
    }
  })
).pipe(
  Command.withDescription(
    "run the real worker in a deterministic simulation under injected faults and check its invariants; a failure " +
      "is shrunk and printed with the line that replays it"
  )
)
