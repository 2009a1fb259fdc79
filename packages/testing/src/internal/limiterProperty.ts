/**
 * The commands of the Limiter's model-based property: `define`, `apply` (batches of Acquire, Release, Renew and
 * Pause items), `resume` and `read`, input the Limiter must reject, and two that move store time (by a step, or onto
 * a permit's or a pause's end, give or take a millisecond). Each command is plain data (what a shrunk counterexample
 * prints); running it resolves the data against the world into concrete items, sends the same items at the same
 * `now` to the backend and to the model, requires equal replies, then equal states of every resource of the run.
 *
 * Limits and costs are drawn from values that make the doubles interesting (7 or 90 per minute, bursts of 0.5 or
 * 2.5 seconds, steps of 13 or 137 ms), so a backend that evaluates a formula in another order shows up.
 *
 * @internal
 */
import { isDeepStrictEqual } from "node:util"
import type { InvalidInput } from "@slowcall/core/Errors"
import type { Limiter, LimitItem, Limits, PauseKind } from "@slowcall/core/Limiter"
import { Effect } from "effect"
import fc from "fast-check"
import type * as LimiterModel from "../LimiterModel.js"

/** The model side of a run. @internal */
export interface World {
  readonly model: LimiterModel.LimiterModel
  /** Store time of the sequence: only moves forward, passed as `now` to every call on both sides. */
  clock: number
  /** The run's resources by index. */
  readonly resources: ReadonlyArray<string>
}

/** The backend side of a run. @internal */
export interface Real {
  readonly limiter: Limiter["Type"]
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
}

/** The number of resources a run names. @internal */
export const RESOURCES = 3

/** An item as data: indexes into the run's resources, call ids, jobs and tokens; times relative to now. */
type ItemSpec =
  | {
      readonly _tag: "Acquire"
      readonly resource: number
      readonly call: number
      readonly job: number
      readonly token: number
      readonly leaseMs: number
      readonly priority: number
      readonly tenant: string | null
      readonly cost: {
        readonly requests?: number | undefined
        readonly inputTokens?: number | undefined
        readonly outputTokens?: number | undefined
      } | null
    }
  | {
      readonly _tag: "Release"
      readonly resource: number
      readonly call: number
      readonly job: number
      readonly token: number
      readonly reached: boolean
      readonly usage: { readonly inputTokens?: number | undefined; readonly outputTokens?: number | undefined } | null
      readonly rateLimited: boolean | undefined
    }
  | {
      readonly _tag: "Renew"
      readonly resource: number
      readonly call: number
      readonly job: number
      readonly token: number
      readonly leaseMs: number
    }
  | {
      readonly _tag: "Pause"
      readonly resource: number
      readonly kind: PauseKind
      readonly untilMs: number | null
      readonly reason: string
    }

const resolveItem = (world: World, spec: ItemSpec): LimitItem => {
  const resource = world.resources[spec.resource]!
  if (spec._tag === "Pause") {
    return {
      _tag: "Pause",
      resource,
      kind: spec.kind,
      until: spec.untilMs === null ? null : world.clock + spec.untilMs,
      reason: spec.reason
    }
  }
  const call = { resource, callId: `c${spec.call}`, holder: { jobId: `j${spec.job}`, token: spec.token } }
  switch (spec._tag) {
    case "Acquire":
      return {
        _tag: "Acquire",
        ...call,
        leaseMs: spec.leaseMs,
        priority: spec.priority,
        tenant: spec.tenant,
        ...(spec.cost === null ? {} : { cost: spec.cost })
      }
    case "Release":
      return {
        _tag: "Release",
        ...call,
        reached: spec.reached,
        ...(spec.usage === null ? {} : { usage: spec.usage }),
        ...(spec.rateLimited === undefined ? {} : { rateLimited: spec.rateLimited })
      }
    case "Renew":
      return { _tag: "Renew", ...call, leaseMs: spec.leaseMs }
  }
}

/** A plain-data copy: fields compared, not identity; `undefined` fields and `-0` gone. */
const plain = (value: unknown): unknown => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)))

/** The failure a backend gave, as the model would give it: only an `InvalidInput`'s path and message count. */
const outcomeOf = (value: unknown): unknown =>
  typeof value === "object" && value !== null && (value as { _tag?: unknown })._tag === "InvalidInput"
    ? { invalid: (value as InvalidInput).path, message: (value as InvalidInput).message }
    : plain(value)

/** Equal as data (key order aside), or an error that shows both sides. */
const compare = (what: string, real: unknown, model: unknown): void => {
  const a = outcomeOf(real)
  const b = outcomeOf(model)
  if (!isDeepStrictEqual(a, b)) {
    throw new Error(`${what} differs\n  backend: ${JSON.stringify(a)}\n  model:   ${JSON.stringify(b)}`)
  }
}

