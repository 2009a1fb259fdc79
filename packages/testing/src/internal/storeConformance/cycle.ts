/**
 * Store conformance, `cycle`: the optional verb that applies a worker's settlements, heartbeats, charges and next
 * claim in one atomic write at one store time. Its answers and what the store holds afterwards must equal those of
 * `settle`, `heartbeat`, `charge` and `claimNext` called one after another at that time; every part uses the
 * reply's `now`; a later part sees an earlier one's write; a part its verb refuses as a whole fails the cycle and
 * writes nothing. A backend declares `cycle` exactly when its Store has the verb, and that is checked too.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import type { Job, JobId } from "@slowcall/core/Job"
import type { CycleOptions, CycleReply, HeartbeatItem, SettleItem, Store } from "@slowcall/core/Store"
import { Effect } from "effect"
import { type Area, expectTag, type Fixture, LEASE, outcome } from "./fixture.js"

/** The backend's `cycle`: a test of this area runs only where the backend declared it. */
const cycleOf = (store: Store["Type"]): NonNullable<Store["Type"]["cycle"]> => {
  const cycle = store.cycle
  if (cycle === undefined) throw new Error("the backend declared cycle, but its Store has no cycle")
  return cycle
}

/** The jobs of one twin: four of the queue's jobs in one arrangement, so two twins can be compared. */
interface Twin {
  readonly queue: string
  /** Running; the cycle hands it back, then claims it again. */
  readonly released: Job
  /** Running; the cycle renews its lease and charges it. */
  readonly renewed: Job
  /** Running; the cycle completes it, then heartbeats (too late) and charges it (the money was spent). */
  readonly completed: Job
  /** Queued and due: the claim part takes it. */
  readonly waiting: Job
}

/** Four jobs on `queue` with the same inputs, submitted and claimed at the clock's time, in the same order in every twin. */
const arrange = (f: Fixture, queue: string) =>
  Effect.gen(function* () {
    const [released, renewed, completed] = yield* Effect.forEach(["released", "renewed", "completed"], (role) =>
      Effect.flatMap(f.submit({ queue, input: { role } }), (job) => f.claimed(job.id, "worker-a"))
    )
    const waiting = yield* f.submit({ queue, input: { role: "waiting" } })
    return { queue, released: released!, renewed: renewed!, completed: completed!, waiting } satisfies Twin
  })

/** The parts of the cycle both twins are given, over one twin's jobs. */
const partsOf = (twin: Twin): Omit<CycleOptions, "now"> => {
  const settle: ReadonlyArray<SettleItem> = [
    { jobId: twin.released.id, token: twin.released.leaseToken, outcome: outcome.release },
    { jobId: twin.completed.id, token: twin.completed.leaseToken, outcome: outcome.complete("done") }
  ]
  const heartbeat: ReadonlyArray<HeartbeatItem> = [
    { jobId: twin.renewed.id, token: twin.renewed.leaseToken, leaseMs: 2 * LEASE, progress: 0.5 },
    { jobId: twin.completed.id, token: twin.completed.leaseToken, leaseMs: 2 * LEASE },
    { jobId: twin.released.id, token: twin.released.leaseToken, leaseMs: 2 * LEASE }
  ]
  return {
    settle,
    heartbeat,
    charge: [
      { jobId: twin.renewed.id, callId: "call-1", token: twin.renewed.leaseToken, amountCents: 3, settled: false },
      { jobId: twin.completed.id, callId: "call-1", token: twin.completed.leaseToken, amountCents: 2, settled: true }
    ],
    claimNext: { queue: twin.queue, max: 3, owner: "worker-b", leaseMs: LEASE }
  }
}

