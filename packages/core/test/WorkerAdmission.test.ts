import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Schema } from "effect"
import * as Handler from "../src/Handler.js"
import * as WorkerAdmission from "../src/internal/worker/admission.js"
import { type Known, openingOf } from "../src/internal/worker/forecast.js"
import type { JobId } from "../src/Job.js"
import * as Limiter from "../src/Limiter.js"
import type { ClaimResult, Store } from "../src/Store.js"
import type { Transport } from "../src/Transport.js"
import { harness } from "./fixtures.js"

const RESOURCE = "openai:gpt-4.1:key-a"
const Input = Schema.Struct({ tenant: Schema.String, i: Schema.Number })

/** A claim the worker's store saw: which job, at which TestClock ms. */
interface Claimed {
  readonly job: string
  readonly at: number
}

/** The Store view a worker gets: every job its `claim` and `claimNext` calls land on is recorded with the time. */
const recordingClaims =
  (claims: Array<Claimed>) =>
  (store: Store["Type"]): Store["Type"] => {
    const record = <A extends { readonly results: ReadonlyArray<ClaimResult> }>(reply: A) =>
      Effect.map(Clock.currentTimeMillis, (at) => {
        for (const result of reply.results) {
          if (result._tag === "Claimed") claims.push({ job: result.job.id, at })
        }
        return reply
      })
    return {
      ...store,
      claim: (options) => Effect.flatMap(store.claim(options), record),
      claimNext: (options) => Effect.flatMap(store.claimNext(options), record)
    }
  }

/** The memory transport as a store-selected intake: no deliveries, the worker claims with `claimNext`. */
const storeSelected = (transport: Transport["Type"]): Transport["Type"] => ({
  ...transport,
  capabilities: { ...transport.capabilities, claimsFromStore: true },
  awaitWork: ({ waitMs }) => Effect.sleep(Math.min(waitMs, 50))
})

/**
 * A handler of the resource (named on the handler): one model call of `callMs` per job, recording the tenant and the
 * start of each call; the first call answers a 429 with `retry-after: 3` when `rateLimitFirst`.
 */
const calling = (options: {
  readonly ran: Array<{ readonly tenant: string; readonly at: number }>
  readonly callMs: number
  readonly rateLimitFirst: boolean
}) =>
  Handler.make({
    type: "limited.call",
    version: 1,
    input: Input,
    result: Schema.String,
    attempt: { timeoutMs: 5_000 },
    resource: RESOURCE,
    run: (input, ctx) =>
      ctx.call({
        estimateCents: 0,
        cost: () => 0,
        run: Effect.gen(function* () {
          const first = options.ran.length === 0
          options.ran.push({ tenant: input.tenant, at: yield* Clock.currentTimeMillis })
          yield* Effect.sleep(options.callMs)
          if (first && options.rateLimitFirst)
            return yield* Effect.fail({ status: 429, headers: { "retry-after": "3" } })
          return input.tenant
        })
      })
  })

const setup = (limits: Limiter.Limits | undefined) =>
  Effect.gen(function* () {
    const claims: Array<Claimed> = []
    const t = yield* harness({ defaults: { type: "limited.call", maxAttempts: 1 }, wrap: recordingClaims(claims) })
    const limiter = yield* Limiter.makeMemory
    if (limits !== undefined) yield* limiter.define({ items: [{ resource: RESOURCE, limits }] })
    return { t, limiter, claims }
  })

