/**
 * Values Postgres cannot keep (U+0000 in jsonb or text): a write that carries one fails as a final, non-retryable
 * `Constraint` StoreError and changes nothing; the Client refuses such input before any write on every Store; and
 * a model reply that carries one is paid for once, never called again on a later attempt.
 */
import { expect, it, layer } from "@effect/vitest"
import * as Client from "@slowcall/core/Client"
import * as Handler from "@slowcall/core/Handler"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import type { SubmitItem } from "@slowcall/core/Protocol"
import { Query } from "@slowcall/core/Query"
import * as StoreModule from "@slowcall/core/Store"
import { Store } from "@slowcall/core/Store"
import * as Sweeper from "@slowcall/core/Sweeper"
import * as TransportModule from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Effect, Layer, Schema } from "effect"
import { describe } from "vitest"
import {
  holdServer,
  only,
  pgliteStoreLayer,
  serverLayer,
  serverStoreLayer,
  submitOptions,
  uniqueSchema
} from "./support.js"

holdServer()

const submitNul = (id: JobId, extra: Partial<SubmitItem> = {}) => submitOptions("nul", id, extra)

const backends = [
  { name: "postgres server", layer: () => serverStoreLayer(uniqueSchema("nul")) },
  { name: "pglite", layer: () => pgliteStoreLayer() }
] as const

for (const backend of backends) {
  layer(backend.layer())(`U+0000 at the Store: ${backend.name}`, (it) => {
    it.effect("a submit whose input holds U+0000 fails with a final Constraint error and writes nothing", () =>
      Effect.gen(function* () {
        const store = yield* Store
        const query = yield* Query
        const id = yield* makeJobId
        const neighbour = yield* makeJobId

        const error = yield* Effect.flip(
          store.submit({ items: [submitNul(neighbour), submitNul(id, { input: { text: "a\u0000b" } })] })
        )

        expect(error).toMatchObject({ _tag: "StoreError", reason: "Constraint", operation: "submit" })
        expect(error.isRetryable).toBe(false)
        expect(yield* Effect.flip(query.get({ jobId: id }))).toMatchObject({ _tag: "JobNotFound" })
        expect(yield* Effect.flip(query.get({ jobId: neighbour }))).toMatchObject({ _tag: "JobNotFound" })
      })
    )

    it.effect("a result or evidence holding U+0000 fails with a final Constraint error; the lease stays usable", () =>
      Effect.gen(function* () {
        const store = yield* Store
        const query = yield* Query
        const id = yield* makeJobId
        yield* store.submit({ items: [submitNul(id)] })
        const claim = only(yield* store.claim({ items: [{ jobId: id, owner: "w", leaseMs: 60_000 }] }))
        const token = claim._tag === "Claimed" ? claim.job.leaseToken : -1
        const before = yield* query.get({ jobId: id })
        const settle = (outcome: Parameters<typeof store.settle>[0]["items"][number]["outcome"]) =>
          store.settle({ items: [{ jobId: id, token, outcome }] })

        const complete = yield* Effect.flip(settle({ _tag: "Complete", result: { text: "x\u0000y" } }))
        const fail = yield* Effect.flip(settle({ _tag: "Fail", errorClass: "unknown", error: "x\u0000y" }))

        for (const error of [complete, fail]) {
          expect(error).toMatchObject({ _tag: "StoreError", reason: "Constraint" })
          expect(error.isRetryable).toBe(false)
        }
        expect(yield* query.get({ jobId: id })).toEqual(before)
        const failed = only(yield* settle({ _tag: "Fail", errorClass: "unknown", error: "result not storable" }))
        expect(failed).toMatchObject({
          _tag: "Settled",
          job: { state: "failed", errorClass: "unknown", leaseToken: token }
        })
      })
    )
  })
}

describe("U+0000 through the Client", () => {
  const scenario = Effect.gen(function* () {
    const client = yield* Client.make
    const query = yield* Query
    const queue = `nul-in-${(yield* makeJobId).slice(-8)}`
    const error = yield* Effect.flip(client.submit({ queue, type: "t", input: { text: "a\u0000b" } }))
    const written = yield* query.list({ queue })
    return { error: error._tag, written: written.length }
  })

  it.effect("is refused as InvalidInput before any write, on the memory store and on Postgres alike", () =>
    Effect.gen(function* () {
      const memory = yield* scenario.pipe(
        Effect.provide(Layer.merge(StoreModule.layerMemory, TransportModule.layerMemory()))
      )
      const pg = yield* scenario.pipe(Effect.provide(serverLayer(uniqueSchema("nul_client"))))

      expect(memory).toEqual({ error: "InvalidInput", written: 0 })
      expect(pg).toEqual(memory)
    })
  )
})

describe("U+0000 in a model reply", () => {
  it.live(
    "is paid for once: the job settles without a second model call",
    () =>
      Effect.gen(function* () {
        const calls = { n: 0 }
        const handler = Handler.make({
          type: "t",
          version: 1,
          input: Schema.Struct({ text: Schema.String }),
          result: Schema.Struct({ text: Schema.String }),
          attempt: { timeoutMs: 100, marginMs: 400 },
          run: (_input, ctx) =>
            ctx
              .call({ estimateCents: 1, run: Effect.sync(() => ++calls.n), cost: () => 1 })
              .pipe(Effect.as({ text: "model said \u0000 here" }))
        })
        const store = yield* Store
        const query = yield* Query
        const id = yield* makeJobId
        yield* store.submit({ items: [submitNul(id, { maxAttempts: 2 })] })
        yield* Worker.make({ queue: "nul", id: "w1", handlers: [handler], receiveWaitMs: 100 })
        yield* Sweeper.make({ queue: "nul", intervalMs: 100, republishAfterMs: 60_000 })

        let job = yield* query.get({ jobId: id })
        for (let i = 0; i < 100 && (job.state === "queued" || job.state === "running"); i++) {
          yield* Effect.sleep(100)
          job = yield* query.get({ jobId: id })
        }

        expect({ calls: calls.n, costCents: job.costCents, state: job.state, errorClass: job.errorClass }).toEqual({
          calls: 1,
          costCents: 1,
          state: "failed",
          errorClass: "unknown"
        })
      }).pipe(Effect.scoped, Effect.provide(serverLayer(uniqueSchema("nul_reply"), { pollMs: 50 }))),
    30_000
  )
})
