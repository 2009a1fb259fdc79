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
import type { PurgeState } from "../../StoreModel.js"
import {
  type BatchRef,
  type FilterSpec,
  type OutcomeSpec,
  type PurgeSpec,
  type Specs,
  Step,
  type SubmitSpec
} from "./commands.js"
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

/** @internal */
export const token = fc.oneof(
  { weight: 8, arbitrary: fc.constant("current" as const) },
  { weight: 2, arbitrary: fc.constant("stale" as const) },
  { weight: 1, arbitrary: fc.constant("next" as const) }
)

const errorClass = fc.constantFrom<ErrorClass>("timeout", "auth", "rate_limited")

/** @internal */
export const leaseMs = fc.constantFrom(1, 1_000, 3_000)

/** A batch: mostly of one item, sometimes two or three (which may name the same job). */
const batch = <A>(item: fc.Arbitrary<A>): fc.Arbitrary<ReadonlyArray<A>> =>
  fc.oneof(
    { weight: 3, arbitrary: item.map((one) => [one]) },
    { weight: 1, arbitrary: fc.array(item, { minLength: 2, maxLength: 3 }) }
  )

/** @internal */
export const submitSpec: fc.Arbitrary<SubmitSpec> = fc.record({
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

/** Outcomes, failures weighted up so that dead letters (and groups of them with one input) are common. @internal */
export const outcome: fc.Arbitrary<OutcomeSpec> = fc.oneof(
  fc.record({ _tag: fc.constant("Complete" as const), result: fc.constantFrom(null, "done", { n: 1.5 }) }),
  fc.record({ _tag: fc.constant("Retry" as const), delayMs: fc.constantFrom(0, 500, 3_000), errorClass }),
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("Fail" as const), errorClass }) },
  fc.record({
    _tag: fc.constant("Abandon" as const),
    reason: fc.constantFrom("deadline" as const, "budget" as const, "cancelled" as const),
    errorClass: fc.option(errorClass, { nil: null })
  }),
  fc.constant({ _tag: "Release" as const }),
  fc.record({ _tag: fc.constant("Throttle" as const), delayMs: fc.constantFrom(0, 500, 3_000) })
)

const filter: fc.Arbitrary<FilterSpec> = fc.record(
  { tenant: fc.constantFrom(0, 1), errorClass, type: fc.constantFrom(0, 1), input: fc.constantFrom(0, 1, 2) },
  { requiredKeys: [] }
)

const step = <K extends keyof Specs>(kind: K, spec: fc.Arbitrary<Specs[K]>): fc.Arbitrary<Step> =>
  spec.map((data) => new Step(kind, data) as unknown as Step)

/**
 * What each sequence starts with, so that its first commands meet jobs: one submit of one to six items.
 *
 * @internal
 */
export const prelude: fc.Arbitrary<Step> = step("Submit", fc.array(submitSpec, { minLength: 1, maxLength: 6 }))

/**
 * What a sequence of `focus: "purge"` starts with: two or three submits of one to three items, each after a step of
 * store time, so that its jobs have several ages from the start and a purge's order and cutoff have jobs to tell
 * apart.
 *
 * @internal
 */
export const purgePrelude: fc.Arbitrary<ReadonlyArray<Step>> = fc
  .array(
    fc.tuple(
      step("Tick", fc.record({ ms: fc.constantFrom(1, 2, 500) })),
      step("Submit", fc.array(submitSpec, { minLength: 1, maxLength: 3 }))
    ),
    { minLength: 2, maxLength: 3 }
  )
  .map((pairs) => pairs.flat().slice(1))

const batchRef: fc.Arbitrary<BatchRef> = fc.oneof(
  { weight: 8, arbitrary: fc.nat({ max: 3 }) },
  { weight: 1, arbitrary: fc.constant<BatchRef>("unknown") }
)

const batchTenant = fc.constantFrom("own" as const, "own" as const, "other" as const, "none" as const)

/**
 * The batch commands: opening batches of one to four items (shared keys, two item lists, budgets a charge or two
 * exhausts, callbacks), filling them in chunks (often at the landed items, sometimes repeating one, now and then
 * leaving a gap), charges of their items (mostly reservations, which the batch's budget may refuse), cancels,
 * replays and reads. Batch items are jobs of the run's queue, so every job command meets
 * them.
 *
 * @internal
 */
