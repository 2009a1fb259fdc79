import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import { check } from "../src/Checkers.js"
import type { Event, LimitEvent, Snap } from "../src/History.js"
import type { LimitsPlan } from "../src/LimitsPlan.js"
import * as Plan from "../src/Plan.js"

const R = "sim:model-0:key-a"
const limits: LimitsPlan = {
  resources: [
    {
      maxConcurrent: 1,
      requestsPerMinute: 600,
      inputTokensPerMinute: 60_000,
      outputTokensPerMinute: 60_000,
      burstSeconds: 2
    }
  ],
  declared: "match",
  tenants: [1],
  fair: false,
  inputTokens: 100,
  maxOutput: 100,
  spendCap: null
}
const plan: Plan.Plan = {
  ...fc.sample(Plan.arbitrary({ jobs: 1, workers: 2, faults: [] }), { seed: 1, numRuns: 1 })[0]!,
  faults: [],
  targeted: { _tag: "None" },
  limits
}

const limit = (fields: Partial<LimitEvent> & Pick<LimitEvent, "t" | "op" | "res">): LimitEvent => ({
  k: "limit",
  start: fields.t,
  who: "w0.1",
  resource: R,
  callId: null,
  jobId: null,
  token: null,
  leaseMs: null,
  reached: null,
  kind: null,
  ok: true,
  until: null,
  permits: null,
  delivered: true,
  ...fields
})
const acquire = (t: number, job: string, res: string, permits: number): LimitEvent =>
  limit({ t, op: "Acquire", res, callId: `${job}:1:1`, jobId: job, token: 1, leaseMs: 5_000, permits })
const release = (t: number, job: string, permits: number): LimitEvent =>
  limit({ t, op: "Release", res: "Released", callId: `${job}:1:1`, jobId: job, token: 1, reached: true, permits })
const call = (t: number, job: string): Event => ({
  k: "call",
  t,
  asked: t,
  end: t + 100,
  who: "w0.1",
  jobId: job,
  token: 1,
  callId: `${job}:1:1`,
  cents: 0,
  outcome: "ok",
  spentAtStart: 0,
  budget: null,
  attemptsAtStart: 1,
  maxAttempts: 3
})
const snap = (state: Snap["state"], attempts: number, attemptsBase: number): Snap => ({
  state,
  token: 1,
  attempts,
  attemptsBase,
  maxAttempts: 3,
  leaseOwner: null,
  leaseUntil: null,
  runAfter: 0,
  updatedAt: 0,
  costCents: 0,
  budgetCents: null,
  abandonReason: null
})
const throttle = (t: number, job: string, after: Snap): Event => ({
  k: "write",
  t,
  start: t,
  op: "settle",
  who: "w0.1",
  jobId: job,
  token: 1,
  ok: true,
  res: "queued",
  outcome: "Throttle",
  takeover: false,
  before: snap("running", 1, 0),
  after,
  callId: null,
  amount: null,
  settled: null,
  resultToken: null
})
const refund = (t: number, job: string, amount: number): Event => ({
  k: "write",
  t,
  start: t,
  op: "charge",
  who: "w0.1",
  jobId: job,
  token: 1,
  ok: true,
  res: "ok",
  outcome: null,
  takeover: false,
  before: null,
  after: null,
  callId: `${job}:1:1`,
  amount,
  settled: true,
  resultToken: null
})

const invariants = (events: ReadonlyArray<Event>): Array<string> =>
  check(events, plan, "Done", null)
    .violations.map((v) => v.invariant)
    .filter((id) => ["I13", "I14", "I15", "I16"].includes(id))

