import { describe, expect, it } from "@effect/vitest"
import { Query } from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import { Context, Effect, Layer } from "effect"
import { linearize, type Model, type Timed } from "../src/internal/storeConcurrent/linearize.js"
import { check, cycleScenarioNames, scenarioNames } from "../src/StoreConcurrency.js"
import { check as checkSequential } from "../src/StoreProperty.js"

/** A counter register: `add` replies with the new total, `read` with the total. */
type Op = Timed &
  (
    | { readonly kind: "add"; readonly by: number; readonly reply: number }
    | { readonly kind: "read"; readonly reply: number }
  )

const counter = (final?: number): Model<number, Op> => ({
  step: (state, op) => {
    const next = op.kind === "add" ? state + op.by : state
    return next === op.reply ? { state: next } : { refused: () => `replied ${op.reply}, the model says ${next}` }
  },
  inert: (op) => op.kind === "read",
  key: (state) => String(state),
  observe: (state) => (final === undefined || state === final ? undefined : `holds ${final}, the model ${state}`)
})

const add = (by: number, reply: number, invokedAt: number, returnedAt: number): Op => ({
  kind: "add",
  by,
  reply,
  invokedAt,
  returnedAt
})
const read = (reply: number, invokedAt: number, returnedAt: number): Op => ({
  kind: "read",
  reply,
  invokedAt,
  returnedAt
})

describe("linearize", () => {
  it("finds the order of overlapping writes that their replies tell", () => {
    const verdict = linearize(counter(3), [0], [add(2, 3, 0, 10), add(1, 1, 0, 10), read(1, 1, 9)])

    expect(verdict._tag).toBe("Linearizable")
    if (verdict._tag !== "Linearizable") return
    expect(verdict.ends.map((end) => end.state)).toEqual([3])
    expect(verdict.ends[0]!.order.filter((i) => i !== 2)).toEqual([1, 0])
  })

  it("rejects a lost update: two additions that both saw the old total", () => {
    const verdict = linearize(counter(1), [0], [add(1, 1, 0, 10), add(1, 1, 0, 10)])

    expect(verdict._tag).toBe("NotLinearizable")
    if (verdict._tag !== "NotLinearizable") return
    expect(verdict.deepest).toHaveLength(1)
    expect(verdict.refusals.map((r) => r.reason)).toEqual(["replied 1, the model says 2"])
  })

  it("respects real time: a read invoked after a write returned must see it", () => {
    const overlapping = linearize(counter(), [0], [add(1, 1, 0, 10), read(0, 5, 6)])
    const after = linearize(counter(), [0], [add(1, 1, 0, 10), read(0, 11, 12)])

    expect(overlapping._tag).toBe("Linearizable")
    expect(after._tag).toBe("NotLinearizable")
  })

  it("rejects an order whose end state the backend does not hold, and says so", () => {
    const verdict = linearize(counter(5), [0], [add(1, 1, 0, 10), add(2, 3, 0, 10)])

    expect(verdict._tag).toBe("NotLinearizable")
    if (verdict._tag !== "NotLinearizable") return
    expect(verdict.observed).toBe("holds 5, the model 3")
  })

  it("tries every start state and keeps every end state the backend cannot tell apart", () => {
    const verdict = linearize({ ...counter(), key: (state) => String(state % 10) }, [0, 10], [add(1, 1, 0, 1)])

    expect(verdict._tag).toBe("Linearizable")
  })

  it("stops at its bound and does not pass a history it could not finish", () => {
    const ops = Array.from({ length: 12 }, (_, i) => add(2 ** i, 2 ** i, 0, 1))

    const verdict = linearize(
      { ...counter(), step: (state, op) => ({ state: state + (op.kind === "add" ? op.by : 0) }) },
      [0],
      ops,
      50
    )

    expect(verdict._tag).toBe("NotLinearizable")
    if (verdict._tag !== "NotLinearizable") return
    expect(verdict.exhausted).toBe(true)
  })
})

