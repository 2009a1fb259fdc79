/**
 * `slowcall jobs get|list|cancel`: read and cancel jobs on a running server over its HTTP API.
 *
 * @since 0.1.0
 */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { cents, jobLines, table } from "./internal/format.js"
import { request } from "./internal/http.js"

/**
 * `--url`: the server to talk to (default http://127.0.0.1:8787, or `SLOWCALL_URL`).
 *
 * @since 0.1.0
 * @category options
 */
export const url = Options.text("url").pipe(
  Options.withDescription("base URL of a running slowcall server"),
  Options.withDefault(process.env.SLOWCALL_URL ?? "http://127.0.0.1:8787")
)

/**
 * `--json`: print the API's JSON instead of text (every read command has it).
 *
 * @since 0.1.0
 * @category options
 */
export const json = Options.boolean("json").pipe(Options.withDescription("print JSON"))

const id = Args.text({ name: "job-id" }).pipe(Args.withDescription("the job id"))

const get = Command.make("get", { id, url, json }, ({ id, json, url }) =>
  Effect.gen(function* () {
    const job = yield* request(url, "GET", `v1/jobs/${encodeURIComponent(id)}`)
    yield* Console.log(json ? JSON.stringify(job, null, 2) : jobLines(job))
  })
).pipe(Command.withDescription("show one job"))

const list = Command.make(
  "list",
  {
    state: Options.choice("state", ["queued", "running", "succeeded", "failed", "abandoned"]).pipe(Options.optional),
    type: Options.text("type").pipe(Options.optional),
    limit: Options.integer("limit").pipe(Options.withDefault(20)),
    url,
    json
  },
  ({ json, limit, state, type, url }) =>
    Effect.gen(function* () {
      const query = new URLSearchParams({ limit: String(limit) })
      if (Option.isSome(state)) query.set("state", state.value)
      if (Option.isSome(type)) query.set("type", type.value)
      const body = yield* request<{ jobs: Array<any> }>(url, "GET", `v1/jobs?${query}`)
      if (json) return yield* Console.log(JSON.stringify(body.jobs, null, 2))
      if (body.jobs.length === 0) return yield* Console.log("no jobs")
      yield* Console.log(
        table(
          ["ID", "TYPE", "STATE", "ATTEMPTS", "COST", "ERROR", "UPDATED"],
          body.jobs.map((job) => [
            job.id,
            job.type,
            job.state,
            `${job.attempts}/${job.maxAttempts}`,
            cents(job.costCents),
            job.errorClass ?? "",
            job.updatedAt
          ])
        )
      )
    })
).pipe(Command.withDescription("list recent jobs, newest first"))

const cancel = Command.make("cancel", { id, url, json }, ({ id, json, url }) =>
  Effect.gen(function* () {
    const job = yield* request(url, "POST", `v1/jobs/${encodeURIComponent(id)}/cancel`, {})
    yield* Console.log(
      json
        ? JSON.stringify(job, null, 2)
        : job.state === "abandoned"
          ? `cancelled ${job.id}`
          : `cancel requested for ${job.id}: the worker stops it at its next heartbeat`
    )
  })
).pipe(Command.withDescription("cancel a job (queued: at once; running: at the next heartbeat)"))

/**
 * `slowcall jobs`.
 *
 * @since 0.1.0
 * @category commands
 */
export const jobsCommand = Command.make("jobs").pipe(
  Command.withDescription("read and cancel jobs on a running server"),
  Command.withSubcommands([get, list, cancel])
)
