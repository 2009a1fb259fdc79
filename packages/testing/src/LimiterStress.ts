/**
 * A stress run of one resource's concurrency cap on a real backend: many clients (each its own `Limiter`, on its
 * own connection) acquire, hold and release permits of one resource at once, on the backend's own clock. Each
 * client counts the permits the clients hold between a `Granted` and the `Release` they send, and reads the
 * backend's own view after every grant; the run reports the most of either, which a correct backend keeps at or
 * below `maxConcurrent`.
 *
 * @since 0.4.0
 */
import type { Limiter, LimitResult } from "@slowcall/core/Limiter"
import { Effect } from "effect"

/**
 * What a stress run does: `clients` race for `resource` (defined here with `maxConcurrent`), each taking `rounds`
 * permits one after another and holding each for `holdMs` (default 5 ms). A client that must wait sleeps a little
 * (at most 20 ms, up to the backend's `until`) and asks again, at most `maxTries` times per round (default 2000).
 *
 * @since 0.4.0
 * @category models
 */
export interface StressOptions {
  readonly clients: ReadonlyArray<Limiter["Type"]>
  readonly resource: string
  readonly maxConcurrent: number
  readonly rounds: number
  readonly holdMs?: number | undefined
  readonly maxTries?: number | undefined
}

/**
 * What a stress run saw: grants made, waits answered, the most permits the clients held at once by their own
 * count, and the most live permits the backend's reads showed (in the view and in the permit list).
 *
 * @since 0.4.0
 * @category models
 */
export interface StressResult {
  readonly grants: number
  readonly waits: number
  readonly maxHeldByClients: number
  readonly maxSeenByStore: number
}

/**
 * Runs the stress. Fails when a client ran out of tries or met an answer a concurrency cap never gives.
 *
 * @since 0.4.0
 * @category testing
 */
export const stress = (options: StressOptions): Effect.Effect<StressResult, unknown> =>
  Effect.gen(function* () {
    const first = options.clients[0]
    if (first === undefined) return yield* Effect.dieMessage("stress: no clients")
    yield* first.define({ items: [{ resource: options.resource, limits: { maxConcurrent: options.maxConcurrent } }] })
    const holdMs = options.holdMs ?? 5
    const maxTries = options.maxTries ?? 2_000
    let held = 0
    let grants = 0
    let waits = 0
    let maxHeldByClients = 0
    let maxSeenByStore = 0
    const client = (limiter: Limiter["Type"], c: number) =>
      Effect.gen(function* () {
        for (let round = 0; round < options.rounds; round++) {
          const call = {
            resource: options.resource,
            callId: `stress-${c}-${round}`,
            holder: { jobId: `job-${c}`, token: round + 1 }
          }
          let granted = false
          for (let tries = 0; !granted; tries++) {
            if (tries >= maxTries)
              return yield* Effect.fail(new Error(`client ${c} ran out of tries in round ${round}`))
            const reply = yield* limiter.apply({ items: [{ _tag: "Acquire", ...call, leaseMs: 60_000 }] })
            const result: LimitResult = reply.results[0]!
            if (result._tag === "Granted") {
              granted = true
              grants += 1
              held += 1
              maxHeldByClients = Math.max(maxHeldByClients, held)
              const seen = yield* limiter.read({ resources: [options.resource] })
              const state = seen.resources[0]!
              maxSeenByStore = Math.max(maxSeenByStore, state.view.permits, state.permits.length)
              yield* Effect.sleep(holdMs)
              held -= 1
              yield* limiter.apply({ items: [{ _tag: "Release", ...call, reached: true }] })
            } else if (result._tag === "Wait") {
              waits += 1
              yield* Effect.sleep(Math.min(20, Math.max(1, result.until - reply.now)))
            } else {
              return yield* Effect.fail(new Error(`client ${c}: unexpected ${result._tag}`))
            }
          }
        }
      })
    yield* Effect.forEach(options.clients, client, { concurrency: "unbounded", discard: true })
    return { grants, waits, maxHeldByClients, maxSeenByStore }
  })
