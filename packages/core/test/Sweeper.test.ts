import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, TestClock } from "effect"
import { TransportError } from "../src/Errors.js"
import * as Handler from "../src/Handler.js"
import * as Metrics from "../src/Metrics.js"
import * as StoreModule from "../src/Store.js"
import { Store } from "../src/Store.js"
import * as Sweeper from "../src/Sweeper.js"
import * as TransportModule from "../src/Transport.js"
import { Transport } from "../src/Transport.js"
import * as Worker from "../src/Worker.js"
import { claimOne, submitOne } from "./fixtures.js"

/** A memory Store and Transport; `transport` overrides the Transport the sweeper and workers see. */
const setup = (view?: (transport: Transport["Type"]) => Transport["Type"]) =>
  Effect.gen(function* () {
    const { query, store } = yield* StoreModule.makeMemory
    const memory = yield* TransportModule.makeMemory()
    const transport = view === undefined ? memory : view(memory)
    const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(Effect.provideService(Store, store), Effect.provideService(Transport, transport))
    const receive = memory.receive({ queue: "q", max: 10, visibilityMs: 60_000, waitMs: 0 })
    const job = (jobId: Parameters<typeof query.get>[0]["jobId"]) => Effect.orDie(query.get({ jobId }))
    /** Submit an echo job and publish it, as a client would. */
    const submit = (input: number, maxAttempts = 3) =>
      Effect.tap(submitOne(store, { type: "echo", input, maxAttempts }), (job) =>
        memory.publish({ queue: "q", items: [{ message: { jobId: job.id, type: job.type, version: job.version } }] })
      )
    return { store, query, memory, transport, provide, receive, job, submit }
  })

const echo = (calls: { n: number }) =>
  Handler.make({
    type: "echo",
    version: 1,
    input: Schema.Number,
    result: Schema.Number,
    attempt: { timeoutMs: 1_000 },
    run: (input) =>
      Effect.sync(() => {
        calls.n++
        return input
      })
  })

describe("Sweeper", () => {
  it.scoped("republishes a queued job whose message was lost, and a worker then runs it", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      // Stored, but its publish was lost: the transport never heard of it.
      const job = yield* submitOne(t.store, { type: "echo", input: 7 })
      expect(yield* t.memory.size("q")).toBe(0)
      const calls = { n: 0 }
      yield* t.provide(Worker.make({ queue: "q", id: "w", handlers: [echo(calls)] }))
      yield* t.provide(Sweeper.make({ intervalMs: 1_000, republishAfterMs: 5_000 }))

      yield* TestClock.adjust(4_000)
      expect((yield* t.job(job.id)).state).toBe("queued")
      yield* TestClock.adjust(3_000)

      const done = yield* t.job(job.id)
      expect(done.state).toBe("succeeded")
      expect(done.result).toBe(7)
      expect(calls.n).toBe(1)
    })
  )

  it.effect("publishes the requeued job records of the sweep reply", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      const job = yield* submitOne(t.store, { type: "echo", input: 1, priority: 3 })
      yield* claimOne(t.store, job.id, "dead", 2_000)

      const early = yield* t.provide(Sweeper.runOnce({ republishAfterMs: 60_000 }))
      expect(early.requeued).toEqual([])
      yield* TestClock.adjust(2_001)
      const swept = yield* t.provide(Sweeper.runOnce({ republishAfterMs: 60_000 }))

      expect(swept.now).toBe(2_001)
      expect(swept.requeued).toEqual([yield* t.job(job.id)])
      expect(swept.requeued[0]).toMatchObject({ state: "queued", runAfter: 2_001, leaseOwner: null })
      expect((yield* t.receive).map((d) => [d.jobId, d.type, d.version, d.priority])).toEqual([[job.id, "echo", 1, 3]])
    })
  )

  it.effect("fails an expired job with no attempt left and counts the dead letter", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      const job = yield* submitOne(t.store, { type: "echo", input: 1, maxAttempts: 1 })
      yield* claimOne(t.store, job.id, "dead", 2_000)
      yield* TestClock.adjust(2_001)
      const before = yield* Metrics.snapshot

      const swept = yield* t.provide(Sweeper.runOnce())

      expect(swept.expiredFailed).toEqual([job.id])
      const failed = yield* t.job(job.id)
      expect([failed.state, failed.errorClass]).toEqual(["failed", "lease_expired"])
      expect(yield* t.receive).toEqual([])
      const after = yield* Metrics.snapshot
      expect(
        Metrics.read(after, "slowcall_dead_letter_arrivals_total") -
          Metrics.read(before, "slowcall_dead_letter_arrivals_total")
      ).toBe(1)
    })
  )

  it.effect("a job waiting in the transport is republished once per republishAfterMs, not on every sweep", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      const job = yield* t.submit(1)
      expect(yield* t.memory.size("q")).toBe(1)
      yield* TestClock.adjust(31_000)

      const handedOut: Array<number> = []
      for (let i = 0; i < 10; i++) {
        const swept = yield* t.provide(Sweeper.runOnce({ republishAfterMs: 30_000 }))
        handedOut.push(swept.stale.length)
        yield* TestClock.adjust(5_000)
      }

      // Sweeps at 31, 36, ..., 76 s: the job goes out at 31 s, then at 66 s (at 61 s exactly 30 s have passed, not
      // more), never in between.
      expect(handedOut).toEqual([1, 0, 0, 0, 0, 0, 0, 1, 0, 0])
      expect(yield* t.memory.size("q")).toBe(3)
      expect(yield* t.job(job.id)).toEqual(job)
    })
  )

  it.effect("a transport whose ack does not remove messages gets requeued jobs but never stale ones", () =>
    Effect.gen(function* () {
      const t = yield* setup((memory) => ({ ...memory, capabilities: { ...memory.capabilities, ackRemoves: false } }))
      const waiting = yield* t.submit(1)
      const orphan = yield* t.submit(2)
      yield* claimOne(t.store, orphan.id, "dead", 2_000)
      // Ack the two original messages so only the sweeper's publishes are left to see.
      const originals = yield* t.receive
      expect(originals.map((d) => d.jobId)).toEqual([waiting.id, orphan.id])
      for (const delivery of originals) yield* t.memory.ack({ items: [{ delivery }] })
      yield* TestClock.adjust(31_000)

      const swept = yield* t.provide(Sweeper.runOnce({ republishAfterMs: 30_000 }))

      expect(swept.requeued.map((job) => job.id)).toEqual([orphan.id])
      expect(swept.stale.map((job) => job.id)).toEqual([waiting.id])
      expect((yield* t.receive).map((d) => d.jobId)).toEqual([orphan.id])
    })
  )

  it.effect("a failed publish is logged and the sweep still reports what it wrote", () =>
    Effect.gen(function* () {
      const t = yield* setup((memory) => ({
        ...memory,
        publish: () => Effect.fail(new TransportError({ reason: "Timeout", operation: "publish", detail: "lost" }))
      }))
      const job = yield* submitOne(t.store, { type: "echo", input: 1 })
      yield* claimOne(t.store, job.id, "dead", 2_000)
      yield* TestClock.adjust(2_001)

      const swept = yield* t.provide(Sweeper.runOnce())

      expect(swept.requeued.map((j) => j.id)).toEqual([job.id])
      expect((yield* t.job(job.id)).state).toBe("queued")
      expect(yield* t.memory.size("q")).toBe(0)
    })
  )
})
