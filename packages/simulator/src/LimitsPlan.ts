/**
 * Fleet limits in a plan: the provider resources a run's jobs use, the limits the simulated provider enforces on each
 * (its own token buckets and concurrency cap), what the fleet declares to its Limiter (the provider's limits, none,
 * or limits above the provider's), the tenants jobs belong to and their weights, the tokens each call reserves and
 * uses, and a spend cap the provider reaches for a while. Drawn after every other field of a plan, so a seed's other
 * fields are the ones it drew before limits existed; a plan saved without `limits` runs with no resource.
 *
 * @since 0.4.0
 */
import type * as Limiter from "@slowcall/core/Limiter"
import * as fc from "fast-check"

/**
 * What the provider enforces on one resource: concurrent calls, requests, input and output tokens per minute (token
 * buckets holding `burstSeconds` of each limit, refilled continuously, as `Limits.ts` states them).
 *
 * @since 0.4.0
 * @category models
 */
export interface ResourcePlan {
  readonly maxConcurrent: number
  readonly requestsPerMinute: number
  readonly inputTokensPerMinute: number
  readonly outputTokensPerMinute: number
  readonly burstSeconds: number
}

/**
 * A plan's fleet limits. Invariant: every bucket holds at least one call's reservation (`inputTokens`, `maxOutput`,
 * one request), so neither the provider nor a Limiter that matches it ever runs a bucket into debt.
 *
 * - `declared`: what the fleet's Limiter is told: `match` (the provider's limits), `none` (the resources are named
 *   but have no limits: the fleet learns only from 429s), `higher` (twice the provider's).
 * - `tenants`: each tenant's weight; job `i` belongs to tenant `i % tenants.length`. `fair`: workers claim fairly
 *   by those weights (store intake only).
 * - `spendCap`: the provider answers every call of the first resource with a spend-cap 429 from `at` until `until`
 *   (ms into the run), when the cap is raised and an operator resumes the resource.
 *
 * @since 0.4.0
 * @category models
 */
export interface LimitsPlan {
  readonly resources: ReadonlyArray<ResourcePlan>
  readonly declared: "match" | "none" | "higher"
  readonly tenants: ReadonlyArray<number>
  readonly fair: boolean
  readonly inputTokens: number
  readonly maxOutput: number
  readonly spendCap: { readonly at: number; readonly until: number } | null
}

/**
 * The resource id of resource `r`.
 *
 * @since 0.4.0
 * @category combinators
 */
export const resourceId = (r: number): string => `sim:model-${r}:key-a`

/**
 * The job type of a job that calls resource `r` (`undefined`: a plan without limits). Each resource has a handler of
 * its own that declares it (`HandlerOptions.resource`), so workers admit a job before they claim it, as a production
 * fleet whose handlers each call one model does.
 *
 * @since 0.4.0
 * @category combinators
 */
export const jobTypeOf = (r: number | undefined): string => (r === undefined ? "sim.generate" : `sim.generate.r${r}`)

/**
 * The job type of job `i` (of input `n = i`) in a plan with `limits` (or none).
 *
 * @since 0.4.0
 * @category combinators
 */
export const jobTypeOfJob = (limits: LimitsPlan | undefined, i: number): string =>
  jobTypeOf(limits === undefined ? undefined : Math.abs(i) % limits.resources.length)

/**
 * The tenant job `i` belongs to.
 *
 * @since 0.4.0
 * @category combinators
 */
export const tenantOfJob = (limits: LimitsPlan, i: number): string => `tenant-${i % limits.tenants.length}`

/**
 * The provider's limits of a resource as a `Limiter.Limits`.
 *
 * @since 0.4.0
 * @category combinators
 */
export const providerLimits = (resource: ResourcePlan): Limiter.Limits => ({
  maxConcurrent: resource.maxConcurrent,
  requestsPerMinute: resource.requestsPerMinute,
  inputTokensPerMinute: resource.inputTokensPerMinute,
  outputTokensPerMinute: resource.outputTokensPerMinute,
  burstSeconds: resource.burstSeconds
})

