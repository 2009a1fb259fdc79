/**
 * The concurrent model-based property of the Limiter: the sequential property (`LimiterProperty`) checks each call
 * alone; this one sends batches of calls from several clients at once, aimed at one resource (many acquires of it
 * under a few call ids, repeats of one acquire, releases racing renewals of one permit, pauses, resumes and
 * redefinitions racing acquires, the half-open probe racing the next calls), records when each call was invoked and
 * when its reply came back (real time), and checks the history for linearizability against `LimiterModel`: some
 * order of each batch's calls, consistent with real time, must give every reply the backend gave and end in the
 * resources the backend then describes (`read`). A backend that lets two acquires both see the last free permit has
 * no such order: the model grants one and makes the other wait. The checker is the Store's
 * (`StoreConcurrency`), with the Limiter's model plugged in.
 *
 * Store time: every call of a batch carries the same explicit `now`, so any order of them is a valid replay for the
 * model; time moves between batches.
 *
 * `check(options)` runs it and returns a Promise with its figures, with no test runner needed;
 * `LimiterConcurrentProperty(options)` (module `LimiterConcurrentProperty`) registers it as one vitest test.
 *
 * @since 0.4.0
 */

import type { Limits } from "@slowcall/core/Limiter"
import { Limiter } from "@slowcall/core/Limiter"
import { type Layer, ManagedRuntime } from "effect"
import fc from "fast-check"
import {
  prelude,
  type Real,
  type Round,
  rounds,
  type Stats,
  scenarios,
  timeOf,
  type World,
  window,
  yieldToRunner
} from "./internal/limiterConcurrent.js"
import { makeJobFactory } from "./JobFactory.js"
import * as LimiterModel from "./LimiterModel.js"

/**
 * How a backend runs the concurrent property. `layer` provides `Limiter`; it serves the checks' reads and, without
 * `clientLayer`, every client. `clientLayer`, when given, is built `clients` times (default 8) and each build must
 * reach the same data as `layer` over its own connection, so the calls of a batch arrive on separate connections (a
 * node-postgres pool already gives each call in flight its own). `freshPerRun` builds `layer` anew per sequence.
 *
 * `numRuns` sequences (default 110): the fixed `scenarios` first, then random sequences of `minRounds` to
 * `maxRounds` rounds (default 10 to 16), each ending in one batch of 2 to 8 calls. `seed` and `path` replay a
 * failure's calls; `shrink: false` reports the first failing sequence as it is.
 *
 * @since 0.4.0
 * @category models
 */
export interface LimiterConcurrencyOptions {
  /** Shown in the test name and in failure reports; never used to change behaviour. */
  readonly name: string
  readonly layer: Layer.Layer<Limiter, unknown>
  readonly clientLayer?: Layer.Layer<Limiter, unknown> | undefined
  readonly clients?: number | undefined
  readonly freshPerRun?: boolean | undefined
  readonly numRuns?: number | undefined
  readonly minRounds?: number | undefined
  readonly maxRounds?: number | undefined
  readonly seed?: number | undefined
  readonly path?: string | undefined
  readonly shrink?: boolean | undefined
}

/**
 * The names of the fixed scenarios ("16 acquires of one resource with maxConcurrent 4", ...).
 *
 * @since 0.4.0
 * @category models
 */
export const scenarioNames: ReadonlyArray<string> = Object.keys(scenarios)

/**
 * What a run did: sequences, batches of two or more calls sent at once, calls in all, grants among their results,
 * and the time taken.
 *
 * @since 0.4.0
 * @category models
 */
export interface LimiterConcurrencyResult {
  readonly runs: number
  readonly concurrentSteps: number
  readonly calls: number
  readonly grants: number
  readonly ms: number
}

/** Where the first sequence's store time starts (2031-01-01), moved an hour per run. */
const BASE_TIME = Date.UTC(2031, 0, 1)

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
 * Runs the property and resolves with its figures; rejects with fast-check's report (seed, path, the calls) and the
 * batch no order explains: every call with its client, invocation and reply instants and reply, the resources
 * before the batch and after it, and the longest order the checker could build with why each call that could come
 * next was refused.
 *
 * @since 0.4.0
 * @category testing
 */
export const check = async (options: LimiterConcurrencyOptions): Promise<LimiterConcurrencyResult> => {
  const factory = makeJobFactory()
  const examples = scenarioNames.map((name): [Limits, ReadonlyArray<Round>] => {
    const [limits, scenarioRounds] = scenarios[name]!
    return [limits, scenarioRounds]
  })
  const shared = options.freshPerRun === true ? undefined : await open(options.layer)
  const clientBackends: Array<Backend> = []
  const stats: Stats = { concurrentSteps: 0, calls: 0, grants: 0 }
  let runs = 0
  const started = performance.now()
  try {
    if (options.clientLayer !== undefined) {
      for (let i = 0; i < (options.clients ?? 8); i++) clientBackends.push(await open(options.clientLayer))
    }
    const property = fc.asyncProperty(
      prelude,
      rounds(options.minRounds ?? 10, options.maxRounds ?? 16),
      async (limits, sequence) => {
        const backend = shared ?? (await open(options.layer))
        const clients = clientBackends.length > 0 ? clientBackends.map((b) => b.real) : [backend.real]
        const run = factory.uniqueName("cl")
        const model = LimiterModel.make()
        const world: World = {
          model,
          frontier: [model],
          clock: BASE_TIME + (runs % 20_000) * HOUR,
          resources: [`cprop:${run}:r0`, `cprop:${run}:r1`]
        }
        runs += 1
        try {
          await window(world, backend.real, clients, [{ kind: "Define", resource: 0, limits }], stats)
          for (const round of sequence) {
            for (const call of round.before) await window(world, backend.real, clients, [call], stats)
            if (round.time !== null) world.clock = timeOf(world, round.time)
            await window(world, backend.real, clients, round.batch, stats)
          }
        } finally {
          if (shared === undefined) await backend.dispose()
          await yieldToRunner()
        }
      }
    )
    await fc.assert(property, {
      numRuns: options.numRuns ?? 110,
      examples,
      ...(options.shrink === false ? { endOnFailure: true } : {}),
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      ...(options.path === undefined ? {} : { path: options.path })
    })
  } catch (error) {
    const report = error instanceof Error ? error.message : String(error)
    const cause = error instanceof Error && error.cause instanceof Error ? `\n${error.cause.message}` : ""
    throw new Error(
      `LimiterConcurrentProperty (${options.name}) found a history that no order of its calls explains:\n${report}${cause}`
    )
  } finally {
    for (const client of clientBackends) await client.dispose()
    await shared?.dispose()
  }
  return {
    runs,
    concurrentSteps: stats.concurrentSteps,
    calls: stats.calls,
    grants: stats.grants,
    ms: performance.now() - started
  }
}
