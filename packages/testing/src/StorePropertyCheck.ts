/**
 * The model-based property of the Store: random sequences of Store writes (submits with and without request keys,
 * claims and `claimNext` by several owners, heartbeats, settlements with all five outcomes, charges, cancels,
 * replays by id and by filter, sweeps), `cycle` where the backend has it (its four parts against the model's four
 * verbs one after another at one time), the batch verbs and the retention purge where the backend has them, Query
 * reads, and steps of store time (small, zero, and onto lease ends,
 * run-after times and deadlines) run on the backend and on `StoreModel`, the reference model built from
 * `Protocol.ts` alone. After every step the replies must be equal, and so must the records: every job of the
 * sequence, and the attempt and ledger rows of every job the step named or wrote (all of them once more at the end).
 *
 * Runs are cheap on a database: each sequence has its own queue and tenants and fresh job ids, so one layer serves
 * every run (sweeps and `claimNext` are scoped to the sequence's queue, filtered replays to it too). Store time is
 * always the explicit `now`: each sequence starts from its own point after 2030-01-01, so the backend's own clock is
 * never mixed in.
 *
 * `check(options)` runs it and returns a Promise, outside a test runner too (a script, `npm run mutants`);
 * `StoreProperty(options)` (module `StoreProperty`) registers it as one vitest test.
 *
 * @since 0.8.0
 */
import { BatchStore } from "@slowcall/core/Batch"
import { inputHash } from "@slowcall/core/Canonical"
import type { Json } from "@slowcall/core/Job"
import { Query } from "@slowcall/core/Query"
import { Store } from "@slowcall/core/Store"
import { Effect, type Layer, ManagedRuntime } from "effect"
import fc from "fast-check"
import { assertAgainstModel } from "./internal/modelRuns.js"
import { commandWith, prelude, purgePrelude } from "./internal/storeProperty/arbitraries.js"
import * as World from "./internal/storeProperty/world.js"
import { makeJobFactory } from "./JobFactory.js"
import * as StoreModel from "./StoreModel.js"

/**
 * A backend's retention purge, as `PgStore.purge` and `RedisStore.purge` offer it: the rule it must keep is
 * `StoreModel.purgeTargets`.
 *
 * @since 0.8.0
 * @category models
 */
export type Purge = World.Purge

/**
 * How a backend runs the property. The layer provides `Store | Query`; it is built once for all runs unless
 * `freshPerRun` asks for a new build per run (cheap for in-memory layers). `numRuns` defaults to 1000 and
 * `maxCommands` (the longest sequence, besides the opening submit) to 20, which keeps 1000 sequences on a database
 * within a couple of minutes; `seed`, `path` and `replayPath` (all three printed in a failure report)
 * replay a reported failure.
 *
 * @since 0.2.0
 * @category models
 */
export interface StorePropertyOptions<R = never> {
  /** Shown in the test name and in failure reports; never used to change behaviour. */
  readonly name: string
  readonly layer: Layer.Layer<Store | Query | R, unknown>
  readonly freshPerRun?: boolean | undefined
  readonly numRuns?: number | undefined
  readonly maxCommands?: number | undefined
  readonly seed?: number | undefined
  readonly path?: string | undefined
  /** The command arbitrary's own replay path: the `replayPath="..."` comment of a reported counterexample. */
  readonly replayPath?: string | undefined
  /**
   * Whether the sequences include the batch verbs (`BatchStore`: open, add in chunks, cancel, replay, reads) beside
   * the job verbs; the layer must then provide `BatchStore` too. Batch items are jobs of the sequence's queue, so
   * every job command meets them, and the batch records are compared after every write.
   */
  readonly batches?: boolean | undefined
  /**
   * The backend's retention purge, read from the layer's services (e.g. `Effect.map(PgStore, (s) => s.purge)`):
   * when given, the sequences include purges (cutoffs at and around jobs' creation times, limits of 1 to 3, subsets
   * of the finished states), their ids are compared with `StoreModel.purgeTargets`, and the model forgets the jobs,
   * so every later read and write meets their absence.
   */
  readonly purge?: Effect.Effect<Purge, never, R> | undefined
  /**
   * With `"purge"` (and `purge`), the sequences lean on what a purge meets: they open with submits at two or three
   * store times, then mostly claim the next due jobs and settle them to a finished state, step store time, submit,
   * read and purge; the other verbs are left out, and `maxCommands` defaults to 40. In the full mix few jobs have
   * finished when a purge comes (a purge waits until two have), so a backend runs this as a second, shorter property
   * beside the full one: it is the one that meets a purge's order and limit often.
   */
  readonly focus?: "purge" | undefined
  /** The vitest timeout of the test `StoreProperty` registers (default 10 minutes). */
  readonly timeoutMs?: number | undefined
}

