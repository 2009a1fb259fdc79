/**
 * Network faults between the adapter and the machine's Redis, injected by the TCP fault proxy of
 * `@slowcall/testing`: connections reset before a claim or settle script reaches the server (it never ran) or after
 * (it ran, its reply is lost), a black hole that only `commandTimeout` gets out of, and added latency. Every time:
 * no job lost, no model call while another claim's lease on the job lives, at most one call per claim. Then the
 * scripts one by one: each whose reply was lost is safe to run again.
 */
import { expect, it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import type { Store } from "@slowcall/core/Store"
import * as FaultProxy from "@slowcall/testing/FaultProxy"
import { Context, Duration, Effect, Layer, Queue, Ref } from "effect"
import { afterAll, beforeAll, describe } from "vitest"
import { all as scripts } from "../src/internal/scripts.js"
import * as RedisStore from "../src/RedisStore.js"
import { dropPrefix, REDIS_URL, uniquePrefix } from "./support.js"

const LEASE_MS = 2_000
const COMMAND_TIMEOUT_MS = 800
const SLACK_MS = 1_500
const prefix = uniquePrefix("faults")
const target = new URL(REDIS_URL)

let proxy: FaultProxy.FaultProxy

beforeAll(async () => {
  proxy = await FaultProxy.start({ targetHost: target.hostname, targetPort: Number(target.port || 6379) })
})

afterAll(async () => {
  await proxy.close()
  await dropPrefix(REDIS_URL, prefix)
})

/** The store through the proxy, with a short command timeout so that a black hole turns into errors. */
const faulty = () =>
  RedisStore.layer({ url: proxy.url(REDIS_URL), prefix, commandTimeoutMs: COMMAND_TIMEOUT_MS, checkServer: false })

const direct = () => RedisStore.layer({ url: REDIS_URL, prefix, checkServer: false })

const withStore = <A, E>(
  layer: ReturnType<typeof direct>,
  body: (store: RedisStore.RedisStoreService) => Effect.Effect<A, E>
): Effect.Effect<A, unknown> =>
  Effect.scoped(Effect.flatMap(Layer.build(layer), (context) => body(Context.get(context, RedisStore.RedisStore))))

/** A model call a worker made: under which claim, and when. */
interface Call {
  readonly jobId: JobId
  readonly token: number
  readonly start: number
}

const submitJobs = (queue: string, count: number) =>
  withStore(direct(), (store) =>
    Effect.gen(function* () {
      const ids: Array<JobId> = []
      for (let i = 0; i < count; i++) ids.push(yield* makeJobId)
      yield* store.submit({
        items: ids.map((id, i) => ({
          id,
          queue,
          type: "fault",
          version: 1,
          inputHash: `h${i}`,
          input: { i },
          maxAttempts: 10
        }))
      })
      return ids
    })
  )

/**
 * Worker loops over the Store alone: claim before call, a fenced settle retried on store errors, a live lease
 * waited out. A settle that meets `LeaseLost` with the job already succeeded under the same token was a lost reply
 * of its own earlier try.
 */
const work = (store: Store["Type"], ids: ReadonlyArray<JobId>, workers: number, callMs: number) =>
  Effect.gen(function* () {
    const queue = yield* Queue.unbounded<JobId>()
    yield* Queue.offerAll(queue, ids)
    const left = yield* Ref.make(ids.length)
    const calls: Array<Call> = []
    let storeErrors = 0
    const later = (id: JobId, ms: number) =>
      Effect.forkDaemon(Effect.zipRight(Effect.sleep(Duration.millis(ms)), Queue.offer(queue, id)))
    const finish = Ref.update(left, (n) => n - 1)

    const complete = (worker: string, id: JobId, token: number): Effect.Effect<boolean> =>
      Effect.gen(function* () {
        while (true) {
          const reply = yield* Effect.either(
            store.settle({ items: [{ jobId: id, token, outcome: { _tag: "Complete", result: { worker } } }] })
          )
          if (reply._tag === "Left") {
            storeErrors++
            yield* Effect.sleep("100 millis")
            continue
          }
          const result = reply.right.results[0]!
          return result._tag === "Settled" || (result.state === "succeeded" && result.currentToken === token)
        }
      })

    const one = (worker: string, id: JobId) =>
      Effect.gen(function* () {
        const claim = yield* Effect.either(store.claim({ items: [{ jobId: id, owner: worker, leaseMs: LEASE_MS }] }))
        if (claim._tag === "Left") {
          storeErrors++
          return yield* later(id, 100)
        }
        const result = claim.right.results[0]!
        switch (result._tag) {
          case "Settled":
          case "NotFound":
            return yield* finish
          case "Busy":
          case "NotDue":
            return yield* later(id, Math.min(LEASE_MS, Math.max(20, result.until - claim.right.now + 20)))
          case "Claimed": {
            const token = result.job.leaseToken
            calls.push({ jobId: id, token, start: Date.now() })
            yield* Effect.sleep(Duration.millis(callMs))
            if (yield* complete(worker, id, token)) yield* finish
            else yield* later(id, 20)
          }
        }
      })

    const loop = (worker: string) =>
      Effect.gen(function* () {
        while ((yield* Ref.get(left)) > 0) {
          const next = yield* Queue.take(queue).pipe(Effect.timeout("200 millis"), Effect.option)
          if (next._tag === "Some") yield* one(worker, next.value)
        }
      })

    yield* Effect.all(
      Array.from({ length: workers }, (_, i) => loop(`worker-${i}`)),
      { concurrency: "unbounded" }
    ).pipe(Effect.timeout("45 seconds"))
    return { calls, storeErrors }
  })

/**
 * Every job succeeded; each model call was made under a claim the store granted, at most one per claim; a later
 * claim started only after the earlier lease ended, and (for a lease whose holder vanished) not much later than
 * that, or than the moment the network came back.
 */
const check = (ids: ReadonlyArray<JobId>, calls: ReadonlyArray<Call>, healedAt = 0) =>
  withStore(direct(), (store) =>
    Effect.gen(function* () {
      for (const id of ids) {
        expect((yield* store.get({ jobId: id })).state, `job ${id}`).toBe("succeeded")
        const attempts = yield* store.attempts({ jobId: id })
        const mine = calls.filter((call) => call.jobId === id)
        expect(new Set(mine.map((call) => call.token)).size).toBe(mine.length)
        for (const call of mine) expect(attempts.some((a) => a.token === call.token)).toBe(true)
        for (let i = 1; i < attempts.length; i++) {
          const previous = attempts[i - 1]!
          const next = attempts[i]!
          expect(next.startedAt).toBeGreaterThanOrEqual(previous.startedAt + LEASE_MS)
          if (previous.outcome === "expired") {
            const due = Math.max(previous.startedAt + LEASE_MS, healedAt + COMMAND_TIMEOUT_MS)
            expect(next.startedAt).toBeLessThanOrEqual(due + SLACK_MS)
          }
        }
      }
    })
  )

const sha = (name: "claim" | "settle" | "charge") => scripts().get(name)!.sha

describe("faults between the adapter and Redis", () => {
  it.live(
    "connection resets around claims: a claim that ran but lost its reply is waited out, never called twice",
    () =>
      Effect.gen(function* () {
        const ids = yield* submitJobs("reset-claim", 20)
        const after = proxy.addResetRule({ match: (c) => c.includes(sha("claim")), when: "after", times: 3 })
        const before = proxy.addResetRule({ match: (c) => c.includes(sha("claim")), when: "before", times: 2 })

        const report = yield* withStore(faulty(), (store) => work(store, ids, 4, 20))

        expect(after.fired()).toBe(3)
        expect(before.fired()).toBe(2)
        expect(report.storeErrors).toBeGreaterThanOrEqual(5)
        yield* check(ids, report.calls)
      }),
    60_000
  )

  it.live(
    "connection resets around settles: a lost reply after the write is recognised, a lost request is repeated",
    () =>
      Effect.gen(function* () {
        const ids = yield* submitJobs("reset-settle", 20)
        const after = proxy.addResetRule({ match: (c) => c.includes(sha("settle")), when: "after", times: 3 })
        const before = proxy.addResetRule({ match: (c) => c.includes(sha("settle")), when: "before", times: 3 })

        const report = yield* withStore(faulty(), (store) => work(store, ids, 4, 20))

        expect(after.fired()).toBe(3)
        expect(before.fired()).toBe(3)
        expect(report.calls).toHaveLength(ids.length)
        yield* check(ids, report.calls)
      }),
    60_000
  )

  it.live(
    "black hole: commands time out instead of hanging, and work resumes when the network returns",
    () =>
      Effect.gen(function* () {
        const ids = yield* submitJobs("blackhole", 30)
        let healedAt = Number.POSITIVE_INFINITY
        const report = yield* withStore(faulty(), (store) =>
          Effect.gen(function* () {
            const healer = yield* Effect.fork(
              Effect.gen(function* () {
                yield* Effect.sleep("150 millis")
                proxy.setBlackhole(true)
                yield* Effect.sleep("3 seconds")
                proxy.setBlackhole(false)
                healedAt = Date.now()
              })
            )
            const result = yield* work(store, ids, 4, 30)
            yield* healer.await
            return result
          })
        )

        expect(report.storeErrors).toBeGreaterThan(0)
        expect(healedAt).toBeLessThan(Number.POSITIVE_INFINITY)
        yield* check(ids, report.calls, healedAt)
      }),
    60_000
  )

  it.live("latency: every command is slower, nothing else changes", () =>
    Effect.gen(function* () {
      const ids = yield* submitJobs("latency", 10)
      proxy.setLatency(30)
      const report = yield* withStore(faulty(), (store) => work(store, ids, 2, 5)).pipe(
        Effect.ensuring(Effect.sync(() => proxy.setLatency(0)))
      )

      expect(report.calls).toHaveLength(ids.length)
      expect(report.storeErrors).toBe(0)
      yield* check(ids, report.calls)
    })
  )
})

describe("a script whose reply was lost is safe to run again", () => {
  it.live("claim, charge and settle, each repeated after its reply was cut: same job, one charge, one result", () =>
    withStore(faulty(), (store) =>
      Effect.gen(function* () {
        const [id] = yield* submitJobs("repeat", 1)
        const cut = (name: "claim" | "settle" | "charge") =>
          proxy.addResetRule({ match: (c) => c.includes(sha(name)), when: "after", times: 1 })
        // Learn the route first, so that only the scripts cross the cut connections.
        yield* store.get({ jobId: id! })
        const claim = { items: [{ jobId: id!, owner: "w", leaseMs: 30_000 }] }

        const claimCut = cut("claim")
        const lostClaim = yield* Effect.flip(store.claim(claim))
        const claimAgain = yield* store.claim(claim)
        const job = yield* store.get({ jobId: id! })
        const charge = { items: [{ jobId: id!, callId: "c1", token: job.leaseToken, amountCents: 3, settled: true }] }
        const chargeCut = cut("charge")
        const lostCharge = yield* Effect.flip(store.charge(charge))
        const chargeAgain = yield* store.charge(charge)
        const settle = {
          items: [{ jobId: id!, token: job.leaseToken, outcome: { _tag: "Complete" as const, result: "done" } }]
        }
        const settleCut = cut("settle")
        const lostSettle = yield* Effect.flip(store.settle(settle))
        const settleAgain = yield* store.settle(settle)

        expect([claimCut.fired(), chargeCut.fired(), settleCut.fired()]).toEqual([1, 1, 1])
        for (const lost of [lostClaim, lostCharge, lostSettle]) expect(lost).toMatchObject({ reason: "Ambiguous" })
        // The lost claim had applied: the repeat finds this owner's live lease, and no second token was taken.
        expect(claimAgain.results[0]).toMatchObject({ _tag: "Busy", job: { leaseOwner: "w", leaseToken: 1 } })
        expect(chargeAgain.results[0]).toEqual({ _tag: "Charged", costCents: 3 })
        expect(settleAgain.results[0]).toMatchObject({ _tag: "LeaseLost", currentToken: 1, state: "succeeded" })
        expect(yield* store.get({ jobId: id! })).toMatchObject({ state: "succeeded", costCents: 3, result: "done" })
        expect(yield* store.charges({ jobId: id! })).toHaveLength(1)
        expect(yield* store.attempts({ jobId: id! })).toHaveLength(1)
      })
    )
  )
})
