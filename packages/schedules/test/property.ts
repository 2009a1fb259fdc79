/**
 * The model-based property of the ScheduleStore: random sequences of every verb, with store time driven by the
 * test, run on an adapter and on the pure rules (`ScheduleStore.Rules`); every reply must be equal, and so must the
 * adapter's whole list after the sequence. Each sequence uses ids of its own (a fresh prefix), so one store serves
 * every run.
 */
import { Effect, Either, type Layer } from "effect"
import * as fc from "fast-check"
import { expect, it } from "vitest"
import * as Schedule from "../src/Schedule.js"
import * as ScheduleStore from "../src/ScheduleStore.js"

type Op =
  | { readonly verb: "upsert"; readonly items: ReadonlyArray<readonly [number, number]> }
  | { readonly verb: "list" }
  | { readonly verb: "get" | "pause" | "resume" | "remove"; readonly id: number }
  | { readonly verb: "advance"; readonly id: number; readonly to: number; readonly job: string | null }

const definitions = [
  { cron: "* * * * * *", catchUp: "skip" as const, overlap: "skip" as const },
  { cron: "0 2 * * *", timezone: "Europe/Berlin", catchUp: "latest" as const, overlap: "allow" as const },
  {
    cron: "*/5 * * * *",
    catchUp: { all: 60_000 },
    overlap: "cancelPrevious" as const,
    graceMs: 5_000,
    job: { queue: "q2", type: "t2", input: { deep: [1, "two", null] }, priority: -3 }
  }
]

const schedule = (prefix: string, id: number, definition: number): Schedule.Schedule =>
  Either.getOrThrow(
    Schedule.make({ id: `${prefix}-${id}`, job: { queue: "q", type: "t" }, ...definitions[definition]! })
  )

// Three ids, so verbs meet the schedules earlier verbs made; pause and resume weighted up, so a resume of a paused
// schedule comes in most sequences.
const anId = fc.integer({ min: 0, max: 2 })
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({
      verb: fc.constant("upsert" as const),
      items: fc.array(fc.tuple(anId, fc.integer({ min: 0, max: 2 })), { minLength: 1, maxLength: 3 })
    }),
    weight: 3
  },
  { arbitrary: fc.constant({ verb: "list" as const }), weight: 1 },
  { arbitrary: fc.record({ verb: fc.constantFrom("pause" as const, "resume" as const), id: anId }), weight: 4 },
  { arbitrary: fc.record({ verb: fc.constantFrom("get" as const, "remove" as const), id: anId }), weight: 1 },
  {
    arbitrary: fc.record({
      verb: fc.constant("advance" as const),
      id: anId,
      to: fc.integer({ min: 0, max: 4_000_000 }).map((n) => 1_700_000_000_000 + n),
      job: fc.option(fc.constantFrom("job-a", "job-b"), { nil: null })
    }),
    weight: 3
  }
)

let runs = 0

/** Registers the property for one adapter. */
export const ScheduleStoreProperty = (options: {
  readonly name: string
  readonly layer: Layer.Layer<ScheduleStore.ScheduleStore, unknown>
  readonly numRuns: number
}) =>
  it(`${options.name}: every verb's reply equals the rules' (${options.numRuns} random sequences)`, async () => {
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const store = yield* ScheduleStore.ScheduleStore
          yield* Effect.promise(() =>
            fc.assert(
              fc.asyncProperty(
                fc.array(fc.tuple(op, fc.integer({ min: 0, max: 200_000 })), { minLength: 5, maxLength: 30 }),
                async (ops) => {
                  const prefix = `p${runs++}-${Math.random().toString(36).slice(2, 8)}`
                  const mine = (records: ReadonlyArray<ScheduleStore.ScheduleRecord>) =>
                    records.filter((record) => record.schedule.id.startsWith(`${prefix}-`))
                  let state: ScheduleStore.State = new Map()
                  let now = 1_700_000_000_000
                  for (const [o, step] of ops) {
                    now += step
                    const at = { now }
                    const id = "id" in o ? `${prefix}-${o.id}` : ""
                    switch (o.verb) {
                      case "upsert": {
                        const schedules = o.items.map(([i, d]) => schedule(prefix, i, d))
                        const reply = await Effect.runPromise(store.upsert(schedules, at))
                        for (const s of schedules) state = ScheduleStore.Rules.upsert(state, s, now)[1]
                        expect(reply).toEqual({ now, result: schedules.map((s) => state.get(s.id)) })
                        break
                      }
                      case "list": {
                        const reply = await Effect.runPromise(store.list(at))
                        expect({ now: reply.now, result: mine(reply.result) }).toEqual({
                          now,
                          result: ScheduleStore.Rules.list(state)
                        })
                        break
                      }
                      case "get":
                        expect(await Effect.runPromise(store.get(id, at))).toEqual({
                          now,
                          result: ScheduleStore.Rules.get(state, id)
                        })
                        break
                      case "pause": {
                        const reply = await Effect.runPromise(store.pause(id, at))
                        const [result, next] = ScheduleStore.Rules.pause(state, id)
                        state = next
                        expect(reply).toEqual({ now, result })
                        break
                      }
                      case "remove": {
                        const reply = await Effect.runPromise(store.remove(id, at))
                        const [result, next] = ScheduleStore.Rules.remove(state, id)
                        state = next
                        expect(reply).toEqual({ now, result })
                        break
                      }
                      case "resume": {
                        const reply = await Effect.runPromise(store.resume(id, at))
                        const [result, next] = ScheduleStore.Rules.resume(state, id, now)
                        state = next
                        expect(reply).toEqual({ now, result })
                        break
                      }
                      case "advance": {
                        const reply = await Effect.runPromise(store.advance(id, o.to, o.job, at))
                        const [result, next] = ScheduleStore.Rules.advance(state, id, o.to, o.job)
                        state = next
                        expect(reply).toEqual({ now, result })
                        break
                      }
                    }
                  }
                  const final = await Effect.runPromise(store.list())
                  expect(mine(final.result)).toEqual(ScheduleStore.Rules.list(state))
                }
              ),
              { numRuns: options.numRuns }
            )
          )
        }).pipe(Effect.provide(options.layer))
      )
    )
  })
