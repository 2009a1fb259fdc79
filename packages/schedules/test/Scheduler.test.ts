import { describe, expect, it } from "@effect/vitest"
import * as Client from "@slowcall/core/Client"
import { StoreError } from "@slowcall/core/Errors"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import { Clock, Effect, Either, Fiber, Layer, TestClock, Tracer } from "effect"
import * as Schedule from "../src/Schedule.js"
import * as Scheduler from "../src/Scheduler.js"
import * as ScheduleStore from "../src/ScheduleStore.js"

const start = Date.parse("2026-06-01T00:00:00Z")

const layer = () =>
  Client.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(ScheduleStore.layerMemory, Store.layerMemory, Transport.layerMemory()))
  )

const everySecond = (options: Partial<Schedule.MakeOptions> = {}) =>
  Either.getOrThrow(
    Schedule.make({
      id: "tick",
      cron: "* * * * * *",
      job: { queue: "q", type: "tick" },
      overlap: "allow",
      catchUp: { all: 60_000 },
      graceMs: 500,
      ...options
    })
  )

/** The tick instants of the jobs made so far, ascending, with how many jobs each has. */
const jobsByTick = Effect.gen(function* () {
  const client = yield* Client.Client
  const jobs = yield* client.list({ queue: "q", limit: null })
  const byTick = new Map<number, number>()
  for (const job of jobs) {
    const at = (job.input as unknown as Schedule.TickInput).at
    byTick.set(at, (byTick.get(at) ?? 0) + 1)
  }
  return [...byTick.entries()].sort((a, b) => a[0] - b[0])
})

const setUp = (schedule: Schedule.Schedule) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(start + 200)
    const store = yield* ScheduleStore.ScheduleStore
    yield* store.upsert([schedule])
  })

const at = (ms: number) => TestClock.setTime(start + ms)