/** A twin's answers and records with its own names replaced by its role: what two twins must agree on. */
const neutral = (twin: Twin, value: unknown): unknown => {
  const names: ReadonlyArray<readonly [string, string]> = [
    [twin.queue, "<queue>"],
    [twin.released.id, "<released>"],
    [twin.renewed.id, "<renewed>"],
    [twin.completed.id, "<completed>"],
    [twin.waiting.id, "<waiting>"]
  ]
  let text = JSON.stringify(value)
  for (const [name, role] of names) text = text.split(JSON.stringify(name).slice(1, -1)).join(role)
  return JSON.parse(text)
}

/** Everything the store holds of a twin's jobs: records, attempt rows and ledger rows, in role order. */
const holdings = (f: Fixture, twin: Twin) =>
  Effect.forEach([twin.released, twin.renewed, twin.completed, twin.waiting], (job) =>
    Effect.all({ job: f.get(job.id), attempts: f.attempts(job.id), charges: f.charges(job.id) })
  )

const compositionTests = ({ it, fixture }: Area): void => {
  it.effect("a cycle answers and writes what settle, heartbeat, charge and claimNext do one after another", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const cycle = cycleOf(f.store)
      const viaCycle = yield* arrange(f, `${f.queue}-cycle`)
      const viaVerbs = yield* arrange(f, `${f.queue}-verbs`)
      yield* f.advance(1_000)
      const now = yield* f.now

      const reply = yield* cycle({ ...partsOf(viaCycle), now })
      const parts = partsOf(viaVerbs)
      const settled = yield* f.store.settle({ items: parts.settle!, now })
      const renewed = yield* f.store.heartbeat({ items: parts.heartbeat!, now })
      const charged = yield* f.store.charge({ items: parts.charge!, now })
      const claimed = yield* f.store.claimNext({ ...parts.claimNext!, now })

      const sequential: CycleReply = {
        now,
        settle: settled.results,
        heartbeat: renewed.results,
        charge: charged.results,
        claimNext: claimed.results
      }
      expect(neutral(viaCycle, reply)).toEqual(neutral(viaVerbs, sequential))
      expect(neutral(viaCycle, yield* holdings(f, viaCycle))).toEqual(neutral(viaVerbs, yield* holdings(f, viaVerbs)))
    })
  )

  it.effect("each part sees the parts before it: settle, then heartbeat, then charge, then claim", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const twin = yield* arrange(f, f.queue)
      yield* f.advance(1_000)
      const now = yield* f.now

      const reply = yield* cycleOf(f.store)({ ...partsOf(twin), now })

      expect(reply.settle.map((result) => expectTag(result, "Settled").job.state)).toEqual(["queued", "succeeded"])
      expect(reply.heartbeat[0]).toMatchObject({ _tag: "Renewed", leaseUntil: now + 2 * LEASE, costCents: 0 })
      expect(reply.heartbeat[1]).toEqual({
        _tag: "LeaseLost",
        jobId: twin.completed.id,
        token: twin.completed.leaseToken,
        currentToken: twin.completed.leaseToken,
        state: "succeeded"
      })
      // The job the settle part handed back is queued for the heartbeat part, and running again after the claim.
      expect(reply.heartbeat[2]).toEqual({
        _tag: "LeaseLost",
        jobId: twin.released.id,
        token: twin.released.leaseToken,
        currentToken: twin.released.leaseToken,
        state: "queued"
      })
      expect(reply.charge).toEqual([
        { _tag: "Charged", costCents: 3 },
        { _tag: "Charged", costCents: 2 }
      ])
      const taken = reply.claimNext.map((result) => expectTag(result, "Claimed").job)
      expect(taken.map((job) => job.id).sort()).toEqual([twin.released.id, twin.waiting.id].sort())
      expect(taken.find((job) => job.id === twin.released.id)).toMatchObject({
        state: "running",
        leaseOwner: "worker-b",
        leaseToken: twin.released.leaseToken + 1
      })
    })
  )

  it.effect("every part uses the reply's store time, the store's own when no time is given", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const twin = yield* arrange(f, f.queue)
      yield* f.advance(1_000)

      const reply = yield* cycleOf(f.store)(partsOf(twin))

      const at = reply.now
      expect(expectTag(reply.settle[1]!, "Settled").job).toMatchObject({ state: "succeeded", updatedAt: at })
      expect(reply.heartbeat[0]).toMatchObject({ _tag: "Renewed", leaseUntil: at + 2 * LEASE })
      expect(reply.claimNext).toHaveLength(2)
      for (const result of reply.claimNext) {
        expect(expectTag(result, "Claimed").job).toMatchObject({ leaseUntil: at + LEASE })
      }
      const charges = yield* f.charges(twin.renewed.id)
      expect(charges.map((charge) => charge.createdAt)).toEqual([at])
      const attempts = yield* f.attempts(twin.waiting.id)
      expect(attempts.map((attempt) => attempt.startedAt)).toEqual([at])
    })
  )
}

