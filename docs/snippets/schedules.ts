import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import * as Worker from "@slowcall/core/Worker"
import { PgScheduleStore, Schedule, Scheduler } from "@slowcall/schedules"
import { Effect, Either, Layer, Schema } from "effect"

// #region schedule
// Every night at 02:00 in Berlin, summarise the workspace's previous day.
export const nightlySummary = Schedule.make({
  id: "nightly-summary",
  cron: "0 2 * * *",
  timezone: "Europe/Berlin",
  job: {
    queue: "reports",
    type: "summarize-day",
    input: { workspace: "acme" },
    budgetCents: 500, // the tick's job may spend at most $5
    deadlineMs: 4 * 3_600_000 // and must be done by 06:00
  },
  overlap: "skip", // yesterday's summary still running: no second one on top
  catchUp: "latest" // down over 02:00: run once for the newest missed night, as soon as a scheduler is back
})
// #endregion schedule

// #region handler
// The job's input is the tick envelope: `tick` says which night this run is for, whenever it actually runs.
const TickInput = Schema.Struct({
  schedule: Schema.String,
  at: Schema.Number,
  tick: Schema.String,
  input: Schema.Struct({ workspace: Schema.String })
})

export const summarizeDay = Handler.make({
  type: "summarize-day",
  version: 1,
  input: TickInput,
  result: Schema.Struct({ day: Schema.String, summary: Schema.String }),
  attempt: { timeoutMs: 10 * 60_000, retries: 1 },
  estimateCents: 40,
  run: (input, ctx) => {
    const day = new Date(input.at - 86_400_000).toISOString().slice(0, 10)
    return ctx
      .call({
        estimateCents: 40,
        run: Effect.succeed(`${input.input.workspace}: what happened on ${day}`),
        cost: () => 31
      })
      .pipe(Effect.map((summary) => ({ day, summary })))
  }
})
// #endregion handler

// #region process
// Every worker process runs the Scheduler beside its Worker; they agree through the Store.
export const workerProcess = (connectionString: string) =>
  Layer.mergeAll(
    Worker.layer({ queue: "reports", handlers: [summarizeDay], concurrency: 2 }),
    Scheduler.layer({ schedules: [Either.getOrThrow(nightlySummary)] })
  ).pipe(
    Layer.provide(Client.layer),
    Layer.provideMerge(PgScheduleStore.layer()),
    Layer.provideMerge(PgStore.layer({ connectionString }))
  )
// #endregion process
