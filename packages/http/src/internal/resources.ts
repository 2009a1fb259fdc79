/**
 * The `resources` endpoint group: the fleet's provider limits through the `Limiter` of the server's backend. Reads
 * are `Limiter.read` (nothing written); setting limits is `Limiter.define`, a pause is an `apply` of one `Pause` item
 * of kind `manual`, and resume is `Limiter.resume`, each one call for the whole fleet. Every write answers the
 * resource as the store describes it after the write.
 *
 * With authentication, any tenant may read (the live permits of other tenants' jobs are left out of its list, not of
 * the count; an operator sees them all), and only an operator tenant (`Server.Options.operators`) may write: a resource is shared by every
 * tenant, so one tenant must not be able to pause or loosen another's provider key.
 *
 * @internal
 */
import { HttpApiBuilder } from "@effect/platform"
import type { InvalidInput } from "@slowcall/core/Errors"
import { Limiter, type ResourceState } from "@slowcall/core/Limiter"
import * as Limits from "@slowcall/core/Limits"
import { Effect } from "effect"
import { type Issue, type LimitsBody, type PauseBody, type ResourceView, SlowcallApi, Tenant } from "../Api.js"
import { invalidRequest, ServerOptions, storeUnavailable } from "./common.js"

const iso = (ms: number): string => new Date(ms).toISOString()

/**
 * A resource's state as the API shows it to `tenant` (undefined: everyone's permits): times as ISO-8601.
 *
 * @internal
 */
export const resourceView = (state: ResourceState, tenant: string | undefined): ResourceView => ({
  resource: state.resource,
  limits: Limits.normalize(state.limits),
  permitsInUse: state.view.permits,
  maxConcurrent: state.view.maxConcurrent,
  learnedConcurrent: state.view.learnedConcurrent,
  buckets: state.view.buckets,
  pause:
    state.pause === null
      ? null
      : {
          kind: state.pause.kind,
          until: state.pause.until === null ? null : iso(state.pause.until),
          reason: state.pause.reason,
          since: iso(state.pause.since)
        },
  halfOpen: state.view.halfOpen,
  permits: state.permits
    .filter((permit) => tenant === undefined || permit.tenant === tenant)
    .map((permit) => ({
      callId: permit.callId,
      jobId: permit.holder.jobId,
      token: permit.holder.token,
      tenant: permit.tenant,
      priority: permit.priority,
      permitUntil: iso(permit.permitUntil),
      probe: permit.probe
    })),
  counters: state.counters
})

/**
 * A problem the Limiter found (its path names a call item, `items[0].limits.maxConcurrent`) as an issue of the
 * request: the body field, or `resource` for the path's id.
 */
const limiterIssue = (error: InvalidInput): Issue => {
  const field = error.path.replace(/^items\[\d+\]\.(limits\.?)?/, "")
  return { path: field === "" ? [] : field.split("."), message: error.message }
}

const refuseInput = (error: InvalidInput) => Effect.fail(invalidRequest([limiterIssue(error)]))

/** With authentication, only an operator tenant may change a resource. */
const operatorOnly = Effect.gen(function* () {
  const options = yield* ServerOptions
  const tenant = yield* Tenant
  if (options.authenticate !== undefined && (tenant === undefined || !options.operators.has(tenant))) {
    return yield* Effect.fail({ error: "operator_required" } as const)
  }
})

/** Whose permits the caller sees: everyone's without authentication and for an operator, else its tenant's. */
const permitsOf = Effect.gen(function* () {
  const options = yield* ServerOptions
  const tenant = yield* Tenant
  return tenant === undefined || options.operators.has(tenant) ? undefined : tenant
})

/** One resource as the store describes it now, for the caller. */
const describe = (resource: string) =>
  Effect.gen(function* () {
    const limiter = yield* Limiter
    const tenant = yield* permitsOf
    const read = yield* limiter.read({ resources: [resource] })
    return { now: iso(read.now), resource: resourceView(read.resources[0]!, tenant) }
  })

const list = Effect.gen(function* () {
  const limiter = yield* Limiter
  const tenant = yield* permitsOf
  const read = yield* limiter.read({})
  return { now: iso(read.now), resources: read.resources.map((state) => resourceView(state, tenant)) }
}).pipe(Effect.catchTags({ StoreError: storeUnavailable, InvalidInput: refuseInput }))

const get = (request: { readonly path: { readonly resource: string } }) =>
  describe(request.path.resource).pipe(Effect.catchTags({ StoreError: storeUnavailable, InvalidInput: refuseInput }))

const define = (request: { readonly path: { readonly resource: string }; readonly payload: LimitsBody }) =>
  Effect.gen(function* () {
    yield* operatorOnly
    const limiter = yield* Limiter
    yield* limiter.define({ items: [{ resource: request.path.resource, limits: request.payload }] })
    return yield* describe(request.path.resource)
  }).pipe(Effect.catchTags({ StoreError: storeUnavailable, InvalidInput: refuseInput }))

const pause = (request: { readonly path: { readonly resource: string }; readonly payload: PauseBody }) =>
  Effect.gen(function* () {
    yield* operatorOnly
    const limiter = yield* Limiter
    const resource = request.path.resource
    const until = request.payload.until === undefined ? null : Date.parse(request.payload.until)
    if (until !== null) {
      // A pause that ends at or before the store's time would pause nothing: refused, nothing written.
      const { now } = yield* limiter.read({ resources: [resource] })
      if (until <= now) return yield* Effect.fail({ error: "until_not_in_future" } as const)
    }
    yield* limiter.apply({
      items: [
        { _tag: "Pause", resource, kind: "manual", until, reason: request.payload.reason ?? "paused by an operator" }
      ]
    })
    return yield* describe(resource)
  }).pipe(Effect.catchTags({ StoreError: storeUnavailable, InvalidInput: refuseInput }))

const resume = (request: { readonly path: { readonly resource: string } }) =>
  Effect.gen(function* () {
    yield* operatorOnly
    const limiter = yield* Limiter
    const reply = yield* limiter.resume({ items: [{ resource: request.path.resource }] })
    const described = yield* describe(request.path.resource)
    return { ...described, wasPaused: reply.results[0]!.wasPaused }
  }).pipe(Effect.catchTags({ StoreError: storeUnavailable, InvalidInput: refuseInput }))

/**
 * The handlers of the `resources` group.
 *
 * @internal
 */
export const resourcesGroup = HttpApiBuilder.group(SlowcallApi, "resources", (handlers) =>
  handlers
    .handle("list", () => list)
    .handle("get", get)
    .handle("define", define)
    .handle("pause", pause)
    .handle("resume", resume)
)
