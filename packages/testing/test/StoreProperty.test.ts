import { describe, expect, it } from "@effect/vitest"
import { Query } from "@slowcall/core/Query"
import * as Store from "@slowcall/core/Store"
import { Context, Effect, Layer } from "effect"
import { check } from "../src/StoreProperty.js"

type Service = Store.Store["Type"]
type Peek = (
  jobId: Parameters<Service["claim"]>[0]["items"][number]["jobId"]
) => ReturnType<Effect.Effect.Success<typeof Store.makeMemory>["peek"]>

/** A memory store with one deliberate bug, as a layer: the property must tell it from the model. */
const mutant = (change: (store: Service, peek: Peek) => Partial<Service>): Layer.Layer<Store.Store | Query> =>
  Layer.effectContext(
    Effect.map(Store.makeMemory, ({ peek, query, store }) =>
      Context.make(Store.Store, { ...store, ...change(store, peek) }).pipe(Context.add(Query, query))
    )
  )

type Part = "settle" | "heartbeat" | "charge" | "claimNext"

/** A cycle made of the store's own four verbs at one store time, its parts applied in `order`. */
const cycleInOrder =
  (store: Service, order: ReadonlyArray<Part>): NonNullable<Service["cycle"]> =>
  (options) =>
    Effect.gen(function* () {
      const now = options.now ?? (yield* store.now)
      const parts: Record<Part, ReadonlyArray<unknown>> = { settle: [], heartbeat: [], charge: [], claimNext: [] }
      for (const part of order) {
        switch (part) {
          case "settle":
            parts.settle = (yield* store.settle({ items: options.settle ?? [], now })).results
            break
          case "heartbeat":
            parts.heartbeat = (yield* store.heartbeat({ items: options.heartbeat ?? [], now })).results
            break
          case "charge":
            parts.charge = (yield* store.charge({ items: options.charge ?? [], now })).results
            break
          case "claimNext":
            parts.claimNext =
              options.claimNext === undefined ? [] : (yield* store.claimNext({ ...options.claimNext, now })).results
        }
      }
      return { now, ...parts } as Store.CycleReply
    })

const mutants: ReadonlyArray<readonly [string, Layer.Layer<Store.Store | Query>]> = [
  [
    "a heartbeat under a stale token renews the lease",
    mutant((store, peek) => ({
      heartbeat: (options) =>
        store.heartbeat({
          ...options,
          items: options.items.map((item) => ({ ...item, token: peek(item.jobId)?.leaseToken ?? item.token }))
        })
    }))
  ],
  [
    "a lease can be taken over at its last millisecond",
    mutant((store, peek) => ({
      claim: (options) =>
        store.claim({
          ...options,
          now:
            options.now !== undefined && options.items.some((item) => peek(item.jobId)?.leaseUntil === options.now)
              ? options.now + 1
              : options.now
        })
    }))
  ],
  [
    "a retry ignores its delay",
    mutant((store) => ({
      settle: (options) =>
        store.settle({
          ...options,
          items: options.items.map((item) =>
            item.outcome._tag === "Retry" ? { ...item, outcome: { ...item.outcome, delayMs: 0 } } : item
          )
        })
    }))
  ],
  [
    "a settled charge is counted again under a new call id",
    mutant((store) => ({
      charge: (options) =>
        Effect.zipLeft(
          store.charge(options),
          store.charge({
            ...options,
            items: options.items.filter((item) => item.settled).map((item) => ({ ...item, callId: `${item.callId}+` }))
          })
        )
    }))
  ],
  [
    "a sweep ignores its limit",
    mutant((store) => ({ sweep: (options) => store.sweep({ ...options, limit: undefined }) }))
  ],
  [
    "a fair claim takes jobs in the plain order",
    mutant((store) => ({ claimNext: (options) => store.claimNext({ ...options, fair: undefined }) }))
  ],
  [
    "a fair claim ignores the tenants' weights",
    mutant((store) => ({
      claimNext: (options) =>
        store.claimNext({ ...options, fair: options.fair && { ...options.fair, weights: undefined } })
    }))
  ],
  [
    "a cycle claims before it settles",
    mutant((store) => ({ cycle: cycleInOrder(store, ["claimNext", "settle", "heartbeat", "charge"]) }))
  ],
  [
    "a cycle renews leases before it settles",
    mutant((store) => ({ cycle: cycleInOrder(store, ["heartbeat", "settle", "charge", "claimNext"]) }))
  ]
]

/** The seed of the mutant hunts below; with it, each mutant is found within the 500 sequences. */
const mutantSeed = 1

describe("StoreProperty", () => {
  it("the memory store agrees with the model on a short run", async () => {
    const result = await check({ name: "memory", layer: Store.layerMemory, freshPerRun: true, numRuns: 50 })

    expect(result.runs).toBe(50)
  })

  for (const [bug, layer] of mutants) {
    it(`finds a store where ${bug}, reporting the seed and the shrunk commands`, async () => {
      // A fixed seed: whether 500 random sequences happen to reach a rare bug (a claim at the lease's very last
      // millisecond) must not vary from run to run.
      const failure = await check({ name: "mutant", layer, freshPerRun: true, numRuns: 500, seed: mutantSeed }).then(
        () => undefined,
        (error: unknown) => (error instanceof Error ? error.message : String(error))
      )

      expect(failure).toBeDefined()
      expect(failure).toContain("StoreProperty (mutant)")
      expect(failure).toMatch(/seed: -?\d+/)
      expect(failure).toContain("Counterexample")
    }, 120_000)
  }

  it("replays a reported failure from its seed and path", async () => {
    const layer = mutants[2]![1]
    const first = await check({ name: "mutant", layer, freshPerRun: true, numRuns: 500 }).catch(
      (error: Error) => error.message
    )
    const seed = Number(/seed: (-?\d+)/.exec(String(first))?.[1])
    const path = /path: "([^"]+)"/.exec(String(first))?.[1]
    const replayPath = /replayPath="([^"]+)"/.exec(String(first))?.[1]

    const again = await check({ name: "mutant", layer, freshPerRun: true, numRuns: 500, seed, path, replayPath }).catch(
      (error: Error) => error.message
    )

    expect(path).toBeDefined()
    expect(replayPath).toBeDefined()
    expect(String(again)).toContain("Counterexample")
    const counterexample = (report: unknown) => /Counterexample: (.*)/.exec(String(report))?.[1]
    expect(counterexample(again)).toBe(counterexample(first))
  }, 120_000)
})
