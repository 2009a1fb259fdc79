/**
 * The keep-alive takeover through a real core `Worker` on a real backend: a job claimed by a process that then died
 * (its lease claimed once, never renewed) is taken over by a live Worker's `Store.claimNext` as soon as that lease
 * ends, with no Sweeper running, and the dead holder's token can never commit afterwards. The conformance suite
 * checks `claimNext`'s takeover verb by verb under `TestClock`; this test checks that the Worker's own intake finds
 * the lapsed lease on the backend's clock, with the backend's wake-ups and polling, in seconds rather than after the
 * handler's worst case.
 *
 * It runs on live time (real waits of a few seconds). The layer is built once, for the test, and closed after it.
 *
 * @since 0.9.0
 */
import { expect, it } from "@effect/vitest"
import * as Handler from "@slowcall/core/Handler"
import { Query } from "@slowcall/core/Query"
import { Store } from "@slowcall/core/Store"
import type { Transport } from "@slowcall/core/Transport"
import * as Worker from "@slowcall/core/Worker"
import { Context, Effect, Layer, Schedule, Schema } from "effect"
import { describe } from "vitest"
import { makeJobFactory } from "./JobFactory.js"

/**
 * How a backend runs the takeover test: a display name and a layer providing the Store, its Query and a Transport
 * whose intake the Worker uses as it would in production (a store-selected one, `claimsFromStore`, for Postgres and
 * Redis). The transport must find due and lapsed jobs by itself (wake-ups or polling): nothing publishes a message
 * for the takeover. `leaseMs` is the dead holder's lease (default 1.5 s); `withinMs` bounds the wait for the
 * takeover (default 15 s, far below the handler's 66 s worst case).
 *
 * @since 0.9.0
 * @category models
 */
export interface KeepAliveTakeoverOptions {
  /** Shown in the describe block; never used to change behaviour. */
  readonly name: string
  readonly layer: Layer.Layer<Store | Query | Transport, unknown>
  readonly leaseMs?: number | undefined
  readonly withinMs?: number | undefined
}

/** The handler's worst case is a 60 s call (a 66 s lease, `Lease.leaseFor`); the Worker holds its keep-alive. */
const slowEcho = Handler.make({
  type: "conformance.echo",
  version: 1,
  input: Schema.Struct({ n: Schema.Number }),
  result: Schema.Struct({ echoed: Schema.Number }),
  attempt: { timeoutMs: 60_000 },
  run: (input) => Effect.succeed({ echoed: input.n })
})

/**
 * Registers the keep-alive takeover test (a vitest `describe` block with one live test) for one backend. It keeps
 * the lease protocol's recovery promise under the Worker: a lapsed lease goes to the next claimer directly (attempt
 * 1 `expired`, attempt 2 `succeeded` under token 2, started after the dead lease ended), without a sweep and long
 * before the attempt's worst case, and a settle under the dead holder's token is `LeaseLost` and changes nothing.
 *
 * @since 0.9.0
 * @category testing
 */
export const KeepAliveTakeover = (options: KeepAliveTakeoverOptions): void => {
  const leaseMs = options.leaseMs ?? 1_500
  const withinMs = options.withinMs ?? 15_000
  describe(`KeepAliveTakeover: ${options.name}`, () => {
    it.live(
      "a lease claimed and never renewed is taken over by a Worker's claimNext once it ends; no sweep runs",
      () =>
        Effect.scoped(
          Effect.gen(function* () {
            const context = yield* Layer.build(options.layer)
            const store = Context.get(context, Store)
            const query = Context.get(context, Query)
            const factory = makeJobFactory()
            const queue = factory.uniqueName("keepalive")
            const item = yield* factory.submitItem({ queue, input: { n: 7 } })
            const jobId = item.id
            const submitted = (yield* store.submit({ items: [item] })).results[0]
            if (submitted?._tag !== "Created") return yield* Effect.dieMessage(`not created: ${submitted?._tag}`)
            // A process claims the job with a short keep-alive, then dies: nothing renews it, no Sweeper runs.
            const dead = (yield* store.claim({ items: [{ jobId, owner: "dead/1", leaseMs }] })).results[0]
            if (dead?._tag !== "Claimed") return yield* Effect.dieMessage(`not claimed: ${dead?._tag}`)

            yield* Worker.make({ queue, handlers: [slowEcho] }).pipe(Effect.provide(context))
            yield* Effect.repeat(query.get({ jobId }), {
              until: (job) => job.state === "succeeded",
              schedule: Schedule.spaced("100 millis")
            }).pipe(Effect.timeout(withinMs))
            const done = yield* query.get({ jobId })

            const attempts = yield* query.attempts({ jobId })
            expect(attempts.map((a) => [a.token, a.worker === "dead/1", a.outcome])).toEqual([
              [1, true, "expired"],
              [2, false, "succeeded"]
            ])
            // Taken over once the dead lease ended (store time), long before the 66 s worst case the wait above
            // would have needed to cover.
            expect(attempts[1]!.startedAt).toBeGreaterThan(dead.job.leaseUntil!)
            expect(done.leaseToken).toBe(2)
            expect(done.result).toEqual({ echoed: 7 })
            // The dead holder's token can never commit.
            const late = yield* store.settle({
              items: [{ jobId, token: 1, outcome: { _tag: "Complete", result: { echoed: -1 } } }]
            })
            expect(late.results[0]?._tag).toBe("LeaseLost")
            expect((yield* query.get({ jobId })).result).toEqual({ echoed: 7 })
          })
        ),
      withinMs + 30_000
    )
  })
}
