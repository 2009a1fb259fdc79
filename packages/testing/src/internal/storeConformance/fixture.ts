/**
 * What every area of the Store conformance suite arranges its tests with: the services, a unique queue and tenant
 * per test, the suite's `TestClock` as store time, and one-item forms of the batch verbs (each asserts that a batch
 * of one got exactly one result back).
 *
 * Time: each test reads `TestClock` and passes it as `now` to every write; `advance` moves it. The clock starts at
 * `BASE_TIME` and every test starts a second after the previous one, so no two tests share a timestamp.
 *
 * @internal
 */
import { expect, type Vitest } from "@effect/vitest"
import type { ErrorClass } from "@slowcall/core/ErrorClass"
import type { AbandonReason, Attempt, Charge, Job, JobId, Json } from "@slowcall/core/Job"
import type { Outcome, ReplayFilter, SubmitItem } from "@slowcall/core/Protocol"
import { Query } from "@slowcall/core/Query"
import {
  type CancelResult,
  type ChargeItem,
  type ChargeResult,
  type ClaimResult,
  type HeartbeatItem,
  type HeartbeatResult,
  type ReplayItemResult,
  type Reply,
  type SettleResult,
  Store,
  type SubmitOutcome
} from "@slowcall/core/Store"
import { Clock, Duration, Effect, type Layer, TestClock } from "effect"
import { type JobFactory, type JobSpec, makeJobFactory } from "../../JobFactory.js"
import type { StoreCapabilities } from "../../StoreConformance.js"

/** A fixed starting point (2026-01-01) so every backend stores realistic timestamps. @internal */
export const BASE_TIME = 1_767_225_600_000

/** The lease most tests take. @internal */
export const LEASE = 30_000

/** A test's own services, names and clock. @internal */
export interface Fixture {
  readonly store: Store["Type"]
  readonly query: Query["Type"]
  readonly factory: JobFactory
  readonly queue: string
  readonly tenant: string
  /** The suite's clock: store time for every write of the test. */
  readonly now: Effect.Effect<number>
  readonly advance: (ms: number) => Effect.Effect<void>
  /** A submit item on the test's queue and tenant. */
  readonly item: (spec?: Partial<JobSpec>) => Effect.Effect<SubmitItem>
  /** Submits one job at the clock's time; it must be `Created`. */
  readonly submit: (spec?: Partial<JobSpec>) => Effect.Effect<Job, unknown>
  /** Submits one item at the clock's time and returns its outcome. */
  readonly submitOne: (item: SubmitItem) => Effect.Effect<SubmitOutcome, unknown>
  /** One claim at the clock's time (or `at`). */
  readonly claim: (
    jobId: JobId,
    options?: {
      readonly owner?: string | undefined
      readonly leaseMs?: number | undefined
      readonly estimateCents?: number | undefined
      readonly at?: number | undefined
    }
  ) => Effect.Effect<ClaimResult, unknown>
  /** One claim that must be `Claimed`: the job under its new lease. */
  readonly claimed: (jobId: JobId, owner?: string, leaseMs?: number) => Effect.Effect<Job, unknown>
  readonly heartbeat: (item: HeartbeatItem, at?: number) => Effect.Effect<HeartbeatResult, unknown>
  readonly charge: (item: ChargeItem, at?: number) => Effect.Effect<ChargeResult, unknown>
  /** The job's spend after a charge that must be `Charged`. */
  readonly charged: (item: ChargeItem, at?: number) => Effect.Effect<number, unknown>
  readonly settle: (jobId: JobId, token: number, outcome: Outcome, at?: number) => Effect.Effect<SettleResult, unknown>
  /** A settlement that must apply: the job as it left it. */
  readonly settled: (jobId: JobId, token: number, outcome: Outcome, at?: number) => Effect.Effect<Job, unknown>
  readonly cancel: (jobId: JobId, tenant?: string, at?: number) => Effect.Effect<CancelResult, unknown>
  readonly replay: (
    jobIds: ReadonlyArray<JobId>,
    filter?: ReplayFilter
  ) => Effect.Effect<ReadonlyArray<ReplayItemResult>, unknown>
  readonly get: (jobId: JobId) => Effect.Effect<Job, unknown>
  readonly attempts: (jobId: JobId) => Effect.Effect<ReadonlyArray<Attempt>, unknown>
  readonly charges: (jobId: JobId) => Effect.Effect<ReadonlyArray<Charge>, unknown>
}

/** The single result of a batch of one. @internal */
export const only = <A>(reply: Reply<A>): A => {
  expect(reply.results).toHaveLength(1)
  return reply.results[0]!
}

/** Asserts the tag and narrows to it. @internal */
export const expectTag = <A extends { readonly _tag: string }, T extends A["_tag"]>(
  value: A,
  tag: T
): Extract<A, { readonly _tag: T }> => {
  expect(value._tag).toBe(tag)
  if (value._tag !== tag) throw new Error(`expected ${tag}, got ${value._tag}`)
  return value as Extract<A, { readonly _tag: T }>
}

