/**
 * The batch part of a plan: batches the simulated application submits beside its single jobs, each with a few items,
 * an optional spend cap, optional callbacks and an optional cancel. Plain JSON, generated and shrunk by fast-check.
 *
 * @since 0.8.0
 */
import * as fc from "fast-check"

/**
 * One batch of a plan: submitted at `at` (ms after the run starts) with `items` items (each a job of the simulated
 * handler), a spend cap of `budgetCents` (null: none), an `onComplete` and an `onSuccess` callback when set,
 * cancelled by the operator at `cancelAt` (null: never), its items landed in one chunk or in `chunks`.
 *
 * @since 0.8.0
 * @category models
 */
export interface BatchPlan {
  readonly at: number
  readonly items: number
  readonly budgetCents: number | null
  readonly onComplete: boolean
  readonly onSuccess: boolean
  readonly cancelAt: number | null
  /**
   * A targeted window (F19, plans with F19 only): the first settle of an item that reaches the store while exactly two
   * of the batch's items are unfinished waits this long in the store before it applies, so the other one may finish
   * meanwhile (two finishers at once). Null: none. A plan saved without it: none.
   */
  readonly finishWindowMs?: number | null | undefined
  /**
   * Items landed in several chunks (`SubmitBatchOptions.chunkSize` = `size`), the application pausing `gapMs` after
   * each chunk but the last, so that items of an early chunk may be claimed and finish while the rest are still to
   * land. Null: one chunk. A plan saved without it: one chunk.
   */
  readonly chunks?: { readonly size: number; readonly gapMs: number } | null | undefined
}

/**
 * One to three batches; each shrinks toward two items, no budget, no callback, no cancel, no window and one chunk.
 *
 * @since 0.8.0
 * @category constructors
 */
export const batchPlans: fc.Arbitrary<ReadonlyArray<BatchPlan>> = fc.array(
  fc.record({
    at: fc.integer({ min: 0, max: 12_000 }),
    items: fc.integer({ min: 2, max: 6 }),
    budgetCents: fc.option(fc.integer({ min: 0, max: 30 }), { nil: null, freq: 2 }),
    onComplete: fc.boolean(),
    onSuccess: fc.boolean(),
    cancelAt: fc.option(fc.integer({ min: 0, max: 20_000 }), { nil: null, freq: 3 }),
    finishWindowMs: fc.option(fc.integer({ min: 100, max: 1_500 }), { nil: null, freq: 2 }),
    chunks: fc.option(
      fc.record({ size: fc.integer({ min: 1, max: 3 }), gapMs: fc.integer({ min: 200, max: 6_000 }) }),
      { nil: null, freq: 2 }
    )
  }),
  { minLength: 1, maxLength: 3 }
)
