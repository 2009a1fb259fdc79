/**
 * `slowcall batches get|jobs|cancel|replay`: follow, cancel and replay a batch on a running server over its HTTP API
 * (`/v1/batches`). With `--json` each prints the API's response body unchanged.
 *
 * @since 0.7.0
 */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { cents, jobPageText } from "./internal/format.js"
import { request } from "./internal/http.js"
import { json, url } from "./Jobs.js"

const id = Args.text({ name: "batch-id" }).pipe(
  Args.withDescription("the batch's id, as `POST /v1/batches` answered it")
)

const pathOf = (batchId: string, rest = "") => `v1/batches/${encodeURIComponent(batchId)}${rest}`

/** The batch over labelled lines: progress, counts per state, cost, budget, callbacks and times. */
const batchLines = (batch: any): string => {
  const done = batch.counts.succeeded + batch.counts.failed + batch.counts.abandoned
  const status =
    batch.finishedAt !== null
      ? `finished at ${batch.finishedAt}`
      : batch.cancelRequestedAt !== null
        ? `cancel requested at ${batch.cancelRequestedAt}`
        : batch.added < batch.size
          ? `landing items (${batch.added} of ${batch.size})`
          : "running"
  const callback = (spec: any) =>
    spec === null ? "-" : `${spec.type} ${spec.jobId === null ? "(not enqueued yet)" : `job ${spec.jobId}`}`
  const rows: Array<[string, string]> = [
    ["batch", batch.id],
    ["status", status],
    ["progress", `${done}/${batch.size} ended`],
    [
      "counts",
      `queued ${batch.counts.queued}, running ${batch.counts.running}, succeeded ${batch.counts.succeeded}, ` +
        `failed ${batch.counts.failed}, abandoned ${batch.counts.abandoned}`
    ],
    ["cost", `${cents(batch.costCents)}${batch.budgetCents === null ? "" : ` of ${cents(batch.budgetCents)}`}`],
    ["deadline", batch.deadline ?? "-"],
    ["onComplete", callback(batch.onComplete)],
    ["onSuccess", callback(batch.onSuccess)],
    ["created", batch.createdAt],
    ["updated", batch.updatedAt]
  ]
  return rows.map(([label, value]) => `${label.padEnd(10)} ${value}`).join("\n")
}

const get = Command.make("get", { id, url, json }, ({ id, json, url }) =>
  Effect.gen(function* () {
    const batch = yield* request(url, "GET", pathOf(id))
    yield* Console.log(json ? JSON.stringify(batch, null, 2) : batchLines(batch))
  })
).pipe(Command.withDescription("show one batch: progress, counts per state, cost against its budget, callbacks"))

const jobs = Command.make(
  "jobs",
  {
    id,
    state: Options.choice("state", ["queued", "running", "succeeded", "failed", "abandoned"]).pipe(
      Options.optional,
      Options.withDescription("only the batch's jobs in this state")
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
  ({ after, id, json, limit, state, url }) =>
    Effect.gen(function* () {
      const query = new URLSearchParams({ limit: String(limit) })
      if (Option.isSome(state)) query.set("state", state.value)
      if (Option.isSome(after)) query.set("after", after.value)
      const body = yield* request<{ jobs: Array<any>; next: string | null }>(
        url,
        "GET",
        `${pathOf(id, "/jobs")}?${query}`
      )
      yield* Console.log(json ? JSON.stringify(body, null, 2) : jobPageText(body))
    })
).pipe(Command.withDescription("list a batch's jobs in the order they landed, filtered by state"))

const cancel = Command.make("cancel", { id, url, json }, ({ id, json, url }) =>
  Effect.gen(function* () {
    const batch = yield* request(url, "POST", pathOf(id, "/cancel"), {})
    yield* Console.log(
      json
        ? JSON.stringify(batch, null, 2)
        : `cancelled ${batch.id}: ${batch.counts.abandoned} abandoned, ${batch.counts.running} running asked to stop`
    )
  })
).pipe(
  Command.withDescription(
    "cancel a batch: queued jobs abandoned at once, running ones stop at their next heartbeat, none starts after"
  )
)

const replay = Command.make("replay", { id, url, json }, ({ id, json, url }) =>
  Effect.gen(function* () {
    const body = yield* request(url, "POST", pathOf(id, "/replay"), {})
    yield* Console.log(
      json ? JSON.stringify(body, null, 2) : `replayed ${body.replayed} failed job(s) of batch ${body.batch.id}`
    )
  })
).pipe(
  Command.withDescription("move a batch's failed jobs back to queued (never a succeeded one); each may be billed again")
)

/**
 * `slowcall batches`.
 *
 * @since 0.7.0
 * @category commands
 */
export const batchesCommand = Command.make("batches").pipe(
  Command.withDescription("follow, cancel and replay batches on a running server (--url, or SLOWCALL_URL)"),
  Command.withSubcommands([get, jobs, cancel, replay])
)
