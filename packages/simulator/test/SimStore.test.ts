import { describe, expect, it } from "@effect/vitest"
import type * as Batch from "@slowcall/core/Batch"
import type { StoreError } from "@slowcall/core/Errors"
import type { JobId } from "@slowcall/core/Job"
import * as Store from "@slowcall/core/Store"
import { Clock, Effect, Either, Fiber } from "effect"
import * as fc from "fast-check"
import { type Event, History } from "../src/History.js"
import { Faults, Incarnation, ofIncarnation } from "../src/internal/world.js"
import * as Plan from "../src/Plan.js"
import { noSkew, VirtualClock } from "../src/SimClock.js"
import * as SimRuntime from "../src/SimRuntime.js"
import * as SimStore from "../src/SimStore.js"

type Write = Extract<Event, { k: "write" }>

const basePlan = fc.sample(Plan.arbitrary({ jobs: 2, workers: 1, faults: ["F5"] }), { seed: 2, numRuns: 1 })[0]!

/** A plan whose fault points fire on every tape entry, with exactly `faults` on. */
const planWith = (faults: ReadonlyArray<Plan.FaultKind>, tape: ReadonlyArray<number>): Plan.Plan => ({
  ...basePlan,
  faults,
  faultRate: 1000,
  tape,
  targeted: { _tag: "None" }
})

const jobIds = ["019b76da-0000-7000-8000-000000000001", "019b76da-0000-7000-8000-000000000002"] as Array<JobId>

const item = (id: JobId, n: number) => ({
  id,
  queue: "q",
  type: "t",
  version: 1,
  requestKey: `k${n}`,
  inputHash: `h${n}`,
  input: { n },
  maxAttempts: 3
})

/**
 * Runs `body` against a proxy of a fresh memory store (on the virtual clock) for one worker process, and returns what
 * it returned with the writes the proxy recorded.
 */
const withProxy = <A>(
  plan: Plan.Plan,
  body: (store: Store.Store["Type"], batches: Batch.BatchStore["Type"]) => Effect.Effect<A, StoreError>
): { readonly value: A; readonly writes: ReadonlyArray<Write>; readonly events: ReadonlyArray<Event> } => {
  const clock = new VirtualClock(1_000_000)
  const history = new History()
  const program = Effect.gen(function* () {
    // The world's store, with the window a proxy opens (F19) taken by its next write.
    let window = 0
    const {
      batches,
      peek,
      peekCharges,
      store: memory
    } = yield* Store.makeMemoryWith({
      interleave: () => {
        const ms = window
        window = 0
        return ms === 0 ? undefined : clock.sleepMillis(ms)
      }
    })
    const faults = new Faults(plan, history, clock, 4_000)
    const store = SimStore.make(memory, {
      actor: ofIncarnation(new Incarnation(0, 1, clock, noSkew)),
      history,
      faults,
      clock,
      crash: () => undefined,
      peek,
      peekCharges,
      openWindow: (ms) => {
        window = ms
      },
      // The targeted window that outlives a lease needs a world of processes: the run tests cover it.
      openStaleWindow: () => undefined,
      canBeOvertaken: () => false
    })
    return yield* Effect.orDie(body(store, batches))
  })
  const outcome = SimRuntime.run(program, { seed: 1, clock })
  if (outcome._tag !== "Done" || outcome.exit._tag !== "Success") throw new Error(`run ended ${outcome._tag}`)
  const writes = history.events.filter((e): e is Write => e.k === "write")
  return { value: outcome.exit.value, writes, events: history.events }
}

describe("Faults", () => {
  it("lets the infrastructure read the tape from its end, leaving the processes' entries alone", () => {
    // Arrange: only the entry 999 fires.
    const clock = new VirtualClock(0)
    const faults = new Faults({ ...planWith(["F5"], [0, 999]), faultRate: 1 }, new History(), clock, 4_000)
    // Act: process and infrastructure points, interleaved.
    const rolls = [
      faults.roll(["F5"], "w0.1", "store.claim"),
      faults.roll(["F5"], "sweeper", "store.sweep", true),
      faults.roll(["F5"], "w0.1", "store.settle"),
      faults.roll(["F5"], "sweeper", "store.sweep", true),
      faults.roll(["F5"], "w0.1", "store.claim")
    ]
    // Assert: each lane reads every entry once, in its own order; the tape then runs out.
    expect(rolls).toEqual([undefined, "F5", "F5", undefined, undefined])
  })
})

