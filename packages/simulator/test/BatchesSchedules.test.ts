import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as BatchesCheck from "../src/BatchesCheck.js"
import { check } from "../src/Checkers.js"
import { type Event, hashEvents } from "../src/History.js"
import { epoch } from "../src/internal/world.js"
import * as Plan from "../src/Plan.js"
import { runPlan } from "../src/Run.js"
import * as SchedulesCheck from "../src/SchedulesCheck.js"

const sampled = fc.sample(Plan.arbitrary({ jobs: 4, workers: 2, faults: [] }), { seed: 3, numRuns: 1 })[0]!

const batchPlan: Plan.Plan = {
  ...sampled,
  model: { ...sampled.model, priceCents: 2 },
  batches: [{ at: 0, items: 2, budgetCents: 6, onComplete: true, onSuccess: true, cancelAt: null }],
  schedule: null
}

const state = (patch: Partial<Extract<Event, { k: "bstate" }>> = {}): Extract<Event, { k: "bstate" }> => ({
  k: "bstate",
  t: epoch + 10,
  batchId: "b",
  counts: [0, 0, 2, 0, 0],
  actual: [0, 0, 2, 0, 0],
  cost: 4,
  actualCost: 4,
  added: 2,
  size: 2,
  finished: true,
  onComplete: "c1",
  onSuccess: "c2",
  ...patch
})

const final = (patch: Partial<Extract<Event, { k: "bfinal" }>> = {}): Event => ({
  k: "bfinal",
  t: epoch + 20,
  batchId: "b",
  names: ["onComplete", "onSuccess"],
  onCompleteJobs: 1,
  onSuccessJobs: 1,
  ...patch
})

const invariants = (events: ReadonlyArray<Event>, plan: Plan.Plan = batchPlan) =>
  BatchesCheck.check(events, plan).map((v) => v.invariant)

