/**
 * The in-memory Limiter: one Map from resource id to its stored state, every call one synchronous step, so each
 * item is atomic among fibers. Every rule comes from `Limits.ts`; this file only keeps the map and the order of the
 * items.
 *
 * Store time comes from the Clock captured when the Limiter is made (or an explicit `now`), never from the caller's.
 *
 * @internal
 */
import { type Clock, Effect } from "effect"
import type { InvalidInput } from "../Errors.js"
import type { Limiter } from "../Limiter.js"
import * as Limits from "../Limits.js"

/** The Limiter over one clock and one map. */
const build = (clock: Clock.Clock): Limiter["Type"] => {
  const states = new Map<string, Limits.LimitState>()
  const storeNow = (now: number | undefined): number => now ?? clock.unsafeCurrentTimeMillis()
  const stateOf = (resource: string): Limits.LimitState => states.get(resource) ?? Limits.empty
  /** A call: its input checked first (nothing written when it fails), then its items in one synchronous step. */
  const call = <A>(problem: InvalidInput | undefined, run: () => A): Effect.Effect<A, InvalidInput> =>
    problem === undefined ? Effect.sync(run) : Effect.fail(problem)
  return {
    define: (options) =>
      call(Limits.checkDefine(options), () => {
        const now = storeNow(options.now)
        const results = options.items.map((item) => {
          const state = Limits.define(stateOf(item.resource), item.limits, now)
          states.set(item.resource, state)
          return { _tag: "Defined" as const, view: Limits.view(state, now) }
        })
        return { now, results }
      }),
    apply: (options) =>
      call(Limits.checkApply(options), () => {
        const now = storeNow(options.now)
        const results = options.items.map((item) => {
          const step = Limits.applyItem(stateOf(item.resource), item, now)
          states.set(item.resource, step.state)
          return step.result
        })
        return { now, results }
      }),
    resume: (options) =>
      call(Limits.checkResume(options), () => {
        const now = storeNow(options.now)
        const results = options.items.map((item) => {
          const step = Limits.resume(stateOf(item.resource), now)
          states.set(item.resource, step.state)
          return { _tag: "Resumed" as const, wasPaused: step.wasPaused, view: Limits.view(step.state, now) }
        })
        return { now, results }
      }),
    read: (options) =>
      call(Limits.checkRead(options), () => {
        const now = storeNow(options.now)
        const names = options.resources ?? [...states.keys()].sort()
        return { now, resources: names.map((resource) => Limits.describe(resource, stateOf(resource), now)) }
      })
  }
}

/** @internal */
export const make: Effect.Effect<Limiter["Type"]> = Effect.map(Effect.clock, build)