const edgeTests = ({ it, fixture }: Area): void => {
  it.effect("an empty cycle writes nothing and answers with its store time", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const job = yield* f.submit()
      const now = yield* f.now

      const reply = yield* cycleOf(f.store)({ now })
      const noClaim = yield* cycleOf(f.store)({
        claimNext: { queue: `${f.queue}-empty`, max: 2, owner: "w", leaseMs: 1 },
        now
      })

      expect(reply).toEqual({ now, settle: [], heartbeat: [], charge: [], claimNext: [] })
      expect(noClaim).toEqual({ now, settle: [], heartbeat: [], charge: [], claimNext: [] })
      expect(yield* f.get(job.id)).toEqual(job)
    })
  )

  it.effect("a part its verb refuses as a whole fails the cycle, and no part is written", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const twin = yield* arrange(f, f.queue)
      const before = yield* holdings(f, twin)
      const parts = partsOf(twin)
      const now = yield* f.now

      const badCharge = yield* Effect.flip(
        cycleOf(f.store)({
          ...parts,
          charge: [{ jobId: twin.renewed.id, callId: "call-x", token: 1, amountCents: -1, settled: true }],
          now
        })
      )
      const badFair = yield* Effect.flip(
        cycleOf(f.store)({ ...parts, claimNext: { ...parts.claimNext!, fair: { halfLifeMs: 1 } }, now })
      )

      for (const error of [badCharge, badFair]) {
        expect(error).toMatchObject({ _tag: "StoreError", reason: "Constraint" })
      }
      expect(yield* holdings(f, twin)).toEqual(before)
    })
  )

  it.effect("a repeated cycle finds its own writes: settlements LeaseLost, charges counted once", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const twin = yield* arrange(f, f.queue)
      const parts = partsOf(twin)
      const now = yield* f.now

      yield* cycleOf(f.store)({ ...parts, claimNext: undefined, now })
      const again = yield* cycleOf(f.store)({ ...parts, claimNext: undefined, now: now + 1 })

      expect(again.settle.map((result) => result._tag)).toEqual(["LeaseLost", "LeaseLost"])
      expect(again.charge).toEqual([
        { _tag: "Charged", costCents: 3 },
        { _tag: "Charged", costCents: 2 }
      ])
      const ids: ReadonlyArray<JobId> = [twin.renewed.id, twin.completed.id]
      for (const jobId of ids) expect(yield* f.charges(jobId)).toHaveLength(1)
    })
  )
}

/** Registers the `cycle` area: the declaration check always, the rest where the backend declares `cycle`. */
export const cycleTests = (area: Area): void => {
  describe("cycle", () => {
    area.it.effect("the backend's Store has cycle exactly when it declares it", () =>
      Effect.gen(function* () {
        const { store } = yield* area.fixture

        expect(store.cycle !== undefined).toBe(area.capabilities.cycle === true)
      })
    )
    if (area.capabilities.cycle !== true) {
      area.notRun("cycle", "the backend does not declare cycle")
      return
    }
    compositionTests(area)
    edgeTests(area)
  })
}