describe("Scheduler.pass", () => {
  it.effect("makes one job per tick, keyed by the tick's instant, with the tick in its input", () =>
    Effect.gen(function* () {
      yield* setUp(everySecond({ job: { queue: "q", type: "tick", input: { scope: "all" } } }))
      for (let s = 1; s <= 3; s++) {
        yield* at(s * 1000 + 100)
        yield* Scheduler.pass
      }
      expect(yield* jobsByTick).toEqual([
        [start + 1000, 1],
        [start + 2000, 1],
        [start + 3000, 1]
      ])
      const client = yield* Client.Client
      const [job] = yield* client.list({ queue: "q", requestKey: Schedule.requestKey("tick", start + 2000) })
      expect(job?.input).toEqual({
        schedule: "tick",
        at: start + 2000,
        tick: "2026-06-01T00:00:02.000Z",
        input: { scope: "all" }
      })
    }).pipe(Effect.provide(layer()))
  )

  it.effect("a pass with nothing due writes nothing and makes no span; one with a due tick makes one", () =>
    Effect.gen(function* () {
      const native = yield* Effect.tracer
      const spans: Array<string> = []
      const recording = Tracer.make({
        span: (name, ...rest) => {
          spans.push(name)
          return native.span(name, ...rest)
        },
        context: native.context
      })
      yield* setUp(everySecond())
      yield* at(1_100)
      const first = yield* Effect.withTracer(Scheduler.pass, recording)
      expect(first.ticks.map((t) => t._tag)).toEqual(["Submitted"])
      expect(spans.filter((name) => name === "slowcall.schedules.pass")).toHaveLength(1)
      // The same second again: its tick is made, nothing else is due.
      const store = yield* ScheduleStore.ScheduleStore
      const before = yield* store.list()
      const again = yield* Effect.withTracer(Scheduler.pass, recording)
      expect(again.ticks).toEqual([])
      expect(spans.filter((name) => name === "slowcall.schedules.pass")).toHaveLength(1)
      expect((yield* store.list()).result).toEqual(before.result)
    }).pipe(Effect.provide(layer()))
  )

  it.effect("schedulers racing on the same ticks make one job each", () =>
    Effect.gen(function* () {
      yield* setUp(everySecond())
      for (let s = 1; s <= 5; s++) {
        yield* at(s * 1000 + 50)
        const reports = yield* Effect.all([Scheduler.pass, Scheduler.pass, Scheduler.pass], { concurrency: 3 })
        const created = reports.flatMap((r) => r.ticks).filter((t) => t._tag === "Submitted" && t.created)
        expect(created.length).toBe(1)
      }
      expect((yield* jobsByTick).map(([, n]) => n)).toEqual([1, 1, 1, 1, 1])
    }).pipe(Effect.provide(layer()))
  )

  it.effect("a scheduler that dies between its submit and its advance: the next pass repeats the tick, one job", () =>
    Effect.gen(function* () {
      yield* setUp(everySecond())
      const store = yield* ScheduleStore.ScheduleStore
      const dying = { ...store, advance: () => Effect.die("crashed before advance") }
      yield* at(1100)
      const died = yield* Effect.exit(Effect.provideService(Scheduler.pass, ScheduleStore.ScheduleStore, dying))
      expect(died._tag).toBe("Failure")
      expect(yield* jobsByTick).toEqual([[start + 1000, 1]])
      yield* at(1300)
      const report = yield* Scheduler.pass
      expect(report.ticks).toMatchObject([{ _tag: "Submitted", tick: start + 1000, created: false }])
      expect(yield* jobsByTick).toEqual([[start + 1000, 1]])
    }).pipe(Effect.provide(layer()))
  )

  it.effect("after a ten-second outage: latest makes one job, all ten, skip the newest only while on time", () =>
    Effect.gen(function* () {
      const run = (catchUp: Schedule.CatchUp, resumeAt: number) =>
        Effect.gen(function* () {
          yield* setUp(everySecond({ catchUp }))
          yield* at(1100)
          yield* Scheduler.pass
          yield* at(resumeAt) // no pass from 1.1 s to here: ticks 2..11 came while no scheduler ran
          yield* Scheduler.pass
          return (yield* jobsByTick).map(([tick]) => (tick - start) / 1000)
        }).pipe(Effect.provide(layer()))
      expect(yield* run("latest", 11_300)).toEqual([1, 11])
      expect(yield* run({ all: 60_000 }, 11_300)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
      expect(yield* run({ all: 4_000 }, 11_300)).toEqual([1, 8, 9, 10, 11])
      expect(yield* run("skip", 11_300)).toEqual([1, 11])
      expect(yield* run("skip", 11_700)).toEqual([1])
      expect(yield* run("latest", 11_700)).toEqual([1, 11])
    })
  )

  it.effect(
    "overlap: skip leaves a tick out while the previous job is going, allow does not, cancelPrevious cancels it",
    () =>
      Effect.gen(function* () {
        const run = (overlap: Schedule.Overlap) =>
          Effect.gen(function* () {
            yield* setUp(everySecond({ overlap }))
            yield* at(1100)
            yield* Scheduler.pass
            yield* at(2100)
            const report = yield* Scheduler.pass
            const client = yield* Client.Client
            const jobs = yield* client.list({ queue: "q", limit: null, order: "oldest" })
            return { report: report.ticks.map((t) => t._tag), states: jobs.map((job) => job.state) }
          }).pipe(Effect.provide(layer()))
        // no worker runs: the first tick's job stays queued, so it is still going when the second tick comes
        expect(yield* run("skip")).toEqual({ report: ["Overlapped"], states: ["queued"] })
        expect(yield* run("allow")).toEqual({ report: ["Submitted"], states: ["queued", "queued"] })
        expect(yield* run("cancelPrevious")).toEqual({ report: ["Submitted"], states: ["abandoned", "queued"] })
      })
  )

  it.effect("overlap looks at the previous tick's job only while it is going", () =>
    Effect.gen(function* () {
      yield* setUp(everySecond({ overlap: "skip" }))
      yield* at(1100)
      yield* Scheduler.pass
      const client = yield* Client.Client
      const [first] = yield* client.list({ queue: "q", limit: null })
      yield* client.cancel(first!.id)
      yield* at(2100)
      expect((yield* Scheduler.pass).ticks.map((t) => t._tag)).toEqual(["Submitted"])
    }).pipe(Effect.provide(layer()))
  )

  it.effect("a paused schedule makes nothing, and ticks that came during the pause never run after resume", () =>
    Effect.gen(function* () {
      yield* setUp(everySecond())
      const store = yield* ScheduleStore.ScheduleStore
      yield* at(1100)
      yield* Scheduler.pass
      yield* store.pause("tick")
      for (let s = 2; s <= 5; s++) {
        yield* at(s * 1000 + 100)
        expect((yield* Scheduler.pass).ticks).toEqual([])
      }
      yield* at(5500)
      yield* store.resume("tick")
      yield* at(6100)
      yield* Scheduler.pass
      expect((yield* jobsByTick).map(([tick]) => (tick - start) / 1000)).toEqual([1, 6])
    }).pipe(Effect.provide(layer()))
  )

  it.effect("ticks are decided in store time, whatever the process's clock says", () =>
    Effect.gen(function* () {
      const store = yield* ScheduleStore.ScheduleStore
      // The store's clock is an hour ahead of this process's, from the schedule's creation on.
      yield* store.upsert([everySecond()], { now: start + 3_600_200 })
      const ahead: ScheduleStore.ScheduleStoreService = {
        ...store,
        list: () => Effect.flatMap(Clock.currentTimeMillis, (now) => store.list({ now: now + 3_600_000 }))
      }
      yield* at(1100)
      const report = yield* Effect.provideService(Scheduler.pass, ScheduleStore.ScheduleStore, ahead)
      expect(report.now).toBe(start + 3_601_100)
      expect(report.ticks.map((tick) => tick.tick - start)).toEqual([3_601_000])
      expect(report.ticks[0]).toMatchObject({ _tag: "Submitted", created: true })
    }).pipe(Effect.provide(layer()))
  )

  it.effect("a full queue defers the schedule's ticks to the next pass, and the other schedules go on", () =>
    Effect.gen(function* () {
      yield* setUp(everySecond({ job: { queue: "full", type: "tick" } }))
      const store = yield* ScheduleStore.ScheduleStore
      yield* store.upsert([everySecond({ id: "other" })])
      const client = yield* Client.Client
      yield* client.submit({ queue: "full", type: "filler" })
      yield* at(1100)
      const report = yield* Scheduler.pass
      expect(report.ticks.map((tick) => [tick.scheduleId, tick._tag])).toEqual([["other", "Submitted"]])
      const records = (yield* store.list()).result
      expect(records.map((record) => [record.schedule.id, record.cursor - start])).toEqual([
        ["other", 1000],
        ["tick", 200]
      ])
    }).pipe(
      Effect.provide(
        Client.layerWith({ maxQueued: 1 }).pipe(
          Layer.provideMerge(Layer.mergeAll(ScheduleStore.layerMemory, Store.layerMemory, Transport.layerMemory()))
        )
      )
    )
  )

  it.effect("a schedule never makes a tick from before it was first stored", () =>
    Effect.gen(function* () {
      yield* at(1500)
      const store = yield* ScheduleStore.ScheduleStore
      yield* store.upsert([everySecond({ catchUp: { all: 3_600_000 } })])
      yield* at(1900)
      expect((yield* Scheduler.pass).ticks).toEqual([])
      yield* at(2050)
      expect((yield* Scheduler.pass).ticks.map((t) => t.tick - start)).toEqual([2000])
    }).pipe(Effect.provide(layer()))
  )
})

describe("Scheduler.run", () => {
  it.effect("declares its schedules and makes every tick as time goes by", () =>
    Effect.gen(function* () {
      yield* at(0)
      const fiber = yield* Effect.fork(Scheduler.run({ schedules: [everySecond()], pollMs: 250 }))
      for (let i = 0; i < 24; i++) yield* TestClock.adjust(250)
      yield* Fiber.interrupt(fiber)
      expect((yield* jobsByTick).map(([tick, n]) => [(tick - start) / 1000, n])).toEqual([
        [1, 1],
        [2, 1],
        [3, 1],
        [4, 1],
        [5, 1],
        [6, 1]
      ])
    }).pipe(Effect.provide(layer()))
  )

  it.effect("as a layer: runs for the layer's lifetime, reports each pass, and outlives a failed one", () =>
    Effect.gen(function* () {
      yield* at(0)
      const store = yield* ScheduleStore.ScheduleStore
      let calls = 0
      const flaky: ScheduleStore.ScheduleStoreService = {
        ...store,
        list: (options) =>
          ++calls === 2
            ? Effect.fail(new StoreError({ reason: "Connection", operation: "list", detail: "down for one pass" }))
            : store.list(options)
      }
      const reports: Array<Scheduler.PassReport> = []
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Layer.build(
            Scheduler.layer({
              schedules: [everySecond()],
              pollMs: 500,
              onPass: (report) => Effect.sync(() => reports.push(report))
            })
          )
          for (let i = 0; i < 8; i++) yield* TestClock.adjust(500)
        })
      ).pipe(Effect.provideService(ScheduleStore.ScheduleStore, flaky))
      const made = (yield* jobsByTick).length
      for (let i = 0; i < 4; i++) yield* TestClock.adjust(500) // the layer is gone: nothing more is made
      expect((yield* jobsByTick).length).toBe(made)
      expect(made).toBe(4)
      expect(calls).toBeGreaterThanOrEqual(8)
      // one pass failed: the others were reported, each with its store time
      expect(reports.length).toBe(calls - 1)
      expect(reports.map((report) => report.now - start)).not.toContain(500)
      expect(reports.flatMap((report) => report.ticks.map((tick) => tick.tick - start))).toEqual([
        1000, 2000, 3000, 4000
      ])
    }).pipe(Effect.provide(layer()))
  )
})
