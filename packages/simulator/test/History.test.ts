import { describe, expect, it } from "vitest"
import { type Event, hashAll, hashEvents, type Snap } from "../src/History.js"

const snap: Snap = {
  state: "running",
  token: 1,
  attempts: 1,
  attemptsBase: 0,
  maxAttempts: 3,
  leaseOwner: "w0.1/i_ab.1",
  leaseUntil: 1_767_225_604_000,
  runAfter: 1_767_225_600_000,
  updatedAt: 1_767_225_600_001,
  costCents: 0,
  budgetCents: null,
  abandonReason: null
}

const history = (): Array<Event> => [
  { k: "phase", t: 10, name: "heal" },
  {
    k: "write",
    t: 20,
    start: 19,
    op: "claim",
    who: "w0.1",
    jobId: "019b76da-b098-7695-9262-309b5765a9f1",
    token: null,
    ok: true,
    res: "Claimed",
    takeover: false,
    before: { ...snap, state: "queued", token: 0, leaseOwner: null, leaseUntil: null },
    after: snap,
    callId: null,
    amount: null,
    settled: null,
    resultToken: null
  },
  { k: "final", t: 30, jobId: "019b76da-b098-7695-9262-309b5765a9f1", snap, ledger: 2.5 }
]

describe("hashEvents", () => {
  it("is 16 hex characters and the same for equal histories", () => {
    const hash = hashEvents(history())
    expect(hash).toMatch(/^[0-9a-f]{16}$/)
    expect(hashEvents(history())).toBe(hash)
  })

  it("changes with any field, nested or not, and with the order of events", () => {
    const base = hashEvents(history())
    const variants: Array<(events: Array<Event>) => Array<Event>> = [
      (e) => e.slice(1),
      (e) => [e[1]!, e[0]!, e[2]!],
      (e) => [e[0]!, { ...e[1]!, t: 21 } as Event, e[2]!],
      (e) => [e[0]!, e[1]!, { ...e[2]!, ledger: 2.5000001 } as Event],
      (e) => [e[0]!, e[1]!, { ...e[2]!, snap: { ...snap, budgetCents: 0 } } as Event],
      (e) => [e[0]!, e[1]!, { ...e[2]!, snap: { ...snap, leaseOwner: "w0.1/i_ab.2" } } as Event],
      (e) => [{ k: "phase", t: 10, name: "final" }, e[1]!, e[2]!]
    ]
    const hashes = variants.map((variant) => hashEvents(variant(history())))
    for (const hash of hashes) expect(hash).not.toBe(base)
    expect(new Set(hashes).size).toBe(hashes.length)
  })

  it("tells values of different types apart (a number from its string, null from false)", () => {
    const as = (value: unknown) => hashEvents([{ k: "phase", t: value, name: "heal" } as unknown as Event])
    expect(as(1)).not.toBe(as("1"))
    expect(as(null)).not.toBe(as(false))
    expect(as(0)).not.toBe(as(-0))
  })

  it("hashAll folds run hashes in order", () => {
    expect(hashAll(["a", "b"])).toMatch(/^[0-9a-f]{16}$/)
    expect(hashAll(["a", "b"])).not.toBe(hashAll(["b", "a"]))
  })
})