export const batchCommands: ReadonlyArray<{ readonly weight: number; readonly arbitrary: fc.Arbitrary<Step> }> = [
  {
    weight: 3,
    arbitrary: step(
      "BatchOpen",
      fc.record({
        key: fc.constantFrom(null, "bkey-0", "bkey-1"),
        tenant: fc.constantFrom(0, 0, 1, 2),
        size: fc.integer({ min: 1, max: 4 }),
        variant: fc.constantFrom(0, 0, 1),
        budgetCents: fc.constantFrom(null, null, 2, 5),
        deadlineMs: fc.constantFrom(null, null, 2_000),
        onComplete: fc.boolean(),
        onSuccess: fc.boolean()
      })
    )
  },
  {
    weight: 5,
    arbitrary: step(
      "BatchAdd",
      fc.record({
        batch: batchRef,
        offset: fc.constantFrom("next" as const, "next" as const, "next" as const, "back" as const, "gap" as const),
        items: fc.array(submitSpec, { minLength: 1, maxLength: 3 })
      })
    )
  },
  {
    // Reservations of a batch's items, several in one call now and then, against budgets of 2 and 5: the batch's
    // check refuses the one that would pass the budget, counting the earlier items' reservations.
    weight: 4,
    arbitrary: step(
      "BatchCharge",
      fc.record({
        batch: batchRef,
        items: batch(
          fc.record({
            item: fc.nat({ max: 3 }),
            call: fc.nat({ max: 2 }),
            amountCents: fc.constantFrom(0, 1, 2.5, 4),
            settled: fc.constantFrom(false, false, false, true)
          })
        )
      })
    )
  },
  { weight: 1, arbitrary: step("BatchCancel", fc.record({ batch: batchRef, tenant: batchTenant })) },
  { weight: 1, arbitrary: step("BatchReplay", fc.record({ batch: batchRef, tenant: batchTenant })) },
  { weight: 1, arbitrary: step("BatchGet", fc.record({ batch: batchRef, tenant: batchTenant })) },
  {
    weight: 1,
    arbitrary: step(
      "BatchJobs",
      fc.record({
        batch: batchRef,
        tenant: batchTenant,
        state: fc.constantFrom<JobState | null>(null, null, "queued", "running", "succeeded", "failed", "abandoned"),
        after: fc.option(fc.nat({ max: 3 }), { nil: null }),
        limit: fc.constantFrom(null, 1, 2)
      })
    )
  }
]

/**
 * The purge command: a cutoff one millisecond before, at or after a job's `createdAt` (often a dead letter's, as
 * retention keeps or drops them) or the store time now, small limits so that the order decides which jobs go, and
 * states as a caller may send them (the default, one or two of them in any order, now and then repeated or none).
 *
 * @internal
 */
export const purgeCommand: { readonly weight: number; readonly arbitrary: fc.Arbitrary<Step> } = {
  weight: 3,
  arbitrary: step(
    "Purge",
    fc.record<PurgeSpec>({
      cutoff: fc.oneof(
        { weight: 4, arbitrary: fc.nat({ max: 7 }) },
        { weight: 1, arbitrary: fc.constant<JobRef>("failed") },
        { weight: 3, arbitrary: fc.constant("now" as const) }
      ),
      offset: fc.constantFrom(-1, 0, 1, 1),
      limit: fc.constantFrom(null, 1, 1, 2, 3),
      states: fc.option(fc.array(fc.constantFrom<PurgeState>("succeeded", "abandoned", "failed"), { maxLength: 3 }), {
        nil: null,
        freq: 2
      })
    })
  )
}

/** A `claimNext` as data. */
const claimNextSpec: fc.Arbitrary<Specs["ClaimNext"]> = fc.record({
  owner: fc.nat({ max: 2 }),
  max: fc.integer({ min: 1, max: 4 }),
  leaseMs,
  // No filter most of the time; else the types it may pick (possibly none of the submitted ones).
  types: fc.option(fc.subarray([0, 1]), { nil: null, freq: 2 }),
  // Fair two times in three: small weights so one pick moves a tenant past another, half-lives from one
  // decay step per millisecond to almost no decay within a sequence.
  fair: fc.option(
    fc.record({
      weights: fc.tuple(fc.constantFrom(null, 0.5, 3, 3), fc.constantFrom(null, 2, 2)),
      defaultWeight: fc.constantFrom(null, 1, 0.25),
      halfLifeMs: fc.constantFrom(null, 16, 16, 1_000, 4_000)
    }),
    { nil: null, freq: 3 }
  )
})