describe("SimStore", () => {
  it("records one write per item with the record before and after, and a settle's outcome", () => {
    // Arrange: no fault is on.
    const plan = planWith([], [])
    // Act: two jobs submitted, claimed and settled in batches, then one settle under a superseded token.
    const { value, writes } = withProxy(plan, (store) =>
      Effect.gen(function* () {
        yield* store.submit({ items: [item(jobIds[0]!, 0), item(jobIds[1]!, 1)] })
        yield* store.claim({ items: jobIds.map((jobId) => ({ jobId, owner: "w0.1/a", leaseMs: 5_000 })) })
        yield* store.settle({
          items: [
            { jobId: jobIds[0]!, token: 1, outcome: { _tag: "Complete", result: { token: 1 } } },
            { jobId: jobIds[1]!, token: 1, outcome: { _tag: "Retry", delayMs: 500, errorClass: "timeout", error: "x" } }
          ]
        })
        return yield* store.settle({ items: [{ jobId: jobIds[1]!, token: 1, outcome: { _tag: "Release" } }] })
      })
    )
    // Assert
    expect(writes.map((w) => [w.op, w.jobId, w.ok, w.res, w.outcome])).toEqual([
      ["submit", jobIds[0], true, "Created", null],
      ["submit", jobIds[1], true, "Created", null],
      ["claim", jobIds[0], true, "Claimed", null],
      ["claim", jobIds[1], true, "Claimed", null],
      ["settle", jobIds[0], true, "succeeded", "Complete"],
      ["settle", jobIds[1], true, "queued", "Retry"],
      ["settle", jobIds[1], false, "LeaseLost", "Release"]
    ])
    expect(value.results[0]?._tag).toBe("LeaseLost")
    const [submitted, , claimed, , completed] = writes
    expect(submitted?.before).toBeNull()
    expect(submitted?.after?.state).toBe("queued")
    expect(claimed?.before?.state).toBe("queued")
    expect(claimed?.after).toMatchObject({ state: "running", token: 1, leaseOwner: "w0.1/a" })
    expect(completed?.resultToken).toBe(1)
    expect(completed?.token).toBe(1)
  })

  it("records a reservation the batch's budget refused as a charge that did not apply", () => {
    const batchId = "019b76da-0000-7000-8000-0000000000b1" as Batch.BatchId
    const { value, writes } = withProxy(planWith([], []), (store, batches) =>
      Effect.gen(function* () {
        yield* batches.open({ spec: { id: batchId, fingerprint: "b1:one", size: 1, budgetCents: 2 } })
        yield* batches.add({ batchId, offset: 0, items: [item(jobIds[0]!, 0)] })
        const reserve = (callId: string) =>
          store.charge({ items: [{ jobId: jobIds[0]!, callId, token: 0, amountCents: 2, settled: false }] })
        return [yield* reserve("c1"), yield* reserve("c2")].map((reply) => reply.results[0]!._tag)
      })
    )
    expect(value).toEqual(["Charged", "BatchBudgetExceeded"])
    expect(writes.map((w) => [w.op, w.callId, w.ok, w.res, w.after?.costCents])).toEqual([
      ["charge", "c1", true, "ok", 2],
      ["charge", "c2", false, "BatchBudgetExceeded", 2]
    ])
  })

  it("sends a batch that names a job twice one item at a time, so each item's record before is its own", () => {
    const { value, writes } = withProxy(planWith([], []), (store) =>
      Effect.gen(function* () {
        yield* store.submit({ items: [item(jobIds[0]!, 0)] })
        return yield* store.claim({
          items: [
            { jobId: jobIds[0]!, owner: "w0.1/a", leaseMs: 5_000 },
            { jobId: jobIds[0]!, owner: "w1.1/b", leaseMs: 5_000 }
          ]
        })
      })
    )
    expect(value.results.map((r) => r._tag)).toEqual(["Claimed", "Busy"])
    const [, first, second] = writes
    expect(first?.before?.state).toBe("queued")
    expect(second?.res).toBe("Busy")
    expect(second?.before).toEqual(first?.after)
  })

  it("F5: refuses the whole call before the store sees it and records every item as refused", () => {
    // Arrange: the submit passes (its tape entry falls below the threshold), the claim hits F5.
    const plan = { ...planWith(["F5"], [0, 999]), faultRate: 1 }
    const { value, writes, events } = withProxy(plan, (store) =>
      Effect.gen(function* () {
        yield* store.submit({ items: [item(jobIds[0]!, 0), item(jobIds[1]!, 1)] })
        return yield* Effect.either(
          store.claim({ items: jobIds.map((jobId) => ({ jobId, owner: "w0.1/a", leaseMs: 5_000 })) })
        )
      })
    )
    expect(Either.isLeft(value) && value.left.reason).toBe("Connection")
    const claims = writes.filter((w) => w.op === "claim")
    expect(claims.map((w) => [w.ok, w.res, w.before?.state, w.after?.state])).toEqual([
      [false, "StoreError", "queued", "queued"],
      [false, "StoreError", "queued", "queued"]
    ])
    expect(events.filter((e) => e.k === "fault").map((e) => e.k === "fault" && e.point)).toEqual(["store.claim"])
  })

  it("F21: a settlement of a worker's charge starts an outage that refuses every call until it ends", () => {
    // Arrange: F21 fires at the one point that may draw it, the charge settlement.
    const plan = planWith(["F21"], [999])
    // Act: reserve, settle (the outage starts), renew during it, then settle again once the longest outage is over.
    const { events, value, writes } = withProxy(plan, (store) =>
      Effect.gen(function* () {
        yield* store.submit({ items: [item(jobIds[0]!, 0)] })
        yield* store.claim({ items: [{ jobId: jobIds[0]!, owner: "w0.1/a", leaseMs: 20_000 }] })
        const charge = (amountCents: number, settled: boolean) =>
          Effect.either(store.charge({ items: [{ jobId: jobIds[0]!, callId: "c1", token: 1, amountCents, settled }] }))
        const reserved = yield* charge(1, false)
        const settling = yield* charge(3, true)
        const during = yield* Effect.either(
          store.heartbeat({ items: [{ jobId: jobIds[0]!, token: 1, leaseMs: 20_000 }] })
        )
        yield* Effect.sleep(8_000)
        const after = yield* charge(3, true)
        return { reserved, settling, during, after }
      })
    )
    // Assert: the reservation went through; the settlement and the heartbeat after it were refused; once the
    // outage was over the settlement landed.
    expect([value.reserved, value.settling, value.during, value.after].map((e) => e._tag === "Right")).toEqual([
      true,
      false,
      false,
      true
    ])
    expect(Either.isLeft(value.settling) && value.settling.left.reason).toBe("Connection")
    const outage = events.find((e) => e.k === "outage")
    expect(outage?.k === "outage" && outage.ms >= 200 && outage.ms <= 8_000).toBe(true)
    expect(events.filter((e) => e.k === "fault").map((e) => e.k === "fault" && [e.id, e.point])).toEqual([
      ["F21", "store.charge"]
    ])
    expect(writes.filter((w) => w.op !== "submit" && w.op !== "claim").map((w) => [w.op, w.ok, w.res])).toEqual([
      ["charge", true, "ok"],
      ["charge", false, "StoreError"],
      ["heartbeat", false, "StoreError"],
      ["charge", true, "ok"]
    ])
  })

  it("F6: applies a prefix of the batch, records what applied, and loses the reply", () => {
    const plan = planWith(["F6"], [0])
    const { value, writes } = withProxy(plan, (store) =>
      Effect.gen(function* () {
        const submitted = yield* Effect.either(store.submit({ items: [item(jobIds[0]!, 0), item(jobIds[1]!, 1)] }))
        return submitted
      })
    )
    expect(Either.isLeft(value) && value.left.reason).toBe("Ambiguous")
    // Whatever prefix applied is exactly what was recorded, each as created.
    expect(writes.length).toBeGreaterThanOrEqual(1)
    expect(writes.map((w) => [w.jobId, w.res])).toEqual(jobIds.slice(0, writes.length).map((id) => [id, "Created"]))
  })

  it("records the jobs a sweep and a store-selected claim wrote, against the record last seen", () => {
    const { writes } = withProxy(planWith([], []), (store) =>
      Effect.gen(function* () {
        const { now } = yield* store.submit({ items: [item(jobIds[0]!, 0), item(jobIds[1]!, 1)] })
        yield* store.claimNext({ queue: "q", max: 1, owner: "w0.1/a", leaseMs: 1_000 })
        return yield* store.sweep({ queue: "q", now: now + 5_000 })
      })
    )
    const [, , claimed, swept] = writes
    expect(claimed).toMatchObject({ op: "claim", jobId: jobIds[0], res: "Claimed" })
    expect(claimed?.before?.state).toBe("queued")
    expect(swept).toMatchObject({ op: "sweep", jobId: jobIds[0], res: "requeued" })
    expect(swept?.before).toEqual(claimed?.after)
    expect(swept?.after?.state).toBe("queued")
  })

  it("F19: opens a window inside the write; a write that lands in it is what the late write is checked against", () => {
    // Arrange: only the third store call (the heartbeat) draws a fault, and it is F19.
    const plan = { ...planWith(["F19"], [0, 0, 999, 0]), faultRate: 1 }
    const { value, writes, events } = withProxy(plan, (store) =>
      Effect.gen(function* () {
        yield* store.submit({ items: [item(jobIds[0]!, 0)] })
        yield* store.claim({ items: [{ jobId: jobIds[0]!, owner: "w0.1/a", leaseMs: 5_000 }] })
        // Act: the heartbeat waits in its window while the holder's own Complete lands.
        const beat = yield* Effect.fork(store.heartbeat({ items: [{ jobId: jobIds[0]!, token: 1, leaseMs: 5_000 }] }))
        yield* Effect.sleep(1)
        yield* store.settle({ items: [{ jobId: jobIds[0]!, token: 1, outcome: { _tag: "Complete", result: {} } }] })
        return yield* beat.await
      })
    )
    // Assert: the heartbeat was applied after the settle, found the job succeeded, and changed nothing.
    expect(value._tag === "Success" && value.value.results[0]?._tag).toBe("LeaseLost")
    expect(writes.map((w) => [w.op, w.ok, w.res])).toEqual([
      ["submit", true, "Created"],
      ["claim", true, "Claimed"],
      ["settle", true, "succeeded"],
      ["heartbeat", false, "LeaseLost"]
    ])
    const [, , settled, beat] = writes
    expect(beat!.before).toEqual(settled!.after)
    expect(beat!.t).toBeGreaterThan(beat!.start)
    // The caller learned the lost lease when the reply reached it.
    expect(events.filter((e) => e.k === "lost")).toEqual([
      { k: "lost", t: beat!.t, who: "w0.1", op: "heartbeat", jobId: jobIds[0], token: 1 }
    ])
  })

  it("F19: a write that reached the store lands and is recorded even when its caller is interrupted", () => {
    const plan = { ...planWith(["F19"], [0, 0, 999]), faultRate: 1 }
    const { writes } = withProxy(plan, (store) =>
      Effect.gen(function* () {
        yield* store.submit({ items: [item(jobIds[0]!, 0)] })
        yield* store.claim({ items: [{ jobId: jobIds[0]!, owner: "w0.1/a", leaseMs: 5_000 }] })
        const beat = yield* Effect.fork(store.heartbeat({ items: [{ jobId: jobIds[0]!, token: 1, leaseMs: 5_000 }] }))
        yield* Effect.sleep(1)
        return yield* Fiber.interrupt(beat)
      })
    )
    expect(writes.map((w) => [w.op, w.ok, w.res])).toEqual([
      ["submit", true, "Created"],
      ["claim", true, "Claimed"],
      ["heartbeat", true, "ok"]
    ])
  })

  it("F20: applies the write at once and hands its successful reply over late", () => {
    const plan = { ...planWith(["F20"], [0, 999]), faultRate: 1 }
    const { value, writes } = withProxy(plan, (store) =>
      Effect.gen(function* () {
        yield* store.submit({ items: [item(jobIds[0]!, 0)] })
        const sent = yield* Clock.currentTimeMillis
        const reply = yield* store.claim({ items: [{ jobId: jobIds[0]!, owner: "w0.1/a", leaseMs: 5_000 }] })
        return { sent, received: yield* Clock.currentTimeMillis, reply }
      })
    )
    const claim = writes[1]!
    expect(value.reply.results[0]?._tag).toBe("Claimed")
    expect([claim.op, claim.ok, claim.start, claim.t]).toEqual(["claim", true, value.sent, value.sent])
    expect(value.received - value.sent).toBeGreaterThanOrEqual(100)
    expect(value.received - value.sent).toBeLessThanOrEqual(3_000)
  })

  it("LateClaimReply: the worker's first claim reply arrives a lease and the plan's extra later, once", () => {
    const plan: Plan.Plan = { ...planWith([], []), targeted: { _tag: "LateClaimReply", worker: 0, extraMs: 250 } }
    const { value } = withProxy(plan, (store) =>
      Effect.gen(function* () {
        yield* store.submit({ items: [item(jobIds[0]!, 0), item(jobIds[1]!, 1)] })
        const times: Array<number> = []
        for (const jobId of jobIds) {
          const sent = yield* Clock.currentTimeMillis
          yield* store.claim({ items: [{ jobId, owner: "w0.1/a", leaseMs: 4_000 }] })
          times.push((yield* Clock.currentTimeMillis) - sent)
        }
        return times
      })
    )
    // The harness's lease is 4 s.
    expect(value).toEqual([4_250, 0])
  })
})