type Service = Store.Store["Type"]
type Peek = (
  jobId: Parameters<Service["claim"]>[0]["items"][number]["jobId"]
) => { readonly costCents: number; readonly leaseToken: number } | undefined

/** A memory store with one deliberate race, as a layer: right one command at a time, wrong under concurrency. */
const mutant = (change: (store: Service, peek: Peek) => Partial<Service>): Layer.Layer<Store.Store | Query> =>
  Layer.effectContext(
    Effect.map(Store.makeMemory, ({ peek, query, store }) =>
      Context.make(Store.Store, { ...store, ...change(store, peek) }).pipe(Context.add(Query, query))
    )
  )

const mutants: ReadonlyArray<readonly [string, Layer.Layer<Store.Store | Query>]> = [
  [
    "a charge answers the spend it read before a round trip, plus its own delta",
    mutant((store, peek) => ({
      charge: (options) =>
        Effect.gen(function* () {
          const seen = options.items.map((item) => peek(item.jobId)?.costCents ?? 0)
          yield* Effect.yieldNow()
          const before = options.items.map((item) => peek(item.jobId)?.costCents ?? 0)
          const reply = yield* store.charge(options)
          return {
            ...reply,
            results: reply.results.map((result, i) =>
              result._tag === "Charged" ? { ...result, costCents: seen[i]! + result.costCents - before[i]! } : result
            )
          }
        })
    }))
  ],
  [
    "a heartbeat checks its token, then renews under whatever token holds the job after a round trip",
    mutant((store, peek) => ({
      heartbeat: (options) =>
        Effect.gen(function* () {
          const held = options.items.map((item) => peek(item.jobId)?.leaseToken === item.token)
          yield* Effect.yieldNow()
          return yield* store.heartbeat({
            ...options,
            items: options.items.map((item, i) =>
              held[i] ? { ...item, token: peek(item.jobId)?.leaseToken ?? item.token } : item
            )
          })
        })
    }))
  ]
]

/**
 * A memory store whose `cycle` is the four verbs called one after another with a round trip between them: each part
 * right, one cycle at a time right (the sequential property passes it), but not one atomic write.
 */
const splitCycle = mutant((store) => ({
  cycle: (options) =>
    Effect.gen(function* () {
      const settle = yield* store.settle({ items: options.settle ?? [], now: options.now })
      yield* Effect.yieldNow()
      const heartbeat = yield* store.heartbeat({ items: options.heartbeat ?? [], now: settle.now })
      yield* Effect.yieldNow()
      const charge = yield* store.charge({ items: options.charge ?? [], now: settle.now })
      yield* Effect.yieldNow()
      const claimNext =
        options.claimNext === undefined
          ? []
          : (yield* store.claimNext({ ...options.claimNext, now: settle.now })).results
      return {
        now: settle.now,
        settle: settle.results,
        heartbeat: heartbeat.results,
        charge: charge.results,
        claimNext
      }
    })
}))

const failureOf = (run: Promise<unknown>): Promise<string | undefined> =>
  run.then(
    () => undefined,
    (error: unknown) => (error instanceof Error ? error.message : String(error))
  )

