/**
 * Store conformance, fair claims: `claimNext` with `fair` picks across tenants by `Fairness.pick` (least decayed
 * service per weight first, today's order within a tenant and between equal services) and keeps each tenant's
 * service per queue in the same write. Equal weights alternate; a tenant that arrives behind another's backlog is
 * served first until its service catches up; weights divide the picks; service halves every half-life; jobs with no
 * tenant are one tenant; a bad `fair` claims nothing.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import { StoreError } from "@slowcall/core/Errors"
import type { FairOptions } from "@slowcall/core/Fairness"
import type { Job } from "@slowcall/core/Job"
import { Effect } from "effect"
import { type Area, type Fixture, LEASE } from "./fixture.js"

/** Registers the fair-claim tests. @internal */
export const fairnessTests = ({ it, fixture }: Area): void => {
  describe("fair claimNext", () => {
    /** One fair claim of up to `max` at the test's clock: the ids it claimed, in pick order. */
    const fairClaim = (f: Fixture, fair: FairOptions, max = 1) =>
      Effect.gen(function* () {
        const reply = yield* f.store.claimNext({
          queue: f.queue,
          max,
          owner: "fair",
          leaseMs: LEASE,
          now: yield* f.now,
          fair
        })
        return reply.results.map((r) => r.job.id)
      })
    /** `count` jobs of one tenant, submitted one after another: their ids. */
    const submitMany = (f: Fixture, tenant: string | null, count: number, spec: { readonly priority?: number } = {}) =>
      Effect.gen(function* () {
        const jobs: Array<Job> = []
        for (let i = 0; i < count; i++) jobs.push(yield* f.submit({ tenant, ...spec }))
        return jobs.map((job) => job.id)
      })

    it.effect("equal weights and equal history alternate between tenants, each in its own order", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const { factory } = f
        const a = yield* submitMany(f, factory.uniqueName("a"), 4)
        const b = yield* submitMany(f, factory.uniqueName("b"), 2)

        const picks: Array<string> = []
        for (let i = 0; i < 7; i++) picks.push(...(yield* fairClaim(f, {})))

        // Equal service (none yet) is broken by the head jobs' order: A's first job was inserted first.
        expect(picks).toEqual([a[0], b[0], a[1], b[1], a[2], a[3]])
      })
    )

    it.effect("one batch picks what the same claims one at a time would pick", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const { factory } = f
        const a = yield* submitMany(f, factory.uniqueName("a"), 3)
        const b = yield* submitMany(f, factory.uniqueName("b"), 3, { priority: 1 })

        const picks = yield* fairClaim(f, {}, 5)

        // B's head has the higher priority, so it wins the first tie; within each tenant, today's order.
        expect(picks).toEqual([b[0], a[0], b[1], a[1], b[2]])
      })
    )

    it.effect("a tenant that arrives behind another's backlog is served first until its service catches up", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const { factory } = f
        const a = yield* submitMany(f, factory.uniqueName("a"), 8)
        const first = yield* fairClaim(f, {}, 4)
        const b = yield* submitMany(f, factory.uniqueName("b"), 6)

        const next = yield* fairClaim(f, {}, 6)

        expect(first).toEqual(a.slice(0, 4))
        // A has 4 picks of service, B none: B's first four come first, then a tie at 4 broken by insertion (A's).
        expect(next).toEqual([b[0], b[1], b[2], b[3], a[4], b[4]])
      })
    )

    it.effect("weights divide the picks: weight 2 gets two for one", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const { factory } = f
        const heavyName = factory.uniqueName("heavy")
        const heavy = yield* submitMany(f, heavyName, 6)
        const light = yield* submitMany(f, factory.uniqueName("light"), 6)

        const picks = yield* fairClaim(f, { weights: { [heavyName]: 2 } }, 6)

        // Keys: heavy 0, 0.5, 1, 1.5; light 0, 1. Ties go to the earlier insertion (heavy's).
        expect(picks).toEqual([heavy[0], light[0], heavy[1], heavy[2], light[1], heavy[3]])
      })
    )

    it.effect("service halves every half-life and is kept per queue", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const { factory, advance, queue, submit, store, now } = f
        const aName = factory.uniqueName("a")
        const a = yield* submitMany(f, aName, 6)
        const fair = { halfLifeMs: 1_000 }
        expect(yield* fairClaim(f, fair, 4)).toEqual(a.slice(0, 4))
        // The same tenant's service on another queue is its own.
        const elsewhere = yield* submit({ queue: `${queue}-other`, tenant: aName })
        const other = yield* store.claimNext({
          queue: `${queue}-other`,
          max: 1,
          owner: "fair",
          leaseMs: LEASE,
          now: yield* now,
          fair
        })
        expect(other.results.map((r) => r.job.id)).toEqual([elsewhere.id])
        yield* advance(2_000)
        const b = yield* submitMany(f, factory.uniqueName("b"), 3)

        // Two half-lives: A's 4 became 1, so B's first pick (0) comes first, then a tie at 1 goes to A (inserted first).
        const picks = yield* fairClaim(f, fair, 3)

        expect(picks).toEqual([b[0], a[4], b[1]])
      })
    )

    it.effect("jobs with no tenant are one tenant of the default weight", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const { factory } = f
        const none = yield* submitMany(f, null, 3)
        const named = yield* submitMany(f, factory.uniqueName("n"), 3)

        const picks = yield* fairClaim(f, { defaultWeight: 1 }, 4)

        expect(picks).toEqual([none[0], named[0], none[1], named[1]])
      })
    )

    it.effect("a fair claim leaves jobs it may not run out of the order, and takes none of them", () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const { factory, store, queue, now, submit, get } = f
        const aName = factory.uniqueName("a")
        const skipped = yield* submit({ tenant: aName, type: "kind.other" })
        const a = yield* submit({ tenant: aName })
        const b = yield* submit({ tenant: factory.uniqueName("b") })

        const reply = yield* store.claimNext({
          queue,
          max: 3,
          owner: "fair",
          leaseMs: LEASE,
          now: yield* now,
          fair: {},
          types: [{ type: a.type, version: a.version }]
        })

        expect(reply.results.map((r) => [r._tag, r.job.id])).toEqual([
          ["Claimed", a.id],
          ["Claimed", b.id]
        ])
        expect(yield* get(skipped.id)).toEqual(skipped)
      })
    )

    it.effect("a bad fair option fails with Constraint and claims nothing", () =>
      Effect.gen(function* () {
        const { store, queue, now, submit, get } = yield* fixture
        const job = yield* submit()
        const at = yield* now

        const errors = yield* Effect.forEach(
          [{ defaultWeight: 0 }, { weights: { x: Number.NaN } }, { halfLifeMs: 1 }] satisfies Array<FairOptions>,
          (fair) => Effect.flip(store.claimNext({ queue, max: 1, owner: "fair", leaseMs: LEASE, now: at, fair }))
        )

        for (const error of errors) {
          expect(error).toBeInstanceOf(StoreError)
          expect(error).toMatchObject({ reason: "Constraint", operation: "claimNext" })
        }
        expect(yield* get(job.id)).toEqual(job)
      })
    )
  })
}