/**
 * What the fleet declares for a resource (see `LimitsPlan.declared`).
 *
 * @since 0.4.0
 * @category combinators
 */
export const declaredLimits = (limits: LimitsPlan, resource: ResourcePlan): Limiter.Limits => {
  switch (limits.declared) {
    case "match":
      return providerLimits(resource)
    case "none":
      return {}
    case "higher":
      return {
        maxConcurrent: resource.maxConcurrent * 2,
        requestsPerMinute: resource.requestsPerMinute * 2,
        inputTokensPerMinute: resource.inputTokensPerMinute * 2,
        outputTokensPerMinute: resource.outputTokensPerMinute * 2,
        burstSeconds: resource.burstSeconds
      }
  }
}

/**
 * The fairness weights of a plan's tenants, by tenant id.
 *
 * @since 0.4.0
 * @category combinators
 */
export const weights = (limits: LimitsPlan): Record<string, number> => {
  const out: Record<string, number> = {}
  limits.tenants.forEach((weight, t) => {
    out[`tenant-${t}`] = weight
  })
  return out
}

/**
 * The generator: `null` (no resource, as before limits existed) in half the plans. Each bucket is drawn as a number
 * of calls per minute times one call's reservation, with a burst of at least one call, so every bucket holds a call.
 * Shrinks toward no limits, one resource, one tenant, limits that match the provider's and no spend cap.
 *
 * @since 0.4.0
 * @category constructors
 */
export const arbitrary: fc.Arbitrary<LimitsPlan | null> = fc.oneof(
  fc.constant(null),
  fc
    .record({
      resources: fc.array(
        fc.record({
          maxConcurrent: fc.integer({ min: 1, max: 4 }),
          requestsPerMinute: fc.integer({ min: 120, max: 1_200 }),
          inputCallsPerMinute: fc.integer({ min: 120, max: 1_200 }),
          outputCallsPerMinute: fc.integer({ min: 120, max: 1_200 }),
          burstSeconds: fc.integer({ min: 2, max: 10 })
        }),
        { minLength: 1, maxLength: 2 }
      ),
      // The provider's own limits in three plans of five, none in one, twice the provider's in one: the fleet learns
      // the concurrency the provider takes from its 429s (`Limits.learn`).
      declared: fc.oneof(
        { weight: 3, arbitrary: fc.constant("match" as const) },
        { weight: 1, arbitrary: fc.constant("none" as const) },
        { weight: 1, arbitrary: fc.constant("higher" as const) }
      ),
      tenants: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 3 }),
      fair: fc.boolean(),
      inputTokens: fc.integer({ min: 100, max: 2_000 }),
      maxOutput: fc.integer({ min: 50, max: 1_000 }),
      // One plan with limits in four reaches the spend cap.
      spendCap: fc.oneof(
        { weight: 3, arbitrary: fc.constant(null) },
        {
          weight: 1,
          arbitrary: fc
            .record({ at: fc.integer({ min: 0, max: 12_000 }), ms: fc.integer({ min: 500, max: 6_000 }) })
            .map(({ at, ms }) => ({ at, until: at + ms }))
        }
      )
    })
    .map(
      ({ inputTokens, maxOutput, resources, ...rest }): LimitsPlan => ({
        ...rest,
        inputTokens,
        maxOutput,
        resources: resources.map((r) => ({
          maxConcurrent: r.maxConcurrent,
          // A burst of `burstSeconds` holds at least one call: `calls per minute * burst / 60 >= 1`.
          requestsPerMinute: Math.max(r.requestsPerMinute, Math.ceil(60 / r.burstSeconds)),
          inputTokensPerMinute: inputTokens * Math.max(r.inputCallsPerMinute, Math.ceil(60 / r.burstSeconds)),
          outputTokensPerMinute: maxOutput * Math.max(r.outputCallsPerMinute, Math.ceil(60 / r.burstSeconds)),
          burstSeconds: r.burstSeconds
        }))
      })
    )
)
