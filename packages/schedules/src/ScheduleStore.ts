/**
 * The ScheduleStore: where the fleet keeps its schedules, so every scheduler of every process reads the same
 * definitions, the same paused flags and the same cursor (the newest tick already decided), in store time.
 *
 * Contract (checked by the model-based property in this package's tests on memory, PGlite, Postgres and Redis):
 * - Every verb is one atomic write (or read) whose result equals what the pure rules below (`Rules`) give for the
 *   same state and the same store time. An adapter's SQL or Lua is an atomic version of them.
 * - Store time only: the adapter's clock (SQL `now()`, Redis `TIME`), or the Effect `Clock` for the memory store.
 *   Every reply carries the store time it used. The `now` option exists so tests can drive time.
 * - The cursor never moves backward: `advance` applies only to a later instant, so two schedulers that decided the
 *   same ticks cannot undo each other, and a slow one cannot rewind a fast one.
 * - A new schedule's cursor is the store time it was first written: ticks from before a schedule existed never run.
 *   Writing an existing schedule again (every process declares its schedules on start) changes its definition
 *   only; its paused flag, cursor and last job stay.
 * - A paused schedule makes no jobs; `resume` moves its cursor to the store time of the resume, so ticks that came
 *   during a pause never run (a pause is an operator's decision, not an outage).
 *
 * @since 0.1.0
 */
import type { StoreError } from "@slowcall/core/Errors"
import { Clock, Context, Effect, Layer, Ref } from "effect"
import type { Schedule } from "./Schedule.js"

/**
 * One stored schedule: its definition, whether it is paused, its cursor (every tick at or before it is decided),
 * the id of the job its newest made tick submitted (what the overlap policy looks at), and when it was created.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScheduleRecord {
  readonly schedule: Schedule
  readonly paused: boolean
  readonly cursor: number
  readonly lastJobId: string | null
  readonly createdAt: number
}

/**
 * A reply: the store time the verb used and its result.
 *
 * @since 0.1.0
 * @category models
 */
export interface Reply<A> {
  readonly now: number
  readonly result: A
}

/**
 * Options every verb takes: `now` overrides store time, for tests only.
 *
 * @since 0.1.0
 * @category models
 */
export interface WriteOptions {
  readonly now?: number | undefined
}

/**
 * A verb on one schedule: the record as the verb left it, or no such schedule.
 *
 * @since 0.1.0
 * @category models
 */
export type RecordResult =
  | { readonly _tag: "Found"; readonly record: ScheduleRecord }
  | { readonly _tag: "NotFound"; readonly scheduleId: string }

/**
 * An `advance`: `Advanced` when the cursor moved, `Stale` when it was already at or past the instant (another
 * scheduler decided those ticks first; nothing changed), or no such schedule.
 *
 * @since 0.1.0
 * @category models
 */
export type AdvanceResult =
  | { readonly _tag: "Advanced"; readonly record: ScheduleRecord }
  | { readonly _tag: "Stale"; readonly record: ScheduleRecord }
  | { readonly _tag: "NotFound"; readonly scheduleId: string }

/**
 * The verbs.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScheduleStoreService {
  /**
   * Creates each schedule, or replaces an existing one's definition (see the module), in one atomic write; one
   * record per item, in order, each as the whole call left it (an id given twice: the last definition wins).
   */
  readonly upsert: (
    schedules: ReadonlyArray<Schedule>,
    options?: WriteOptions
  ) => Effect.Effect<Reply<ReadonlyArray<ScheduleRecord>>, StoreError>
  /** Every schedule, by id. */
  readonly list: (options?: WriteOptions) => Effect.Effect<Reply<ReadonlyArray<ScheduleRecord>>, StoreError>
  /** One schedule. */
  readonly get: (scheduleId: string, options?: WriteOptions) => Effect.Effect<Reply<RecordResult>, StoreError>
  /** Pauses a schedule (repeating it changes nothing). */
  readonly pause: (scheduleId: string, options?: WriteOptions) => Effect.Effect<Reply<RecordResult>, StoreError>
  /** Resumes a paused schedule, its cursor moved to the store time (an unpaused one is unchanged). */
  readonly resume: (scheduleId: string, options?: WriteOptions) => Effect.Effect<Reply<RecordResult>, StoreError>
  /**
   * Moves the cursor to `to` when `to` is after it, and records `lastJobId` when given (the job of the newest made
   * tick); otherwise `Stale`, nothing changed.
   */
  readonly advance: (
    scheduleId: string,
    to: number,
    lastJobId: string | null,
    options?: WriteOptions
  ) => Effect.Effect<Reply<AdvanceResult>, StoreError>
  /** Deletes a schedule; whether there was one. */
  readonly remove: (scheduleId: string, options?: WriteOptions) => Effect.Effect<Reply<boolean>, StoreError>
}

/**
 * The ScheduleStore service.
 *
 * @since 0.1.0
 * @category services
 */
export class ScheduleStore extends Context.Tag("@slowcall/schedules/ScheduleStore")<
  ScheduleStore,
  ScheduleStoreService
