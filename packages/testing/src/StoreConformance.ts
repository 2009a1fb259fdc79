/**
 * The Store conformance suite: one set of tests that every Store adapter runs, so all backends keep the same lease
 * protocol. It is split by area, each in its own file under `internal/storeConformance/` and readable on its own:
 * submit and idempotency, claim, fencing (heartbeat, the five settle outcomes, cancel), charges and budgets, sweep,
 * queries and replay, batches, and concurrency and shared state.
 *
 * Time is driven by `TestClock`: each test reads the test clock and passes it as `now` to every write, and moves time
 * with `TestClock.adjust`, so lease expiry is exercised on every backend without real sleeps.
 *
 * @since 0.1.0
 */
import { layer } from "@effect/vitest"
import type { Query } from "@slowcall/core/Query"
import type { Store } from "@slowcall/core/Store"
import type { Layer } from "effect"
import { batchTests } from "./internal/storeConformance/batches.js"
import { batchRecordTests } from "./internal/storeConformance/batchRecords.js"
import { chargeTests } from "./internal/storeConformance/charges.js"
import { claimTests } from "./internal/storeConformance/claim.js"
import { concurrencyTests } from "./internal/storeConformance/concurrency.js"
import { cycleTests } from "./internal/storeConformance/cycle.js"
import { fairnessTests } from "./internal/storeConformance/fairness.js"
import { fencingTests } from "./internal/storeConformance/fencing.js"
import { type Area, makeFixture } from "./internal/storeConformance/fixture.js"
import { queryTests } from "./internal/storeConformance/queries.js"
import { submitTests } from "./internal/storeConformance/submit.js"
import { sweepTests } from "./internal/storeConformance/sweep.js"

/**
 * What a Store declares about itself. Tests that need a capability the backend lacks are not registered, and the
 * suite prints one line naming them and the reason (never a silent or a visible skip).
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreCapabilities {
  /**
   * The backend accepts writes from many callers at once (fibers or connections) and keeps each one atomic under
   * that load, so the contention tests (racing claims and `claimNext` calls, stale fenced writes and duplicate
   * charges over many jobs) run. A backend that can serve only one caller at a time declares false.
   */
  readonly concurrent: boolean
  /**
   * Two separate builds of the layer see the same jobs (a real database): cross-instance claims and fencing are
   * tested then.
   */
  readonly sharedState: boolean
  /**
   * The layer provides `Batch.BatchStore` over the same records: the batch-record tests run then (chunks landing
   * whole, batch idempotency, counts and cost, callbacks once, batch budget, cancel and replay).
   */
  readonly batches?: boolean | undefined
  /**
   * The Store has the optional `cycle` verb: the cycle tests run then (its answers and writes equal those of the
   * four verbs in order at one store time, every part at the reply's time, a refused part failing the whole cycle).
   * Checked both ways: a Store with `cycle` must declare it, one without must not.
   */
  readonly cycle?: boolean | undefined
}

/**
 * How an adapter runs the Store suite: a display name, a layer providing the protocol `Store` and its `Query`
 * built once for the whole suite (every test isolates itself by queue, tenant and fresh job ids, so one instance
 * serves them all), and the declared capabilities.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreConformanceOptions {
  /** Shown in the describe block; never used to change behaviour. */
  readonly name: string
  readonly layer: Layer.Layer<Store | Query, unknown>
  readonly capabilities: StoreCapabilities
}

/** The areas of the suite, in the order they are registered; each registers its own `describe` block. */
const areas: ReadonlyArray<(area: Area) => void> = [
  submitTests,
  claimTests,
  fairnessTests,
  fencingTests,
  chargeTests,
  sweepTests,
  queryTests,
  batchTests,
  batchRecordTests,
  cycleTests,
  concurrencyTests
]

/**
 * Registers the Store conformance suite (vitest `describe`/`it` blocks) for one backend: every area (each its own `describe`
 * block) under one layer. Covers every Store verb in batch form and the protocol's invariants: one live lease per job,
 * fencing of stale tokens for heartbeats and every settle outcome, strictly increasing tokens, attempts and
 * `updatedAt`, charges counted once, budgets never overspent, idempotent submit, safe replay (also the derived
 * `Query.replay`), sweep, per-item batch results, dead-letter grouping and stats, and `cycle` where the Store has it.
 *
 * @since 0.1.0
 * @category testing
 */
export const StoreConformance = (options: StoreConformanceOptions): void => {
  const skipped: Array<string> = []
  layer(options.layer)(`StoreConformance: ${options.name}`, (it) => {
    const area: Area = {
      it,
      fixture: makeFixture(),
      capabilities: options.capabilities,
      layer: options.layer,
      notRun: (what, why) => skipped.push(`${what} (${why})`)
    }
    for (const register of areas) register(area)
    if (skipped.length > 0) console.info(`[StoreConformance: ${options.name}] not run: ${skipped.join("; ")}`)
  })
}
