import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import fc from "fast-check"
import type { JobState } from "../src/Job.js"
import { type Event, isLegal, next, table, transition } from "../src/StateMachine.js"

const states: ReadonlyArray<JobState> = ["queued", "running", "succeeded", "failed", "abandoned"]
const events: ReadonlyArray<Event> = [
  "claim",
  "takeover",
  "complete",
  "retry",
  "release",
  "expire",
  "fail",
  "abandon",
  "cancel",
  "replay"
]
const absorbing: ReadonlyArray<JobState> = ["succeeded", "abandoned"]

const eventArb = fc.constantFrom(...events)

/** Applies each event when it is legal (an illegal one leaves the state as it was), recording every step. */
const walk = (from: JobState, sequence: ReadonlyArray<Event>) => {
  const steps: Array<{ from: JobState; event: Event; to: JobState | undefined }> = []
  let state = from
  for (const event of sequence) {
    const to = next(state, event)
    steps.push({ from: state, event, to })
    if (to !== undefined) state = to
  }
  return { steps, final: state }
}

describe("StateMachine table", () => {
  it.each(table.map(([from, event, to]) => [from, event, to] as const))("%s + %s -> %s", (from, event, to) => {
    expect(next(from, event)).toBe(to)
    expect(isLegal(from, to)).toBe(true)
  })

  it("lists each (state, event) at most once", () => {
    const keys = table.map(([from, event]) => `${from}:${event}`)
    expect(new Set(keys).size).toBe(keys.length)
  })

  it.each([
    ["queued", "complete"],
    ["queued", "replay"],
    ["queued", "takeover"],
    ["running", "claim"],
    ["running", "replay"],
    ["failed", "claim"],
    ["failed", "cancel"],
    ["succeeded", "replay"],
    ["abandoned", "replay"],
    ["succeeded", "cancel"]
  ] as const)("%s + %s is illegal", (from, event) => {
    expect(next(from, event)).toBeUndefined()
  })

  it("running + cancel keeps the job running (it only sets the cancel request)", () => {
    expect(next("running", "cancel")).toBe("running")
  })

  it("isLegal allows a self-transition only for running (takeover)", () => {
    for (const state of states) expect(isLegal(state, state)).toBe(state === "running")
    expect(isLegal("succeeded", "queued")).toBe(false)
    expect(isLegal("abandoned", "running")).toBe(false)
    expect(isLegal("failed", "queued")).toBe(true)
  })

  it.effect("transition succeeds with the next state or fails with InvalidTransition", () =>
    Effect.gen(function* () {
      expect(yield* transition("queued", "claim")).toBe("running")
      const exit = yield* Effect.exit(transition("succeeded", "retry"))
      expect(Exit.isFailure(exit)).toBe(true)
      const error = yield* Effect.flip(transition("succeeded", "retry"))
      expect(error).toMatchObject({ _tag: "InvalidTransition", from: "succeeded", event: "retry" })
    })
  )

  it("every table row is reachable from queued", () => {
    const reachable = new Set<JobState>(["queued"])
    let grew = true
    while (grew) {
      grew = false
      for (const [from, , to] of table) {
        if (reachable.has(from) && !reachable.has(to)) {
          reachable.add(to)
          grew = true
        }
      }
    }
    for (const [from] of table) expect(reachable.has(from)).toBe(true)
    expect(reachable).toEqual(new Set(states))
  })
})

describe("StateMachine properties", () => {
  it("random event sequences never reach a state outside the table", () => {
    fc.assert(
      fc.property(fc.constantFrom(...states), fc.array(eventArb, { maxLength: 60 }), (start, sequence) => {
        const { steps } = walk(start, sequence)
        for (const { from, event, to } of steps) {
          if (to === undefined) continue
          expect(states).toContain(to)
          const inTable = table.some(([f, e, t]) => f === from && e === event && t === to)
          const cancelRequest = from === "running" && event === "cancel" && to === "running"
          expect(inTable || cancelRequest).toBe(true)
          expect(isLegal(from, to)).toBe(true)
        }
      })
    )
  })

  it("absorbing states stay absorbing under any events", () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 60 }), fc.array(eventArb, { maxLength: 30 }), (prefix, suffix) => {
        const { final } = walk("queued", prefix)
        if (!absorbing.includes(final)) return
        for (const event of suffix) expect(next(final, event)).toBeUndefined()
        expect(walk(final, suffix).final).toBe(final)
      })
    )
    for (const state of absorbing) for (const event of events) expect(next(state, event)).toBeUndefined()
  })

  it("random walks from queued take every table row", () => {
    const taken = new Set<string>()
    fc.assert(
      fc.property(fc.array(eventArb, { minLength: 1, maxLength: 40 }), (sequence) => {
        for (const { from, event, to } of walk("queued", sequence).steps) {
          if (to !== undefined) taken.add(`${from}:${event}`)
        }
      }),
      { numRuns: 2_000, seed: 20_260_101 }
    )
    expect([...taken].filter((key) => key !== "running:cancel").sort()).toEqual(
      table.map(([from, event]) => `${from}:${event}`).sort()
    )
  })

  it("failed is left only by replay, and only to queued", () => {
    fc.assert(
      fc.property(eventArb, (event) => {
        const to = next("failed", event)
        if (event === "replay") expect(to).toBe("queued")
        else expect(to).toBeUndefined()
      })
    )
  })
})
