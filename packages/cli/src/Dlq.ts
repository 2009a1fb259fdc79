/**
 * `slowcall dlq list|replay`: dead letters on a running server. `list` shows a page of the dead-letter groups (the
 * server's view: singletons collapsed per error class, most costly first) with a sample input and the last error of
 * each. `replay` moves failed jobs back to queued in one server-side call; it replays only what it is told to (ids,
 * a filter, or `--all`), and a job that is no longer failed (one that succeeded above all) is skipped.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { CliError } from "./CliError.js"
import { cents, clip, table } from "./internal/format.js"
import { request } from "./internal/http.js"
import { json, url } from "./Jobs.js"

const errorClass = Options.text("error-class").pipe(
  Options.optional,
  Options.withDescription("only dead letters of this error class (rate_limited, auth, ...)")
)
const type = Options.text("type").pipe(Options.optional, Options.withDescription("only dead letters of this job type"))

/** The table of one page of groups: the columns a person decides a replay by. */
const groupRows = (groups: ReadonlyArray<any>): ReadonlyArray<ReadonlyArray<string>> =>
  groups.map((group) => [
    group.errorClass ?? "-",
    group.collapsed ? "(each once)" : String(group.inputHash).slice(0, 12),
    String(group.count),
    cents(group.costCents),
    new Date(group.lastFailedAt).toISOString().replace(/\.\d{3}Z$/, "Z"),
    clip(group.sampleInput ?? "-", 40),
    clip(String(group.lastError ?? "-").split("\n")[0] ?? "-", 60)
  ])

const list = Command.make(
  "list",
  {
    errorClass,
    type,
    sort: Options.choice("sort", ["cost", "count", "recent"]).pipe(
      Options.optional,
      Options.withDescription("order of the groups: cost (the default), count or recent (latest failure first)")
    ),
    limit: Options.integer("limit").pipe(Options.withDefault(20), Options.withDescription("groups per page")),
    cursor: Options.text("cursor").pipe(
      Options.optional,
      Options.withDescription("show the page after this one (the cursor the previous page printed)")
    ),
    url,
    json
  },
  ({ cursor, errorClass, json, limit, sort, type, url }) =>
    Effect.gen(function* () {
      const params = new URLSearchParams({ limit: String(limit) })
      if (Option.isSome(errorClass)) params.set("errorClass", errorClass.value)
      if (Option.isSome(type)) params.set("type", type.value)
      if (Option.isSome(sort)) params.set("sort", sort.value)
      if (Option.isSome(cursor)) params.set("cursor", cursor.value)
      const body = yield* request(url, "GET", `v1/dead-letters?${params}`)
      if (json) return yield* Console.log(JSON.stringify(body, null, 2))
      if (body.groups.length === 0)
        return yield* Console.log(Option.isSome(cursor) ? "no more groups" : "no dead letters")
      yield* Console.log(
        table(
          ["ERROR CLASS", "INPUT", "JOBS", "COST", "LAST FAILED", "SAMPLE INPUT", "LAST ERROR"],
          groupRows(body.groups)
        )
      )
      yield* Console.log(
        `${body.totalGroups} group${body.totalGroups === 1 ? "" : "s"}, ${body.totalJobs} dead letter${
          body.totalJobs === 1 ? "" : "s"
        }, ${cents(body.totalCostCents)} in all; arrivals ${body.arrivalsPerMinute.toFixed(2)}/min`
      )
      if (body.next !== null) yield* Console.log(`next page: --cursor ${body.next}`)
    })
).pipe(Command.withDescription("dead letters grouped by error class and input, most costly first"))

const noun = (n: number) => `${n} dead letter${n === 1 ? "" : "s"}`

/** A line on stderr: what the command is about to do, kept apart from its result on stdout. */
const note = (line: string) => Effect.sync(() => process.stderr.write(`${line}\n`))

const replay = Command.make(
  "replay",
  {
    ids: Options.text("id").pipe(
      Options.withPseudoName("JOB-ID"),
      Options.repeated,
      Options.withDescription("replay this job (repeat for several); filters still apply")
    ),
    errorClass,
    type,
    inputHash: Options.text("input-hash").pipe(
      Options.optional,
      Options.withDescription("only dead letters of this input (a group's input hash)")
    ),
    all: Options.boolean("all").pipe(
      Options.withDescription("replay every dead letter (with no id or filter, this must be said)")
    ),
    dryRun: Options.boolean("dry-run").pipe(
      Options.withDescription("change nothing: print how many would be replayed and what they would cost")
    ),
    url,
    json
  },
  ({ all, dryRun, errorClass, ids, inputHash, json, type, url }) =>
    Effect.gen(function* () {
      const filters = {
        ...(Option.isSome(errorClass) ? { errorClass: errorClass.value } : {}),
        ...(Option.isSome(type) ? { type: type.value } : {}),
        ...(Option.isSome(inputHash) ? { inputHash: inputHash.value } : {})
      }
      const named = ids.length > 0 || Object.keys(filters).length > 0
      if (!named && !all) {
        return yield* new CliError({
          message: "name what to replay: --id <job-id>, a filter (--error-class, --type, --input-hash) or --all"
        })
      }
      const target = { ...(ids.length > 0 ? { ids } : {}), ...filters, ...(named ? {} : { all: true }) }
      const call = (dry: boolean) => request(url, "POST", "v1/dead-letters/replay", { ...target, dryRun: dry })
      if (all && !dryRun) {
        // Everything: say how much first (a dry run's count and estimate), then replay it in one call.
        const preview = yield* call(true)
        yield* note(
          `replaying ${noun(preview.matched)}, estimated spend ${cents(preview.estimatedCents)} (one attempt each)`
        )
      }
      const result = yield* call(dryRun)
      if (result.capped) yield* note(`stopped at ${noun(result.matched)}: run it again for the rest`)
      if (json) return yield* Console.log(JSON.stringify(result))
      yield* Console.log(
        dryRun
          ? `would replay ${noun(result.matched)}, estimated spend ${cents(result.estimatedCents)} (one attempt each)${
              result.skipped > 0 ? `; ${result.skipped} named not failed or not matching` : ""
            }`
          : `replayed ${noun(result.replayed)}, skipped ${result.skipped}, estimated spend ${cents(result.estimatedCents)}`
      )
    })
).pipe(
  Command.withDescription(
    "move dead letters back to queued in one call (never re-runs a job that succeeded); name them by --id, a filter or --all"
  )
)

/**
 * `slowcall dlq`.
 *
 * @since 0.1.0
 * @category commands
 */
export const dlqCommand = Command.make("dlq").pipe(
  Command.withDescription("list and replay dead letters (failed jobs) on a running server"),
  Command.withSubcommands([list, replay])
)