describe("batch invariants (I30-I33)", () => {
  it("pass a finished batch whose counts match its items and whose callbacks were enqueued once", () => {
    expect(invariants([state(), final()])).toEqual([])
  })

  it("I30: kept counts or cost that differ from the items' records at a quiescent point", () => {
    expect(
      invariants([state({ actual: [0, 1, 1, 0, 0], finished: false, onComplete: null, onSuccess: null })])
    ).toEqual(["I30"])
    expect(invariants([state({ cost: 3 }), final()])).toEqual(["I30"])
  })

  it("I31: a complete batch never finished (zero callbacks), two jobs under one key, onSuccess after a failure", () => {
    expect(
      invariants([
        state({ finished: false, onComplete: null, onSuccess: null }),
        final({ onCompleteJobs: 0, onSuccessJobs: 0 })
      ])
    ).toEqual(["I31", "I31", "I31"])
    expect(invariants([state(), final({ onCompleteJobs: 2 })])).toEqual(["I31"])
    const failed = state({ counts: [0, 0, 1, 1, 0], actual: [0, 0, 1, 1, 0], onSuccess: null })
    expect(invariants([failed, final({ onSuccessJobs: 0 })])).toEqual([])
    expect(invariants([failed, final({ onSuccessJobs: 1 })])).toEqual(["I31"])
  })

  it("I31: a batch with an item still running holds no callback job", () => {
    const running = state({
      counts: [0, 1, 1, 0, 0],
      actual: [0, 1, 1, 0, 0],
      finished: false,
      onComplete: null,
      onSuccess: null
    })
    expect(invariants([running, final({ onCompleteJobs: 0, onSuccessJobs: 0 })])).toEqual([])
    expect(invariants([running, final({ onCompleteJobs: 1, onSuccessJobs: 0 })])).toEqual(["I31"])
  })

  it("I31: a batch a replay re-opened keeps the callbacks it was due and is owed none it never was", () => {
    // Both items failed: finished, onComplete enqueued, onSuccess not due; then a replay put one back to queued.
    const failed = state({ counts: [0, 0, 0, 2, 0], actual: [0, 0, 0, 2, 0], onSuccess: null })
    const reopened = state({ counts: [1, 0, 0, 1, 0], actual: [1, 0, 0, 1, 0], finished: false, onSuccess: null })
    expect(invariants([failed, reopened, final({ onCompleteJobs: 1, onSuccessJobs: 0 })])).toEqual([])
    expect(invariants([failed, reopened, final({ onCompleteJobs: 0, onSuccessJobs: 0 })])).toEqual(["I31"])
    expect(invariants([failed, reopened, final({ onCompleteJobs: 1, onSuccessJobs: 1 })])).toEqual(["I31"])
    // The replayed item then succeeded: finished again, still not every item succeeded, so no onSuccess.
    const again = state({ counts: [0, 0, 1, 1, 0], actual: [0, 0, 1, 1, 0], onSuccess: null })
    expect(invariants([failed, reopened, again, final({ onCompleteJobs: 1, onSuccessJobs: 0 })])).toEqual([])
    expect(invariants([failed, reopened, again, final({ onCompleteJobs: 2, onSuccessJobs: 0 })])).toEqual(["I31"])
    // A re-opened batch still finished at the end is finished early.
    expect(invariants([failed, { ...reopened, finished: true }, final({ onSuccessJobs: 0 })])).toEqual(["I31"])
  })

  it("I31 at every write: a batch finished, or a callback named, before it was due, though the end looks right", () => {
    // One item of two landed and succeeded: the batch finished and named both callbacks before the second item landed.
    const early = state({ counts: [0, 0, 1, 0, 0], actual: [0, 0, 1, 0, 0], added: 1, cost: 2, actualCost: 2 })
    expect(invariants([early, state(), final()])).toEqual(["I31", "I31", "I31"])
    // onSuccess named at a finish with a failed item; a replay then made every item succeed.
    const failed = state({ counts: [0, 0, 1, 1, 0], actual: [0, 0, 1, 1, 0] })
    const replayed = state({ counts: [1, 0, 1, 0, 0], actual: [1, 0, 1, 0, 0], finished: false })
    expect(invariants([failed, replayed, state(), final()])).toEqual(["I31"])
    expect(invariants([{ ...failed, onSuccess: null }, { ...replayed, onSuccess: null }, state(), final()])).toEqual([])
    // A callback's job, once named, is that job for good.
    expect(invariants([state(), state({ onComplete: "c9" }), final()])).toEqual(["I31"])
    expect(invariants([state(), state({ onSuccess: null }), final()])).toEqual(["I31"])
  })

  it("I32: an item claimed after its batch's cancel was acknowledged; I33: claimed with the budget spent", () => {
    const cancel: Event = { k: "batch", t: epoch + 5, batchId: "b", what: "cancel", jobIds: [], ok: true }
    const claim = (t: number, spent: number): Event => ({
      k: "bclaim",
      t: epoch + t,
      batchId: "b",
      jobId: "j",
      spent,
      budget: 6
    })
    expect(invariants([claim(4, 0), cancel])).toEqual([])
    expect(invariants([cancel, claim(6, 0)])).toEqual(["I32"])
    expect(invariants([claim(4, 5)])).toEqual([])
    expect(invariants([claim(4, 6)])).toEqual(["I33"])
  })

  it("I35: a batch's spend within its budget once what calls were billed above their estimates is left out", () => {
    const spend = (spent: number, reserved: number): Event => ({
      k: "bspend",
      t: epoch + 7,
      batchId: "b",
      spent,
      reserved,
      budget: 6
    })
    // Reserved up to the budget, and a call billed 3c above its estimate: within the rule.
    expect(invariants([spend(6, 6), spend(9, 6)])).toEqual([])
    // Two items' reservations past the budget together.
    expect(invariants([spend(8, 8)])).toEqual(["I35"])
  })
})

describe("schedule invariant (I34)", () => {
  const at = (s: number) => epoch + s * 1_000
  const schedulePlan = (catchUp: NonNullable<Plan.Plan["schedule"]>["catchUp"]): Plan.Plan => ({
    ...batchPlan,
    batches: [],
    schedule: { everySeconds: 1, catchUp, graceMs: 500, pollMs: 1_000, outage: null }
  })
  const all = schedulePlan({ _tag: "all", windowMs: 3_000 })
  const list = (t: number): Event => ({
    k: "sched",
    t,
    who: "w0.1",
    what: "list",
    passNow: t,
    from: 0,
    to: 0,
    ok: true
  })
  const advance = (t: number, passNow: number, from: number, to: number): Event => ({
    k: "sched",
    t,
    who: "w0.1",
    what: "advance",
    passNow,
    from,
    to,
    ok: true
  })
  const tjob = (tick: number, createdAt: number, jobId = `t${tick}`): Event => ({
    k: "tjob",
    t: at(100),
    tick,
    jobId,
    createdAt
  })
  const found = (events: ReadonlyArray<Event>, plan = all) =>
    SchedulesCheck.check(events, plan).map((v) => v.message.replace(/\d{13}/g, "T"))

  it("passes one job per due tick, made before the cursor passed it", () => {
    const pass = at(5) + 200
    const events = [list(pass), advance(pass + 1, pass, at(1), at(5)), ...[2, 3, 4, 5].map((s) => tjob(at(s), pass))]
    // The tick at 2 s is 3.2 s old at the pass: outside the 3 s window, so it needs no job; the others do.
    expect(found(events.filter((e) => !(e.k === "tjob" && e.tick === at(2))))).toEqual([])
    expect(found(events)).toEqual(["the tick at T made a job although no pass read it within 3000 ms"])
  })

  it("finds a due tick without a job, two jobs for one tick, and a job for an instant the cron never fires at", () => {
    const pass = at(5) + 200
    expect(found([list(pass), advance(pass + 1, pass, at(3), at(5)), tjob(at(5), pass)])).toEqual([
      "the tick at T is due (1200 ms old at the pass) but has no job"
    ])
    expect(
      found([list(pass), advance(pass + 1, pass, at(4), at(5)), tjob(at(5), pass), tjob(at(5), pass, "again")])
    ).toEqual(["2 jobs for the tick at T"])
    expect(found([list(pass), tjob(at(5) + 1, pass)])).toEqual(["a job for T, not an instant the schedule fires at"])
  })

  it("under skip only the ticks within the grace are due; latest may make an old tick", () => {
    const pass = at(5) + 200
    const events = [list(pass), advance(pass + 1, pass, at(3), at(5)), tjob(at(5), pass)]
    expect(found(events, schedulePlan({ _tag: "skip" }))).toEqual([])
    expect(found([list(pass), tjob(at(2), pass)], schedulePlan({ _tag: "latest" }))).toEqual([])
    expect(found([list(pass), tjob(at(2), pass)], schedulePlan({ _tag: "skip" }))).toEqual([
      "the tick at T made a job although no pass read it within 500 ms"
    ])
  })
})

