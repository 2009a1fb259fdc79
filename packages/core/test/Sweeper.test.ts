import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, TestClock } from "effect"
import * as Client from "../src/Client.js"
import { TransportError } from "../src/Errors.js"
import * as Handler from "../src/Handler.js"
import * as Metrics from "../src/Metrics.js"
import * as StoreModule from "../src/Store.js"
import { Store } from "../src/Store.js"
import * as Sweeper from "../src/Sweeper.js"
import * as TransportModule from "../src/Transport.js"
import { Transport } from "../src/Transport.js"
import * as Worker from "../src/Worker.js"

const setup = Effect.gen(function* () {
  const store = yield* StoreModule.makeMemory
  const transport = yield* TransportModule.makeMemory()
  const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.provideService(Store, store), Effect.provideService(Transport, transport))
  const receive = transport.receive({ queue: "q", max: 10, visibilityMs: 60_000, waitMs: 0 })
  return { store, transport, provide, receive }
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
      const t = yield* setup
      const lossy: Transport["Type"] = {
        ...t.transport,
        publish: () => Effect.fail(new TransportError({ reason: "Timeout", operation: "publish", detail: "lost" }))
      }
      const { job } = yield* Client.make.pipe(
        Effect.flatMap((client) => client.submit({ queue: "q", type: "echo", input: 7 })),
        Effect.provideService(Store, t.store),
        Effect.provideService(Transport, lossy)
      )
      expect(yield* t.transport.size("q")).toBe(0)
      const calls = { n: 0 }
      yield* t.provide(Worker.make({ queue: "q", id: "w", handlers: [echo(calls)] }))
      yield* t.provide(Sweeper.make({ intervalMs: 1_000, republishAfterMs: 5_000 }))

      yield* TestClock.adjust(4_000)
      expect((yield* t.store.get({ jobId: job.id })).state).toBe("queued")
      yield* TestClock.adjust(3_000)

      const done = yield* t.store.get({ jobId: job.id })
      expect(done.state).toBe("succeeded")
      expect(done.result).toBe(7)
      expect(calls.n).toBe(1)
    })
  )

  it.effect("requeues and republishes a job whose worker died holding the lease", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const { job } = yield* t.store.submit({
        id: "01890a5d-ac96-774b-bcce-b302099a8057" as never,
        queue: "q",
        type: "echo",
        version: 1,
        inputHash: "h",
        input: 1,
        maxAttempts: 3
      })
      yield* t.store.claim({ jobId: job.id, owner: "dead", leaseMs: 2_000 })

      const early = yield* t.provide(Sweeper.runOnce({ republishAfterMs: 60_000 }))
      expect(early.requeued).toEqual([])
      yield* TestClock.adjust(2_001)
      const swept = yield* t.provide(Sweeper.runOnce({ republishAfterMs: 60_000 }))

      expect(swept.requeued).toEqual([job.id])
      expect((yield* t.store.get({ jobId: job.id })).state).toBe("queued")
      expect((yield* t.receive).map((d) => [d.jobId, d.type, d.version])).toEqual([[job.id, "echo", 1]])
    })
  )

  it.effect("fails an expired job with no attempt left and counts the dead letter", () =>
    Effect.gen(function* () {
      const t = yield* setup
      const { job } = yield* t.store.submit({
        id: "01890a5d-ac96-774b-bcce-b302099a8058" as never,
        queue: "q",
        type: "echo",
        version: 1,
        inputHash: "h",
        input: 1,
        maxAttempts: 1
      })
      yield* t.store.claim({ jobId: job.id, owner: "dead", leaseMs: 2_000 })
      yield* TestClock.adjust(2_001)
      const before = yield* Metrics.snapshot

      const swept = yield* t.provide(Sweeper.runOnce())

      expect(swept.expiredFailed).toEqual([job.id])
      const failed = yield* t.store.get({ jobId: job.id })
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
      const t = yield* setup
      const { job } = yield* t.provide(
        Effect.flatMap(Client.make, (client) => client.submit({ queue: "q", type: "echo", input: 1 }))
      )
      expect(yield* t.transport.size("q")).toBe(1)
      yield* TestClock.adjust(31_000)

      const handedOut: Array<number> = []
      for (let i = 0; i < 10; i++) {
        const swept = yield* t.provide(Sweeper.runOnce({ republishAfterMs: 30_000 }))
        handedOut.push(swept.stale.length)
        yield* TestClock.adjust(5_000)
      }

      // Sweeps at 31, 36, ..., 76 s: the job goes out again at 31 s and at 61 s, never in between.
      expect(handedOut).toEqual([1, 0, 0, 0, 0, 0, 1, 0, 0, 0])
      expect(yield* t.transport.size("q")).toBe(3)
      expect(yield* t.store.get({ jobId: job.id })).toEqual(job)
    })
  )
})
