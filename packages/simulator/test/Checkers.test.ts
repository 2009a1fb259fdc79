import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import { check } from "../src/Checkers.js"
import type { Event, Snap, WriteOp } from "../src/History.js"
import { epoch } from "../src/internal/world.js"
import * as Plan from "../src/Plan.js"

const plan: Plan.Plan = {
  ...fc.sample(Plan.arbitrary({ jobs: 1, workers: 2, faults: ["F5"] }), { seed: 1, numRuns: 1 })[0]!,
  faults: ["F5"],
  maxAttempts: 3,
  model: { medianMs: 100, tailAlpha: 2, errorRate: 0, priceCents: 2 },
  // These histories name no provider resource (the fleet limits' checks have their own tests).
  limits: undefined
}

const job = "j1"
const base: Snap = {
  state: "queued",
  token: 0,
  attempts: 0,
  attemptsBase: 0,
  maxAttempts: 3,
  leaseOwner: null,
  leaseUntil: null,
  runAfter: 0,
  updatedAt: 1,
  costCents: 0,
  budgetCents: null,
  abandonReason: null
}
const s = (patch: Partial<Snap>): Snap => ({ ...base, ...patch })

const write = (
  t: number,
  op: WriteOp,
  who: string,
  token: number | null,
  before: Snap,
  after: Snap,
  extra: Partial<Extract<Event, { k: "write" }>> = {}
): Event => ({
  k: "write",
  t,
  start: t,
  op,
  who,
  jobId: job,
  token,
  ok: true,
  res: op === "claim" ? "Claimed" : after.state,
  outcome: null,
  takeover: false,
  before,
  after,
  callId: null,
  amount: null,
  settled: null,
  resultToken: null,
  ...extra
})

const call = (t: number, who: string, token: number, cents = 2): Event => ({
  k: "call",
  t,
  asked: t,
  end: t + 100,
  who,
  jobId: job,
  token,
  callId: `${job}:${token}:1`,
  cents,
  outcome: "ok",
  spentAtStart: cents,
  budget: null,
  attemptsAtStart: 1,
  maxAttempts: 3
})

const charge = (t: number, who: string, token: number, amount: number, settled: boolean, cost: number): Event =>
  write(
    t,
    "charge",
    who,
    token,
    s({ state: "running", token, costCents: cost - (settled ? 0 : amount) }),
    s({ state: "running", token, costCents: cost, updatedAt: t }),
    {
      callId: `${job}:${token}:1`,
      amount,
      settled,
      res: "ok"
    }
  )

const submit: Event = { k: "submit", t: 0, key: "k", hash: "h", ok: true, jobId: job, created: true, error: null }
const running1 = s({ state: "running", token: 1, attempts: 1, leaseOwner: "w0.1", leaseUntil: 3_000, updatedAt: 10 })
const done = s({ state: "succeeded", token: 1, attempts: 1, costCents: 2, updatedAt: 120 })
const finals = (snap: Snap, ledger: number): Array<Event> => [
  { k: "phase", t: 500, name: "heal" },
  { k: "final", t: 500, jobId: job, snap, ledger },
  { k: "phase", t: 600, name: "final" },
  { k: "final", t: 600, jobId: job, snap, ledger }
]

/** A correct history: claim, reserve, call, settle the charge, settle the attempt (Complete), ack. */
const happy: Array<Event> = [
  submit,
  write(10, "claim", "w0.1", null, base, running1),
  charge(10, "w0.1", 1, 2, false, 2),
  call(10, "w0.1", 1),
  charge(110, "w0.1", 1, 2, true, 2),
  write(120, "settle", "w0.1", 1, s({ ...running1, costCents: 2, updatedAt: 110 }), done, {
    outcome: "Complete",
    resultToken: 1
  }),
  { k: "msg", t: 121, op: "ack", who: "w0.1", jobId: job, receipt: "r1", count: 1, state: "succeeded", owner: null },
  ...finals(done, 2)
]

