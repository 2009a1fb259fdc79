/**
 * A schedule: a cron expression in an IANA timezone, the job each tick submits, and the two policies that decide
 * what happens when ticks were missed (`catchUp`) or when the previous tick's job is still going (`overlap`).
 *
 * Invariants:
 * - A `Schedule` value is always valid: `make` checks every field (the cron through `croner`, the timezone through
 *   `Intl`, the job's options through the same ranges as a submit) and fails with `InvalidSchedule` naming the first
 *   field that is wrong; nothing half-valid is ever built.
 * - A value is plain JSON (no functions, no class instances), so the Store keeps it as it is and `decode` reads it
 *   back to the equal value.
 * - Tick instants come from `croner`, never from a hand-written parser. In a timezone with daylight saving time, a
 *   fixed time of day that falls in the skipped hour runs at the first valid instant after the gap, and one that
 *   falls in the repeated hour runs once (at its first occurrence); a pattern that steps through the hours
 *   (`0 * * * *`, `0,30 * * * *`) skips the times that do not exist and runs at both occurrences of the repeated ones.
 *
 * @since 0.1.0
 */

import * as Canonical from "@slowcall/core/Canonical"
import * as Client from "@slowcall/core/Client"
import type { Json } from "@slowcall/core/Job"
import { Cron } from "croner"
import { Data, Either } from "effect"

/**
 * What to do when a tick comes while the job of the previous tick is not terminal (queued or running):
 * - `allow`: submit the new tick's job anyway, so both may run at once;
 * - `skip`: make no job for this tick (the default, as most periodic work should not pile up);
 * - `cancelPrevious`: cancel the previous job (queued: abandoned at once; running: stopped at its next heartbeat),
 *   then submit this tick's.
 *
 * @since 0.1.0
 * @category models
 */
export type Overlap = "allow" | "skip" | "cancelPrevious"

/**
 * What to do with ticks that were missed because no scheduler was running (an outage, a deploy):
 * - `skip`: none of them; a tick runs only while it is on time (at most `graceMs` old);
 * - `latest`: one job, for the newest tick that has come, however late (the missed ones collapse into it);
 * - `{ all: windowMs }`: one job for every missed tick not older than `windowMs`; older ones are dropped.
 * A tick at most `graceMs` old is not missed: while the fleet never falls more than `graceMs` behind (a slow pass, a
 * short stall), no tick is lost under any policy (see `Due`).
 *
 * @since 0.1.0
 * @category models
 */
export type CatchUp = "skip" | "latest" | { readonly all: number }

/**
 * The job a tick submits. Its input is the `TickInput` envelope around `input`; `deadlineMs`, when given, is the
 * job's deadline counted from the tick's instant.
 *
 * @since 0.1.0
 * @category models
 */
export interface JobTemplate {
  readonly queue: string
  readonly type: string
  readonly input?: Json | undefined
  readonly version?: number | undefined
  readonly tenant?: string | undefined
  readonly priority?: number | undefined
  readonly maxAttempts?: number | undefined
  readonly budgetCents?: number | undefined
  readonly deadlineMs?: number | undefined
}

/**
 * The input every tick's job receives: which schedule made it, the tick's instant (epoch ms and ISO-8601 in UTC)
 * and the schedule's own `input` (null when it has none). A handler of a nightly summary reads `tick` to know which
 * day it sums up, whatever time the job actually runs.
 *
 * @since 0.1.0
 * @category models
 */
export interface TickInput {
  readonly schedule: string
  readonly at: number
  readonly tick: string
  readonly input: Json
}

/**
 * A valid schedule (build one with `make`). `graceMs` is how far behind its ticks the fleet may fall and still make
 * every one of them (default one minute); a tick older than that is missed and follows `catchUp`. Keep it shorter
 * than the outages that `latest` or `skip` should collapse: with the default, a once-a-second schedule down for ten
 * seconds simply catches up every tick.
 *
 * @since 0.1.0
 * @category models
 */
export interface Schedule {
  readonly id: string
  readonly cron: string
  readonly timezone: string
  readonly job: JobTemplate
  readonly overlap: Overlap
  readonly catchUp: CatchUp
  readonly graceMs: number
}