>() {}

/**
 * The state the rules work on: the records by id.
 *
 * @since 0.1.0
 * @category rules
 */
export type State = ReadonlyMap<string, ScheduleRecord>

/**
 * Records sorted by id (UTF-16 code unit order, as JavaScript compares strings): the order of `list` everywhere.
 *
 * @since 0.1.0
 * @category rules
 */
export const byId = (records: ReadonlyArray<ScheduleRecord>): ReadonlyArray<ScheduleRecord> =>
  [...records].sort((a, b) => (a.schedule.id < b.schedule.id ? -1 : a.schedule.id > b.schedule.id ? 1 : 0))

/**
 * The pure rules of every verb: given the state and store time, the result and the next state. The memory store is
 * these functions over a `Ref`; the property checks every adapter against them.
 *
 * @since 0.1.0
 * @category rules
 */
export const Rules = {
  upsert: (state: State, schedule: Schedule, now: number): readonly [ScheduleRecord, State] => {
    const existing = state.get(schedule.id)
    const record: ScheduleRecord =
      existing === undefined
        ? { schedule, paused: false, cursor: now, lastJobId: null, createdAt: now }
        : { ...existing, schedule }
    return [record, new Map(state).set(schedule.id, record)]
  },
  list: (state: State): ReadonlyArray<ScheduleRecord> => byId([...state.values()]),
  get: (state: State, scheduleId: string): RecordResult => {
    const record = state.get(scheduleId)
    return record === undefined ? { _tag: "NotFound", scheduleId } : { _tag: "Found", record }
  },
  pause: (state: State, scheduleId: string): readonly [RecordResult, State] => {
    const record = state.get(scheduleId)
    if (record === undefined) return [{ _tag: "NotFound", scheduleId }, state]
    const next = { ...record, paused: true }
    return [{ _tag: "Found", record: next }, new Map(state).set(scheduleId, next)]
  },
  resume: (state: State, scheduleId: string, now: number): readonly [RecordResult, State] => {
    const record = state.get(scheduleId)
    if (record === undefined) return [{ _tag: "NotFound", scheduleId }, state]
    if (!record.paused) return [{ _tag: "Found", record }, state]
    const next = { ...record, paused: false, cursor: Math.max(record.cursor, now) }
    return [{ _tag: "Found", record: next }, new Map(state).set(scheduleId, next)]
  },
  advance: (
    state: State,
    scheduleId: string,
    to: number,
    lastJobId: string | null
  ): readonly [AdvanceResult, State] => {
    const record = state.get(scheduleId)
    if (record === undefined) return [{ _tag: "NotFound", scheduleId }, state]
    if (!(to > record.cursor)) return [{ _tag: "Stale", record }, state]
    const next = { ...record, cursor: to, lastJobId: lastJobId ?? record.lastJobId }
    return [{ _tag: "Advanced", record: next }, new Map(state).set(scheduleId, next)]
  },
  remove: (state: State, scheduleId: string): readonly [boolean, State] => {
    if (!state.has(scheduleId)) return [false, state]
    const next = new Map(state)
    next.delete(scheduleId)
    return [true, next]
  }
} as const

/**
 * The ScheduleStore in memory: the rules over one `Ref`, store time from the Effect `Clock`. For tests, the
 * simulator and single-process use; schedules are lost with the process.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<ScheduleStoreService> = Effect.gen(function* () {
  const ref = yield* Ref.make<State>(new Map())
  const timeOf = (options: WriteOptions | undefined) =>
    options?.now === undefined ? Clock.currentTimeMillis : Effect.succeed(options.now)
  const step = <A>(options: WriteOptions | undefined, f: (state: State, now: number) => readonly [A, State]) =>
    Effect.flatMap(timeOf(options), (now) =>
      Ref.modify(ref, (state) => {
        const [result, next] = f(state, now)
        return [{ now, result }, next] as const
      })
    )
  return {
    upsert: (schedules, options) =>
      step(options, (state, now) => {
        let current = state
        for (const schedule of schedules) current = Rules.upsert(current, schedule, now)[1]
        // Each item's record is the one the whole call left (the last definition of an id repeated in it wins).
        return [schedules.map((schedule) => current.get(schedule.id)!), current] as const
      }),
    list: (options) => step(options, (state) => [Rules.list(state), state] as const),
    get: (scheduleId, options) => step(options, (state) => [Rules.get(state, scheduleId), state] as const),
    pause: (scheduleId, options) => step(options, (state) => Rules.pause(state, scheduleId)),
    resume: (scheduleId, options) => step(options, (state, now) => Rules.resume(state, scheduleId, now)),
    advance: (scheduleId, to, lastJobId, options) =>
      step(options, (state) => Rules.advance(state, scheduleId, to, lastJobId)),
    remove: (scheduleId, options) => step(options, (state) => Rules.remove(state, scheduleId))
  }
})

/**
 * The memory ScheduleStore as a layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<ScheduleStore> = Layer.effect(ScheduleStore, makeMemory)