/** Runs an effect on the backend, its typed failure as a value. */
const settle = <A, E>(real: Real, effect: Effect.Effect<A, E>): Promise<A | E> =>
  real.run(Effect.merge(effect as Effect.Effect<A | E, E>))

/** Every resource of the run, read on both sides at the world's clock, must be equal. */
const compareStates = async (world: World, real: Real): Promise<void> => {
  const backend = await settle(real, real.limiter.read({ resources: world.resources, now: world.clock }))
  compare(`the resources at ${world.clock}`, backend, world.model.read(world.resources, world.clock))
}

/** One command of the property. */
abstract class Base implements fc.AsyncCommand<World, Real> {
  check(): boolean {
    return true
  }
  abstract run(world: World, real: Real): Promise<void>
  abstract toString(): string
}

class Define extends Base {
  constructor(readonly items: ReadonlyArray<{ readonly resource: number; readonly limits: Limits }>) {
    super()
  }
  async run(world: World, real: Real) {
    const items = this.items.map((item) => ({ resource: world.resources[item.resource]!, limits: item.limits }))
    const backend = await settle(real, real.limiter.define({ items, now: world.clock }))
    compare("define", backend, world.model.define(items, world.clock))
    await compareStates(world, real)
  }
  toString() {
    return `Define(${JSON.stringify(this.items)})`
  }
}

class Apply extends Base {
  constructor(readonly items: ReadonlyArray<ItemSpec>) {
    super()
  }
  async run(world: World, real: Real) {
    const items = this.items.map((spec) => resolveItem(world, spec))
    const backend = await settle(real, real.limiter.apply({ items, now: world.clock }))
    compare("apply", backend, world.model.apply(items, world.clock))
    await compareStates(world, real)
  }
  toString() {
    return `Apply(${JSON.stringify(this.items)})`
  }
}

class Resume extends Base {
  constructor(readonly resources: ReadonlyArray<number>) {
    super()
  }
  async run(world: World, real: Real) {
    const items = this.resources.map((i) => ({ resource: world.resources[i]! }))
    const backend = await settle(real, real.limiter.resume({ items, now: world.clock }))
    compare("resume", backend, world.model.resume(items, world.clock))
    await compareStates(world, real)
  }
  toString() {
    return `Resume(${JSON.stringify(this.resources)})`
  }
}

/** A read of every resource: the backend's listing holds other runs' resources too, so only the run's own count. */
class ReadAll extends Base {
  async run(world: World, real: Real) {
    const backend = await settle(real, real.limiter.read({ now: world.clock }))
    const own = new Set(world.resources)
    const mine =
      typeof backend === "object" && backend !== null && "resources" in backend
        ? { now: backend.now, resources: backend.resources.filter((state) => own.has(state.resource)) }
        : backend
    compare("read of every resource", mine, world.model.read(undefined, world.clock))
  }
  toString() {
    return "ReadAll"
  }
}

/** Input the Limiter must reject whole, writing nothing (the states compared after prove it). */
class Invalid extends Base {
  constructor(
    readonly verb: "define" | "apply" | "resume" | "read",
    readonly valid: ReadonlyArray<ItemSpec>
  ) {
    super()
  }
  async run(world: World, real: Real) {
    const resource = world.resources[0]!
    const now = world.clock
    switch (this.verb) {
      case "define": {
        const items = [
          { resource, limits: { maxConcurrent: 2 } },
          { resource, limits: { requestsPerMinute: Number.NaN } }
        ]
        compare("a bad define", await settle(real, real.limiter.define({ items, now })), world.model.define(items, now))
        break
      }
      case "apply": {
        const items: Array<LimitItem> = [
          ...this.valid.map((spec) => resolveItem(world, spec)),
          { _tag: "Acquire", resource, callId: "c0", holder: { jobId: "j0", token: 1 }, leaseMs: -1 }
        ]
        compare("a bad apply", await settle(real, real.limiter.apply({ items, now })), world.model.apply(items, now))
        break
      }
      case "resume": {
        const items = [{ resource }, { resource: "has spaces" }]
        compare("a bad resume", await settle(real, real.limiter.resume({ items, now })), world.model.resume(items, now))
        break
      }
      case "read": {
        const resources = [resource, "x".repeat(201)]
        compare(
          "a bad read",
          await settle(real, real.limiter.read({ resources, now })),
          world.model.read(resources, now)
        )
        break
      }
    }
    await compareStates(world, real)
  }
  toString() {
    return `Invalid(${this.verb}, ${JSON.stringify(this.valid)})`
  }
}

class Tick extends Base {
  constructor(readonly ms: number) {
    super()
  }
  async run(world: World) {
    world.clock += this.ms
  }
  toString() {
    return `Tick(${this.ms})`
  }
}

