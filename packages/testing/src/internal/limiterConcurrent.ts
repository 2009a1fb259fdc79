/**
 * The concurrent property of the Limiter: its calls as data, their generators and fixed scenarios, and one window
 * (a batch of calls sent at once, then the search for an order that explains it, with the generic checker of
 * `storeConcurrent/linearize.ts`).
 *
 * A sequence names two resources: `r0`, which every batch contends for (always with a concurrency cap), and `r1`,
 * which calls name now and then. A batch is 2 to 8 calls (each one `apply`, `define` or `resume`) at one store time,
 * drawn so that they collide: acquires of `r0` under a few call ids (repeats of one call and holder among them),
 * releases and renewals of one of `r0`'s permits, pauses, resumes and redefinitions. Before each batch come up to
 * two calls one at a time and a step of store time (small, onto a permit's or a pause's end, or past the permit
 * retention), so batches meet full, empty, paused and half-open resources.
 *
 * @internal
 */
import { isDeepStrictEqual } from "node:util"
import type { Limiter, LimitItem, Limits as LimitsType, PauseKind } from "@slowcall/core/Limiter"
import * as Limits from "@slowcall/core/Limits"
import type { Effect } from "effect"
import fc from "fast-check"
import type * as LimiterModel from "../LimiterModel.js"
import { linearize, type Model, type Timed } from "./storeConcurrent/linearize.js"

/** The backend side: a Limiter and a way to run its effects. @internal */
export interface Real {
  readonly limiter: Limiter["Type"]
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
}

/** One sequence's model side: the states that explain every window so far, store time, its resources. @internal */
export interface World {
  model: LimiterModel.LimiterModel
  frontier: ReadonlyArray<LimiterModel.LimiterModel>
  clock: number
  readonly resources: readonly [string, string]
}

/** A permit of a resource, by its place among the permits the model holds (by name); none held: a made-up one. */
interface PermitRef {
  readonly resource: 0 | 1
  readonly index: number
}

/** An apply item as data. */
type ItemSpec =
  | {
      readonly _tag: "Acquire"
      readonly resource: 0 | 1
      readonly call: number
      readonly token: number
      readonly leaseMs: number
      readonly priority: number
      readonly cost: { readonly requests?: number; readonly inputTokens?: number; readonly outputTokens?: number }
    }
  | {
      readonly _tag: "Release"
      readonly permit: PermitRef
      readonly reached: boolean
      readonly usage: { readonly inputTokens?: number; readonly outputTokens?: number } | null
    }
  | { readonly _tag: "Renew"; readonly permit: PermitRef; readonly leaseMs: number }
  | { readonly _tag: "Pause"; readonly resource: 0 | 1; readonly kind: PauseKind; readonly untilMs: number | null }

/** One Limiter call as data. @internal */
export type Call =
  | { readonly kind: "Apply"; readonly items: ReadonlyArray<ItemSpec> }
  | { readonly kind: "Define"; readonly resource: 0 | 1; readonly limits: LimitsType }
  | { readonly kind: "Resume"; readonly resource: 0 | 1 }

/** How store time moves before a batch. @internal */
export type TimeStep =
  | { readonly _tag: "By"; readonly ms: number }
  | { readonly _tag: "To"; readonly what: "permit" | "pause"; readonly offset: -1 | 0 | 1 }

/** What comes before a batch, and the batch. @internal */
export interface Round {
  readonly before: ReadonlyArray<Call>
  readonly time: TimeStep | null
  readonly batch: ReadonlyArray<Call>
}

/** A call resolved against the world: the same concrete call for the backend and for the model. */
interface Resolved {
  readonly label: string
  readonly real: (real: Real) => Promise<unknown>
  readonly model: (model: LimiterModel.LimiterModel) => unknown
}

/** A plain-data copy: `undefined` fields and `-0` gone. */
const plain = (value: unknown): unknown => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)))

/** The failure a call gave, as data: an `InvalidInput` by its path, anything else by its message. */
const settled = async (promise: Promise<unknown>): Promise<unknown> => {
  try {
    return plain(await promise)
  } catch (error) {
    const tagged = error as { readonly _tag?: unknown; readonly path?: unknown; readonly message?: unknown }
    if (tagged?._tag === "InvalidInput") return { invalid: tagged.path }
    throw error
  }
}