/**
 * What `make` takes: a `Schedule` whose `timezone` (default `UTC`), `overlap` (default `skip`), `catchUp` (default
 * `skip`) and `graceMs` (default 60 s) may be left out.
 *
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions {
  readonly id: string
  readonly cron: string
  readonly timezone?: string | undefined
  readonly job: JobTemplate
  readonly overlap?: Overlap | undefined
  readonly catchUp?: CatchUp | undefined
  readonly graceMs?: number | undefined
}

/**
 * A schedule that cannot be built: `path` names the field (`cron`, `timezone`, `job.queue`, `catchUp.all`, ...) and
 * `message` says what it must be.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidSchedule extends Data.TaggedError("InvalidSchedule")<{
  readonly scheduleId: string
  readonly path: string
  readonly message: string
}> {}

/**
 * The longest accepted id, and the most missed ticks one catch-up makes (the newest ones are kept).
 *
 * @since 0.1.0
 * @category models
 */
export const limits = { maxIdLength: 200, maxCatchUpTicks: 1000, defaultGraceMs: 60_000 } as const

const crons = new Map<string, Cron>()

/**
 * The croner instance of a (cron, timezone) pair, paused (it never fires by itself: it only computes instants). UTC
 * is given to croner as a fixed offset of zero: the same instants (UTC has no daylight saving time), without the
 * `Intl` conversions croner makes for a named zone, which cost about fifty times as much per computed tick.
 */
const cronOf = (cron: string, timezone: string): Cron => {
  const key = `${timezone} ${cron}`
  let found = crons.get(key)
  if (found === undefined) {
    const zone = timezone === "UTC" ? { utcOffset: 0 } : { timezone }
    found = new Cron(cron, { ...zone, paused: true, mode: "5-or-6-parts" })
    if (crons.size > 1000) crons.clear()
    crons.set(key, found)
  }
  return found
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const problemOfString = (value: unknown, { allowEmpty = false } = {}): string | undefined => {
  if (typeof value !== "string") return "must be a string"
  if (!allowEmpty && value.length === 0) return "must not be empty"
  return Canonical.unstorable(value)
}

const isNonNegativeInteger = (value: unknown): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0

/** The first problem of a job template, as [path, message]. */
const templateProblem = (job: unknown): readonly [string, string] | undefined => {
  if (!isObject(job)) return ["job", "must be an object with queue and type"]
  for (const name of ["queue", "type"] as const) {
    const problem = problemOfString(job[name])
    if (problem !== undefined) return [`job.${name}`, problem]
  }
  if (job.tenant !== undefined) {
    const problem = problemOfString(job.tenant)
    if (problem !== undefined) return ["job.tenant", problem]
  }
  if (job.input !== undefined) {
    const hashed = Canonical.inputHashEither(job.input)
    if (Either.isLeft(hashed))
      return [`job.input${hashed.left.path === "" ? "" : `.${hashed.left.path}`}`, hashed.left.message]
  }
  const integer = (min: number) => (value: unknown) =>
    typeof value === "number" && Number.isInteger(value) && value >= min && value <= Client.limits.maxInt
  const numeric: ReadonlyArray<readonly [keyof JobTemplate, (value: unknown) => boolean, string]> = [
    ["version", integer(1), `must be an integer from 1 to ${Client.limits.maxInt}`],
    ["maxAttempts", integer(1), `must be an integer from 1 to ${Client.limits.maxInt}`],
    [
      "priority",
      integer(Client.limits.minInt),
      `must be an integer from ${Client.limits.minInt} to ${Client.limits.maxInt}`
    ],
    [
      "budgetCents",
      (value) => typeof value === "number" && Number.isFinite(value) && value >= 0,
      "must be a finite number of cents, at least 0"
    ],
    [
      "deadlineMs",
      (value) => isNonNegativeInteger(value) && value > 0 && value <= Client.limits.maxDelayMs,
      `must be a whole number of milliseconds from 1 to ${Client.limits.maxDelayMs}`
    ]
  ]
  for (const [name, valid, message] of numeric) {
    if (job[name] !== undefined && !valid(job[name])) return [`job.${name}`, message]
  }
  return undefined
}

/**
 * The timezone names found valid. Asking `Intl` builds a formatter (about 0.2 ms), and every schedule a Store reads
 * back goes through `make` again, with one of a handful of zones.
 */
const knownTimezones = new Set<string>()

const isTimezone = (timezone: string): boolean => {
  if (knownTimezones.has(timezone)) return true
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone })
  } catch {
    return false
  }
  if (knownTimezones.size > 1000) knownTimezones.clear()
  knownTimezones.add(timezone)
  return true
}

