/**
 * The guide's example (docs/snippets/schedules.ts) as it runs: the nightly summary schedule and its handler, on the
 * memory stores with a test clock. At 02:00 in Berlin the tick makes one job, a worker runs it, and the handler sums
 * up the day before.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Client from "@slowcall/core/Client"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Layer, TestClock } from "effect"
import { nightlySummary, summarizeDay } from "../../../docs/snippets/schedules.js"
import * as Scheduler from "../src/Scheduler.js"
import * as ScheduleStore from "../src/ScheduleStore.js"

const layer = Client.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(ScheduleStore.layerMemory, Store.layerMemory, Transport.layerMemory()))
)

describe("the guide's nightly summary", () => {
  it.scoped("runs once at 02:00 Berlin time and sums up the day before", () =>
    Effect.gen(function* () {
      const schedule = yield* nightlySummary
      yield* TestClock.setTime(Date.parse("2026-06-01T23:30:00Z")) // 01:30 in Berlin (CEST)
      const store = yield* ScheduleStore.ScheduleStore
      yield* store.upsert([schedule])
      yield* Worker.make({ queue: "reports", handlers: [summarizeDay] })

      yield* TestClock.setTime(Date.parse("2026-06-01T23:59:00Z"))
      expect((yield* Scheduler.pass).ticks).toEqual([])
      yield* TestClock.setTime(Date.parse("2026-06-02T00:00:01Z")) // 02:00:01 in Berlin
      const report = yield* Scheduler.pass
      expect(report.ticks).toMatchObject([
        { _tag: "Submitted", tick: Date.parse("2026-06-02T00:00:00Z"), created: true }
      ])
      expect((yield* Scheduler.pass).ticks).toEqual([])

      const client = yield* Client.Client
      const [job] = yield* client.list({ queue: "reports", limit: null })
      expect(job?.requestKey).toBe("schedule:nightly-summary:2026-06-02T00:00:00.000Z")
      expect(job?.budgetCents).toBe(500)
      expect(job?.deadlineAt).toBe(Date.parse("2026-06-02T04:00:00Z"))
      let done = yield* client.get(job!.id)
      for (let i = 0; i < 50 && done.state !== "succeeded"; i++) {
        yield* TestClock.adjust(100)
        done = yield* client.get(job!.id)
      }
      expect(done.state).toBe("succeeded")
      expect(done.result).toEqual({ day: "2026-06-01", summary: "acme: what happened on 2026-06-01" })
      expect(done.costCents).toBe(31)
    }).pipe(Effect.provide(layer))
  )
})