describe("SimStore cycle", () => {
  const owner = "w0.1/a"
  /** Both jobs submitted and claimed under token 1, the store time they were claimed at. */
  const running = (store: Store.Store["Type"]) =>
    Effect.gen(function* () {
      yield* store.submit({ items: [item(jobIds[0]!, 0), item(jobIds[1]!, 1)] })
      const { now } = yield* store.claim({ items: jobIds.map((jobId) => ({ jobId, owner, leaseMs: 5_000 })) })
      return now
    })
  /**
   * One worker tick: job 0 retried at once (so the claim part takes it back) and renewed (too late: `LeaseLost`), job
   * 1 renewed and charged; the claim part takes one job.
   */
  const tick = {
    settle: [
      {
        jobId: jobIds[0]!,
        token: 1,
        outcome: { _tag: "Retry", delayMs: 0, errorClass: "timeout", error: "x" } as const
      }
    ],
    heartbeat: [
      { jobId: jobIds[0]!, token: 1, leaseMs: 5_000 },
      { jobId: jobIds[1]!, token: 1, leaseMs: 8_000 }
    ],
    charge: [{ jobId: jobIds[1]!, callId: "c1", token: 1, amountCents: 2, settled: false }],
    claimNext: { queue: "q", max: 1, owner: "w0.1/b", leaseMs: 5_000 }
  }
  const renewal = (store: Store.Store["Type"]) =>
    Effect.either(store.heartbeat({ items: [{ jobId: jobIds[0]!, token: 1, leaseMs: 5_000 }] }))

  it("records a cycle's items as the four verbs called one after another record theirs", () => {
    // Act: the same tick as one cycle, and as the four verbs at the same store time, each on a fresh store.
    const cycled = withProxy(planWith([], []), (store) =>
      Effect.flatMap(running(store), (now) => store.cycle!({ ...tick, now }))
    )
    const apart = withProxy(planWith([], []), (store) =>
      Effect.gen(function* () {
        const now = yield* running(store)
        yield* store.settle({ items: tick.settle, now })
        yield* store.heartbeat({ items: tick.heartbeat, now })
        yield* store.charge({ items: tick.charge, now })
        return yield* store.claimNext({ ...tick.claimNext, now })
      })
    )
    // Assert: the same writes, each with the same record before and after (those between two parts of the cycle
    // derived from its reply), and the caller learns the same lost lease.
    expect(cycled.writes.map((w) => [w.op, w.jobId, w.ok, w.res])).toEqual([
      ["submit", jobIds[0], true, "Created"],
      ["submit", jobIds[1], true, "Created"],
      ["claim", jobIds[0], true, "Claimed"],
      ["claim", jobIds[1], true, "Claimed"],
      ["settle", jobIds[0], true, "queued"],
      ["heartbeat", jobIds[0], false, "LeaseLost"],
      ["heartbeat", jobIds[1], true, "ok"],
      ["charge", jobIds[1], true, "ok"],
      ["claim", jobIds[0], true, "Claimed"]
    ])
    expect(cycled.writes).toEqual(apart.writes)
    expect(cycled.value.claimNext.map((r) => r.job.leaseOwner)).toEqual(["w0.1/b"])
    const lost = (events: ReadonlyArray<Event>) =>
      events.flatMap((e) => (e.k === "lost" ? [[e.who, e.jobId, e.token]] : []))
    expect(lost(cycled.events)).toEqual([["w0.1", jobIds[0], 1]])
    expect(lost(cycled.events)).toEqual(lost(apart.events))
  })

  it("F6 at store.cycle: the whole cycle applies and is recorded, and the caller sees an ambiguous failure", () => {
    // Arrange: the submit and the claim draw no fault; the cycle draws F6; nothing after it does.
    const plan = { ...planWith(["F6"], [0, 0, 999]), faultRate: 1 }
    // Act
    const { value, writes, events } = withProxy(plan, (store) =>
      Effect.gen(function* () {
        const now = yield* running(store)
        const cycle = yield* Effect.either(store.cycle!({ ...tick, now }))
        return { cycle, after: yield* renewal(store) }
      })
    )
    // Assert: the caller saw a failure, the store took the job back from token 1 all the same.
    expect(Either.isLeft(value.cycle) && value.cycle.left.reason).toBe("Ambiguous")
    expect(Either.isRight(value.after) && value.after.right.results[0]?._tag).toBe("LeaseLost")
    expect(events.filter((e) => e.k === "fault").map((e) => e.k === "fault" && [e.id, e.point])).toEqual([
      ["F6", "store.cycle"]
    ])
    expect(writes.slice(4, 9).map((w) => [w.op, w.jobId, w.ok, w.res])).toEqual([
      ["settle", jobIds[0], true, "queued"],
      ["heartbeat", jobIds[0], false, "LeaseLost"],
      ["heartbeat", jobIds[1], true, "ok"],
      ["charge", jobIds[1], true, "ok"],
      ["claim", jobIds[0], true, "Claimed"]
    ])
    // The reply never reached the caller, so it learned that its lease on job 0 was gone only from its own renewal.
    expect(events.flatMap((e) => (e.k === "lost" ? [e.op] : []))).toEqual(["heartbeat"])
  })

  it("F5 at store.cycle: no part applies, and every item is recorded as refused", () => {
    const plan = { ...planWith(["F5"], [0, 0, 999]), faultRate: 1 }
    const { value, writes, events } = withProxy(plan, (store) =>
      Effect.gen(function* () {
        const now = yield* running(store)
        const cycle = yield* Effect.either(store.cycle!({ ...tick, now }))
        return { cycle, after: yield* renewal(store) }
      })
    )
    expect(Either.isLeft(value.cycle) && value.cycle.left.reason).toBe("Connection")
    // Job 0 is still running under token 1: the settle part did not apply, nor did the claim part.
    expect(Either.isRight(value.after) && value.after.right.results[0]?._tag).toBe("Renewed")
    expect(events.filter((e) => e.k === "fault").map((e) => e.k === "fault" && [e.id, e.point])).toEqual([
      ["F5", "store.cycle"]
    ])
    expect(writes.slice(4).map((w) => [w.op, w.jobId, w.ok, w.res, w.before?.state, w.after?.state])).toEqual([
      ["settle", jobIds[0], false, "StoreError", "running", "running"],
      ["heartbeat", jobIds[0], false, "StoreError", "running", "running"],
      ["heartbeat", jobIds[1], false, "StoreError", "running", "running"],
      ["charge", jobIds[1], false, "StoreError", "running", "running"],
      ["heartbeat", jobIds[0], true, "ok", "running", "running"]
    ])
  })

  it("is offered only where the world's store has it", () => {
    const { value } = withProxy(planWith([], []), () => Effect.succeed(undefined))
    expect(value).toBeUndefined()
    const clock = new VirtualClock(0)
    const history = new History()
    const env = {
      actor: ofIncarnation(new Incarnation(0, 1, clock, noSkew)),
      history,
      faults: new Faults(planWith([], []), history, clock, 4_000),
      clock,
      crash: () => undefined,
      peek: () => undefined,
      peekCharges: () => [],
      openWindow: () => undefined,
      openStaleWindow: () => undefined,
      canBeOvertaken: () => false
    }
    const inner = Effect.runSync(Store.makeMemory).store
    expect(SimStore.make({ ...inner, cycle: undefined }, env).cycle).toBeUndefined()
    expect(SimStore.make(inner, env).cycle).toBeDefined()
  })
})
