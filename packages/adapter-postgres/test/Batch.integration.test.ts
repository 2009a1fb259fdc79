/**
 * How the adapter turns batches into SQL, on the real server and on PGlite: a batch that names one job (or one
 * request key) twice is applied as if one item after another; ids that cannot name a row are answered without a
 * statement; a bad item fails the submit before anything is written; every rule holds exactly at its boundary
 * (`<=` against `<`, microsecond store times); and a scripted run of every verb gives, reply for reply and row for
 * row, what the in-memory Store built from `Protocol` gives.
 */
import { expect, layer } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import * as Store from "@slowcall/core/Store"
import { Effect, type Layer, Option } from "effect"
import * as PgStore from "../src/PgStore.js"
import { holdServer, only, pgliteStoreLayer, serverStoreLayer, submitOptions, uniqueSchema } from "./support.js"

holdServer()

const T0 = 1_764_424_454_123.457

/** Store time `ms` after T0, at the store's resolution (a microsecond). */
const at = (ms: number): number => Math.round((T0 + ms) * 1000) / 1000
const NOT_A_UUID = "not-a-uuid" as JobId

const backends: ReadonlyArray<{ readonly name: string; readonly layer: () => Layer.Layer<PgStore.PgStore, unknown> }> =
  [
    { name: "postgres server", layer: () => serverStoreLayer(uniqueSchema("batch")) },
    { name: "pglite", layer: () => pgliteStoreLayer() }
  ]

const ids = (n: number) => Effect.all(Array.from({ length: n }, () => makeJobId))

/** Every verb, with repeats, invalid ids and boundaries; each step runs on both stores. */
const script = ([a, b, c, d, e, f]: ReadonlyArray<JobId>): ReadonlyArray<
  (store: Store.Store["Type"]) => Effect.Effect<unknown, unknown>
> => {
  const q = "script"
  return [
    (s) =>
      s.submit({
        now: T0,
        items: [
          submitOptions(q, a!, { requestKey: "k1" }),
          submitOptions(q, b!, { requestKey: "k1" }),
          submitOptions(q, c!, { requestKey: "k1", inputHash: `h-${a}` }),
          submitOptions(q, d!, { budgetCents: 10, priority: 2 }),
          submitOptions(q, e!, { deadlineAt: T0 + 5_000, maxAttempts: 1, priority: 1 }),
          submitOptions(q, f!, { delayMs: 1_000, tenant: "t1" })
        ]
      }),
    (s) =>
      s.claim({
        now: T0 + 1,
        items: [
          { jobId: a!, owner: "w1", leaseMs: 1_000 },
          { jobId: a!, owner: "w2", leaseMs: 1_000 },
          { jobId: b!, owner: "w2", leaseMs: 1_000 },
          { jobId: f!, owner: "w2", leaseMs: 1_000 },
          { jobId: NOT_A_UUID, owner: "w", leaseMs: 1 }
        ]
      }),
    (s) =>
      s.charge({
        now: T0 + 2,
        items: [
          { jobId: a!, callId: "c1", token: 1, amountCents: 3, settled: false },
          { jobId: a!, callId: "c1", token: 1, amountCents: 4, settled: true },
          { jobId: a!, callId: "c1", token: 1, amountCents: 5, settled: true },
          { jobId: d!, callId: "c2", token: 0, amountCents: 6, settled: true },
          { jobId: NOT_A_UUID, callId: "c3", token: 0, amountCents: 1, settled: true }
        ]
      }),
    (s) =>
      s.heartbeat({
        now: T0 + 3,
        items: [
          { jobId: a!, token: 1, leaseMs: 2_000, progress: 1.5 },
          { jobId: a!, token: 1, leaseMs: 2_000, progress: -1 },
          { jobId: a!, token: 2, leaseMs: 2_000 },
          { jobId: b!, token: 0, leaseMs: 2_000 },
          { jobId: NOT_A_UUID, token: 1, leaseMs: 2_000 }
        ]
      }),
    // d (priority 2) is abandoned for its budget by the fallback estimate (6 + 6 > 10); e is claimed.
    (s) => s.claimNext({ now: T0 + 4, queue: q, max: 5, owner: "w3", leaseMs: 500 }),
    (s) =>
      s.cancel({
        now: T0 + 5,
        items: [{ jobId: a! }, { jobId: a! }, { jobId: f!, tenant: "t2" }, { jobId: d! }, { jobId: NOT_A_UUID }]
      }),
    (s) =>
      s.settle({
        now: T0 + 6,
        items: [
          { jobId: a!, token: 1, outcome: { _tag: "Retry", delayMs: 100, errorClass: "timeout", error: "slow" } },
          { jobId: a!, token: 1, outcome: { _tag: "Complete", result: null } },
          // e's retry would start at its deadline: abandoned(deadline) with the retry's error.
          { jobId: e!, token: 1, outcome: { _tag: "Retry", delayMs: 4_994, errorClass: "network", error: "x" } },
          { jobId: NOT_A_UUID, token: 1, outcome: { _tag: "Release" } }
        ]
      }),
    // a is queued (cancel requested): claiming it abandons it; f is due exactly now.
    (s) =>
      s.claim({
        now: T0 + 1_000,
        items: [
          { jobId: a!, owner: "w4", leaseMs: 1_000 },
          { jobId: f!, owner: "w4", leaseMs: 1_000, estimateCents: 0 }
        ]
      }),
    (s) =>
      s.settle({
        now: T0 + 1_001,
        items: [{ jobId: f!, token: 1, outcome: { _tag: "Fail", errorClass: "auth", error: "no key" } }]
      }),
    (s) =>
      s.replay({
        now: T0 + 1_002,
        items: [{ jobId: f! }, { jobId: f! }, { jobId: a! }, { jobId: NOT_A_UUID }],
        filter: { errorClass: "auth" }
      }),
    (s) => s.claim({ now: T0 + 1_003, items: [{ jobId: f!, owner: "w5", leaseMs: 10 }] }),
    // f's lease ended at T0 + 1_013: expired at T0 + 1_014, so the sweep requeues it; nothing else is stale yet.
    (s) => s.sweep({ now: T0 + 1_013, republishAfterMs: 0 }),
    (s) => s.sweep({ now: T0 + 1_014, republishAfterMs: 0 }),
    (s) => s.sweep({ now: T0 + 90_000, limit: 1 })
  ]
}