describe("Worker admission before the claim", () => {
  for (const intake of ["store-selected", "transport-delivered"] as const) {
    it.scoped(`${intake}: the queued jobs of a paused resource are not claimed while it is paused`, () =>
      Effect.gen(function* () {
        const { claims, limiter, t } = yield* setup(undefined)
        const ids: Array<JobId> = []
        for (let i = 0; i < 4; i++) ids.push(yield* t.submit({ input: { tenant: "a", i } }))
        const ran: Array<{ readonly tenant: string; readonly at: number }> = []
        yield* t.start(
          {
            queue: "q",
            id: "w",
            concurrency: 1,
            limiter,
            handlers: [calling({ ran, callMs: 100, rateLimitFirst: true })]
          },
          t.store,
          intake === "store-selected" ? storeSelected(t.transport) : t.transport
        )
        for (const id of ids) yield* t.reaches(id, ["succeeded"], 60_000)
        // The 429 answered at 100 ms paused the resource until 3.1 s: no claim in between (the throttled job itself
        // comes back once the pause is over).
        const answered = ran[0]!.at + 100
        expect(claims.filter((c) => c.at > answered && c.at < answered + 3_000)).toEqual([])
        // Every job claimed once, and the one that met the 429 once more; no Acquire was answered `Paused`.
        expect(claims).toHaveLength(ids.length + 1)
        const { resources } = yield* limiter.read({ resources: [RESOURCE] })
        expect(resources[0]!.counters.paused).toBe(0)
        for (const id of ids) {
          const job = yield* t.job(id)
          expect(job.attempts - job.attemptsBase).toBe(1)
        }
      })
    )
  }

  for (const intake of ["store-selected", "transport-delivered"] as const) {
    it.scoped(
      `${intake}: a job waiting on a full cap is not claimed again until a read of the limiter shows room`,
      () =>
        Effect.gen(function* () {
          // The only permit is held by a call of another process, for a minute.
          const { claims, limiter, t } = yield* setup({ maxConcurrent: 1 })
          const other = { jobId: "elsewhere", token: 1 }
          yield* limiter.apply({
            items: [
              {
                _tag: "Acquire",
                resource: RESOURCE,
                callId: "elsewhere:1:1",
                holder: other,
                leaseMs: 60_000,
                tenant: null,
                priority: 0,
                cost: { requests: 1, inputTokens: 0, outputTokens: 0 }
              }
            ]
          })
          const id = yield* t.submit({ input: { tenant: "a", i: 0 } })
          const ran: Array<{ readonly tenant: string; readonly at: number }> = []
          yield* t.start(
            {
              queue: "q",
              id: "w",
              concurrency: 1,
              limiter,
              throttle: { recheckMs: 200 },
              handlers: [calling({ ran, callMs: 100, rateLimitFirst: false })]
            },
            t.store,
            intake === "store-selected" ? storeSelected(t.transport) : t.transport
          )
          // Five seconds, 25 rechecks: the first claim learns the cap is full (its Acquire waits), and from then on the
          // worker reads the limiter every recheck instead of claiming the job only to be told to wait again.
          const start = yield* t.now
          yield* t.advanceUntil(
            Effect.map(t.now, (now) => now >= start + 5_000),
            10_000
          )
          expect(claims).toHaveLength(1)
          expect(ran).toEqual([])
          const before = yield* limiter.read({ resources: [RESOURCE] })
          expect(before.resources[0]!.counters.waits.concurrency).toBe(1)
          // The permit comes back: the next read shows room, the job is claimed once more and runs.
          yield* limiter.apply({
            items: [{ _tag: "Release", resource: RESOURCE, callId: "elsewhere:1:1", holder: other, reached: true }]
          })
          yield* t.reaches(id, ["succeeded"], 10_000)
          expect(claims).toHaveLength(2)
          const job = yield* t.job(id)
          expect(job.attempts - job.attemptsBase).toBe(1)
        })
    )
  }

  it.scoped("a bucket without room: jobs are claimed as it refills, none is sent back, in fair order", () =>
    Effect.gen(function* () {
      // One request a second (a bucket of one): tenant A's backlog of six, then tenant B's two.
      const { claims, limiter, t } = yield* setup({ requestsPerMinute: 60 })
      const ids: Array<JobId> = []
      for (let i = 0; i < 6; i++) ids.push(yield* t.submit({ tenant: "a", input: { tenant: "a", i } }))
      for (let i = 0; i < 2; i++) ids.push(yield* t.submit({ tenant: "b", input: { tenant: "b", i } }))
      const ran: Array<{ readonly tenant: string; readonly at: number }> = []
      yield* t.start(
        {
          queue: "q",
          id: "w",
          concurrency: 4,
          limiter,
          fairness: {},
          handlers: [calling({ ran, callMs: 100, rateLimitFirst: false })]
        },
        t.store,
        storeSelected(t.transport)
      )
      for (const id of ids) yield* t.reaches(id, ["succeeded"], 60_000)
      // The first claim knows nothing of the bucket yet: it takes one job, whose call shows the bucket. From then on
      // a job is claimed only once the bucket has room for it: none is sent back, none claimed twice.
      expect(claims).toHaveLength(ids.length)
      const { resources } = yield* limiter.read({ resources: [RESOURCE] })
      expect(resources[0]!.counters.waits.requests).toBe(0)
      // B's jobs go as soon as the fair order gives them a turn, not after A's backlog.
      expect(ran.map((r) => r.tenant).slice(0, 4)).toContain("b")
      expect(ran.map((r) => r.tenant).indexOf("b", ran.map((r) => r.tenant).indexOf("b") + 1)).toBeLessThan(6)
    })
  )
})

