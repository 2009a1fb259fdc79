/**
 * The Scheduler: runs beside the workers in every process and turns due ticks into jobs.
 *
 * Invariants:
 * - One job per tick across the fleet and across restarts. A tick's job is submitted through the ordinary `Client`
 *   with the tick's instant in its idempotency key (`Schedule.requestKey`), so any number of schedulers racing on a
 *   tick, or a scheduler repeating a tick after a crash between its submit and its `advance`, make one job. The job
 *   then goes through the same claim path, budgets and limits as every job.
 * - Which ticks are due is `Due.due` over store time (the `ScheduleStore`'s clock, never the process's), so a
 *   process with a wrong clock cannot make a tick early or twice.
 * - A tick's job is submitted before the cursor moves past the tick: a crash in between repeats the submit, which the
 *   key makes harmless; the opposite order could lose a tick.
 * - Overlap: before a tick's job, the job of the newest tick made before it (the schedule's `lastJobId`, or the one
 *   this pass just made) is looked at; while it is not terminal, `skip` makes no job for the tick and
 *   `cancelPrevious` cancels it first.
 * - The loop never dies of a failed pass: a Store error is logged and the next pass (after `pollMs`, read through
 *   Effect's `Clock`) starts again from the stored cursors.
 *
 * @since 0.1.0
 */
import { Client } from "@slowcall/core/Client"
import type { QueueFull, StoreError } from "@slowcall/core/Errors"
import { isTerminal, type JobId } from "@slowcall/core/Job"
import { Effect, Schedule as EffectSchedule, Layer, Option } from "effect"
import * as Due from "./Due.js"
import * as Schedule from "./Schedule.js"
import { type ScheduleRecord, ScheduleStore } from "./ScheduleStore.js"

/**
 * What the Scheduler of a process does: the schedules it declares (written to the Store on start, see
 * `ScheduleStore.upsert`; schedules declared elsewhere run too) and how often it looks for due ticks (default
 * 1 s; a tick is made at most this long after its instant, plus the Store's round trips).
 *
 * @since 0.1.0
 * @category models
 */
export interface SchedulerOptions {
  readonly schedules?: ReadonlyArray<Schedule.Schedule> | undefined
  readonly pollMs?: number | undefined
  /** Called with the report of every pass that completed (logging, metrics, tests); its failure is logged. */
  readonly onPass?: ((report: PassReport) => Effect.Effect<void>) | undefined
}

/**
 * One tick's fate in a pass: `Submitted` (`created` false when another scheduler, or an earlier try, made the job
 * first), `Overlapped` (skipped: the previous job was still going), or `Failed` (the submit was refused; the
 * error's tag).
 *
 * @since 0.1.0
 * @category models
 */
export type TickOutcome =
  | {
      readonly _tag: "Submitted"
      readonly scheduleId: string
      readonly tick: number
      readonly jobId: JobId
      readonly created: boolean
      readonly cancelled: JobId | null
    }
  | { readonly _tag: "Overlapped"; readonly scheduleId: string; readonly tick: number; readonly running: JobId }
  | { readonly _tag: "Failed"; readonly scheduleId: string; readonly tick: number; readonly error: string }

/**
 * One pass's report: the store time it used and every tick it decided to make, with its fate.
 *
 * @since 0.1.0
 * @category models
 */
export interface PassReport {
  readonly now: number
  readonly ticks: ReadonlyArray<TickOutcome>
}

/** The job a previous tick made, when it is still going (not terminal). */
const stillGoing = (client: Client["Type"], jobId: string) =>
  client.get(jobId as JobId).pipe(
    Effect.map((job) => (isTerminal(job.state) ? Option.none() : Option.some(job.id))),
    Effect.catchTag("JobNotFound", () => Effect.succeed(Option.none<JobId>()))
  )

/**
 * Decides the due ticks of one schedule: with none (most passes), nothing is written and no span is made; otherwise
 * `makeTicks`.
 */
const passOne = (
  client: Client["Type"],
  store: ScheduleStore["Type"],
  record: ScheduleRecord,
  now: number
): Effect.Effect<Array<TickOutcome>, StoreError | QueueFull> => {
  const schedule = record.schedule
  const decided = Due.due({
    now,
    cursor: record.cursor,
    catchUp: schedule.catchUp,
    graceMs: schedule.graceMs,
    ticks: Schedule.candidateTicks(schedule, record.cursor, now)
  })
  return decided.advanceTo === null
    ? Effect.succeed([])
    : makeTicks(client, store, record, decided.make, decided.advanceTo)
}