describe("check", () => {
  it("accepts a correct history and counts its totals", () => {
    const verdict = check(happy, plan, "Done", null)
    expect(verdict.violations).toEqual([])
    expect(verdict.totals.acknowledged).toBe(1)
    expect(verdict.totals.terminal).toBe(1)
    expect(verdict.totals.billedCents).toBe(2)
    expect(verdict.totals.ledgerCents).toBe(2)
  })

  it("I1: a takeover with no fault on the first holder is an unexcused double generation", () => {
    const takeover = s({
      state: "running",
      token: 2,
      attempts: 2,
      leaseOwner: "w1.1",
      leaseUntil: 9_000,
      updatedAt: 3_100
    })
    const history: Array<Event> = [
      submit,
      write(10, "claim", "w0.1", null, base, running1),
      call(10, "w0.1", 1),
      write(3_100, "claim", "w1.1", null, running1, takeover, { takeover: true }),
      call(3_100, "w1.1", 2),
      ...finals(takeover, 0)
    ]
    const verdict = check(history, plan, "Done", null)
    expect(verdict.violations.map((v) => v.invariant)).toContain("I1")
    expect(verdict.totals.duplicateGenerations.unexcused).toBe(1)
    const excused = check(
      [
        ...history.slice(0, 3),
        { k: "fault", t: 20, id: "F5", who: "w0.1", point: "store.heartbeat" },
        ...history.slice(3)
      ],
      plan,
      "Done",
      null
    )
    expect(excused.totals.duplicateGenerations).toEqual({ excused: 1, unexcused: 0 })
    expect(excused.violations.filter((v) => v.invariant === "I1")).toEqual([])
    // A pause that began long before the first claim but ended just as it was made excuses it too.
    const resumed = check(
      [{ k: "life", t: -9_000, who: "w0.1", what: "pause", ms: 9_010 }, ...history],
      plan,
      "Done",
      null
    )
    expect(resumed.totals.duplicateGenerations).toEqual({ excused: 1, unexcused: 0 })
  })

  it("I1: a call under the committing token after the commit is never excused", () => {
    const again = { ...(call(300, "w0.1", 1) as Extract<Event, { k: "call" }>), callId: `${job}:1:2` }
    const verdict = check([...happy.slice(0, 6), again, ...happy.slice(6)], plan, "Done", null)
    expect(verdict.violations.filter((v) => v.invariant === "I1").map((v) => v.message)).toEqual([
      "model called under token 1 after the job succeeded under token 1"
    ])
  })

  it("I2: a write accepted under a superseded token is a stale write", () => {
    const stale = write(120, "settle", "w0.1", 1, s({ ...running1, token: 2 }), s({ ...done, token: 2 }), {
      outcome: "Complete",
      resultToken: 1
    })
    const verdict = check([...happy.slice(0, 5), stale, ...finals(done, 2)], plan, "Done", null)
    expect(verdict.violations.map((v) => v.invariant)).toContain("I2")
    expect(verdict.totals.staleWrites).toBe(1)
  })

  it("I1: a sweep that takes back a live lease is reported; one after the lease ended is not", () => {
    const requeued = s({ state: "queued", token: 1, attempts: 1, runAfter: 2_000, updatedAt: 2_000 })
    const early = write(2_000, "sweep", "sweeper", null, running1, requeued, { res: "requeued" })
    const late = write(
      3_001,
      "sweep",
      "sweeper",
      null,
      running1,
      { ...requeued, updatedAt: 3_001 },
      { res: "requeued" }
    )
    const messages = (sweep: Event) =>
      check([...happy.slice(0, 2), sweep], plan, "Done", null)
        .violations.filter((v) => v.invariant === "I1")
        .map((v) => v.message)
    expect(messages(early)).toEqual(["the sweep took back token 1's lease, live until 3000"])
    expect(messages(late)).toEqual([])
  })

  it("I3: updatedAt going backwards is reported", () => {
    const back = write(130, "heartbeat", "w0.1", 1, running1, s({ ...running1, leaseUntil: 4_000, updatedAt: 5 }), {
      res: "ok"
    })
    const verdict = check([...happy.slice(0, 2), back, ...happy.slice(2)], plan, "Done", null)
    expect(verdict.violations.map((v) => v.invariant)).toContain("I3")
  })

  it("I3: an updatedAt that is not the store's time at the write is reported; the microsecond step is not", () => {
    // A charge settled after the commit: it may move spend and updatedAt, but only to store time.
    const at = (t: number, updatedAt: number) =>
      write(t, "charge", "w0.1", 1, done, s({ ...done, updatedAt }), { res: "ok", callId: `${job}:1:1`, amount: 2 })
    const i3 = (e: Event) =>
      check([...happy.slice(0, 6), e, ...happy.slice(6)], plan, "Done", null).violations.filter(
        (v) => v.invariant === "I3"
      )
    // A caller's clock 900 ms ahead stamped it: still increasing, but not store time.
    expect(i3(at(130, 1_030)).map((v) => v.message)).toEqual([
      "charge stamped updatedAt 1030, not the store time 130 of the write"
    ])
    expect(i3(at(130, 130))).toEqual([])
    // A second write in the settle's store millisecond steps past it by a microsecond.
    expect(i3(at(120, 120.001))).toEqual([])
    expect(i3(at(120, 120.01))).toHaveLength(1)
  })

  it("I3: a heartbeat may carry the store time it was sent at (held in the store, as a statement's start); no other write may", () => {
    const i3 = (e: Event) =>
      check([...happy.slice(0, 4), e, ...happy.slice(4)], plan, "Done", null).violations.filter(
        (v) => v.invariant === "I3"
      )
    // Sent at 60, held inside the store until 100, stamped with 60.
    const held = (op: WriteOp) => ({
      ...(write(100, op, "w0.1", 1, running1, s({ ...running1, leaseUntil: 4_000, updatedAt: 60 })) as Extract<
        Event,
        { k: "write" }
      >),
      start: 60,
      res: "ok"
    })
    expect(i3(held("heartbeat"))).toEqual([])
    expect(i3(held("charge")).map((v) => v.message)).toEqual([
      "charge stamped updatedAt 60, not the store time 100 of the write"
    ])
    // Before its send, a heartbeat's stamp is no store time at all.
    expect(i3({ ...held("heartbeat"), start: 90 }).map((v) => v.message)).toEqual([
      "heartbeat stamped updatedAt 60, not the store time 100 of the write"
    ])
  })

  it("I1: a call asked for after its lease ended in the store is reported, unless a pause or a skewed clock did it", () => {
    // The claim's lease ends at 3000; a renewal at 2000 carries it to 5000.
    const late = (asked: number, sent = asked): Event => ({
      ...(call(sent, "w0.1", 1) as Extract<Event, { k: "call" }>),
      asked,
      callId: `${job}:1:2`
    })
    const renewal = write(
      2_000,
      "heartbeat",
      "w0.1",
      1,
      running1,
      s({ ...running1, leaseUntil: 5_000, updatedAt: 2_000 }),
      {
        res: "ok"
      }
    )
    const lateCalls = (history: ReadonlyArray<Event>, p: Plan.Plan = plan) =>
      check(history, p, "Done", null)
        .violations.filter((v) => v.invariant === "I1" && v.message.includes("after its lease ended"))
        .map((v) => v.message)
    const prefix = happy.slice(0, 4)
    expect(lateCalls([...prefix, late(3_000)])).toEqual([
      "model call under token 1 by w0.1 asked at 3000, after its lease ended at 3000"
    ])
    expect(lateCalls([...prefix, late(2_999)])).toEqual([])
    // Asked for while the lease was live, sent once a pause ended.
    expect(lateCalls([...prefix, late(2_900, 3_400)])).toEqual([])
    // A renewal applied before the call counts; one applied after it does not.
    expect(lateCalls([...prefix, renewal, late(3_000)])).toEqual([])
    expect(lateCalls([...prefix, late(3_000), { ...renewal, t: 3_500 } as Event])).toHaveLength(1)
    // A skewed clock excuses a late call only by as much as it fell behind since the claim's send (at 10).
    const skewed = (skew: { offsetMs: number; driftPpm: number; jumpMs: number }): Plan.Plan => ({
      ...plan,
      faults: ["F5", "F12"],
      skews: [skew, skew]
    })
    // 5% slow: 149.5 ms behind at 3000, so a call asked at 3100 is late by more than that, one at 3140 is not excused.
    const slow = skewed({ offsetMs: 0, driftPpm: -50_000, jumpMs: 0 })
    expect(lateCalls([...prefix, late(3_100)], slow)).toEqual([])
    expect(lateCalls([...prefix, late(3_200)], slow)).toEqual([
      "model call under token 1 by w0.1 asked at 3200, after its lease ended at 3000 (its clock fell behind by at most 162 ms)"
    ])
    // A clock 5 s behind from the start measures a lease as long as a true one: the offset excuses nothing.
    expect(lateCalls([...prefix, late(3_000)], skewed({ offsetMs: -5_000, driftPpm: 0, jumpMs: 0 }))).toHaveLength(1)
    // A fast clock, or one that jumps forward, ends its lease early in its own eyes: nothing to excuse either.
    expect(lateCalls([...prefix, late(3_000)], skewed({ offsetMs: 0, driftPpm: 50_000, jumpMs: 2_000 }))).toHaveLength(
      1
    )
  })

  it("I1: a backward clock jump between the lease's grant and the call excuses the call by the jump, no more", () => {
    // Plans of 10 s jump at the middle of the fault phase, 5 s after the run's epoch; the run's epoch is the world's.
    const start = epoch
    const at = (ms: number) => start + ms
    const running = s({ ...running1, leaseUntil: at(3_000) })
    const jumped: Plan.Plan = {
      ...plan,
      faults: ["F5", "F12"],
      faultPhaseMs: 4_000,
      skews: [
        { offsetMs: 0, driftPpm: 0, jumpMs: -400 },
        { offsetMs: 0, driftPpm: 0, jumpMs: -400 }
      ]
    }
    const late = (asked: number): Event => ({
      ...(call(at(asked), "w0.1", 1) as Extract<Event, { k: "call" }>),
      callId: `${job}:1:2`
    })
    const lateCalls = (asked: number, p: Plan.Plan) =>
      check([submit, write(at(0), "claim", "w0.1", null, base, running), late(asked)], p, "Done", null)
        .violations.filter((v) => v.invariant === "I1" && v.message.includes("after its lease ended"))
        .map((v) => v.message)
    // The jump (at 2000, 400 ms back) came between the claim and the call: 3300 is excused, 3500 is not.
    expect(lateCalls(3_300, jumped)).toEqual([])
    expect(lateCalls(3_500, jumped)).toHaveLength(1)
    // The same jump after the call's asking instant excuses nothing.
    expect(lateCalls(3_300, { ...jumped, faultPhaseMs: 8_000 })).toHaveLength(1)
  })

  it("I10 and I11: nothing under a token after its process learned the lease was lost, but its charges", () => {
    const learned: Event = { k: "lost", t: 500, who: "w0.1", op: "heartbeat", jobId: job, token: 1 }
    const callAt = (asked: number): Event => ({
      ...(call(asked, "w0.1", 1) as Extract<Event, { k: "call" }>),
      callId: `${job}:1:2`
    })
    const beatAt = (start: number, who = "w0.1"): Event => ({
      ...(write(start, "heartbeat", who, 1, running1, running1) as Extract<Event, { k: "write" }>),
      ok: false,
      res: "LeaseLost"
    })
    const invariants = (extra: ReadonlyArray<Event>) =>
      check([...happy.slice(0, 4), learned, ...extra], plan, "Done", null)
        .violations.map((v) => v.invariant)
        .filter((inv) => inv === "I10" || inv === "I11")
    expect(invariants([callAt(600)])).toEqual(["I10"])
    expect(invariants([callAt(500)])).toEqual([])
    expect(invariants([beatAt(600)])).toEqual(["I11"])
    expect(invariants([beatAt(500), beatAt(600, "w1.1")])).toEqual([])
    expect(invariants([charge(600, "w0.1", 1, 2, true, 2)])).toEqual([])
  })

  it("a fault-free run calls the model under one token, at most as often as the handler's chain has steps", () => {
    const faultFree: Plan.Plan = {
      ...plan,
      faults: [],
      targeted: { _tag: "None" },
      handler: { ...Plan.oneCall, steps: 2 }
    }
    const second = { ...(call(60, "w0.1", 1) as Extract<Event, { k: "call" }>), callId: `${job}:1:2` }
    const i1 = (history: ReadonlyArray<Event>, p: Plan.Plan) =>
      check(history, p, "Done", null).violations.filter((v) => v.invariant === "I1" && v.message.includes("fault-free"))
    const twoSteps = [...happy.slice(0, 4), second, ...happy.slice(4)]
    expect(i1(twoSteps, faultFree)).toEqual([])
    expect(i1(twoSteps, { ...faultFree, handler: Plan.oneCall })).toHaveLength(1)
  })

  it("I6: a billed call missing from the charge ledger is an under-count", () => {
    const verdict = check(
      happy.filter((e) => !(e.k === "write" && e.op === "charge")),
      plan,
      "Done",
      null
    )
    expect(verdict.violations.map((v) => v.invariant)).toContain("I6")
  })

  it("I6: a settled row must hold exactly what the provider billed", () => {
    const history = happy.map((e) =>
      e.k === "write" && e.op === "charge" && e.settled === true ? { ...e, amount: 3 } : e
    )
    const verdict = check(history, plan, "Done", null)
    expect(verdict.violations.filter((v) => v.invariant === "I6").map((v) => v.message)).toContain(
      `call ${job}:1:1 billed 2c but was settled at 3c`
    )
  })

  describe("I12: a billed amount that reached a worker that lived on is in its call's row", () => {
    // The call was reserved at 1 cent (its estimate) and billed 3: the reply carrying the 3 cents reached w0.1 at 110.
    const billed = { ...(call(10, "w0.1", 1, 3) as Extract<Event, { k: "call" }>), spentAtStart: 1 }
    const reply: Event = { k: "reply", t: 110, who: "w0.1", jobId: job, callId: `${job}:1:1`, cents: 3 }
    const refused = (t: number): Event => ({
      ...(charge(t, "w0.1", 1, 3, true, 1) as Extract<Event, { k: "write" }>),
      ok: false,
      res: "StoreError"
    })
    const left = s({ state: "succeeded", token: 1, attempts: 1, costCents: 1, updatedAt: 900 })
    const history = (...middle: ReadonlyArray<Event>): Array<Event> => [
      submit,
      write(10, "claim", "w0.1", null, base, running1),
      charge(10, "w0.1", 1, 1, false, 1),
      billed,
      ...middle,
      ...finals(left, 1)
    ]
    const i12 = (events: ReadonlyArray<Event>) =>
      check(events, plan, "Done", null).violations.filter((v) => v.invariant === "I12" || v.invariant === "I6")

    it("is broken by a worker that gave up its settlement and lived on", () => {
      expect(i12(history(reply, refused(110), refused(160), refused(260), refused(460))).map((v) => v.message)).toEqual(
        [
          `call ${job}:1:1 billed 3c, which reached w0.1 at 110, but its ledger row holds 1c unsettled while w0.1 lived on`
        ]
      )
    })

    it("excuses an amount that never reached its caller, and a caller that crashed before it could settle", () => {
      expect(i12(history())).toEqual([])
      expect(i12(history(reply, refused(110), { k: "life", t: 300, who: "w0.1", what: "crash", ms: null }))).toEqual([])
    })

    it("excuses a shutdown only while the settlement was still refused after it began", () => {
      const shutdown: Event = { k: "life", t: 200, who: "w0.1", what: "shutdown", ms: null }
      expect(i12(history(reply, refused(110), shutdown, refused(250)))).toEqual([])
      expect(i12(history(reply, refused(110), shutdown))).toHaveLength(1)
    })

    it("counts a settlement refused past the short retries; a slow one that was never refused is not counted", () => {
      const settled = charge(900, "w0.1", 1, 3, true, 3)
      const verdict = check(history(reply, refused(110), settled), plan, "Done", null)
      expect(verdict.coverage.lateSettlement).toBe(1)
      expect(verdict.violations.filter((v) => v.invariant === "I12")).toEqual([])
      expect(check(history(reply, settled), plan, "Done", null).coverage.lateSettlement).toBe(0)
    })
  })

  it("a store outage is a fault on every process: it excuses a takeover", () => {
    const takeover = s({
      state: "running",
      token: 2,
      attempts: 2,
      leaseOwner: "w1.1",
      leaseUntil: 9_000,
      updatedAt: 3_100
    })
    const history: Array<Event> = [
      submit,
      write(10, "claim", "w0.1", null, base, running1),
      call(10, "w0.1", 1),
      { k: "outage", t: 500, ms: 3_000 },
      write(3_100, "claim", "w1.1", null, running1, takeover, { takeover: true }),
      call(3_100, "w1.1", 2),
      ...finals(takeover, 0)
    ]
    expect(check(history, plan, "Done", null).totals.duplicateGenerations).toEqual({ excused: 1, unexcused: 0 })
  })

  it("counts a fenced write that reached the record only after the job was claimed under a later token", () => {
    const takeover = s({
      state: "running",
      token: 2,
      attempts: 2,
      leaseOwner: "w1.1",
      leaseUntil: 9_000,
      updatedAt: 3_100
    })
    const stale = {
      ...(write(3_200, "settle", "w0.1", 1, takeover, takeover, { outcome: "Complete" }) as Extract<
        Event,
        { k: "write" }
      >),
      start: 1_000,
      ok: false,
      res: "LeaseLost"
    }
    const verdict = check(
      [
        submit,
        write(10, "claim", "w0.1", null, base, running1),
        write(3_100, "claim", "w1.1", null, running1, takeover),
        stale
      ],
      plan,
      "Done",
      null
    )
    expect(verdict.coverage.writeOutlivedLease).toBe(1)
    expect(verdict.coverage.fencedWriteRejected).toBe(1)
  })

  it("I9: acking while the acker's own attempt is still running", () => {
    const early: Event = {
      k: "msg",
      t: 11,
      op: "ack",
      who: "w0.1",
      jobId: job,
      receipt: "r1",
      count: 1,
      state: "running",
      owner: "w0.1"
    }
    const verdict = check([...happy.slice(0, 2), early, ...happy.slice(2)], plan, "Done", null)
    expect(verdict.violations.map((v) => v.invariant)).toContain("I9")
  })

  it("I5 and liveness: an acknowledged job not terminal after heal, and a deadlocked run", () => {
    const verdict = check(
      [submit, write(10, "claim", "w0.1", null, base, running1), ...finals(running1, 0)],
      plan,
      "Deadlock",
      null
    )
    const invariants = verdict.violations.map((v) => v.invariant)
    expect(invariants).toContain("I5")
    expect(invariants).toContain("liveness")
    expect(verdict.totals.lost).toBe(1)
  })

  it("idempotent submit: the same key returning two jobs is a violation", () => {
    const second: Event = { ...submit, t: 5, jobId: "j2", created: true }
    const verdict = check([submit, second], plan, "Done", null)
    expect(verdict.violations.map((v) => v.invariant)).toContain("submit")
  })

  it("coverage counts fenced rejections and budget exhaustion", () => {
    const rejected: Event = {
      ...(write(130, "heartbeat", "w0.1", 1, done, done) as Extract<Event, { k: "write" }>),
      ok: false,
      res: "LeaseLost"
    }
    const budget = write(
      140,
      "claim",
      "w1.1",
      null,
      s({ budgetCents: 1, costCents: 2 }),
      s({ state: "abandoned", abandonReason: "budget", budgetCents: 1, costCents: 2, updatedAt: 140 }),
      { res: "Settled" }
    )
    const verdict = check([...happy, rejected, budget], plan, "Done", null)
    expect(verdict.coverage.fencedWriteRejected).toBe(1)
    expect(verdict.coverage.budgetExhausted).toBe(1)
  })
})