/** One heartbeat item as data. */
const heartbeatSpec: fc.Arbitrary<Specs["Heartbeat"][number]> = fc.record({
  job: runningJob,
  token,
  leaseMs,
  progress: fc.constantFrom(null, 0.5, 1.5)
})

/** One settle item as data. */
const settleSpec: fc.Arbitrary<Specs["Settle"][number]> = fc.record({ job: runningJob, token, outcome })

/** One charge item as data. */
const chargeSpec: fc.Arbitrary<Specs["Charge"][number]> = fc.record({
  job: runningJob,
  call: fc.nat({ max: 2 }),
  token,
  amountCents: fc.constantFrom(0, 1, 2.5, 4),
  settled: fc.boolean()
})

/** A part of a cycle: often empty, else one or two items (which may name the same job). */
const part = <A>(item: fc.Arbitrary<A>): fc.Arbitrary<ReadonlyArray<A>> =>
  fc.oneof(
    { weight: 1, arbitrary: fc.constant([]) },
    { weight: 2, arbitrary: fc.array(item, { minLength: 1, maxLength: 2 }) }
  )

/**
 * The cycle command, for a backend that has `Store.cycle`: each of its four parts drawn as the verb's own command
 * draws it, each but the claim often empty. Every token is resolved before the cycle runs, so a settle and a
 * heartbeat or charge of the same job in one cycle meet (the heartbeat finds the lease gone, the charge lands on
 * the settled job), and a job the settle part released or retried at once is there for the claim part to take.
 *
 * @internal
 */
export const cycleCommand: { readonly weight: number; readonly arbitrary: fc.Arbitrary<Step> } = {
  weight: 5,
  arbitrary: step(
    "Cycle",
    fc.record({
      settle: part(settleSpec),
      heartbeat: part(heartbeatSpec),
      charge: part(chargeSpec),
      claimNext: fc.option(claimNextSpec, { nil: null, freq: 4 })
    })
  )
}

/** A command arbitrary with its kind and its weight in the mix. */
interface Weighted {
  readonly kind: keyof Specs
  readonly weight: number
  readonly arbitrary: fc.Arbitrary<Step>
}

/**
 * Every job command of the property, weighted towards the writes that move jobs through their lives.
 */
