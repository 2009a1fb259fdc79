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
    outcome: null,
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

  it("mixes every field of every event kind: changing any one field, nested or not, changes the hash", () => {
    // Arrange: one event of each kind, every nullable field holding a value.
    const write = history()[1]! as Extract<Event, { k: "write" }>
    const samples: Array<[Event, nullable: ReadonlyArray<string>]> = [
      [
        { k: "submit", t: 1, key: "job-1", hash: "job-1:{}", ok: true, jobId: "j", created: true, error: "E" },
        ["jobId", "created", "error"]
      ],
      [
        { ...write, token: 1, outcome: "Complete", callId: "c", amount: 2, settled: true, resultToken: 1 },
        ["token", "outcome", "before", "after", "callId", "amount", "settled", "resultToken"]
      ],
      [
        {
          k: "call",
          t: 1,
          asked: 1,
          end: 2,
          who: "w0.1",
          jobId: "j",
          token: 1,
          callId: "c",
          cents: 2,
          outcome: "ok",
          spentAtStart: 0,
          budget: 5,
          attemptsAtStart: 1,
          maxAttempts: 3
        },
        ["budget"]
      ],
      [
        { k: "msg", t: 1, op: "ack", who: "w0.1", jobId: "j", receipt: "r", count: 1, state: "running", owner: "o" },
        ["receipt", "count", "state", "owner"]
      ],
      [{ k: "reply", t: 1, who: "w0.1", jobId: "j", callId: "c", cents: 3 }, []],
      [{ k: "outage", t: 1, ms: 700 }, []],
      [{ k: "fault", t: 1, id: "F5", who: "w0.1", point: "store.claim" }, []],
      [{ k: "life", t: 1, who: "w0.1", what: "pause", ms: 5 }, ["ms"]],
      [{ k: "op", t: 1, what: "cancel", jobId: "j", ok: true, before: "running" }, ["before"]],
      [{ k: "through", t: 1, resource: "r", callId: "c" }, []],
      [{ k: "phase", t: 1, name: "heal" }, []],
      [{ k: "final", t: 1, jobId: "j", snap: { ...snap, budgetCents: 4, abandonReason: "budget" }, ledger: 2 }, []]
    ]
    const nullableInSnap = ["leaseOwner", "leaseUntil", "budgetCents", "abandonReason"]
    /** Every variant of `value` with exactly one leaf changed: a number moved, a string, a flag flipped, a null. */
    const variants = (
      value: Record<string, unknown>,
      nullable: ReadonlyArray<string>
    ): Array<Record<string, unknown>> =>
      Object.entries(value).flatMap(([key, leaf]) => {
        const changed: Array<unknown> =
          typeof leaf === "number"
            ? [leaf + 1, -leaf - 0.5]
            : typeof leaf === "string"
              ? [`${leaf}x`]
              : typeof leaf === "boolean"
                ? [!leaf]
                : leaf !== null && typeof leaf === "object"
                  ? variants(leaf as Record<string, unknown>, nullableInSnap)
                  : []
        const nulled = nullable.includes(key) && leaf !== null ? [null] : []
        return [...changed, ...nulled].map((v) => ({ ...value, [key]: v }))
      })
    for (const [event, nullable] of samples) {
      const base = hashEvents([event])
      // Act
      const hashes = variants(event as unknown as Record<string, unknown>, nullable).map((v) =>
        hashEvents([v as unknown as Event])
      )
      // Assert: each variant differs from the event and from every other variant.
      expect(hashes.length).toBeGreaterThan(2)
      for (const hash of hashes) expect(hash).not.toBe(base)
      expect(new Set(hashes).size).toBe(hashes.length)
    }
  })

  it("hashAll folds run hashes in order", () => {
    expect(hashAll(["a", "b"])).toMatch(/^[0-9a-f]{16}$/)
    expect(hashAll(["a", "b"])).not.toBe(hashAll(["b", "a"]))
  })
})