const modelReply = (reply: unknown): unknown => {
  const tagged = reply as { readonly _tag?: unknown; readonly path?: unknown }
  return tagged?._tag === "InvalidInput" ? { invalid: tagged.path } : plain(reply)
}

/** The permits of a resource by name, as the model holds them. */
const permitsOf = (model: LimiterModel.LimiterModel, resource: string): ReadonlyArray<Limits.Permit> =>
  [...(model.state(resource)?.permits ?? [])].sort((a, b) =>
    `${a.callId}\u0000${a.holder.jobId}\u0000${a.holder.token}` <
    `${b.callId}\u0000${b.holder.jobId}\u0000${b.holder.token}`
      ? -1
      : 1
  )

const resolveItem = (world: World, spec: ItemSpec): LimitItem => {
  switch (spec._tag) {
    case "Acquire":
      return {
        _tag: "Acquire",
        resource: world.resources[spec.resource],
        callId: `c${spec.call}`,
        holder: { jobId: `j${spec.call}`, token: spec.token },
        leaseMs: spec.leaseMs,
        priority: spec.priority,
        cost: spec.cost
      }
    case "Pause":
      return {
        _tag: "Pause",
        resource: world.resources[spec.resource],
        kind: spec.kind,
        until: spec.untilMs === null ? null : world.clock + spec.untilMs,
        reason: spec.kind
      }
    case "Release":
    case "Renew": {
      const resource = world.resources[spec.permit.resource]
      const held = permitsOf(world.model, resource)
      const permit = held[spec.permit.index % Math.max(1, held.length)]
      const name =
        permit === undefined
          ? { callId: "c-none", holder: { jobId: "j-none", token: 1 } }
          : { callId: permit.callId, holder: permit.holder }
      return spec._tag === "Release"
        ? {
            _tag: "Release",
            resource,
            ...name,
            reached: spec.reached,
            ...(spec.usage === null ? {} : { usage: spec.usage })
          }
        : { _tag: "Renew", resource, ...name, leaseMs: spec.leaseMs }
    }
  }
}

const resolve = (world: World, call: Call): Resolved => {
  const now = world.clock
  switch (call.kind) {
    case "Apply": {
      const items = call.items.map((spec) => resolveItem(world, spec))
      return {
        label: `apply ${JSON.stringify(items)}`,
        real: (real) => settled(real.run(real.limiter.apply({ items, now }))),
        model: (model) => modelReply(model.apply(items, now))
      }
    }
    case "Define": {
      const items = [{ resource: world.resources[call.resource], limits: call.limits }]
      return {
        label: `define ${JSON.stringify(items)}`,
        real: (real) => settled(real.run(real.limiter.define({ items, now }))),
        model: (model) => modelReply(model.define(items, now))
      }
    }
    case "Resume": {
      const items = [{ resource: world.resources[call.resource] }]
      return {
        label: `resume ${JSON.stringify(items)}`,
        real: (real) => settled(real.run(real.limiter.resume({ items, now }))),
        model: (model) => modelReply(model.resume(items, now))
      }
    }
  }
}

/** One call of a window as it happened. */
interface Recorded extends Timed {
  readonly resolved: Resolved
  readonly client: number
  readonly outcome:
    | { readonly _tag: "Reply"; readonly value: unknown }
    | { readonly _tag: "Error"; readonly message: string }
}

/**
 * A key equal for equal model states: every resource's state, its permits by name (the rules never depend on the
 * order permits were granted in).
 */
const keyOf = (model: LimiterModel.LimiterModel): string =>
  JSON.stringify(
    [...model.states()]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([resource, state]) => [resource, { ...state, permits: permitsOf(model, resource) }])
  )

const limiterModel: Omit<Model<LimiterModel.LimiterModel, Recorded>, "observe"> = {
  step: (state, op) => {
    const outcome = op.outcome
    if (outcome._tag === "Error") return { refused: () => `the backend failed the call: ${outcome.message}` }
    const next = state.clone()
    const reply = op.resolved.model(next)
    return isDeepStrictEqual(outcome.value, reply)
      ? { state: next }
      : { refused: () => `the model answers ${JSON.stringify(reply)}` }
  },
  inert: () => false,
  key: keyOf
}

/** Counters a run keeps across its windows. @internal */
export interface Stats {
  concurrentSteps: number
  calls: number
  grants: number
}