/** Makes the ticks `decided` names, in order, then moves the schedule's cursor (one span, `slowcall.schedules.pass`). */
const makeTicks = Effect.fn("slowcall.schedules.pass")(function* (
  client: Client["Type"],
  store: ScheduleStore["Type"],
  record: ScheduleRecord,
  make: ReadonlyArray<number>,
  advanceTo: number
) {
  const schedule = record.schedule
  const outcomes: Array<TickOutcome> = []
  let previous = record.lastJobId
  let made: string | null = null
  for (const tick of make) {
    let cancelled: JobId | null = null
    if (schedule.overlap !== "allow" && previous !== null) {
      const going = yield* stillGoing(client, previous)
      if (Option.isSome(going)) {
        if (schedule.overlap === "skip") {
          outcomes.push({ _tag: "Overlapped", scheduleId: schedule.id, tick, running: going.value })
          continue
        }
        yield* client
          .cancel(going.value)
          .pipe(Effect.catchTags({ JobNotFound: () => Effect.void, AlreadyTerminal: () => Effect.void }))
        cancelled = going.value
      }
    }
    const submitted = yield* client.submit(Schedule.submitOptions(schedule, tick)).pipe(
      Effect.map((result) => ({ jobId: result.job.id, created: result.created })),
      // The key names a job made for this tick under an earlier definition: that is the tick's one job.
      Effect.catchTag("IdempotencyKeyReused", (error) =>
        Effect.succeed({ jobId: error.existingJobId, created: false })
      ),
      Effect.catchTags({
        InvalidInput: (error) => Effect.succeed({ error: `InvalidInput: ${error.path} ${error.message}` }),
        QueueFull: (error) => Effect.fail(error)
      })
    )
    if ("error" in submitted) {
      outcomes.push({ _tag: "Failed", scheduleId: schedule.id, tick, error: submitted.error })
      continue
    }
    outcomes.push({ _tag: "Submitted", scheduleId: schedule.id, tick, ...submitted, cancelled })
    previous = submitted.jobId
    made = submitted.jobId
  }
  yield* store.advance(schedule.id, advanceTo, made)
  return outcomes
})

/**
 * One pass over every schedule of the Store that is not paused: reads them with the store time, makes each one's
 * due ticks, moves its cursor. A schedule whose queue is full keeps its cursor (its ticks are tried again next
 * pass); the others go on.
 *
 * @since 0.1.0
 * @category run
 */
export const pass: Effect.Effect<PassReport, StoreError, Client | ScheduleStore> = Effect.flatMap(
  Effect.zip(Client, ScheduleStore),
  ([client, store]) => passWith(client, store)
)

/** `pass` over a given client and store: `run` looks them up once, not on every pass. */
const passWith = Effect.fnUntraced(function* (client: Client["Type"], store: ScheduleStore["Type"]) {
  const { now, result: records } = yield* store.list()
  const ticks: Array<TickOutcome> = []
  for (const record of records) {
    if (record.paused) continue
    const outcomes = yield* passOne(client, store, record, now).pipe(
      Effect.catchTag("QueueFull", (error) =>
        Effect.as(
          Effect.logWarning("schedule tick deferred: queue full").pipe(
            Effect.annotateLogs({ schedule: record.schedule.id, queue: error.queue })
          ),
          []
        )
      )
    )
    ticks.push(...outcomes)
  }
  return { now, ticks }
})

/**
 * Declares the given schedules (retrying a failed write) and then runs a `pass` every `pollMs` until interrupted;
 * a failed pass is logged and the next one goes on.
 *
 * @since 0.1.0
 * @category run
 */
export const run = (options: SchedulerOptions = {}): Effect.Effect<never, never, Client | ScheduleStore> =>
  Effect.gen(function* () {
    const client = yield* Client
    const store = yield* ScheduleStore
    const pollMs = options.pollMs ?? 1000
    const declared = options.schedules ?? []
    if (declared.length > 0) {
      yield* store.upsert(declared).pipe(
        Effect.tapError((error) => Effect.logWarning("declaring schedules failed; retrying", error)),
        Effect.retry(EffectSchedule.spaced(pollMs))
      )
    }
    const onPass = options.onPass
    const passed =
      onPass === undefined
        ? passWith(client, store)
        : Effect.flatMap(passWith(client, store), (report) =>
            Effect.catchAllCause(onPass(report), (cause) => Effect.logWarning("onPass failed", cause))
          )
    return yield* passed.pipe(
      Effect.catchAll((error) => Effect.logWarning("schedule pass failed", error)),
      Effect.zipRight(Effect.sleep(pollMs)),
      Effect.forever
    )
  }).pipe(Effect.orDie)

/**
 * The Scheduler as a layer: `run` forked for the layer's lifetime (run it in every worker process; they agree
 * through the Store).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: SchedulerOptions = {}): Layer.Layer<never, never, Client | ScheduleStore> =>
  Layer.scopedDiscard(Effect.forkScoped(run(options)))