const jobCommands: ReadonlyArray<Weighted> = [
  { kind: "Submit", weight: 5, arbitrary: step("Submit", batch(submitSpec)) },
  {
    kind: "Claim",
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
  { kind: "ClaimNext", weight: 4, arbitrary: step("ClaimNext", claimNextSpec) },
  { kind: "Heartbeat", weight: 3, arbitrary: step("Heartbeat", batch(heartbeatSpec)) },
  { kind: "Settle", weight: 6, arbitrary: step("Settle", batch(settleSpec)) },
  { kind: "Charge", weight: 4, arbitrary: step("Charge", batch(chargeSpec)) },
  {
    kind: "Cancel",
    weight: 2,
    arbitrary: step(
      "Cancel",
      batch(fc.record({ job, tenant: fc.constantFrom("own" as const, "other" as const, "none" as const) }))
    )
  },
  {
    kind: "Replay",
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
    kind: "ReplayWhere",
    weight: 1,
    arbitrary: step(
      "ReplayWhere",
      fc.record({
        filter,
        jobs: fc.option(fc.array(failedJob, { minLength: 1, maxLength: 3 }), { nil: null }),
        limit: fc.constantFrom(null, 1, 2),
        dryRun: fc.boolean()
      })
    )
  },
  {
    kind: "Sweep",
    weight: 3,
    arbitrary: step(
      "Sweep",
      fc.record({ republishAfterMs: fc.constantFrom(null, 0, 1_000), limit: fc.constantFrom(null, null, 1, 2) })
    )
  },
  {
    kind: "Tick",
    weight: 4,
    arbitrary: step("Tick", fc.record({ ms: fc.constantFrom(0, 1, 2, 499, 500, 1_000, 3_000) }))
  },
  {
    kind: "TickTo",
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
    kind: "List",
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
  {
    kind: "DeadLetters",
    weight: 2,
    arbitrary: step(
      "DeadLetters",
      fc.record({
        // Often no filter: every dead letter of the queue, so groups of several jobs meet the comparison.
        filter: fc.oneof({ weight: 2, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: filter }),
        limit: fc.constantFrom(null, 1, 2)
      })
    )
  },
  {
    kind: "Stats",
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
    kind: "Get",
    weight: 1,
    arbitrary: step(
      "Get",
      fc.record({ job, tenant: fc.constantFrom("own" as const, "other" as const, "none" as const) })
    )
  }
]

/**
 * Settlements that mostly finish the job (completed, failed, abandoned; now and then a retry), under the current
 * token: the focused mix's way to dead letters and finished jobs.
 */
const finishingSettle: fc.Arbitrary<Step> = step(
  "Settle",
  batch(
    fc.record({
      job: runningJob,
      token: fc.oneof({ weight: 9, arbitrary: fc.constant("current" as const) }, token),
      outcome: fc.oneof(
        { weight: 2, arbitrary: outcome.filter((o) => o._tag === "Complete") },
        { weight: 2, arbitrary: outcome.filter((o) => o._tag === "Fail") },
        { weight: 1, arbitrary: outcome.filter((o) => o._tag === "Abandon") },
        { weight: 1, arbitrary: outcome }
      )
    })
  )
)

/** Claims of the next due jobs, up to four at once, with no filter: the focused mix's way to running jobs. */
const claimDue: fc.Arbitrary<Step> = step(
  "ClaimNext",
  fc.record({
    owner: fc.nat({ max: 2 }),
    max: fc.integer({ min: 1, max: 4 }),
    leaseMs: fc.constantFrom(1_000, 3_000),
    types: fc.constant(null),
    fair: fc.constant(null)
  })
)

/** The weights of the full mix's job commands that the mix of `focus: "purge"` keeps. */
const purgeFocusWeights: Partial<Record<keyof Specs, number>> = {
  Submit: 2,
  Claim: 2,
  ClaimNext: 2,
  Cancel: 2,
  Replay: 1,
  Tick: 3,
  List: 1,
  DeadLetters: 1,
  Stats: 1,
  Get: 1
}

/**
 * The mix of `focus: "purge"`: the commands that finish jobs (claims of the next due jobs, settlements that mostly
 * finish, cancels of queued jobs) and move store time between submits, the reads that meet the purged jobs'
 * absence, and purges. In the full mix few jobs have finished when a purge comes, so purges there seldom have a
 * choice to make; here most have finished jobs of several ages to order and cut.
 */
const purgeFocus: ReadonlyArray<{ readonly weight: number; readonly arbitrary: fc.Arbitrary<Step> }> = [
  ...jobCommands.flatMap((c) => {
    const weight = purgeFocusWeights[c.kind]
    return weight === undefined ? [] : [{ weight, arbitrary: c.arbitrary }]
  }),
  { weight: 6, arbitrary: claimDue },
  { weight: 12, arbitrary: finishingSettle },
  purgeCommand
]

/**
 * Every command of the property, weighted towards the writes that move jobs through their lives; with `cycle`, the
 * cycle command; with `batches`, the batch commands too, and with `purge` the purge command. With `focus: "purge"` (and `purge`), the job commands
 * and purges are the mix of `purgeFocus` instead.
 *
 * @internal
 */
export const commandWith = (options: {
  readonly batches: boolean
  readonly purge?: boolean
  readonly focus?: "purge" | undefined
  readonly cycle?: boolean | undefined
}): fc.Arbitrary<Step> => {
  const batches = options.batches ? batchCommands : []
  const cycle = options.cycle === true ? [cycleCommand] : []
  if (options.purge !== true) return fc.oneof(...jobCommands, ...cycle, ...batches)
  return options.focus === "purge"
    ? fc.oneof(...purgeFocus, ...batches)
    : fc.oneof(...jobCommands, ...cycle, ...batches, purgeCommand)
}

/**
 * Every job command of the property (`commandWith` without batches).
 *
 * @internal
 */
export const command: fc.Arbitrary<Step> = commandWith({ batches: false })
