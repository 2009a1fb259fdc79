/**
 * The reference model of the Limiter: the oracle of `LimiterProperty`. Plain synchronous bookkeeping over one Map
 * from resource id to stored state, where every rule is a call of a pure function of `@slowcall/core/Limits`
 * (`checkDefine`/`checkApply`/..., `define`, `applyItem`, `resume`, `describe`). What it adds is only what the
 * Limiter contract states about shape and order: bad input rejected before any write, one result per item, items
 * applied one after another, records made by the first write that names a resource, and `read` listing records by id.
 *
 * Store time is always the caller's `now`; the model has no clock.
 *
 * @since 0.4.0
 */
import type { InvalidInput } from "@slowcall/core/Errors"
import type {
  DefineItem,
  DefineResult,
  LimitItem,
  LimitResult,
  Reply,
  ResourceState,
  ResumeResult
} from "@slowcall/core/Limiter"
import * as Limits from "@slowcall/core/Limits"

/**
 * The model: the Limiter's verbs, synchronous. Each answers exactly what the contract says a backend answers for the
 * same items at the same `now`, or the `InvalidInput` a backend fails with (writing nothing).
 *
 * @since 0.4.0
 * @category models
 */
export interface LimiterModel {
  /** The stored state of a resource (undefined when no write has named it). */
  readonly state: (resource: string) => Limits.LimitState | undefined
  /** Every stored state, by resource. */
  readonly states: () => ReadonlyMap<string, Limits.LimitState>
  /** An independent copy (states are immutable values, so the copy shares them until either side writes). */
  readonly clone: () => LimiterModel
  readonly define: (items: ReadonlyArray<DefineItem>, now: number) => Reply<DefineResult> | InvalidInput
  readonly apply: (items: ReadonlyArray<LimitItem>, now: number) => Reply<LimitResult> | InvalidInput
  readonly resume: (
    items: ReadonlyArray<{ readonly resource: string }>,
    now: number
  ) => Reply<ResumeResult> | InvalidInput
  readonly read: (
    resources: ReadonlyArray<string> | undefined,
    now: number
  ) => { readonly now: number; readonly resources: ReadonlyArray<ResourceState> } | InvalidInput
}

/**
 * A new model: empty, or holding `initial` (as `states()` gave it).
 *
 * @since 0.4.0
 * @category constructors
 */
export const make = (initial?: ReadonlyMap<string, Limits.LimitState>): LimiterModel => {
  const states = new Map<string, Limits.LimitState>(initial)
  const stateOf = (resource: string) => states.get(resource) ?? Limits.empty
  return {
    state: (resource) => states.get(resource),
    states: () => states,
    clone: () => make(states),
    define: (items, now) => {
      const problem = Limits.checkDefine({ items, now })
      if (problem !== undefined) return problem
      const results = items.map((item): DefineResult => {
        const state = Limits.define(stateOf(item.resource), item.limits, now)
        states.set(item.resource, state)
        return { _tag: "Defined", view: Limits.view(state, now) }
      })
      return { now, results }
    },
    apply: (items, now) => {
      const problem = Limits.checkApply({ items, now })
      if (problem !== undefined) return problem
      const results = items.map((item) => {
        const step = Limits.applyItem(stateOf(item.resource), item, now)
        states.set(item.resource, step.state)
        return step.result
      })
      return { now, results }
    },
    resume: (items, now) => {
      const problem = Limits.checkResume({ items, now })
      if (problem !== undefined) return problem
      const results = items.map((item): ResumeResult => {
        const step = Limits.resume(stateOf(item.resource), now)
        states.set(item.resource, step.state)
        return { _tag: "Resumed", wasPaused: step.wasPaused, view: Limits.view(step.state, now) }
      })
      return { now, results }
    },
    read: (resources, now) => {
      const problem = Limits.checkRead({ resources, now })
      if (problem !== undefined) return problem
      const names = resources ?? [...states.keys()].sort()
      return { now, resources: names.map((resource) => Limits.describe(resource, stateOf(resource), now)) }
    }
  }
}