const report = (
  world: World,
  ops: ReadonlyArray<Recorded>,
  verdict: Extract<ReturnType<typeof linearize>, { readonly _tag: "NotLinearizable" }>,
  held: unknown
): string => {
  const t0 = Math.min(...ops.map((op) => op.invokedAt))
  const at = (t: number) => (t - t0).toFixed(2)
  const lines = [
    `No order of this batch of ${ops.length} Limiter calls (sent at once from ${new Set(ops.map((op) => op.client)).size} client(s), store time ${world.clock}) explains the backend's replies and resources; every batch before it was explained.`,
    "The batch (times in ms from the first invocation; a call that returned before another was invoked must come first):",
    ...ops.map(
      (op, i) =>
        `  #${i} client ${op.client} [${at(op.invokedAt)} -> ${at(op.returnedAt)}] ${op.resolved.label}\n      -> ${op.outcome._tag === "Reply" ? JSON.stringify(op.outcome.value) : `failed: ${op.outcome.message}`}`
    ),
    `The resources before the batch: ${keyOf(world.model)}`,
    `What the backend holds after the batch: ${JSON.stringify(held)}`,
    verdict.exhausted
      ? `The search stopped after ${verdict.nodes} states without an answer.`
      : verdict.observed !== undefined
        ? `Every reply fits some order, but no order ends in what the backend holds: ${verdict.observed}`
        : `The longest order found: ${verdict.deepest.length === 0 ? "(none)" : verdict.deepest.map((i) => `#${i}`).join(", ")}; after it, every call that could come next was refused:\n${verdict.refusals.map((r) => `  #${r.index}: ${r.reason}`).join("\n")}`
  ]
  return lines.join("\n")
}

/**
 * Runs one window: the calls at once (one alone is a sequential step), then the check against what the backend
 * holds (`read` of both resources at the window's store time). Throws the report when no order explains it;
 * otherwise moves the world to the states that do.
 *
 * @internal
 */
export const window = async (
  world: World,
  reader: Real,
  clients: ReadonlyArray<Real>,
  calls: ReadonlyArray<Call>,
  stats: Stats
): Promise<void> => {
  const resolved = calls.map((call) => resolve(world, call))
  const ops: ReadonlyArray<Recorded> = await Promise.all(
    resolved.map((r, i) => {
      const client = i % clients.length
      const invokedAt = performance.now()
      return r.real(clients[client]!).then(
        (value): Recorded => ({
          resolved: r,
          client,
          invokedAt,
          returnedAt: performance.now(),
          outcome: { _tag: "Reply", value }
        }),
        (error: unknown): Recorded => ({
          resolved: r,
          client,
          invokedAt,
          returnedAt: performance.now(),
          outcome: { _tag: "Error", message: error instanceof Error ? error.message : String(error) }
        })
      )
    })
  )
  stats.calls += ops.length
  if (ops.length > 1) stats.concurrentSteps += 1
  for (const op of ops) {
    if (op.outcome._tag !== "Reply") continue
    const results = (op.outcome.value as { readonly results?: ReadonlyArray<{ readonly _tag: string }> }).results
    for (const result of results ?? []) if (result._tag === "Granted") stats.grants += 1
  }
  const read = { resources: [...world.resources], now: world.clock }
  const held = plain(await reader.run(reader.limiter.read(read)))
  const found = linearize(
    {
      ...limiterModel,
      observe: (state) => {
        const expected = plain(state.read(read.resources, read.now))
        return isDeepStrictEqual(held, expected) ? undefined : `the model holds ${JSON.stringify(expected)}`
      }
    },
    world.frontier,
    ops
  )
  if (found._tag === "NotLinearizable") throw new Error(report(world, ops, found, held))
  world.frontier = found.ends.map((end) => end.state)
  world.model = found.ends[0]!.state
}

/**
 * Store time after a step: by `ms`, or onto the next end of one of `r0`'s permits or its pause (if one lies ahead),
 * give or take a millisecond.
 *
 * @internal
 */
export const timeOf = (world: World, step: TimeStep): number => {
  if (step._tag === "By") return world.clock + step.ms
  const state = world.model.state(world.resources[0])
  const ends =
    step.what === "permit"
      ? (state?.permits ?? []).map((permit) => permit.until)
      : state?.pause?.until == null
        ? []
        : [state.pause.until]
  const ahead = ends.filter((end) => end + step.offset > world.clock)
  return ahead.length === 0 ? world.clock : Math.min(...ahead) + step.offset
}

