/**
 * The concurrent model-based property of the Store: the sequential property (`StoreProperty`) checks each command
 * alone; this one sends batches of commands from several clients at once, aimed at one job and one request key
 * (many claims of one job, settles and heartbeats under the same and other tokens, charges under distinct call ids
 * and under one call id, submits with one key, replays of one job, `claimNext` racing claims, sweeps racing settles,
 * and, where the store has `Store.cycle`, cycles racing claims of the jobs they release),
 * records when each command was invoked and when its reply came back (real time), and checks the history for
 * linearizability against `StoreModel`: some order of each batch's commands, consistent with real time (a command
 * that returned before another was invoked comes first), must give every reply the backend gave and end in the job
 * records, attempt rows and ledger rows the backend holds afterwards. A lost update (two charges that both add to
 * the same old spend) has no such order: the ledger holds both calls, the job's spend only one.
 *
 * Store time: every command of a batch carries the same explicit `now`, so any order of them is a valid replay for
 * the model; time moves between batches.
 *
 * A `cycle` is one command: its four parts must fit in one place of the order, as one atomic step of the model
 * (`StoreModel.cycle`). A store whose cycle lets another command in between its parts has no such order.
 *
 * One relaxation, from the Store contract: a `claimNext` or `sweep` may pass over a job that an overlapping command
 * of the batch named or wrote (a database skips the rows another transaction holds instead of waiting for them).
 * The check asks the model what the pick would have been without those jobs; every other job must be picked as the
 * model picks it.
 *
 * `check(options)` runs it and returns a Promise with its figures; it needs no test runner, so a script can run it
 * too. `StoreConcurrentProperty(options)` (module `StoreConcurrentProperty`) registers it as one vitest test.
 *
 * @since 0.3.0
 */
import { BatchStore } from "@slowcall/core/Batch"
import { inputHash } from "@slowcall/core/Canonical"
import type { Json } from "@slowcall/core/Job"
import { Query } from "@slowcall/core/Query"
import { Store } from "@slowcall/core/Store"
import { Effect, type Layer, ManagedRuntime } from "effect"
import fc from "fast-check"
import { batchScenarios, cycleScenarios, prelude, rounds, scenarios } from "./internal/storeConcurrent/arbitraries.js"
import { type Command, type ConcurrentWorld, type Round, timeOf } from "./internal/storeConcurrent/commands.js"
import { type Stats, window } from "./internal/storeConcurrent/history.js"
import type { SubmitSpec } from "./internal/storeProperty/commands.js"
import { compareRecords, type Real, type World } from "./internal/storeProperty/world.js"
import { makeJobFactory } from "./JobFactory.js"
import * as StoreModel from "./StoreModel.js"

/**
 * How a backend runs the concurrent property. `layer` provides `Store | Query`; it serves the checks' reads and,
 * without `clientLayer`, every client. `clientLayer`, when given, is built `clients` times (default 8), once each,
 * and each build must reach the same data as `layer` over its own connection: batches are spread over those builds,
 * so commands arrive on separate connections. A pool (node-postgres) already gives each command in flight its own
 * connection and needs no `clientLayer`. `freshPerRun` builds `layer` anew for every sequence (cheap in memory).
 *
 * `numRuns` sequences (default 110): the fixed `scenarios` first (all by default, named by `scenarioNames`, and
 * `cycleScenarioNames` when the store has `cycle`; one batch each), then random sequences of `minRounds` to `maxRounds` rounds (default 10 to 16), every round ending
 * with one batch of 2 to 8 commands, so the defaults send at least 1,000 concurrent batches. `seed` and `path`
 * (printed in a failure report) replay a failure's commands; whether the same interleaving comes back is up to the
 * backend's timing. `shrink: false` reports the first failing sequence as it is.
 *
 * @since 0.3.0
 * @category models
 */
