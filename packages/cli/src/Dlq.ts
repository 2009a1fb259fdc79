/**
 * `slowcall dlq list|replay`: dead letters on a running server. Replay moves failed jobs back to queued through the
 * server, in batches, with a progress bar; a job that is no longer failed (one that succeeded above all) is skipped.
 *
 * @since 0.1.0
 */
import { Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { CliError } from "./CliError.js"
import { bar, cents, table } from "./internal/format.js"
import { request } from "./internal/http.js"
import { json, url } from "./Jobs.js"

const errorClass = Options.text("error-class").pipe(Options.optional, Options.withDescription("only this error class"))
const type = Options.text("type").pipe(Options.optional, Options.withDescription("only this job type"))

const query = (filters: { errorClass: Option.Option<string>; type: Option.Option<string>; limit: number }) => {
  const params = new URLSearchParams({ limit: String(filters.limit) })
  if (Option.isSome(filters.errorClass)) params.set("errorClass", filters.errorClass.value)
  if (Option.isSome(filters.type)) params.set("type", filters.type.value)
  return params
}

const list = Command.make(
  "list",
  { errorClass, type, limit: Options.integer("limit").pipe(Options.withDefault(50)), url, json },
  ({ errorClass, json, limit, type, url }) =>
    Effect.gen(function* () {
      const body = yield* request(url, "GET", `v1/dead-letters?${query({ errorClass, type, limit })}`)
      if (json) return yield* Console.log(JSON.stringify(body, null, 2))
      if (body.groups.length === 0) return yield* Console.log("no dead letters")
      yield* Console.log(
        table(
          ["ERROR CLASS", "INPUT HASH", "JOBS", "COST"],
          body.groups.map((group: any) => [
            group.errorClass ?? "-",
            group.inputHash.slice(0, 16),
            String(group.count),
            cents(group.costCents)
          ])
        )
      )
      yield* Console.log(`arrivals: ${body.arrivalsPerMinute.toFixed(2)}/min`)
    })
).pipe(Command.withDescription("dead letters grouped by error class and input, with their cost"))

const replay = Command.make(
  "replay",
  {
    ids: Options.text("id").pipe(Options.repeated, Options.withDescription("a job id to replay (repeatable)")),
    errorClass,
    type,
    limit: Options.integer("limit").pipe(Options.withDefault(1000)),
    batch: Options.integer("batch").pipe(Options.withDefault(25)),
    url,
    json
  },
  ({ batch, errorClass, ids, json, limit, type, url }) =>
    Effect.gen(function* () {
      if (batch < 1) return yield* new CliError({ message: "--batch must be at least 1" })
      const targets =
        ids.length > 0
          ? ids
          : (
              (yield* request(url, "GET", `v1/dead-letters?${query({ errorClass, type, limit })}`)).jobs as Array<any>
            ).map((job) => job.id as string)
      let replayed = 0
      let skipped = 0
      const interactive = !json && process.stderr.isTTY === true
      for (let i = 0; i < targets.length; i += batch) {
        const result = yield* request(url, "POST", "v1/dead-letters/replay", { ids: targets.slice(i, i + batch) })
        replayed += result.replayed
        skipped += result.skipped
        if (!json) {
          const line = `${bar(Math.min(targets.length, i + batch), targets.length)} replayed ${replayed}, skipped ${skipped}`
          yield* Effect.sync(() => process.stderr.write(interactive ? `\r${line}` : `${line}\n`))
        }
      }
      if (interactive && targets.length > 0) yield* Effect.sync(() => process.stderr.write("\n"))
      yield* Console.log(
        json
          ? JSON.stringify({ replayed, skipped })
          : `replayed ${replayed} dead letter${replayed === 1 ? "" : "s"}, skipped ${skipped}`
      )
    })
).pipe(Command.withDescription("move dead letters back to queued (never re-runs a job that succeeded)"))

/**
 * `slowcall dlq`.
 *
 * @since 0.1.0
 * @category commands
 */
export const dlqCommand = Command.make("dlq").pipe(
  Command.withDescription("dead letters: list and replay"),
  Command.withSubcommands([list, replay])
)
