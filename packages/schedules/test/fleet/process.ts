/**
 * One process of the acceptance fleet: a worker of the `ticks` queue and, on command, the Scheduler, both on the
 * machine's Postgres (`SCHEMA`) or Redis (`PREFIX`). It says `ready` over IPC once its connections are up and its
 * schema migrated, starts its worker and its Scheduler on `start` (so a standby process runs nothing before), and
 * lives until it is killed. Declares the fleet's two schedules (every second, one catching
 * up `all` missed ticks, one the `latest`; a tick is missed once it is 3 s old), as every process of a real fleet declares the same ones.
 */
import * as PgStore from "@slowcall/adapter-postgres/PgStore"
import * as RedisStore from "@slowcall/adapter-redis/RedisStore"
import * as Client from "@slowcall/core/Client"
import type { StoreError } from "@slowcall/core/Errors"
import * as Handler from "@slowcall/core/Handler"
import type { Query } from "@slowcall/core/Query"
import type { Store } from "@slowcall/core/Store"
import type { Transport } from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Deferred, Effect, Either, Layer, Schema } from "effect"
import * as PgScheduleStore from "../../src/PgScheduleStore.js"
import * as RedisScheduleStore from "../../src/RedisScheduleStore.js"
import * as Schedule from "../../src/Schedule.js"
import * as Scheduler from "../../src/Scheduler.js"
import type { ScheduleStore } from "../../src/ScheduleStore.js"

const schedules = [
  Either.getOrThrow(
    Schedule.make({
      id: "every-second-all",
      cron: "* * * * * *",
      job: { queue: "ticks", type: "tick" },
      overlap: "allow",
      catchUp: { all: 60_000 },
      graceMs: 3_000
    })
  ),
  Either.getOrThrow(
    Schedule.make({
      id: "every-second-latest",
      cron: "* * * * * *",
      job: { queue: "ticks", type: "tick" },
      overlap: "allow",
      catchUp: "latest",
      graceMs: 3_000
    })
  )
]

const tick = Handler.make({
  type: "tick",
  version: 1,
  input: Schema.Unknown,
  result: Schema.Null,
  attempt: { timeoutMs: 5_000 },
  run: () => Effect.succeed(null)
})

const backend = (): Layer.Layer<ScheduleStore | Store | Query | Transport, StoreError> => {
  const schema = process.env.SCHEMA
  if (schema !== undefined) {
    return PgScheduleStore.layer({ schema }).pipe(
      Layer.provideMerge(PgStore.layer({ connectionString: process.env.DATABASE_URL!, schema, pollMs: 200 }))
    )
  }
  return RedisScheduleStore.layer.pipe(
    Layer.provideMerge(RedisStore.layer({ url: process.env.REDIS_URL!, prefix: process.env.PREFIX! }))
  )
}

const send = (message: unknown) => process.send?.(message)

const program = Effect.gen(function* () {
  const started = yield* Deferred.make<void>()
  process.on("message", (message) => {
    if ((message as { cmd?: string }).cmd === "start") Deferred.unsafeDone(started, Effect.void)
  })
  send({ ready: true })
  yield* Deferred.await(started)
  yield* Worker.make({ queue: "ticks", handlers: [tick], concurrency: 4 })
  // Every pass's store time goes to the parent, so the test knows when the first pass after an outage looked.
  yield* Effect.forkScoped(
    Scheduler.run({ schedules, pollMs: 200, onPass: (report) => Effect.sync(() => send({ pass: report.now })) })
  )
  send({ started: true })
  return yield* Effect.never
})

const layer = Client.layer.pipe(Layer.provideMerge(backend()))

Effect.runFork(Effect.scoped(program).pipe(Effect.provide(layer)))