export interface StoreConcurrencyOptions {
  /** Shown in the test name and in failure reports; never used to change behaviour. */
  readonly name: string
  readonly layer: Layer.Layer<Store | Query, unknown>
  readonly clientLayer?: Layer.Layer<Store | Query, unknown> | undefined
  readonly clients?: number | undefined
  readonly freshPerRun?: boolean | undefined
  readonly numRuns?: number | undefined
  readonly minRounds?: number | undefined
  readonly maxRounds?: number | undefined
  /**
   * Whether the backend's batch verbs are checked too: the layers must then provide `BatchStore`, and the batch
   * scenarios (`batchScenarioNames`: the last two items of a batch settled at once, a batch cancel racing them) run
   * with the others.
   */
  readonly batches?: boolean | undefined
  /**
   * The fixed scenarios to run first (default: all of `scenarioNames`, of `batchScenarioNames` with `batches`, and of
   * `cycleScenarioNames` when the store has `cycle`).
   */
  readonly scenarios?: ReadonlyArray<string> | undefined
  readonly seed?: number | undefined
  readonly path?: string | undefined
  readonly shrink?: boolean | undefined
}

/**
 * The names of the fixed scenarios, each a race a store is most likely to get wrong ("16 charges on one job,
 * distinct call ids", "8 claims of one queued job by 8 owners", ...).
 *
 * @since 0.3.0
 * @category models
 */
export const scenarioNames: ReadonlyArray<string> = Object.keys(scenarios)

/**
 * The names of the batch scenarios ("two workers settle the last two items of a batch at once: exactly one
 * callback", ...), run when `batches` is set.
 *
 * @since 0.7.0
 * @category models
 */
export const batchScenarioNames: ReadonlyArray<string> = Object.keys(batchScenarios)

/**
 * The names of the cycle scenarios ("two cycles settle their jobs and claim next, racing claims of the released
 * jobs"), run by default when the store has `Store.cycle`; random sequences then send cycles too.
 *
 * @since 0.9.0
 * @category models
 */
export const cycleScenarioNames: ReadonlyArray<string> = Object.keys(cycleScenarios)

/**
 * What a run did: sequences, the fixed scenarios among them, batches of two or more commands sent at once, commands
 * in all, and the time taken.
 *
 * @since 0.3.0
 * @category models
 */
export interface StoreConcurrencyResult {
  readonly runs: number
  /** How many of the runs were fixed scenarios (one concurrent batch or more each; a random sequence has `minRounds`). */
  readonly scenarios: number
  /** Whether the store has `Store.cycle`, so that batches sent cycles. */
  readonly cycle: boolean
  /** How many of the commands were cycles (0 without `Store.cycle`). */
  readonly cycles: number
  readonly concurrentSteps: number
  readonly commands: number
  readonly ms: number
}

/** Where the first sequence's store time starts (as the sequential property's: 2030-01-01, moved per run). */
const BASE_TIME = Date.UTC(2030, 0, 1)

const HOUR = 3_600_000

const INPUTS: ReadonlyArray<Json> = [{ a: 1 }, { a: 2 }, { b: [1, 2] }]

interface Backend {
  readonly real: Real
  readonly dispose: () => Promise<void>
}

const open = async (layer: Layer.Layer<Store | Query, unknown>, batches: boolean): Promise<Backend> => {
  const runtime = ManagedRuntime.make(layer)
  const [store, query, batchStore] = await runtime.runPromise(
    Effect.all([Store, Query, Effect.serviceOption(BatchStore)])
  )
  if (batches && batchStore._tag === "None") {
    throw new Error("StoreConcurrentProperty: batches asked for, but the layer has no BatchStore")
  }
  return {
    real: {
      store,
      query,
      batches: batches && batchStore._tag === "Some" ? batchStore.value : undefined,
      run: (effect) => runtime.runPromise(effect)
    },
    dispose: () => runtime.dispose()
  }
}

/** Whether the backend has `Store.cycle`: the shared instance says, or one build made to ask and let go. */
const offersCycle = async (
  layer: Layer.Layer<Store | Query, unknown>,
  batches: boolean,
  shared: Backend | undefined
): Promise<boolean> => {
  if (shared !== undefined) return shared.real.store.cycle !== undefined
  const probe = await open(layer, batches)
  try {
    return probe.real.store.cycle !== undefined
  } finally {
    await probe.dispose()
  }
}