// ---------------------------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------------------------

const leaseMs = fc.constantFrom(1, 500, 2_000, 30_000)
const resource = fc.constantFrom<0 | 1>(0, 0, 0, 1)
const tokens = fc.constantFrom(0, 13, 500, 3_000)

const limits: fc.Arbitrary<LimitsType> = fc.record(
  {
    maxConcurrent: fc.integer({ min: 1, max: 4 }),
    requestsPerMinute: fc.constantFrom(7, 90, 600),
    inputTokensPerMinute: fc.constantFrom(6_000, 60_000),
    outputTokensPerMinute: fc.constantFrom(6_000, 60_000),
    burstSeconds: fc.constantFrom(0.5, 1, 2.5),
    priorityShare: fc.record({ minPriority: fc.constant(1), share: fc.constantFrom(0.25, 0.5) })
  },
  { requiredKeys: ["maxConcurrent"] }
)

const acquire = (calls: number): fc.Arbitrary<ItemSpec> =>
  fc.record({
    _tag: fc.constant("Acquire" as const),
    resource,
    call: fc.nat({ max: calls - 1 }),
    token: fc.constantFrom(1, 1, 1, 2),
    leaseMs,
    priority: fc.constantFrom(0, 0, 1),
    cost: fc.record(
      { requests: fc.constantFrom(1, 1, 2), inputTokens: tokens, outputTokens: tokens },
      { requiredKeys: [] }
    )
  })

const permitRef = (index: fc.Arbitrary<number>): fc.Arbitrary<PermitRef> =>
  fc.record({ resource: fc.constantFrom<0 | 1>(0, 0, 0, 0, 1), index })

const release = (index: fc.Arbitrary<number>): fc.Arbitrary<ItemSpec> =>
  fc.record({
    _tag: fc.constant("Release" as const),
    permit: permitRef(index),
    reached: fc.boolean(),
    usage: fc.option(fc.record({ inputTokens: tokens, outputTokens: tokens }, { requiredKeys: [] }), { nil: null })
  })

const renew = (index: fc.Arbitrary<number>): fc.Arbitrary<ItemSpec> =>
  fc.record({ _tag: fc.constant("Renew" as const), permit: permitRef(index), leaseMs })

const pause: fc.Arbitrary<ItemSpec> = fc.record({
  _tag: fc.constant("Pause" as const),
  resource,
  kind: fc.constantFrom<PauseKind>("rate_limited", "rate_limited", "quota_exhausted", "manual"),
  untilMs: fc.constantFrom<number | null>(0, 500, 2_000, null)
})

const applyOf = (item: fc.Arbitrary<ItemSpec>): fc.Arbitrary<Call> =>
  fc.array(item, { minLength: 1, maxLength: 2 }).map((items) => ({ kind: "Apply" as const, items }))

/** One call of a batch whose permit targets are drawn from `index` (one value: every call aims at one permit). */
const batchCall = (index: fc.Arbitrary<number>, calls: number): fc.Arbitrary<Call> =>
  fc.oneof(
    { weight: 8, arbitrary: applyOf(acquire(calls)) },
    { weight: 4, arbitrary: applyOf(fc.oneof(release(index), renew(index))) },
    { weight: 2, arbitrary: applyOf(fc.oneof(acquire(calls), release(index), renew(index), pause)) },
    { weight: 1, arbitrary: applyOf(pause) },
    { weight: 1, arbitrary: resource.map((r): Call => ({ kind: "Resume", resource: r })) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("Define" as const), resource, limits }) }
  )

/** A batch: 2 to 8 calls aimed at one permit of `r0` (or anywhere) and at a few call ids. */
const batch: fc.Arbitrary<ReadonlyArray<Call>> = fc
  .tuple(
    fc.oneof(
      fc.nat({ max: 3 }).map((n) => fc.constant(n)),
      fc.constant(fc.nat({ max: 3 }))
    ),
    fc.integer({ min: 2, max: 8 })
  )
  .chain(([index, calls]) => fc.array(batchCall(index, calls), { minLength: 2, maxLength: 8 }))

