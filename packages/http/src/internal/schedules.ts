/**
 * The `schedules` endpoint group: the fleet's cron schedules through the `ScheduleStore` of the server's backend.
 * Reads are `list` / `get` (nothing written); `PUT` builds the schedule with `Schedule.make` (a refusal is a `400`
 * naming the field, nothing written) and `upsert`s it; pause, resume and delete are the store's verbs, each one
 * atomic write for the whole fleet. Every answer carries the store time it was made in, and `nextTick` is computed
 * from that time, never the process's clock.
 *
 * With authentication, only an operator tenant (`Server.Options.operators`) may write: a schedule makes jobs for
 * whatever tenant its template names, so a tenant must not be able to define or stop one. A tenant that is not an
 * operator sees the schedules whose jobs are its own, and another's answers like an unknown one (`404`).
 *
 * @internal
 */
import { HttpApiBuilder } from "@effect/platform"
import * as Schedule from "@slowcall/schedules/Schedule"
import { type ScheduleRecord, ScheduleStore } from "@slowcall/schedules/ScheduleStore"
import { Effect, Either } from "effect"
import { type ScheduleDefinitionBody, type ScheduleView, SlowcallApi, Tenant } from "../Api.js"
import { invalidRequest, notFound, ServerOptions, storeUnavailable } from "./common.js"

const iso = (ms: number): string => new Date(ms).toISOString()

/**
 * A stored schedule as the API shows it at store time `now`: `lastTick` is the cursor when the cursor is a tick of
 * the expression (a new or resumed schedule's cursor is the time it was written or resumed: no tick yet), `nextTick`
 * the first tick after `now` unless paused.
 *
 * @internal
 */
export const scheduleView = (record: ScheduleRecord, now: number): ScheduleView => {
  const schedule = record.schedule
  const isTick = Schedule.nextTick(schedule, record.cursor - 1) === record.cursor
  const next = record.paused ? null : Schedule.nextTick(schedule, now)
  return {
    id: schedule.id,
    cron: schedule.cron,
    timezone: schedule.timezone,
    job: schedule.job,
    overlap: schedule.overlap,
    catchUp: schedule.catchUp,
    graceMs: schedule.graceMs,
    paused: record.paused,
    lastTick: isTick ? iso(record.cursor) : null,
    lastJobId: record.lastJobId,
    decidedThrough: iso(record.cursor),
    nextTick: next === null ? null : iso(next),
    createdAt: iso(record.createdAt)
  }
}

/** With authentication, only an operator tenant may change a schedule. */
const operatorOnly = Effect.gen(function* () {
  const options = yield* ServerOptions
  const tenant = yield* Tenant
  if (options.authenticate !== undefined && (tenant === undefined || !options.operators.has(tenant))) {
    return yield* Effect.fail({ error: "operator_required" } as const)
  }
})

/** Which schedules the caller sees: all without authentication and for an operator, else its own tenant's. */
const visibleTo = Effect.gen(function* () {
  const options = yield* ServerOptions
  const tenant = yield* Tenant
  return (record: ScheduleRecord) =>
    tenant === undefined || options.operators.has(tenant) || record.schedule.job.tenant === tenant
})

/** A verb's `RecordResult` as the API's body, or `404`. */
const answer = (
  now: number,
  result: { readonly _tag: "Found"; readonly record: ScheduleRecord } | { _tag: "NotFound" }
) =>
  result._tag === "Found"
    ? Effect.succeed({ now: iso(now), schedule: scheduleView(result.record, now) })
    : Effect.fail(notFound)

const list = Effect.gen(function* () {
  const store = yield* ScheduleStore
  const visible = yield* visibleTo
  const { now, result } = yield* store.list()
  return { now: iso(now), schedules: result.filter(visible).map((record) => scheduleView(record, now)) }
}).pipe(Effect.catchTag("StoreError", storeUnavailable))

const get = (request: { readonly path: { readonly id: string } }) =>
  Effect.gen(function* () {
    const store = yield* ScheduleStore
    const visible = yield* visibleTo
    const { now, result } = yield* store.get(request.path.id)
    if (result._tag === "Found" && !visible(result.record)) return yield* Effect.fail(notFound)
    return yield* answer(now, result)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const define = (request: { readonly path: { readonly id: string }; readonly payload: ScheduleDefinitionBody }) =>
  Effect.gen(function* () {
    yield* operatorOnly
    const built = Schedule.make({ ...request.payload, id: request.path.id } as Schedule.MakeOptions)
    if (Either.isLeft(built)) {
      const { path, message } = built.left
      // The id comes from the path; every other field names the body's.
      return yield* Effect.fail(invalidRequest([{ path: path === "id" ? ["id"] : path.split("."), message }]))
    }
    const store = yield* ScheduleStore
    const { now, result } = yield* store.upsert([built.right])
    return { now: iso(now), schedule: scheduleView(result[0]!, now) }
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const pause = (request: { readonly path: { readonly id: string } }) =>
  Effect.gen(function* () {
    yield* operatorOnly
    const store = yield* ScheduleStore
    const { now, result } = yield* store.pause(request.path.id)
    return yield* answer(now, result)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const resume = (request: { readonly path: { readonly id: string } }) =>
  Effect.gen(function* () {
    yield* operatorOnly
    const store = yield* ScheduleStore
    const { now, result } = yield* store.resume(request.path.id)
    return yield* answer(now, result)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

const remove = (request: { readonly path: { readonly id: string } }) =>
  Effect.gen(function* () {
    yield* operatorOnly
    const store = yield* ScheduleStore
    const { result } = yield* store.remove(request.path.id)
    if (!result) return yield* Effect.fail(notFound)
  }).pipe(Effect.catchTag("StoreError", storeUnavailable))

/**
 * The handlers of the `schedules` group.
 *
 * @internal
 */
export const schedulesGroup = HttpApiBuilder.group(SlowcallApi, "schedules", (handlers) =>
  handlers
    .handle("list", () => list)
    .handle("get", get)
    .handle("define", define)
    .handle("pause", pause)
    .handle("resume", resume)
    .handle("remove", remove)
)
