/**
 * Schedules in a simulated run: every worker process runs the real Scheduler of `@slowcall/schedules` beside its
 * Worker, on its own (possibly skewed) clock, declaring the plan's schedule on start; its tick jobs go through the
 * real Client over the process's faulty store and transport, into a queue no worker reads (so each tick's job stays
 * as it was made). The schedules live in one memory ScheduleStore that answers in store time (the world's clock,
 * never a process's), behind a proxy per process that passes the process's gate (a paused process's calls wait, a
 * crashed one's never land) and records each read of the schedules and each cursor move (`sched`). At the end every
 * tick job is recorded with the tick in its input (`tjob`). `SchedulesCheck.ts` judges the events.
 *
 * The overlap policy is `allow` (a tick's job never runs here, so `skip` would make one job in all); the catch-up
 * policy, grace and poll interval come from the plan, and an outage of every process (`SchedulePlan.outage`) makes
 * ticks come due while no Scheduler runs.
 *
 * @since 0.8.0
 */
import * as Client from "@slowcall/core/Client"
import * as Query from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as Schedule from "@slowcall/schedules/Schedule"
import * as Scheduler from "@slowcall/schedules/Scheduler"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Either, type Scope } from "effect"
import type { History } from "./History.js"
import { type Actor, passGate } from "./internal/world.js"
import type { Plan } from "./Plan.js"
import type { SchedulePlan } from "./SchedulesPlan.js"
import type { VirtualClock } from "./SimClock.js"

/**
 * The queue of every tick's job: no worker reads it.
 *
 * @since 0.8.0
 * @category models
 */
export const tickQueue = "sim.ticks"

/**
 * The schedule a plan declares: `sim` with a tick every `everySeconds` seconds (a six-field cron, UTC), overlap
 * `allow`, and the plan's catch-up policy and grace.
 *
 * @since 0.8.0
 * @category constructors
 */
export const scheduleOf = (planned: SchedulePlan): Schedule.Schedule => {
  const made = Schedule.make({
    id: "sim",
    cron: `*/${planned.everySeconds} * * * * *`,
    job: { queue: tickQueue, type: "sim.tick" },
    overlap: "allow",
    catchUp: planned.catchUp._tag === "all" ? { all: planned.catchUp.windowMs } : planned.catchUp._tag,
    graceMs: planned.graceMs
  })
  if (Either.isLeft(made)) throw new Error(`the planned schedule is invalid: ${made.left.message}`)
  return made.right
}

/**
 * The schedules of one run: the ScheduleStore, the schedule, and what each process's Scheduler needs.
 *
 * @since 0.8.0
 * @category models
 */
export class ScheduleWorld {
  private readonly schedule: Schedule.Schedule

  constructor(
    readonly planned: SchedulePlan,
    private readonly store: ScheduleStore.ScheduleStoreService,
    private readonly clock: VirtualClock,
    private readonly history: History
  ) {
    this.schedule = scheduleOf(planned)
  }

  /**
   * The ScheduleStore as one process sees it: each call passes the process's gate, runs at store time (the world's
   * clock as the call reaches the store), and is recorded when it reads the schedules or moves a cursor.
   */
  private storeFor(actor: Actor): ScheduleStore.ScheduleStoreService {
    const { clock, history, store } = this
    const gated = passGate(actor)
    /** The store time of this process's latest read of its schedules: the `now` its pass decides with. */
    let passNow = clock.now
    const at = () => ({ now: clock.now })
    return {
      upsert: (schedules) => gated(() => store.upsert(schedules, at())),
      list: () =>
        gated(() =>
          Effect.map(store.list(at()), (reply) => {
            passNow = reply.now
            history.push({ k: "sched", t: reply.now, who: actor.id, what: "list", passNow, from: 0, to: 0, ok: true })
            return reply
          })
        ),
      get: (scheduleId) => gated(() => store.get(scheduleId, at())),
      pause: (scheduleId) => gated(() => store.pause(scheduleId, at())),
      resume: (scheduleId) => gated(() => store.resume(scheduleId, at())),
      advance: (scheduleId, to, lastJobId) =>
        gated(() =>
          Effect.flatMap(store.get(scheduleId, at()), (before) =>
            Effect.map(store.advance(scheduleId, to, lastJobId, at()), (reply) => {
              const from = before.result._tag === "Found" ? before.result.record.cursor : 0
              history.push({
                k: "sched",
                t: reply.now,
                who: actor.id,
                what: "advance",
                passNow,
                from,
                to,
                ok: reply.result._tag === "Advanced"
              })
              return reply
            })
          )
        ),
      remove: (scheduleId) => gated(() => store.remove(scheduleId, at()))
    }
  }

  /**
   * Forks the Scheduler of one process into the current scope: the real `Scheduler.run` with the plan's schedule and
   * poll interval, over a Client built on the process's store and transport and on the process's view of the
   * ScheduleStore. It runs on the clock of the effect that forks it (the process's).
   */
  start(
    actor: Actor,
    services: { readonly store: Store.Store["Type"]; readonly transport: Transport.Transport["Type"] },
    query: Query.Query["Type"]
  ): Effect.Effect<void, never, Scope.Scope> {
    const scheduleStore = this.storeFor(actor)
    const client = Client.make.pipe(
      Effect.provideService(Store.Store, services.store),
      Effect.provideService(Query.Query, query),
      Effect.provideService(Transport.Transport, services.transport)
    )
    return Effect.asVoid(
      Effect.forkScoped(
        Effect.flatMap(client, (client) =>
          Scheduler.run({ schedules: [this.schedule], pollMs: this.planned.pollMs }).pipe(
            Effect.provideService(Client.Client, client),
            Effect.provideService(ScheduleStore.ScheduleStore, scheduleStore)
          )
        )
      )
    )
  }

  /** Every tick job in the store, with the tick its input names. */
  finalReads(query: Query.Query["Type"]): Effect.Effect<void> {
    return Effect.map(Effect.orDie(query.list({ queue: tickQueue, limit: null, order: "oldest" })), (jobs) => {
      for (const job of jobs) {
        const input = job.input as { readonly at?: unknown }
        this.history.push({
          k: "tjob",
          t: this.clock.now,
          tick: typeof input.at === "number" ? input.at : -1,
          jobId: job.id,
          createdAt: job.createdAt
        })
      }
    })
  }
}

/**
 * A schedule world for a plan with a schedule, or undefined.
 *
 * @since 0.8.0
 * @category constructors
 */
export const make = (plan: Plan, clock: VirtualClock, history: History): Effect.Effect<ScheduleWorld | undefined> => {
  const planned = plan.schedule
  if (planned === null || planned === undefined) return Effect.succeed(undefined)
  return Effect.map(ScheduleStore.makeMemory, (store) => new ScheduleWorld(planned, store, clock, history))
}