const timeStep: fc.Arbitrary<TimeStep | null> = fc.oneof(
  { weight: 2, arbitrary: fc.constant(null) },
  { weight: 4, arbitrary: fc.constantFrom(1, 137, 1_000, 2_500).map((ms): TimeStep => ({ _tag: "By", ms })) },
  { weight: 1, arbitrary: fc.constant<TimeStep>({ _tag: "By", ms: Limits.defaults.permitRetentionMs + 30_000 }) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom("permit" as const, "pause" as const), fc.constantFrom(-1 as const, 0 as const, 1 as const))
      .map(([what, offset]): TimeStep => ({ _tag: "To", what, offset }))
  }
)

/** The limits of `r0` a sequence opens with. @internal */
export const prelude: fc.Arbitrary<LimitsType> = limits

/** `min` to `max` rounds. @internal */
export const rounds = (min: number, max: number): fc.Arbitrary<ReadonlyArray<Round>> =>
  fc.array(
    fc.record({
      before: fc.array(batchCall(fc.nat({ max: 3 }), 6), { maxLength: 2 }),
      time: timeStep,
      batch
    }),
    { minLength: min, maxLength: max }
  )

const acquireOf = (call: number, extra: Partial<Extract<ItemSpec, { _tag: "Acquire" }>> = {}): Call => ({
  kind: "Apply",
  items: [{ _tag: "Acquire", resource: 0, call, token: 1, leaseMs: 30_000, priority: 0, cost: {}, ...extra }]
})

const one = (item: ItemSpec): Call => ({ kind: "Apply", items: [item] })

/**
 * The fixed scenarios, each a race a Limiter is most likely to get wrong, as (limits of `r0`, rounds).
 *
 * @internal
 */
export const scenarios: Readonly<Record<string, readonly [LimitsType, ReadonlyArray<Round>]>> = {
  "16 acquires of one resource with maxConcurrent 4": [
    { maxConcurrent: 4 },
    [{ before: [], time: null, batch: Array.from({ length: 16 }, (_, i) => acquireOf(i)) }]
  ],
  "8 repeats of one acquire (one call, one holder) at once": [
    { maxConcurrent: 1, requestsPerMinute: 60 },
    [{ before: [], time: null, batch: Array.from({ length: 8 }, () => acquireOf(0)) }]
  ],
  "releases racing renewals of one permit": [
    { maxConcurrent: 2, inputTokensPerMinute: 6_000 },
    [
      {
        before: [acquireOf(0, { cost: { inputTokens: 80 } })],
        time: { _tag: "By", ms: 100 },
        batch: [
          ...Array.from({ length: 3 }, () =>
            one({ _tag: "Release", permit: { resource: 0, index: 0 }, reached: true, usage: { inputTokens: 20 } })
          ),
          ...Array.from({ length: 3 }, () => one({ _tag: "Renew", permit: { resource: 0, index: 0 }, leaseMs: 5_000 })),
          acquireOf(1),
          acquireOf(2)
        ]
      }
    ]
  ],
  "a pause racing acquires, then the half-open probe racing acquires": [
    { maxConcurrent: 3 },
    [
      {
        before: [],
        time: null,
        batch: [
          one({ _tag: "Pause", resource: 0, kind: "rate_limited", untilMs: 2_000 }),
          ...Array.from({ length: 5 }, (_, i) => acquireOf(i))
        ]
      },
      {
        before: [],
        time: { _tag: "To", what: "pause", offset: 0 },
        batch: Array.from({ length: 6 }, (_, i) => acquireOf(10 + i, { leaseMs: 2_000 }))
      },
      {
        before: [],
        time: { _tag: "By", ms: 10 },
        batch: [
          one({ _tag: "Release", permit: { resource: 0, index: 0 }, reached: true, usage: null }),
          one({ _tag: "Release", permit: { resource: 0, index: 1 }, reached: true, usage: null }),
          ...Array.from({ length: 4 }, (_, i) => acquireOf(20 + i))
        ]
      }
    ]
  ],
  "a lowered limit racing acquires and releases": [
    { maxConcurrent: 4, requestsPerMinute: 600 },
    [
      {
        before: [acquireOf(0), acquireOf(1)],
        time: null,
        batch: [
          { kind: "Define", resource: 0, limits: { maxConcurrent: 1, requestsPerMinute: 90 } },
          acquireOf(2),
          acquireOf(3),
          one({ _tag: "Release", permit: { resource: 0, index: 0 }, reached: false, usage: null }),
          { kind: "Resume", resource: 0 }
        ]
      }
    ]
  ]
}

/** Lets the runner's own messages through between sequences. @internal */
export const yieldToRunner = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))