describe("runs with batches and a schedule", () => {
  const plan: Plan.Plan = {
    ...batchPlan,
    faultPhaseMs: 12_000,
    batches: [
      { at: 100, items: 3, budgetCents: null, onComplete: true, onSuccess: true, cancelAt: null },
      { at: 200, items: 4, budgetCents: 3, onComplete: true, onSuccess: false, cancelAt: 2_000 }
    ],
    schedule: { everySeconds: 1, catchUp: { _tag: "all", windowMs: 5_000 }, graceMs: 500, pollMs: 700, outage: null }
  }

  it("record the batches, their callbacks and every tick's job, hold every invariant, and replay exactly", () => {
    // Act
    const run = runPlan(plan)
    const verdict = check(run.events, plan, run.outcome, run.defect)
    // Assert
    expect(verdict.violations).toEqual([])
    const finals = run.events.filter((e) => e.k === "bfinal")
    expect(finals).toHaveLength(2)
    expect(finals[0]).toMatchObject({ onCompleteJobs: 1 })
    const ticks = run.events.filter((e) => e.k === "tjob").map((e) => (e.k === "tjob" ? e.tick : 0))
    // One job per second from the schedule's creation to the shutdown, none twice.
    expect(ticks.length).toBeGreaterThan(10)
    expect(new Set(ticks).size).toBe(ticks.length)
    expect(runPlan(plan).hash).toBe(run.hash)
  })

  it("land a batch planned in chunks chunk by chunk, the application pausing between them", () => {
    // Arrange
    const chunked: Plan.Plan = {
      ...plan,
      batches: [
        {
          at: 100,
          items: 3,
          budgetCents: null,
          onComplete: true,
          onSuccess: true,
          cancelAt: null,
          chunks: { size: 2, gapMs: 4_000 }
        }
      ],
      schedule: null
    }
    // Act
    const run = runPlan(chunked)
    // Assert
    expect(check(run.events, chunked, run.outcome, run.defect).violations).toEqual([])
    const landed = run.events.flatMap((e) => (e.k === "batch" && e.what === "items" ? [e] : []))
    expect(landed.map((e) => e.jobIds.length)).toEqual([2, 1])
    expect(landed[1]!.t - landed[0]!.t).toBeGreaterThanOrEqual(4_000)
    // Both items of the first chunk ended before the last landed, and the batch was not finished meanwhile.
    const states = run.events.flatMap((e) => (e.k === "bstate" && e.t < landed[1]!.t ? [e] : []))
    expect(states.some((e) => e.actual[2] === 2)).toBe(true)
    expect(states.every((e) => !e.finished)).toBe(true)
  })

  it("hash the batch and schedule events: changing a field changes the run's hash", () => {
    const events = runPlan(plan).events.filter((e) => e.k === "bstate" || e.k === "sched" || e.k === "tjob")
    const base = hashEvents(events)
    const first = events.find((e) => e.k === "bstate")!
    const moved = events.map((e) => (e === first ? { ...first, actual: [9, 9, 9, 9, 9] } : e))
    expect(hashEvents(moved)).not.toBe(base)
  })
})
