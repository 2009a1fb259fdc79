/**
 * `slowcall jobs get|list|cancel`: read and cancel jobs on a running server over its HTTP API.
 *
 * @since 0.1.0
 */
import { Args, Command, Options } from "@effect/cli"
import { Config, Console, Effect, Option } from "effect"
import { jobLines, jobPageText } from "./internal/format.js"
import { request } from "./internal/http.js"

/**
 * `--url`: the server to talk to (default http://127.0.0.1:8787, or `SLOWCALL_URL`).
 *
 * @since 0.1.0
 * @category options
 */
export const url = Options.text("url").pipe(
  Options.withDescription("base URL of a running slowcall server"),
  Options.withFallbackConfig(Config.string("SLOWCALL_URL")),
  Options.withDefault("http://127.0.0.1:8787")
)

/**
 * `--json`: print the API's JSON response body unchanged instead of text (every read command has it).
 *
 * @since 0.1.0
 * @category options
 */
export const json = Options.boolean("json").pipe(
  Options.withDescription("print the API's JSON response body unchanged instead of text")
)

const id = Args.text({ name: "job-id" }).pipe(Args.withDescription("the job's id, as `jobs list` prints it"))

const get = Command.make("get", { id, url, json }, ({ id, json, url }) =>
  Effect.gen(function* () {
    const job = yield* request(url, "GET", `v1/jobs/${encodeURIComponent(id)}`)
    yield* Console.log(json ? JSON.stringify(job, null, 2) : jobLines(job))
  })
).pipe(Command.withDescription("show one job: state, attempts, cost, last error and result"))

const list = Command.make(
  "list",
  {
    state: Options.choice("state", ["queued", "running", "succeeded", "failed", "abandoned"]).pipe(
      Options.optional,
      Options.withDescription("only jobs in this state")
    ),
    type: Options.text("type").pipe(Options.optional, Options.withDescription("only jobs of this type")),
    idempotencyKey: Options.text("idempotency-key").pipe(
      Options.withPseudoName("KEY"),
      Options.optional,
      Options.withDescription("only the job submitted with this idempotency key")
    ),
    after: Options.text("after").pipe(
      Options.withPseudoName("JOB-ID"),
      Options.optional,
      Options.withDescription("start after this job: the `next` cursor the previous page printed")
    ),
    limit: Options.integer("limit").pipe(
      Options.withDefault(20),
      Options.withDescription("most jobs on the page, 1 to 1000")
    ),
    url,
    json
  },
  ({ after, idempotencyKey, json, limit, state, type, url }) =>
    Effect.gen(function* () {
      const query = new URLSearchParams({ limit: String(limit) })
      if (Option.isSome(state)) query.set("state", state.value)
      if (Option.isSome(type)) query.set("type", type.value)
      // The API's name for the idempotency key in a query is `requestKey` (docs/guide/http.md, Idempotency).
      if (Option.isSome(idempotencyKey)) query.set("requestKey", idempotencyKey.value)
      if (Option.isSome(after)) query.set("after", after.value)
      const body = yield* request<{ jobs: Array<any>; next: string | null }>(url, "GET", `v1/jobs?${query}`)
      yield* Console.log(json ? JSON.stringify(body, null, 2) : jobPageText(body))
    })
).pipe(
  Command.withDescription(
    "list jobs, newest first; ATTEMPTS is this run's count against its cap, and the lifetime count after a replay"
  )
)

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
).pipe(Command.withDescription("cancel a job: a queued one at once, a running one at its next heartbeat"))

/**
 * `slowcall jobs`.
 *
 * @since 0.1.0
 * @category commands
 */
export const jobsCommand = Command.make("jobs").pipe(
  Command.withDescription("read and cancel jobs on a running server (--url, or SLOWCALL_URL)"),
  Command.withSubcommands([get, list, cancel])
)