describe("the forecast of a resource's room", () => {
  const rechecks = { recheckMs: 200, pausedRecheckMs: 60_000 }
  const known = (view: Partial<Limiter.View>, cost: Partial<Known["cost"]> = {}): Known => ({
    view: {
      permits: 0,
      maxConcurrent: null,
      learnedConcurrent: null,
      buckets: { requests: null, inputTokens: null, outputTokens: null },
      priorityShare: null,
      pause: null,
      halfOpen: false,
      ...view
    },
    at: 1_000,
    cost: { requests: 1, inputTokens: 0, outputTokens: 0, ...cost },
    waitUntil: Number.NEGATIVE_INFINITY
  })

  it("free permits admit as many calls, less the held jobs not admitted yet", () => {
    expect(openingOf(known({ permits: 5, maxConcurrent: 8 }), 1_000, 0, rechecks).room).toBe(3)
    expect(openingOf(known({ permits: 5, maxConcurrent: 8 }), 1_000, 2, rechecks).room).toBe(1)
    expect(openingOf(known({ permits: 5, maxConcurrent: 8 }), 1_000, 3, rechecks)).toEqual({ room: 0, until: 1_200 })
  })

  it("a full cap is trusted for recheckMs after the view, then one probe claim learns how it stands", () => {
    const full = known({ permits: 8, maxConcurrent: 8 })
    expect(openingOf(full, 1_100, 0, rechecks)).toEqual({ room: 0, until: 1_200 })
    // Long after the view (this worker made no call since): a probe, not closed for ever.
    expect(openingOf(full, 5_000, 0, rechecks)).toEqual({ room: 1, until: 5_000, probe: true })
    expect(openingOf(full, 5_000, 1, rechecks)).toEqual({ room: 0, until: 5_200 })
  })

  it("a bucket admits what its forecast level holds, and opens when the refill covers the next call", () => {
    // 600 per minute: 0.01 per ms; 2.5 requests at 1,000 ms, 4.5 at 1,200.
    const requests = { level: 2.5, capacity: 10, perMinute: 600 }
    const view = known({ buckets: { requests, inputTokens: null, outputTokens: null } })
    expect(openingOf(view, 1_000, 0, rechecks).room).toBe(2)
    expect(openingOf(view, 1_200, 0, rechecks).room).toBe(4)
    expect(openingOf(view, 1_000, 2, rechecks)).toEqual({ room: 0, until: 1_050 })
    // Tokens: 1,000 output tokens a call against 2,500 in the bucket.
    const output = { level: 2_500, capacity: 10_000, perMinute: 600_000 }
    const tokens = known(
      { buckets: { requests: null, inputTokens: null, outputTokens: output } },
      { outputTokens: 1_000 }
    )
    expect(openingOf(tokens, 1_000, 0, rechecks).room).toBe(2)
    expect(openingOf(tokens, 1_000, 3, rechecks)).toEqual({ room: 0, until: 1_150 })
  })

  it("a pause gives no room until it ends; one until resumed is probed every pausedRecheckMs", () => {
    const timed = known({ pause: { kind: "rate_limited", until: 4_000 } })
    expect(openingOf(timed, 3_999, 0, rechecks)).toEqual({ room: 0, until: 4_000 })
    // Over: half-open, one probe.
    expect(openingOf(timed, 4_000, 0, rechecks)).toEqual({ room: 1, until: 4_000, probe: true })
    const capped = known({ pause: { kind: "quota_exhausted", until: null } })
    expect(openingOf(capped, 30_000, 0, rechecks)).toEqual({ room: 0, until: 61_000 })
    expect(openingOf(capped, 61_000, 0, rechecks)).toEqual({ room: 1, until: 61_000, probe: true })
  })

  it("a view that only a probe claim would ask again is stale: read before the plan, fresh for recheckMs after", () => {
    const handler = Handler.make({
      type: "limited.call",
      version: 1,
      input: Input,
      result: Schema.String,
      attempt: { timeoutMs: 5_000 },
      resource: RESOURCE,
      run: () => Effect.succeed("")
    })
    const gate = WorkerAdmission.make({ handlers: [handler], ...rechecks })!
    const state = (view: Partial<Limiter.View>) =>
      ({ resource: RESOURCE, view: known(view).view }) as unknown as Limiter.ResourceState
    const claimOne = { _tag: "Claim", types: [{ type: "limited.call", version: 1 }], max: 1 }
    // Never seen: the first claim learns it; nothing to read.
    expect(gate.stale(1_000, [])).toEqual([])
    gate.learnStates(1_000, [state({ permits: 8, maxConcurrent: 8 })])
    // A full cap seen at 1,000 is trusted until 1,200, then read rather than probed.
    expect(gate.stale(1_199, [])).toEqual([])
    expect(gate.plan(4, 1_199, [])).toEqual({ _tag: "Closed", until: 1_200 })
    expect(gate.stale(1_200, [])).toEqual([RESOURCE])
    // The read shows a free permit: nothing stale, one claim.
    gate.learnStates(1_250, [state({ permits: 7, maxConcurrent: 8 })])
    expect(gate.stale(1_300, [])).toEqual([])
    expect(gate.plan(4, 1_300, [])).toEqual(claimOne)
    // A cap with free permits is planned on as seen: never read.
    expect(gate.stale(9_000, [])).toEqual([])
    // A pause until resumed is read every pausedRecheckMs, not every recheckMs.
    gate.learnStates(10_000, [state({ pause: { kind: "quota_exhausted", until: null } })])
    expect(gate.stale(10_200, [])).toEqual([])
    expect(gate.stale(70_000, [])).toEqual([RESOURCE])
  })

  it("a resource with no limits is open", () => {
    expect(openingOf(known({}), 1_000, 50, rechecks).room).toBe(Number.POSITIVE_INFINITY)
  })
})
