/**
 * `slowcall schedules list|get|set|pause|resume|delete`: the cron schedules the fleet keeps, on a running server over
 * its HTTP API (`/v1/schedules`). An id is given as it is; the command encodes it for the path. `set` defines a
 * schedule or replaces its definition whole (its paused flag, last tick and last job stay), checked by the server
 * as `Schedule.make` checks it; `pause` stops its ticks for the whole fleet, `resume` starts them again from now (the
 * ticks of the pause make no job). With `--json` each prints the API's response body unchanged.
 *
 * @since 0.5.0
 */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { CliError } from "./CliError.js"
import { clip, table } from "./internal/format.js"
import { request } from "./internal/http.js"
import { json, url } from "./Jobs.js"

const id = Args.text({ name: "schedule-id" }).pipe(
  Args.withDescription("the schedule's id, as `schedules list` prints it")
)

const pathOf = (scheduleId: string, rest = "") => `v1/schedules/${encodeURIComponent(scheduleId)}${rest}`

const catchUpText = (catchUp: any): string => (typeof catchUp === "string" ? catchUp : `all within ${catchUp.all} ms`)

/** One schedule over several labelled lines: what `get`, `set`, `pause` and `resume` print. */
const scheduleLines = (view: any): string =>
  [
    ["schedule", view.id],
    ["cron", `${view.cron} (${view.timezone})`],
    [
      "job",
      `${view.job.type} on queue ${view.job.queue}${view.job.tenant === undefined ? "" : ` for ${view.job.tenant}`}`
    ],
    ...(view.job.input === undefined ? [] : [["  input", clip(JSON.stringify(view.job.input), 100)]]),
    ["overlap", view.overlap],
    ["catch-up", catchUpText(view.catchUp)],
    ["grace", `${view.graceMs} ms`],
    ["state", view.paused ? "paused" : "running"],
    ["last tick", view.lastTick ?? "-"],
    ["last job", view.lastJobId ?? "-"],
    ["next tick", view.nextTick ?? (view.paused ? "- (paused)" : "-")],
    ["created", view.createdAt]
  ]
    .map(([label, text]) => `${label!.padEnd(12)}${text}`)
    .join("\n")

const list = Command.make("list", { url, json }, ({ json, url }) =>
  Effect.gen(function* () {
    const body = yield* request(url, "GET", "v1/schedules")
    if (json) return yield* Console.log(JSON.stringify(body, null, 2))
    if (body.schedules.length === 0) {
      return yield* Console.log("no schedules: define one with `slowcall schedules set`, or declare one in code")
    }
    yield* Console.log(
      table(
        ["SCHEDULE", "CRON", "TIMEZONE", "JOB TYPE", "STATE", "LAST TICK", "LAST JOB", "NEXT TICK"],
        body.schedules.map((view: any) => [
          clip(view.id, 40),
          view.cron,
          view.timezone,
          view.job.type,
          view.paused ? "paused" : "running",
          view.lastTick ?? "-",
          view.lastJobId ?? "-",
          view.nextTick ?? "-"
        ])
      )
    )
  })
).pipe(
  Command.withDescription(
    "every schedule: its cron and timezone, the job type, paused or running, the last tick and its job, the next tick"
  )
)

const get = Command.make("get", { id, url, json }, ({ id, json, url }) =>
  Effect.gen(function* () {
    const body = yield* request(url, "GET", pathOf(id))
    yield* Console.log(json ? JSON.stringify(body, null, 2) : scheduleLines(body.schedule))
  })
).pipe(Command.withDescription("one schedule: its definition, state, last and next tick"))

/** `90s`, `15m`, `2h`, `1d` (or a whole number of milliseconds) in milliseconds; undefined when it is neither. */
const parseDuration = (text: string): number | undefined => {
  if (/^\d+$/.test(text.trim())) return Number(text)
  const match = /^(\d+(?:\.\d+)?)(s|m|h|d)$/.exec(text.trim())
  if (match === null) return undefined
  const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as "s" | "m" | "h" | "d"]
  return Math.round(Number(match[1]) * unit)
}