/** Onto the next end of a permit or a pause of a resource (if any lies ahead), give or take a millisecond. */
class TickTo extends Base {
  constructor(
    readonly resource: number,
    readonly what: "permit" | "pause",
    readonly offset: -1 | 0 | 1
  ) {
    super()
  }
  async run(world: World, real: Real) {
    const state = world.model.state(world.resources[this.resource]!)
    if (state === undefined) return
    const ends =
      this.what === "permit"
        ? state.permits.map((permit) => permit.until)
        : state.pause?.until == null
          ? []
          : [state.pause.until]
    const ahead = ends.filter((end) => end + this.offset > world.clock)
    if (ahead.length === 0) return
    world.clock = Math.min(...ahead) + this.offset
    await compareStates(world, real)
  }
  toString() {
    return `TickTo(${this.resource}, ${this.what}, ${this.offset})`
  }
}

const resource = fc.nat({ max: RESOURCES - 1 })
const call = fc.nat({ max: 3 })
const job = fc.nat({ max: 2 })
const token = fc.integer({ min: 1, max: 2 })
const leaseMs = fc.constantFrom(1, 137, 500, 1_000, 5_000, 30_000)
const tokens = fc.constantFrom(undefined, 0, 1, 13, 50, 500, 3_000)

const limits: fc.Arbitrary<Limits> = fc.record(
  {
    maxConcurrent: fc.integer({ min: 1, max: 3 }),
    requestsPerMinute: fc.constantFrom(7, 60, 90, 600, 6_000),
    inputTokensPerMinute: fc.constantFrom(600, 6_000, 60_000, 100_000),
    outputTokensPerMinute: fc.constantFrom(600, 6_000, 60_000),
    burstSeconds: fc.constantFrom(0.5, 1, 2.5, 10),
    priorityShare: fc.record({ minPriority: fc.integer({ min: 1, max: 2 }), share: fc.constantFrom(0, 0.25, 0.5, 0.9) })
  },
  { requiredKeys: [] }
)

const itemSpec: fc.Arbitrary<ItemSpec> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      _tag: fc.constant("Acquire" as const),
      resource,
      call,
      job,
      token,
      leaseMs,
      priority: fc.nat({ max: 2 }),
      tenant: fc.constantFrom(null, "ta", "tb"),
      cost: fc.option(
        fc.record(
          { requests: fc.constantFrom(undefined, 0, 1, 2), inputTokens: tokens, outputTokens: tokens },
          { requiredKeys: [] }
        ),
        { nil: null }
      )
    })
  },
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constant("Release" as const),
      resource,
      call,
      job,
      token,
      reached: fc.boolean(),
      usage: fc.option(fc.record({ inputTokens: tokens, outputTokens: tokens }, { requiredKeys: [] }), { nil: null }),
      // A 429 lowers the learned concurrency cap; the other releases raise it (`Limits.learn`).
      rateLimited: fc.constantFrom(undefined, false, true)
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({ _tag: fc.constant("Renew" as const), resource, call, job, token, leaseMs })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("Pause" as const),
      resource,
      kind: fc.constantFrom<PauseKind>("rate_limited", "rate_limited", "quota_exhausted", "manual"),
      untilMs: fc.option(fc.constantFrom(-5, 0, 1, 500, 2_000, 10_000), { nil: null, freq: 4 }),
      reason: fc.constantFrom("429 retry-after", "spend cap", "")
    })
  }
)

/**
 * The command arbitrary: applies most often, defines, time steps (small, onto ends, and past the permit retention),
 * resumes, reads and rejected input.
 *
 * @internal
 */
export const command: fc.Arbitrary<fc.AsyncCommand<World, Real>> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .array(fc.record({ resource, limits }), { minLength: 1, maxLength: 2 })
      .map((items) => new Define(items))
  },
  { weight: 10, arbitrary: fc.array(itemSpec, { minLength: 1, maxLength: 5 }).map((items) => new Apply(items)) },
  {
    weight: 4,
    arbitrary: fc.constantFrom(0, 1, 13, 137, 500, 999, 1_000, 5_000, 3_600_001, 3_630_000).map((ms) => new Tick(ms))
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(resource, fc.constantFrom("permit" as const, "pause" as const), fc.constantFrom(-1 as const, 0, 1))
      .map(([r, what, offset]) => new TickTo(r, what, offset as -1 | 0 | 1))
  },
  { weight: 1, arbitrary: fc.uniqueArray(resource, { minLength: 1, maxLength: 2 }).map((rs) => new Resume(rs)) },
  { weight: 1, arbitrary: fc.constant(new ReadAll()) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom("define" as const, "apply" as const, "resume" as const, "read" as const),
        fc.array(itemSpec, { maxLength: 2 })
      )
      .map(([verb, valid]) => new Invalid(verb, valid))
  }
)

/**
 * The opening of every sequence: limits for the first resource, so most runs exercise the buckets.
 *
 * @internal
 */
export const prelude: fc.Arbitrary<fc.AsyncCommand<World, Real>> = limits.map(
  (l) => new Define([{ resource: 0, limits: l }])
)

/** Compares the states once more at the end of a run. @internal */
export const finalCompare = (world: World, real: Real): Promise<void> => compareStates(world, real)