describe("fleet limits checkers", () => {
  it("accept a permit granted, used and released, and a job that waited for it", () => {
    expect(
      invariants([
        acquire(1_000, "a", "Granted", 1),
        call(1_000, "a"),
        acquire(1_010, "b", "Wait", 1),
        refund(1_010, "b", 0),
        throttle(1_010, "b", snap("queued", 1, 1)),
        release(1_100, "a", 0)
      ])
    ).toEqual([])
  })

  it("I13: more live permits than the cap, or a count the Limiter gets wrong", () => {
    expect(invariants([acquire(1_000, "a", "Granted", 1), acquire(1_010, "b", "Granted", 2)])).toContain("I13")
    expect(invariants([acquire(1_000, "a", "Granted", 0)])).toContain("I13")
    // A second Release of a permit already released (a counter released twice).
    expect(invariants([acquire(1_000, "a", "Granted", 1), release(1_100, "a", 0), release(1_100, "a", 0)])).toContain(
      "I13"
    )
  })

  it("I14: a call without its permit, or a grant while the resource is paused", () => {
    expect(invariants([acquire(1_000, "a", "Paused", 0), call(1_000, "a")])).toContain("I14")
    const pause = limit({ t: 900, op: "Pause", res: "Paused", kind: "rate_limited", until: 2_000, permits: 0 })
    expect(invariants([pause, acquire(1_000, "a", "Granted", 1), call(1_000, "a")])).toContain("I14")
    const resume = limit({ t: 950, op: "Resume", res: "Resumed", permits: 0 })
    expect(invariants([pause, resume, acquire(1_000, "a", "Granted", 1), call(1_000, "a")])).toEqual([])
  })

  it("I15: a wait that keeps its money or an attempt", () => {
    expect(invariants([acquire(1_010, "b", "Wait", 0), refund(1_010, "b", 2)])).toContain("I15")
    expect(
      invariants([acquire(1_010, "b", "Wait", 0), refund(1_010, "b", 0), throttle(1_010, "b", snap("queued", 1, 0))])
    ).toContain("I15")
  })

  it("I16: with the provider's limits declared, a refusal for a bucket, or for concurrency with no orphaned call", () => {
    const refusal = (reason: "requests" | "concurrency"): Event => ({
      k: "refusal",
      t: 1_050,
      resource: R,
      callId: "b:1:1",
      reason
    })
    expect(invariants([acquire(1_000, "a", "Granted", 1), call(1_000, "a"), refusal("requests")])).toContain("I16")
    expect(invariants([acquire(1_000, "a", "Granted", 1), call(1_000, "a"), refusal("concurrency")])).toContain("I16")
    // The call in flight holds a permit that lapsed (granted for 10 ms): the refusal is excused.
    const short = limit({
      t: 1_000,
      op: "Acquire",
      res: "Granted",
      callId: "a:1:1",
      jobId: "a",
      token: 1,
      leaseMs: 10,
      permits: 1
    })
    expect(invariants([short, call(1_000, "a"), refusal("concurrency")])).toEqual([])
  })

  it("I16: a refusal for a bucket excused only while the Limiter's buckets and the provider's may have parted", () => {
    // The plan's buckets fill in 2 s (burstSeconds). Job a's permit lapses at once, so b and c may be granted beside it.
    const through = (t: number, job: string): Event => ({ k: "through", t, resource: R, callId: `${job}:1:1` })
    const refusedAt = (t: number, job: string): ReadonlyArray<Event> => [
      acquire(t, job, "Granted", 1),
      { k: "refusal", t, resource: R, callId: `${job}:1:1`, reason: "outputTokens" },
      { ...(call(t, job) as Extract<Event, { k: "call" }>), end: t, outcome: "limited" }
    ]
    const a = [
      limit({
        t: 1_000,
        op: "Acquire",
        res: "Granted",
        callId: "a:1:1",
        jobId: "a",
        token: 1,
        leaseMs: 10,
        permits: 1
      }),
      call(1_000, "a"),
      through(1_100, "a")
    ]
    const b = [acquire(1_500, "b", "Granted", 1), call(1_500, "b"), through(1_600, "b"), release(1_600, "b", 0)]
    // Job a's process is held past its call: its Release gives the unused output back at 2 s, after b's grant,
    // while the provider gave it back at 1.1 s (and may have lost it to its cap).
    expect(invariants([...a, ...b, release(2_000, "a", 0), ...refusedAt(2_000, "c")])).toEqual([])
    // In step: a released as soon as the provider was through with it, and nothing else moved the buckets.
    expect(invariants([...a, release(1_100, "a", 0), ...b, ...refusedAt(2_000, "c")])).toContain("I16")
    // A bucket's fill time without a grant after the late Release: both buckets are full again.
    expect(invariants([...a, ...b, release(2_000, "a", 0), ...refusedAt(4_000, "c")])).toContain("I16")
    // A call admitted later than it was granted (its process held between the two) parts them too.
    const late = [acquire(1_000, "b", "Granted", 1), call(1_500, "b"), through(1_600, "b"), release(1_600, "b", 0)]
    expect(invariants([...late, ...refusedAt(1_700, "c")])).toEqual([])
    // And so does the refused call's own: granted at 1 s, it reached the provider at 1.5 s.
    const own = [
      acquire(1_000, "c", "Granted", 1),
      { k: "refusal", t: 1_500, resource: R, callId: "c:1:1", reason: "outputTokens" } as const,
      { ...(call(1_500, "c") as Extract<Event, { k: "call" }>), end: 1_500, outcome: "limited" as const }
    ]
    expect(invariants(own)).toEqual([])
  })
})