for (const backend of backends) {
  layer(backend.layer(), { timeout: 60_000 })(`batches: ${backend.name}`, (it) => {
    it.effect("a scripted run of every verb gives the memory Store's replies, attempts and charges exactly", () =>
      Effect.gen(function* () {
        const pg = yield* PgStore.PgStore
        const memory = yield* Store.makeMemory
        const jobs = yield* ids(6)

        for (const [n, step] of script(jobs).entries()) {
          const expected = yield* Effect.either(step(memory.store))
          const actual = yield* Effect.either(step(pg))
          expect(actual, `step ${n}`).toEqual(expected)
        }

        for (const id of jobs) {
          expect(Option.getOrUndefined(yield* Effect.option(pg.get({ jobId: id })))).toEqual(memory.peek(id))
          expect(yield* pg.attempts({ jobId: id })).toEqual(yield* memory.query.attempts({ jobId: id }))
          expect(yield* pg.charges({ jobId: id })).toEqual(yield* memory.query.charges({ jobId: id }))
        }
        const list = { queue: "script", order: "oldest", limit: null } as const
        expect(yield* pg.list(list)).toEqual(yield* memory.query.list(list))
      })
    )

    it.effect("one batch naming a job twice applies its items one after another", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const [x, y] = yield* ids(2)
        const q = `twice-${x!.slice(-6)}`

        const submitted = yield* store.submit({
          items: [
            submitOptions(q, x!, { requestKey: "same" }),
            submitOptions(q, y!, { requestKey: "same", inputHash: "other" })
          ]
        })
        const claims = yield* store.claim({
          items: [
            { jobId: x!, owner: "first", leaseMs: 60_000 },
            { jobId: x!, owner: "second", leaseMs: 60_000 }
          ]
        })
        const settles = yield* store.settle({
          items: [
            { jobId: x!, token: 1, outcome: { _tag: "Fail", errorClass: "auth", error: "e" } },
            { jobId: x!, token: 1, outcome: { _tag: "Complete", result: 1 } }
          ]
        })
        const replays = yield* store.replay({ items: [{ jobId: x! }, { jobId: x! }] })

        expect(submitted.results.map((r) => r._tag)).toEqual(["Created", "KeyReused"])
        expect(submitted.results[1]).toEqual({ _tag: "KeyReused", requestKey: "same", existingJobId: x })
        expect(claims.results.map((r) => r._tag)).toEqual(["Claimed", "Busy"])
        expect(claims.results[1]).toMatchObject({ until: claims.now + 60_000, job: { leaseOwner: "first" } })
        expect(settles.results).toMatchObject([
          { _tag: "Settled", job: { state: "failed" } },
          { _tag: "LeaseLost", token: 1, currentToken: 1, state: "failed" }
        ])
        expect(replays.results).toMatchObject([
          { _tag: "Replayed", job: { state: "queued" } },
          { _tag: "Skipped", state: "queued" }
        ])
        expect(yield* store.list({ queue: q })).toHaveLength(1)
      })
    )

    it.effect("a job id given twice, or one that exists, fails the submit as a Constraint and writes nothing", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const [x, y, z] = yield* ids(3)
        const q = `dup-${x!.slice(-6)}`
        yield* store.submit({ items: [submitOptions(q, x!)] })

        const twice = yield* Effect.flip(store.submit({ items: [submitOptions(q, y!), submitOptions(q, y!)] }))
        // z and the key repeat make two statements; the existing id x sits in the second one.
        const existing = yield* Effect.flip(
          store.submit({
            items: [submitOptions(q, z!, { requestKey: "k" }), submitOptions(q, x!, { requestKey: "k" })]
          })
        )

        for (const error of [twice, existing]) {
          expect(error).toMatchObject({ _tag: "StoreError", reason: "Constraint", operation: "submit" })
        }
        expect((yield* store.list({ queue: q })).map((job) => job.id)).toEqual([x])
      })
    )

    it.effect("text with array-literal metacharacters, and the string NULL, round-trips through every array", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const [x] = yield* ids(1)
        const odd = 'a "quoted" {brace}, back\\slash\ttab NULL'
        const q = `odd-${x!.slice(-6)}, {"NULL"}`

        const submitted = only(
          yield* store.submit({
            items: [submitOptions(q, x!, { tenant: "NULL", requestKey: odd, input: { text: odd, list: [odd, null] } })]
          })
        )
        const claim = only(yield* store.claim({ items: [{ jobId: x!, owner: odd, leaseMs: 60_000 }] }))
        yield* store.charge({ items: [{ jobId: x!, callId: odd, token: 1, amountCents: 1, settled: true }] })
        const settled = only(
          yield* store.settle({
            items: [{ jobId: x!, token: 1, outcome: { _tag: "Fail", errorClass: "unknown", error: odd } }]
          })
        )

        expect(submitted).toMatchObject({
          _tag: "Created",
          job: { queue: q, tenant: "NULL", requestKey: odd, input: { text: odd, list: [odd, null] } }
        })
        expect(claim).toMatchObject({ _tag: "Claimed", job: { leaseOwner: odd } })
        expect(settled).toMatchObject({ _tag: "Settled", job: { lastError: odd, tenant: "NULL" } })
        expect((yield* store.charges({ jobId: x! })).map((charge) => charge.callId)).toEqual([odd])
        expect((yield* store.attempts({ jobId: x! }))[0]).toMatchObject({ worker: odd, evidence: odd })
      })
    )

    it.effect("ids that cannot name a row get each verb's miss, and no statement fails", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const items = [{ jobId: NOT_A_UUID }]

        const claim = yield* store.claim({ items: [{ jobId: NOT_A_UUID, owner: "w", leaseMs: 1 }] })
        const charge = yield* store.charge({
          items: [{ jobId: NOT_A_UUID, callId: "c", token: 1, amountCents: 1, settled: true }]
        })
        const heartbeat = yield* store.heartbeat({ items: [{ jobId: NOT_A_UUID, token: 3, leaseMs: 1 }] })
        const settle = yield* store.settle({ items: [{ jobId: NOT_A_UUID, token: 3, outcome: { _tag: "Release" } }] })
        const cancel = yield* store.cancel({ items })
        const replay = yield* store.replay({ items })

        expect(only(claim)).toEqual({ _tag: "NotFound", jobId: NOT_A_UUID })
        expect(only(charge)).toEqual({ _tag: "NotFound", jobId: NOT_A_UUID })
        const lost = { _tag: "LeaseLost", jobId: NOT_A_UUID, token: 3, currentToken: null, state: null }
        expect(only(heartbeat)).toEqual(lost)
        expect(only(settle)).toEqual(lost)
        expect(only(cancel)).toEqual({ _tag: "NotFound", jobId: NOT_A_UUID })
        expect(only(replay)).toEqual({ _tag: "Skipped", jobId: NOT_A_UUID, state: null })
        expect(yield* Effect.flip(store.get({ jobId: NOT_A_UUID }))).toMatchObject({ _tag: "JobNotFound" })
        expect(yield* store.attempts({ jobId: NOT_A_UUID })).toEqual([])
        expect(yield* store.charges({ jobId: NOT_A_UUID })).toEqual([])
        // No statement ran, yet every reply carries store time.
        for (const reply of [claim, charge, heartbeat, settle, cancel, replay]) expect(reply.now).toBeGreaterThan(0)
      })
    )

    it.effect("boundaries: a lease is live through its last microsecond, due and deadline are inclusive", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const [leased, due, late] = yield* ids(3)
        const q = `edge-${leased!.slice(-6)}`
        yield* store.submit({
          now: T0,
          items: [
            submitOptions(q, leased!),
            submitOptions(q, due!, { delayMs: 10 }),
            submitOptions(q, late!, { deadlineAt: T0 + 10 })
          ]
        })
        yield* store.claim({ now: T0, items: [{ jobId: leased!, owner: "w", leaseMs: 10 }] })
        const claim = (now: number, jobId: JobId) =>
          Effect.map(store.claim({ now, items: [{ jobId, owner: "x", leaseMs: 10 }] }), only)

        const atLeaseEnd = yield* claim(T0 + 10, leased!)
        const justAfter = yield* claim(at(10.001), leased!)
        const justBeforeDue = yield* claim(at(9.999), due!)
        const atDue = yield* claim(T0 + 10, due!)
        const atDeadline = yield* claim(T0 + 10, late!)

        expect(atLeaseEnd).toMatchObject({ _tag: "Busy", until: T0 + 10 })
        expect(justAfter).toMatchObject({ _tag: "Claimed", takeover: true, job: { leaseToken: 2 } })
        expect(justBeforeDue).toMatchObject({ _tag: "NotDue", until: T0 + 10 })
        expect(atDue).toMatchObject({ _tag: "Claimed", takeover: false })
        expect(atDeadline).toMatchObject({ _tag: "Settled", job: { state: "abandoned", abandonReason: "deadline" } })
        const attempts = yield* store.attempts({ jobId: leased! })
        expect(attempts.map((attempt) => [attempt.token, attempt.outcome, attempt.endedAt])).toEqual([
          [1, "expired", at(10.001)],
          [2, "running", null]
        ])
      })
    )

    it.effect("boundaries: the budget fits up to the cent, and the largest spend of one token is the estimate", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const [exact, over, fallback, declared] = yield* ids(4)
        const q = `budget-${exact!.slice(-6)}`
        yield* store.submit({
          items: [exact, over, fallback, declared].map((id) => submitOptions(q, id!, { budgetCents: 10 }))
        })
        // fallback and declared: token 1 charged 2 + 2, token 2 charged 3; spend 7, the largest token total 4.
        yield* store.charge({
          items: [fallback, declared].flatMap((jobId) => [
            { jobId: jobId!, callId: "a", token: 1, amountCents: 2, settled: true },
            { jobId: jobId!, callId: "b", token: 1, amountCents: 2, settled: true },
            { jobId: jobId!, callId: "c", token: 2, amountCents: 3, settled: true }
          ])
        })

        const results = yield* store.claim({
          items: [
            { jobId: exact!, owner: "w", leaseMs: 1, estimateCents: 10 },
            { jobId: over!, owner: "w", leaseMs: 1, estimateCents: 10.01 },
            { jobId: fallback!, owner: "w", leaseMs: 1 },
            { jobId: declared!, owner: "w", leaseMs: 1, estimateCents: 3 }
          ]
        })

        expect(results.results).toMatchObject([
          { _tag: "Claimed" },
          { _tag: "Settled", job: { state: "abandoned", abandonReason: "budget" } },
          { _tag: "Settled", job: { state: "abandoned", abandonReason: "budget", costCents: 7 } },
          { _tag: "Claimed", job: { costCents: 7 } }
        ])
      })
    )

    it.effect("claimNext takes due queued jobs by priority, then due time, then insertion, up to max", () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const [low, highLate, highEarly, notDue, other] = yield* ids(5)
        const q = `next-${low!.slice(-6)}`
        yield* store.submit({
          now: T0,
          items: [
            submitOptions(q, low!),
            submitOptions(q, highLate!, { priority: 5, delayMs: 2 }),
            submitOptions(q, highEarly!, { priority: 5, delayMs: 1 }),
            submitOptions(q, notDue!, { priority: 9, delayMs: 1_000 }),
            submitOptions(`${q}-other`, other!, { priority: 9 })
          ]
        })

        const first = yield* store.claimNext({ now: T0 + 10, queue: q, max: 2, owner: "w", leaseMs: 1_000 })
        const second = yield* store.claimNext({ now: T0 + 10, queue: q, max: 5, owner: "w", leaseMs: 1_000 })
        const none = yield* store.claimNext({ now: T0 + 10, queue: q, max: 5, owner: "w", leaseMs: 1_000 })

        expect(first.now).toBe(T0 + 10)
        expect(first.results.map((r) => r._tag === "Claimed" && r.job.id)).toEqual([highEarly, highLate])
        expect(second.results.map((r) => r._tag === "Claimed" && r.job.id)).toEqual([low])
        expect(none.results).toEqual([])
      })
    )
  })
}
