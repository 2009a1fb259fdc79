/**
 * The generators of the model-based property: small value sets chosen so that sequences meet the interesting
 * cases often (a couple of shared request keys with the same and other inputs and options, with and without their
 * fingerprint, a few owners, tokens that are
 * current, one behind or one ahead, leases of 1 ms, budgets that a few charges exhaust, deadlines a lease or two
 * away) and time steps that land on boundaries. Amounts are multiples of 0.5, so every sum is exact.
 *
 * @internal
 */

import type { ErrorClass } from "@slowcall/core/ErrorClass"
import type { JobState } from "@slowcall/core/Job"
import fc from "fast-check"
import { type FilterSpec, type OutcomeSpec, type Specs, Step, type SubmitSpec } from "./commands.js"
import type { JobRef } from "./world.js"

/** A job reference: one of the sequence's jobs, often one that is running or failed, now and then no job. */
const job: fc.Arbitrary<JobRef> = fc.oneof(
  { weight: 8, arbitrary: fc.nat({ max: 7 }) },
  { weight: 6, arbitrary: fc.constantFrom<JobRef>("running", "running2") },
  { weight: 2, arbitrary: fc.constant<JobRef>("failed") },
  { weight: 1, arbitrary: fc.constant<JobRef>("unknown") }
)

/** The job of a claim: often one that is queued (due or not), often one that is running (busy or expired). */
const claimJob: fc.Arbitrary<JobRef> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<JobRef>("queued") },
  { weight: 3, arbitrary: fc.constant<JobRef>("running") },
  { weight: 4, arbitrary: fc.nat({ max: 7 }) },
  { weight: 1, arbitrary: fc.constant<JobRef>("unknown") }
)

/** The job of a fenced write: mostly one that is running now, so that the current token often holds. */
const runningJob: fc.Arbitrary<JobRef> = fc.oneof(
  { weight: 10, arbitrary: fc.constantFrom<JobRef>("running", "running2") },
  { weight: 4, arbitrary: fc.nat({ max: 7 }) },
  { weight: 1, arbitrary: fc.constant<JobRef>("unknown") }
)

/** The job of a replay: mostly one that failed. */
const failedJob: fc.Arbitrary<JobRef> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<JobRef>("failed") },
  { weight: 3, arbitrary: fc.nat({ max: 7 }) },
  { weight: 1, arbitrary: fc.constant<JobRef>("unknown") }
)

const token = fc.oneof(
  { weight: 8, arbitrary: fc.constant("current" as const) },
  { weight: 2, arbitrary: fc.constant("stale" as const) },
  { weight: 1, arbitrary: fc.constant("next" as const) }
)

const errorClass = fc.constantFrom<ErrorClass>("timeout", "auth", "rate_limited")

const leaseMs = fc.constantFrom(1, 1_000, 3_000)

/** A batch: mostly of one item, sometimes two or three (which may name the same job). */
const batch = <A>(item: fc.Arbitrary<A>): fc.Arbitrary<ReadonlyArray<A>> =>
  fc.oneof(
    { weight: 3, arbitrary: item.map((one) => [one]) },
    { weight: 1, arbitrary: fc.array(item, { minLength: 2, maxLength: 3 }) }
  )

const submitSpec: fc.Arbitrary<SubmitSpec> = fc.record({
  tenant: fc.constantFrom(0, 0, 1, 2),
  key: fc.constantFrom(null, null, "key-0", "key-1"),
  input: fc.constantFrom(0, 1, 2),
  type: fc.constantFrom(0, 1),
  delayMs: fc.constantFrom(0, 0, 0, 500, 2_000),
  deadlineMs: fc.constantFrom(null, null, 1_000, 4_000),
  budgetCents: fc.constantFrom(null, null, 3, 6),
  maxAttempts: fc.constantFrom(1, 2, 3),
  priority: fc.constantFrom(0, 0, 1),
  fingerprinted: fc.constantFrom(true, true, true, false)
})

const outcome: fc.Arbitrary<OutcomeSpec> = fc.oneof(
  fc.record({ _tag: fc.constant("Complete" as const), result: fc.constantFrom(null, "done", { n: 1.5 }) }),
  fc.record({ _tag: fc.constant("Retry" as const), delayMs: fc.constantFrom(0, 500, 3_000), errorClass }),
  fc.record({ _tag: fc.constant("Fail" as const), errorClass }),
  fc.record({
    _tag: fc.constant("Abandon" as const),
    reason: fc.constantFrom("deadline" as const, "budget" as const, "cancelled" as const),
    errorClass: fc.option(errorClass, { nil: null })
  }),
  fc.constant({ _tag: "Release" as const })
)

const filter: fc.Arbitrary<FilterSpec> = fc.record(
  { tenant: fc.constantFrom(0, 1), errorClass, type: fc.constantFrom(0, 1) },
  { requiredKeys: [] }
)