const set = Command.make(
  "set",
  {
    id,
    cron: Options.text("cron").pipe(
      Options.withPseudoName("EXPR"),
      Options.withDescription("a cron expression: five fields, or six with seconds first, such as '0 2 * * *'")
    ),
    timezone: Options.text("timezone").pipe(
      Options.withPseudoName("TZ"),
      Options.optional,
      Options.withDescription("the IANA timezone the expression is read in, such as Europe/Berlin (default UTC)")
    ),
    type: Options.text("type").pipe(Options.withDescription("the job type each tick submits")),
    queue: Options.text("queue").pipe(
      Options.withDefault("default"),
      Options.withDescription("the queue each tick's job is submitted to")
    ),
    input: Options.text("input").pipe(
      Options.withPseudoName("JSON"),
      Options.optional,
      Options.withDescription("JSON the job receives under `input`, beside the schedule's id and the tick's time")
    ),
    tenant: Options.text("tenant").pipe(Options.optional, Options.withDescription("the tenant of each tick's job")),
    priority: Options.integer("priority").pipe(
      Options.optional,
      Options.withDescription("the priority of each tick's job (default 0)")
    ),
    maxAttempts: Options.integer("max-attempts").pipe(
      Options.optional,
      Options.withDescription("attempts each tick's job may make (default 3)")
    ),
    budgetCents: Options.float("budget-cents").pipe(
      Options.optional,
      Options.withDescription("the spend each tick's job may reach, in cents")
    ),
    deadline: Options.text("deadline").pipe(
      Options.withPseudoName("DURATION"),
      Options.optional,
      Options.withDescription("each job's deadline after its tick: 90s, 15m, 2h, 1d or milliseconds")
    ),
    overlap: Options.choice("overlap", ["skip", "allow", "cancelPrevious"]).pipe(
      Options.optional,
      Options.withDescription(
        "when the previous tick's job is still going: skip this tick (default), allow both, or cancelPrevious"
      )
    ),
    catchUp: Options.text("catch-up").pipe(
      Options.withPseudoName("POLICY"),
      Options.optional,
      Options.withDescription(
        "ticks missed in an outage: skip (default), latest (one job for the newest) or all:DURATION (each within it)"
      )
    ),
    grace: Options.text("grace").pipe(
      Options.withPseudoName("DURATION"),
      Options.optional,
      Options.withDescription("how late a tick may be made and still count as on time (default 60s)")
    ),
    url,
    json
  },
  (options) =>
    Effect.gen(function* () {
      const duration = (name: string, text: string) => {
        const ms = parseDuration(text)
        return ms === undefined
          ? Effect.fail(new CliError({ message: `--${name} ${text}: give a duration such as 90s, 15m, 2h or 1d` }))
          : Effect.succeed(ms)
      }
      let input: unknown
      if (Option.isSome(options.input)) {
        try {
          input = JSON.parse(options.input.value)
        } catch {
          return yield* new CliError({ message: `--input: not JSON: ${clip(options.input.value, 60)}` })
        }
      }
      let catchUp: unknown
      if (Option.isSome(options.catchUp)) {
        const text = options.catchUp.value
        if (text === "skip" || text === "latest") catchUp = text
        else if (text.startsWith("all:")) catchUp = { all: yield* duration("catch-up all", text.slice(4)) }
        else {
          return yield* new CliError({ message: `--catch-up ${text}: give skip, latest or all:DURATION (all:1h)` })
        }
      }
      const deadlineMs = Option.isSome(options.deadline)
        ? yield* duration("deadline", options.deadline.value)
        : undefined
      const graceMs = Option.isSome(options.grace) ? yield* duration("grace", options.grace.value) : undefined
      const job = {
        queue: options.queue,
        type: options.type,
        ...(input === undefined ? {} : { input }),
        ...Option.match(options.tenant, { onNone: () => ({}), onSome: (tenant) => ({ tenant }) }),
        ...Option.match(options.priority, { onNone: () => ({}), onSome: (priority) => ({ priority }) }),
        ...Option.match(options.maxAttempts, { onNone: () => ({}), onSome: (maxAttempts) => ({ maxAttempts }) }),
        ...Option.match(options.budgetCents, { onNone: () => ({}), onSome: (budgetCents) => ({ budgetCents }) }),
        ...(deadlineMs === undefined ? {} : { deadlineMs })
      }
      const body = yield* request(options.url, "PUT", pathOf(options.id), {
        cron: options.cron,
        ...Option.match(options.timezone, { onNone: () => ({}), onSome: (timezone) => ({ timezone }) }),
        job,
        ...Option.match(options.overlap, { onNone: () => ({}), onSome: (overlap) => ({ overlap }) }),
        ...(catchUp === undefined ? {} : { catchUp }),
        ...(graceMs === undefined ? {} : { graceMs })
      })
      yield* Console.log(options.json ? JSON.stringify(body, null, 2) : scheduleLines(body.schedule))
    })
).pipe(
  Command.withDescription(
    "define a schedule, or replace its definition whole (an option not given takes its default); state and ticks stay"
  )
)

const pause = Command.make("pause", { id, url, json }, ({ id, json, url }) =>
  Effect.gen(function* () {
    const body = yield* request(url, "POST", pathOf(id, "/pause"), {})
    if (json) return yield* Console.log(JSON.stringify(body, null, 2))
    yield* Console.log(`paused ${id}: no scheduler makes a job for it until \`slowcall schedules resume\``)
    yield* Console.log(scheduleLines(body.schedule))
  })
).pipe(Command.withDescription("pause a schedule for the whole fleet (pausing a paused one changes nothing)"))

const resume = Command.make("resume", { id, url, json }, ({ id, json, url }) =>
  Effect.gen(function* () {
    const body = yield* request(url, "POST", pathOf(id, "/resume"), {})
    if (json) return yield* Console.log(JSON.stringify(body, null, 2))
    yield* Console.log(`resumed ${id}: its ticks run from now on (those of the pause make no job)`)
    yield* Console.log(scheduleLines(body.schedule))
  })
).pipe(Command.withDescription("resume a paused schedule: ticks from now on make jobs, the paused ones never do"))

const remove = Command.make("delete", { id, url, json }, ({ id, json, url }) =>
  Effect.gen(function* () {
    yield* request(url, "DELETE", pathOf(id), {})
    yield* Console.log(
      json ? "{}" : `deleted ${id}: it makes no more jobs (a process declaring it in code writes it again)`
    )
  })
).pipe(Command.withDescription("delete a schedule; the jobs it made stay"))

/**
 * `slowcall schedules`.
 *
 * @since 0.5.0
 * @category commands
 */
export const schedulesCommand = Command.make("schedules").pipe(
  Command.withDescription("cron schedules the fleet keeps: list, read, define, pause, resume and delete them"),
  Command.withSubcommands([list, get, set, pause, resume, remove])
)