/**
 * Where the first sequence's store time starts (2030-01-01). Run `n` starts `n` hours earlier (modulo 20 000 hours,
 * so never before 2027): a later sequence's store time is before every lease end and deadline an earlier sequence
 * left behind, so a shared database's sweeps never have to step over them.
 *
 * @since 0.2.0
 * @category models
 */
export const BASE_TIME = Date.UTC(2030, 0, 1)

const HOUR = 3_600_000

const INPUTS: ReadonlyArray<Json> = [{ a: 1 }, { a: 2 }, { b: [1, 2] }]

/** A backend to run sequences on, and how to let it go. */
interface Backend {
  readonly real: World.Real
  readonly dispose: () => Promise<void>
}

const open = async <R>(options: StorePropertyOptions<R>, batches: boolean): Promise<Backend> => {
  const runtime = ManagedRuntime.make(options.layer)
  const [store, query, batchStore, purge] = await runtime.runPromise(
    Effect.all([Store, Query, Effect.serviceOption(BatchStore), options.purge ?? Effect.succeed(undefined)])
  )
  if (batches && batchStore._tag === "None")
    throw new Error("StoreProperty: batches asked for, but the layer has no BatchStore")
  return {
    real: {
      store,
      query,
      batches: batches && batchStore._tag === "Some" ? batchStore.value : undefined,
      purge,
      run: (effect) => runtime.runPromise(effect)
    },
    dispose: () => runtime.dispose()
  }
}

/** Whether the backend has `Store.cycle`: the shared instance says, or one build made to ask and let go. */
const offersCycle = async <R>(
  options: StorePropertyOptions<R>,
  batches: boolean,
  shared: Backend | undefined
): Promise<boolean> => {
  if (shared !== undefined) return shared.real.store.cycle !== undefined
  const probe = await open(options, batches)
  try {
    return probe.real.store.cycle !== undefined
  } finally {
    await probe.dispose()
  }
}

/**
 * Runs the property and resolves with the number of runs and the time they took; rejects with fast-check's report
 * (the seed, the path and the shrunk command list, prefixed with the backend's name) when the backend and the model
 * disagree.
 *
 * @since 0.2.0
 * @category testing
 */
export const check = async <R = never>(
  options: StorePropertyOptions<R>
): Promise<{ readonly runs: number; readonly ms: number }> => {
  const factory = makeJobFactory()
  const inputs = await Effect.runPromise(
    Effect.forEach(INPUTS, (input) => Effect.map(Effect.orDie(inputHash(input)), (hash) => ({ input, hash })))
  )
  const batches = options.batches === true
  const purge = options.purge !== undefined
  const focused = purge && options.focus === "purge"
  const shared = options.freshPerRun === true ? undefined : await open(options, batches)
  const cycle = await offersCycle(options, batches, shared)
  let runs = 0
  const started = performance.now()
  const property = fc.asyncProperty(
    focused ? purgePrelude : prelude.map((first) => [first]),
    fc.commands([commandWith({ batches, purge, focus: options.focus, cycle })], {
      maxCommands: options.maxCommands ?? (focused ? 40 : 20),
      size: "max",
      ...(options.replayPath === undefined ? {} : { replayPath: options.replayPath })
    }),
    async (opening, commands) => {
      const backend = shared ?? (await open(options, batches))
      const world: World.World = {
        model: StoreModel.make(),
        clock: BASE_TIME - (runs % 20_000) * HOUR,
        queue: factory.uniqueName("prop"),
        tenants: [factory.uniqueName("ta"), factory.uniqueName("tb")],
        jobs: [],
        batches: [],
        factory,
        inputs
      }
      runs += 1
      try {
        await fc.asyncModelRun(() => ({ model: world, real: backend.real }), [...opening, ...commands])
        await World.compareRecords(world, backend.real, { attempts: world.jobs, charges: world.jobs })
      } finally {
        if (shared === undefined) await backend.dispose()
        // Let the runner's own messages through between sequences: an in-memory run never leaves the microtask queue.
        await new Promise((resolve) => setImmediate(resolve))
      }
    }
  )
  await assertAgainstModel("StoreProperty", property, options, async () => {
    await shared?.dispose()
  })
  return { runs, ms: performance.now() - started }
}
