import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Logger, LogLevel, Schema } from "effect"
import * as Handler from "../src/Handler.js"
import type { JobId } from "../src/Job.js"
import type { Transport } from "../src/Transport.js"
import { harness } from "./fixtures.js"

const Input = Schema.Struct({ tenant: Schema.String })

/** A handler that records the tenant of each job it runs (carried in its input), in order. */
const recording = (ran: Array<string>) =>
  Handler.make({
    type: "fair.echo",
    version: 1,
    input: Input,
    result: Schema.String,
    attempt: { timeoutMs: 3_000 },
    run: (input) =>
      Effect.sync(() => {
        ran.push(input.tenant)
        return input.tenant
      })
  })

/** The memory transport as a store-selected intake: no deliveries, the worker claims with `claimNext`. */
const storeSelected = (transport: Transport["Type"]): Transport["Type"] => ({
  ...transport,
  capabilities: { ...transport.capabilities, claimsFromStore: true },
  awaitWork: ({ waitMs }) => Effect.sleep(Math.min(waitMs, 50))
})

/** Tenant A's backlog of six, then tenant B's two; one worker at concurrency 1: the tenants in the order run. */
const runOrder = (fairness: { readonly weights?: Record<string, number> } | undefined) =>
  Effect.gen(function* () {
    const t = yield* harness({ defaults: { type: "fair.echo" } })
    const ids: Array<JobId> = []
    for (let i = 0; i < 6; i++) ids.push(yield* t.submit({ tenant: "a", input: { tenant: "a" } }))
    for (let i = 0; i < 2; i++) ids.push(yield* t.submit({ tenant: "b", input: { tenant: "b" } }))
    const ran: Array<string> = []
    yield* t.start(
      {
        queue: "q",
        id: "w",
        handlers: [recording(ran)],
        concurrency: 1,
        ...(fairness === undefined ? {} : { fairness })
      },
      t.store,
      storeSelected(t.transport)
    )
    for (const id of ids) yield* t.reaches(id, ["succeeded"])
    return ran
  })

describe("Worker fairness", () => {
  it.scoped("without fairness the claim order is the plain one: the backlog first", () =>
    Effect.gen(function* () {
      expect(yield* runOrder(undefined)).toEqual(["a", "a", "a", "a", "a", "a", "b", "b"])
    })
  )

  it.scoped("with fairness the worker's claims alternate between tenants of equal weight", () =>
    Effect.gen(function* () {
      expect(yield* runOrder({})).toEqual(["a", "b", "a", "b", "a", "a", "a", "a"])
    })
  )

  it.scoped("weights reach the store: a tenant of weight 0.25 gets about one pick in four", () =>
    Effect.gen(function* () {
      expect(yield* runOrder({ weights: { b: 0.25 } })).toEqual(["a", "b", "a", "a", "a", "a", "b", "a"])
    })
  )

  it.scoped("bad fairness options are a defect at start, before anything is claimed", () =>
    Effect.gen(function* () {
      const t = yield* harness({ defaults: { type: "fair.echo" } })
      const id = yield* t.submit({ tenant: "a", input: { tenant: "a" } })

      const exit = yield* Effect.exit(
        t.start({ queue: "q", id: "w", handlers: [recording([])], fairness: { defaultWeight: -1 } })
      )

      expect(Exit.isFailure(exit) && Exit.isInterrupted(exit) === false).toBe(true)
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain("fair.defaultWeight")
      expect((yield* t.job(id)).state).toBe("queued")
    })
  )

  it.scoped("a transport that delivers messages is warned about at start", () =>
    Effect.gen(function* () {
      const t = yield* harness({ defaults: { type: "fair.echo" } })
      const lines: Array<string> = []
      const logger = Logger.make(({ message }) => {
        lines.push(String(message))
      })

      yield* t
        .start({ queue: "q", id: "w", handlers: [recording([])], fairness: {} })
        .pipe(
          Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
          Logger.withMinimumLogLevel(LogLevel.Warning)
        )

      expect(lines.some((line) => line.includes("fairness has no effect"))).toBe(true)
    })
  )
})