/**
 * Builds a valid schedule, or fails with `InvalidSchedule` naming the first wrong field: an id that is empty, longer
 * than `limits.maxIdLength` or not storable; a cron expression croner refuses (five fields, or six with seconds
 * first) or one that never fires; a timezone that is not an IANA name; an overlap or catch-up policy outside the
 * lists; a catch-up window or grace that is not a whole number of milliseconds from 1 up to a hundred years; a job
 * template whose queue, type, input or numbers a submit would refuse.
 *
 * The result is an `Either`, which is also an Effect: `yield* Schedule.make(...)` inside `Effect.gen`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: MakeOptions): Either.Either<Schedule, InvalidSchedule> => {
  const raw = options as unknown as Record<string, unknown>
  const id = raw.id
  const fail = (path: string, message: string) =>
    Either.left(new InvalidSchedule({ scheduleId: typeof id === "string" ? id : "", path, message }))
  const idProblem = problemOfString(id)
  if (idProblem !== undefined) return fail("id", idProblem)
  if ((id as string).length > limits.maxIdLength) return fail("id", `must be at most ${limits.maxIdLength} characters`)
  const timezone = raw.timezone === undefined ? "UTC" : raw.timezone
  if (typeof timezone !== "string" || timezone.length === 0 || !isTimezone(timezone)) {
    return fail("timezone", "must be an IANA timezone name such as UTC or Europe/Berlin")
  }
  const cron = raw.cron
  if (typeof cron !== "string") return fail("cron", "must be a string")
  try {
    if (cronOf(cron, timezone).nextRun(new Date(0)) === null) return fail("cron", "never fires")
  } catch (error) {
    return fail("cron", error instanceof Error ? error.message : String(error))
  }
  const overlap = raw.overlap === undefined ? "skip" : raw.overlap
  if (overlap !== "allow" && overlap !== "skip" && overlap !== "cancelPrevious") {
    return fail("overlap", 'must be "allow", "skip" or "cancelPrevious"')
  }
  const catchUp = raw.catchUp === undefined ? "skip" : raw.catchUp
  const validSpan = (value: unknown) => isNonNegativeInteger(value) && value >= 1 && value <= Client.limits.maxDelayMs
  const spanMessage = `must be a whole number of milliseconds from 1 to ${Client.limits.maxDelayMs}`
  if (catchUp !== "skip" && catchUp !== "latest") {
    if (!isObject(catchUp) || Object.keys(catchUp).join() !== "all") {
      return fail("catchUp", 'must be "skip", "latest" or { all: windowMs }')
    }
    if (!validSpan(catchUp.all)) return fail("catchUp.all", spanMessage)
  }
  const graceMs = raw.graceMs === undefined ? limits.defaultGraceMs : raw.graceMs
  if (!validSpan(graceMs)) return fail("graceMs", spanMessage)
  const problem = templateProblem(raw.job)
  if (problem !== undefined) return fail(problem[0], problem[1])
  const job = raw.job as unknown as JobTemplate
  const template: { -readonly [K in keyof JobTemplate]: JobTemplate[K] } = { queue: job.queue, type: job.type }
  for (const name of ["input", "version", "tenant", "priority", "maxAttempts", "budgetCents", "deadlineMs"] as const) {
    if (job[name] !== undefined) (template as Record<string, unknown>)[name] = job[name]
  }
  return Either.right({
    id: id as string,
    cron,
    timezone,
    job: template,
    overlap,
    catchUp: catchUp === "skip" || catchUp === "latest" ? catchUp : { all: (catchUp as { all: number }).all },
    graceMs: graceMs as number
  })
}

/**
 * Reads a schedule kept as JSON (by a Store, or sent over the wire) back into a valid `Schedule`, with the same
 * checks as `make`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const decode = (value: unknown): Either.Either<Schedule, InvalidSchedule> =>
  isObject(value)
    ? make(value as unknown as MakeOptions)
    : Either.left(new InvalidSchedule({ scheduleId: "", path: "", message: "must be an object" }))

/**
 * The first tick strictly after `after` (epoch ms), or null when the expression has no more.
 *
 * @since 0.1.0
 * @category ticks
 */