/**
 * Runs the property and resolves with its figures; rejects with fast-check's report (seed, path, the commands) and
 * the batch that no order explains: every command with its client, its invocation and reply instants and its
 * reply, the jobs as they were before the batch, the longest order the checker could build and why each command
 * that could come next was refused (or, when every command fits, the first difference from the backend's records).
 *
 * @since 0.3.0
 * @category testing
 */
export const check = async (options: StoreConcurrencyOptions): Promise<StoreConcurrencyResult> => {
  const factory = makeJobFactory()
  const inputs = await Effect.runPromise(
    Effect.forEach(INPUTS, (input) => Effect.map(Effect.orDie(inputHash(input)), (hash) => ({ input, hash })))
  )
  const batches = options.batches === true
  const shared = options.freshPerRun === true ? undefined : await open(options.layer, batches)
  // Whether batches send cycles, and so which scenarios run, depends on the store; a bad name lets the store go.
  const { cycle, examples } = await (async () => {
    const cycle = await offersCycle(options.layer, batches, shared)
    const chosen = options.scenarios ?? [
      ...scenarioNames,
      ...(batches ? batchScenarioNames : []),
      ...(cycle ? cycleScenarioNames : [])
    ]
    const examples = chosen.map((name): [ReadonlyArray<SubmitSpec>, ReadonlyArray<Round>] => {
      const scenario = scenarios[name] ?? batchScenarios[name] ?? (cycle ? cycleScenarios[name] : undefined)
      if (scenario === undefined) throw new Error(`no scenario named ${JSON.stringify(name)} for this store`)
      return [scenario[0], scenario[1]]
    })
    return { cycle, examples }
  })().catch(async (error: unknown) => {
    await shared?.dispose()
    throw error
  })
  const clientBackends: Array<Backend> = []
  const stats: Stats = { concurrentSteps: 0, commands: 0, cycles: 0 }
  let runs = 0
  const started = performance.now()
  try {
    if (options.clientLayer !== undefined) {
      for (let i = 0; i < (options.clients ?? 8); i++) clientBackends.push(await open(options.clientLayer, batches))
    }
    const property = fc.asyncProperty(
      prelude,
      rounds(options.minRounds ?? 10, options.maxRounds ?? 16, cycle),
      async (first, sequence) => {
        const backend = shared ?? (await open(options.layer, batches))
        const clients = clientBackends.length > 0 ? clientBackends.map((b) => b.real) : [backend.real]
        const model = StoreModel.make()
        const world: ConcurrentWorld = {
          model,
          frontier: [model],
          clock: BASE_TIME - ((runs + 10_000) % 20_000) * HOUR,
          queue: factory.uniqueName("cprop"),
          tenants: [factory.uniqueName("ta"), factory.uniqueName("tb")],
          jobs: [],
          batches: [],
          factory,
          inputs
        }
        runs += 1
        const run = (commands: ReadonlyArray<Command>) => window(world, backend.real, clients, commands, stats)
        try {
          await run([{ kind: "Submit", specs: first }])
          for (const round of sequence) {
            for (const command of round.before) await run([command])
            if (round.time !== null) world.clock = await timeOf(world, round.time)
            await run(round.batch)
          }
          await compareRecords(world as World, backend.real, { attempts: world.jobs, charges: world.jobs })
        } finally {
          if (shared === undefined) await backend.dispose()
          await new Promise((resolve) => setImmediate(resolve))
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
      `StoreConcurrentProperty (${options.name}) found a history that no order of its commands explains:\n${report}${cause}`
    )
  } finally {
    for (const client of clientBackends) await client.dispose()
    await shared?.dispose()
  }
  return {
    runs,
    scenarios: Math.min(runs, examples.length),
    cycle,
    concurrentSteps: stats.concurrentSteps,
    commands: stats.commands,
    cycles: stats.cycles,
    ms: performance.now() - started
  }
}