describe("StoreConcurrency", () => {
  it("the memory store is linearizable on a short run, scenarios and cycles included", async () => {
    const result = await check({ name: "memory", layer: Store.layerMemory, freshPerRun: true, numRuns: 20 })

    expect(result.runs).toBe(20)
    expect(result.cycle).toBe(true)
    expect(result.scenarios).toBe(scenarioNames.length + cycleScenarioNames.length)
    expect(result.concurrentSteps).toBeGreaterThanOrEqual(result.scenarios + (20 - result.scenarios) * 10)
  })

  it("a store without cycle is sent no cycle and runs no cycle scenario", async () => {
    const withoutCycle = mutant(() => ({ cycle: undefined }))

    const result = await check({ name: "memory without cycle", layer: withoutCycle, freshPerRun: true, numRuns: 12 })

    expect(result.cycle).toBe(false)
    expect(result.cycles).toBe(0)
    expect(result.scenarios).toBe(scenarioNames.length)
  })

  it("the memory store's cycle, with a window inside every write, is linearizable over random cycles", async () => {
    const layer = Layer.effectContext(
      Effect.map(Store.makeMemoryWith({ interleave: () => Effect.yieldNow() }), ({ query, store }) =>
        Context.make(Store.Store, store).pipe(Context.add(Query, query))
      )
    )

    const result = await check({ name: "memory with windows", layer, freshPerRun: true, numRuns: 40, scenarios: [] })

    expect(result.cycle).toBe(true)
    expect(result.runs).toBe(40)
    expect(result.cycles).toBeGreaterThan(40)
  })

  it("finds a cycle that is the four verbs one after another, which the sequential property lets through", async () => {
    const sequential = await checkSequential({
      name: "split cycle",
      layer: splitCycle,
      freshPerRun: true,
      numRuns: 100,
      seed: 1
    })
    const scenario = await failureOf(
      check({
        name: "split cycle",
        layer: splitCycle,
        freshPerRun: true,
        numRuns: 1,
        scenarios: cycleScenarioNames,
        shrink: false
      })
    )

    expect(sequential.runs).toBe(100)
    expect(scenario).toContain("StoreConcurrentProperty (split cycle) found a history that no order of its commands")
    expect(scenario).toContain("Cycle(")
    expect(scenario).toMatch(/The longest order found|no order ends in what the backend holds/)
  }, 120_000)

  it("finds the split cycle from random sequences alone, without the cycle scenario", async () => {
    const random = await failureOf(
      check({ name: "split cycle", layer: splitCycle, freshPerRun: true, numRuns: 30, seed: 1, scenarios: [] })
    )

    expect(random).toContain("StoreConcurrentProperty (split cycle) found a history that no order of its commands")
    expect(random).toContain("Cycle(")
  }, 120_000)

  it("a memory store that opens a window inside every write is still linearizable", async () => {
    const layer = Layer.effectContext(
      Effect.map(Store.makeMemoryWith({ interleave: () => Effect.yieldNow() }), ({ query, store }) =>
        Context.make(Store.Store, store).pipe(Context.add(Query, query))
      )
    )

    const result = await check({ name: "memory with windows", layer, freshPerRun: true, numRuns: 20 })

    expect(result.runs).toBe(20)
  })

  for (const [bug, layer] of mutants) {
    it(`finds a store where ${bug}, which the sequential property lets through`, async () => {
      const sequential = await checkSequential({ name: "mutant", layer, freshPerRun: true, numRuns: 100, seed: 1 })
      const failure = await check({
        name: "mutant",
        layer,
        freshPerRun: true,
        numRuns: 30,
        seed: 1,
        shrink: false
      }).then(
        () => undefined,
        (error: unknown) => (error instanceof Error ? error.message : String(error))
      )

      expect(sequential.runs).toBe(100)
      expect(failure).toContain(
        "StoreConcurrentProperty (mutant) found a history that no order of its commands explains"
      )
      expect(failure).toMatch(/seed: -?\d+/)
      expect(failure).toContain("The batch (times in ms from the first invocation")
      expect(failure).toMatch(/The longest order found|no order ends in what the backend holds/)
    }, 120_000)
  }

  it("replays a reported failure from its seed and path", async () => {
    const layer = mutants[0]![1]
    const first = await check({ name: "mutant", layer, freshPerRun: true, numRuns: 30 }).catch(
      (error: Error) => error.message
    )
    const seed = Number(/seed: (-?\d+)/.exec(String(first))?.[1])
    const path = /path: "([^"]+)"/.exec(String(first))?.[1]

    const again = await check({ name: "mutant", layer, freshPerRun: true, numRuns: 30, seed, path }).catch(
      (error: Error) => error.message
    )

    expect(path).toBeDefined()
    const counterexample = (report: unknown) => /Counterexample: (.*)/.exec(String(report))?.[1]
    expect(counterexample(again)).toBeDefined()
    expect(counterexample(again)).toBe(counterexample(first))
  }, 120_000)
})