export const nextTick = (schedule: Schedule, after: number): number | null =>
  cronOf(schedule.cron, schedule.timezone).nextRun(new Date(after))?.getTime() ?? null

/**
 * The ticks in `(after, upTo]` that the rule of `Due` can ever need, ascending: every tick not older than the grace
 * (or, for `{ all: windowMs }`, the window, when that is longer), and the newest tick older than that, which tells
 * whether the fleet fell behind. At most `limits.maxCatchUpTicks` (the newest). Older ticks are never made, so they
 * are not enumerated: an outage of a day costs a few croner steps.
 *
 * @since 0.1.0
 * @category ticks
 */
export const candidateTicks = (schedule: Schedule, after: number, upTo: number): ReadonlyArray<number> => {
  if (upTo <= after) return []
  const cron = cronOf(schedule.cron, schedule.timezone)
  const span =
    typeof schedule.catchUp === "object" ? Math.max(schedule.graceMs, schedule.catchUp.all) : schedule.graceMs
  const from = Math.max(after, upTo - span)
  const newestFirst: Array<number> = []
  // croner includes a run earlier in the same second as the reference, so `upTo + 1` includes a tick at `upTo`.
  let reference = upTo + 1
  // Chunks grow from one tick to 100: most passes come between two ticks, and the newest tick alone tells them
  // nothing is due (a backward step of croner costs about the same per tick, so a first chunk of four cost four).
  let size = 1
  while (newestFirst.length < limits.maxCatchUpTicks) {
    const chunk = cron.previousRuns(Math.min(size, limits.maxCatchUpTicks - newestFirst.length), new Date(reference))
    size = Math.min(100, size * 4)
    let done = chunk.length === 0
    for (const date of chunk) {
      const at = date.getTime()
      if (at <= after) {
        done = true
        break
      }
      newestFirst.push(at)
      if (at < from) {
        done = true
        break
      }
    }
    if (done) break
    reference = newestFirst[newestFirst.length - 1]!
  }
  return newestFirst.reverse()
}

/**
 * The idempotency key of a tick's job: the schedule id and the tick's instant in UTC. Every scheduler of the fleet
 * computes the same key for the same tick, so however many submit it, the Store keeps one job.
 *
 * @since 0.1.0
 * @category ticks
 */
export const requestKey = (scheduleId: string, tick: number): string =>
  `schedule:${scheduleId}:${new Date(tick).toISOString()}`

/**
 * The input of a tick's job (see `TickInput`).
 *
 * @since 0.1.0
 * @category ticks
 */
export const tickInput = (schedule: Schedule, tick: number): TickInput => ({
  schedule: schedule.id,
  at: tick,
  tick: new Date(tick).toISOString(),
  input: schedule.job.input ?? null
})

/**
 * The submit of a tick's job: the template's options, the `TickInput`, the tick's `requestKey`, and a deadline
 * `deadlineMs` after the tick when the template sets one.
 *
 * @since 0.1.0
 * @category ticks
 */
export const submitOptions = (schedule: Schedule, tick: number): Client.SubmitOptions => {
  const job = schedule.job
  return {
    queue: job.queue,
    type: job.type,
    input: tickInput(schedule, tick),
    requestKey: requestKey(schedule.id, tick),
    version: job.version,
    tenant: job.tenant,
    priority: job.priority,
    maxAttempts: job.maxAttempts,
    budgetCents: job.budgetCents,
    deadlineAt: job.deadlineMs === undefined ? undefined : tick + job.deadlineMs
  }
}
