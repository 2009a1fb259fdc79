/**
 * The model-based property of the Limiter: random sequences of `define`, `apply` (Acquire, Release, Renew and Pause
 * items in batches), `resume` and `read` calls, rejected input, and steps of store time (small, onto permit and
 * pause ends, and past the permit retention) run on the backend and on `LimiterModel`, the reference model built
 * from `@slowcall/core/Limits` alone. After every step the replies must be equal, and so must every resource of
 * the sequence as `read` describes it.
 *
 * Runs are cheap on a database: each sequence names its own resources, so one layer serves every run. Store time
 * is always the explicit `now`, each sequence starting from its own point, so the backend's clock is never mixed in.
 *
 * `LimiterProperty(options)` registers the property as one vitest test; `check(options)` runs it and returns a
 * Promise, for a test that wants the figures.
 *
 * @since 0.4.0
 */
import { Limiter } from "@slowcall/core/Limiter"
import { type Layer, ManagedRuntime } from "effect"
import fc from "fast-check"
import { command, finalCompare, prelude, RESOURCES, type Real, type World } from "./internal/limiterProperty.js"
import { assertAgainstModel } from "./internal/modelRuns.js"
import { registerProperty } from "./internal/modelTests.js"
import { makeJobFactory } from "./JobFactory.js"
import * as LimiterModel from "./LimiterModel.js"

/**
 * How a backend runs the property. The layer provides `Limiter`; it is built once for all runs unless
 * `freshPerRun` asks for a new build per run. `numRuns` defaults to 1000 and `maxCommands` (the longest sequence,
 * besides the opening define) to 20; `seed`, `path` and `replayPath` (printed in a failure report) replay a failure.
 *
 * @since 0.4.0
 * @category models
 */
export interface LimiterPropertyOptions {
  /** Shown in the test name and in failure reports; never used to change behaviour. */
  readonly name: string
  readonly layer: Layer.Layer<Limiter, unknown>
  readonly freshPerRun?: boolean | undefined
  readonly numRuns?: number | undefined
  readonly maxCommands?: number | undefined
  readonly seed?: number | undefined
  readonly path?: string | undefined
  /** The command arbitrary's own replay path: the `replayPath="..."` comment of a reported counterexample. */
  readonly replayPath?: string | undefined
  /** The vitest timeout of the test `LimiterProperty` registers (default 5 minutes). */
  readonly timeoutMs?: number | undefined
}

/**
 * Where the first sequence's store time starts (2030-01-01); run `n` starts `n` hours later.
 *
 * @since 0.4.0
 * @category models
 */
export const BASE_TIME = Date.UTC(2030, 0, 1)

const HOUR = 3_600_000

interface Backend {
  readonly real: Real
  readonly dispose: () => Promise<void>
}

const open = async (layer: Layer.Layer<Limiter, unknown>): Promise<Backend> => {
  const runtime = ManagedRuntime.make(layer)
  const limiter = await runtime.runPromise(Limiter)
  return { real: { limiter, run: (effect) => runtime.runPromise(effect) }, dispose: () => runtime.dispose() }
}

/**
 * Runs the property and resolves with the number of runs and the time they took; rejects with fast-check's report
 * (seed, path and the shrunk command list, prefixed with the backend's name) when the backend and the model differ.
 *
 * @since 0.4.0
 * @category testing
 */
export const check = async (
  options: LimiterPropertyOptions
): Promise<{ readonly runs: number; readonly ms: number }> => {
  const factory = makeJobFactory()
  const shared = options.freshPerRun === true ? undefined : await open(options.layer)
  let runs = 0
  const started = performance.now()
  const property = fc.asyncProperty(
    prelude,
    fc.commands([command], {
      maxCommands: options.maxCommands ?? 20,
      size: "max",
      ...(options.replayPath === undefined ? {} : { replayPath: options.replayPath })
    }),
    async (first, commands) => {
      const backend = shared ?? (await open(options.layer))
      const run = factory.uniqueName("p")
      const world: World = {
        model: LimiterModel.make(),
        clock: BASE_TIME + (runs % 20_000) * HOUR,
        resources: Array.from({ length: RESOURCES }, (_, i) => `prop:${run}:r${i}`)
      }
      runs += 1
      try {
        await fc.asyncModelRun(() => ({ model: world, real: backend.real }), [first, ...commands])
        await finalCompare(world, backend.real)
      } finally {
        if (shared === undefined) await backend.dispose()
        // Let the runner's own messages through between sequences: an in-memory run never leaves the microtask queue.
        await new Promise((resolve) => setImmediate(resolve))
      }
    }
  )
  await assertAgainstModel("LimiterProperty", property, options, async () => {
    await shared?.dispose()
  })
  return { runs, ms: performance.now() - started }
}

/**
 * Registers the property as one vitest test named after the backend. It passes when every sequence agreed, and
 * prints how many sequences ran and how long they took.
 *
 * @since 0.4.0
 * @category testing
 */
export const LimiterProperty = (options: LimiterPropertyOptions): void => {
  registerProperty("LimiterProperty", options, check, 300_000)
}