const step = <K extends keyof Specs>(kind: K, spec: fc.Arbitrary<Specs[K]>): fc.Arbitrary<Step> =>
  spec.map((data) => new Step(kind, data) as unknown as Step)

/**
 * What each sequence starts with, so that its first commands meet jobs: one submit of one to four items.
 *
 * @internal
 */
export const prelude: fc.Arbitrary<Step> = step("Submit", fc.array(submitSpec, { minLength: 1, maxLength: 4 }))

/**
 * Every command of the property, weighted towards the writes that move jobs through their lives.
 *
 * @internal
 */
export const command: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: step("Submit", batch(submitSpec)) },
  {
    weight: 8,
    arbitrary: step(
      "Claim",
      batch(
        fc.record({
          job: claimJob,
          owner: fc.nat({ max: 2 }),
          leaseMs,
          estimateCents: fc.constantFrom(null, null, 0, 2, 5)
        })
      )
    )
  },
  {
    weight: 3,
    arbitrary: step(
      "ClaimNext",
      fc.record({
        owner: fc.nat({ max: 2 }),
        max: fc.integer({ min: 1, max: 3 }),
        leaseMs,
        // No filter most of the time; else the types it may pick (possibly none of the submitted ones).
        types: fc.option(fc.subarray([0, 1]), { nil: null, freq: 2 })
      })
    )
  },
  {
    weight: 3,
    arbitrary: step(
      "Heartbeat",
      batch(fc.record({ job: runningJob, token, leaseMs, progress: fc.constantFrom(null, 0.5, 1.5) }))
    )
  },
  { weight: 6, arbitrary: step("Settle", batch(fc.record({ job: runningJob, token, outcome }))) },
  {
    weight: 4,
    arbitrary: step(
      "Charge",
      batch(
        fc.record({
          job: runningJob,
          call: fc.nat({ max: 2 }),
          token,
          amountCents: fc.constantFrom(0, 1, 2.5, 4),
          settled: fc.boolean()
        })
      )
    )
  },
  {
    weight: 2,
    arbitrary: step(
      "Cancel",
      batch(fc.record({ job, tenant: fc.constantFrom("own" as const, "other" as const, "none" as const) }))
    )
  },
  {
    weight: 2,
    arbitrary: step(
      "Replay",
      fc.record({
        jobs: fc.array(failedJob, { minLength: 1, maxLength: 3 }),
        filter: fc.option(filter, { nil: null, freq: 2 })
      })
    )
  },
  {
    weight: 1,
    arbitrary: step(
      "ReplayWhere",
      fc.record({
        filter,
        jobs: fc.option(fc.array(failedJob, { minLength: 1, maxLength: 3 }), { nil: null }),
        limit: fc.constantFrom(null, 1, 2)
      })
    )
  },
  {
    weight: 3,
    arbitrary: step(
      "Sweep",
      fc.record({ republishAfterMs: fc.constantFrom(null, 0, 1_000), limit: fc.constantFrom(null, null, 1, 2) })
    )
  },
  { weight: 4, arbitrary: step("Tick", fc.record({ ms: fc.constantFrom(0, 1, 2, 499, 500, 1_000, 3_000) })) },
  {
    weight: 4,
    arbitrary: step(
      "TickTo",
      fc.record({
        job,
        field: fc.constantFrom("leaseUntil" as const, "runAfter" as const, "deadlineAt" as const),
        offset: fc.constantFrom(-1, 0, 1)
      })
    )
  },
  {
    weight: 1,
    arbitrary: step(
      "List",
      fc.record({
        filter,
        state: fc.constantFrom<JobState | null>(null, "queued", "running", "failed", "succeeded", "abandoned"),
        limit: fc.constantFrom(null, 1, 2, "all" as const),
        order: fc.constantFrom("newest" as const, "oldest" as const),
        requestKey: fc.constantFrom(null, null, "key-0", "key-1"),
        after: fc.option(job, { nil: null, freq: 2 })
      })
    )
  },
  { weight: 1, arbitrary: step("DeadLetters", fc.record({ filter, limit: fc.constantFrom(null, 1, 2) })) },
  {
    weight: 1,
    arbitrary: step(
      "Stats",
      fc.record({
        tenant: fc.constantFrom(null, 0, 1, 2),
        sinceMs: fc.constantFrom(0, 1, 1_000, 100_000),
        spendMs: fc.constantFrom(null, 0, 1, 1_000, 100_000),
        upTo: fc.constantFrom(0, 1, 2, 100)
      })
    )
  },
  {
    weight: 1,
    arbitrary: step(
      "Get",
      fc.record({ job, tenant: fc.constantFrom("own" as const, "other" as const, "none" as const) })
    )
  }
)