/** The settle outcomes, spelled once. @internal */
export const outcome = {
  complete: (result: Json | null): Outcome => ({ _tag: "Complete", result }),
  retry: (delayMs: number, errorClass: ErrorClass, error: string): Outcome => ({
    _tag: "Retry",
    delayMs,
    errorClass,
    error
  }),
  fail: (errorClass: ErrorClass, error: string): Outcome => ({ _tag: "Fail", errorClass, error }),
  abandon: (reason: AbandonReason, errorClass?: ErrorClass, error?: string): Outcome => ({
    _tag: "Abandon",
    reason,
    errorClass,
    error
  }),
  release: { _tag: "Release" } as Outcome,
  throttle: (delayMs: number, error: string): Outcome => ({ _tag: "Throttle", delayMs, error })
}

/** What each area gets to register its tests. @internal */
export interface Area {
  readonly it: Vitest.MethodsNonLive<Store | Query>
  /** A fresh fixture: call it at the start of each test. */
  readonly fixture: Effect.Effect<Fixture, never, Store | Query>
  readonly capabilities: StoreCapabilities
  /** The suite's layer, for tests that build a second instance of the backend. */
  readonly layer: Layer.Layer<Store | Query, unknown>
  /** Records a test that is not registered for this backend, and why (printed once per suite). */
  readonly notRun: (what: string, why: string) => void
}

/** The fixture maker of one suite run: one job factory, one clock, unique names per test. @internal */
export const makeFixture = (): Effect.Effect<Fixture, never, Store | Query> => {
  const factory = makeJobFactory()
  return Effect.gen(function* () {
    const store = yield* Store
    const query = yield* Query
    const current = yield* Clock.currentTimeMillis
    if (current < BASE_TIME) yield* TestClock.setTime(BASE_TIME)
    yield* TestClock.adjust(Duration.seconds(1))
    const queue = factory.uniqueName("q")
    const tenant = factory.uniqueName("t")
    const now = Clock.currentTimeMillis
    const at = (value: number | undefined) => (value === undefined ? now : Effect.succeed(value))
    const item = (spec: Partial<JobSpec> = {}) => factory.submitItem({ queue, tenant, ...spec })
    const submitOne = (submitItem: SubmitItem) =>
      Effect.flatMap(now, (t) => Effect.map(store.submit({ items: [submitItem], now: t }), only))
    const claim: Fixture["claim"] = (jobId, options = {}) =>
      Effect.flatMap(at(options.at), (t) =>
        Effect.map(
          store.claim({
            items: [
              {
                jobId,
                owner: options.owner ?? "worker-a",
                leaseMs: options.leaseMs ?? LEASE,
                estimateCents: options.estimateCents
              }
            ],
            now: t
          }),
          only
        )
      )
    const settle: Fixture["settle"] = (jobId, token, o, t) =>
      Effect.flatMap(at(t), (n) => Effect.map(store.settle({ items: [{ jobId, token, outcome: o }], now: n }), only))
    const charge: Fixture["charge"] = (chargeItem, t) =>
      Effect.flatMap(at(t), (n) => Effect.map(store.charge({ items: [chargeItem], now: n }), only))
    const fixture: Fixture = {
      store,
      query,
      factory,
      queue,
      tenant,
      now,
      advance: (ms) => TestClock.adjust(Duration.millis(ms)),
      item,
      submitOne,
      submit: (spec) =>
        Effect.gen(function* () {
          const outcome = yield* submitOne(yield* item(spec))
          return expectTag(outcome, "Created").job
        }),
      claim,
      claimed: (jobId, owner, leaseMs) =>
        Effect.map(claim(jobId, { owner, leaseMs }), (result) => expectTag(result, "Claimed").job),
      heartbeat: (heartbeatItem, t) =>
        Effect.flatMap(at(t), (n) => Effect.map(store.heartbeat({ items: [heartbeatItem], now: n }), only)),
      charge,
      charged: (chargeItem, t) => Effect.map(charge(chargeItem, t), (result) => expectTag(result, "Charged").costCents),
      settle,
      settled: (jobId, token, o, t) =>
        Effect.map(settle(jobId, token, o, t), (result) => expectTag(result, "Settled").job),
      cancel: (jobId, tenantOption, t) =>
        Effect.flatMap(at(t), (n) =>
          Effect.map(store.cancel({ items: [{ jobId, tenant: tenantOption }], now: n }), only)
        ),
      replay: (jobIds, filter) =>
        Effect.flatMap(now, (n) =>
          Effect.map(store.replay({ items: jobIds.map((jobId) => ({ jobId })), filter, now: n }), (r) => r.results)
        ),
      get: (jobId) => query.get({ jobId }),
      attempts: (jobId) => query.attempts({ jobId }),
      charges: (jobId) => query.charges({ jobId })
    }
    return fixture
  })
}
