/**
 * The schedule invariant, a pure function over one run's history (the events `Schedules.ts` records):
 *
 * **I34 one job per due tick.** Every tick job names an instant the cron fires at, and no tick has two jobs. A
 * Scheduler's pass decides with the store time of its read (`passNow`); when it moves the cursor from `from` to `to`,
 * every tick in `(from, to]` that its policy makes at that time has its job already (a tick's job is submitted before
 * the cursor passes it): under `all` the ticks at most `max(grace, window)` old, under `skip` those at most `grace`
 * old. No job is made outside that span: a tick's job needs a read of the schedules at most the span after the tick
 * and before the job (`all`, `skip`; `latest` makes the newest missed tick however late).
 *
 * @since 0.8.0
 */
import type { Event, ScheduleEvent } from "./History.js"
import type { Plan } from "./Plan.js"

/**
 * One broken schedule invariant (the shape of `Checkers.Violation`).
 *
 * @since 0.8.0
 * @category models
 */
export interface ScheduleViolation {
  readonly invariant: "I34"
  readonly jobId: string | null
  readonly message: string
  readonly witness: ReadonlyArray<Event>
}

type Sched = Extract<ScheduleEvent, { k: "sched" }>
type TickJob = Extract<ScheduleEvent, { k: "tjob" }>

/**
 * Checks I34 on one run's history.
 *
 * @since 0.8.0
 * @category combinators
 */
export const check = (events: ReadonlyArray<Event>, plan: Plan): ReadonlyArray<ScheduleViolation> => {
  const violations: Array<ScheduleViolation> = []
  const planned = plan.schedule
  if (planned === null || planned === undefined) return violations
  const violate = (jobId: string | null, message: string, witness: ReadonlyArray<Event>) => {
    if (violations.length < 5) violations.push({ invariant: "I34", jobId, message, witness })
  }
  const periodMs = planned.everySeconds * 1_000
  // The cron fires at whole seconds whose second of the minute is a multiple of the period (60 is a multiple of it).
  const isTick = (at: number) => at % 1_000 === 0 && ((at / 1_000) % 60) % planned.everySeconds === 0
  const span =
    planned.catchUp._tag === "all"
      ? Math.max(planned.graceMs, planned.catchUp.windowMs)
      : planned.catchUp._tag === "skip"
        ? planned.graceMs
        : null
  const lists: Array<Sched> = []
  const advances: Array<Sched> = []
  const jobsByTick = new Map<number, Array<TickJob>>()
  for (const e of events) {
    if (e.k === "sched") (e.what === "list" ? lists : advances).push(e)
    else if (e.k === "tjob") {
      const list = jobsByTick.get(e.tick) ?? []
      list.push(e)
      jobsByTick.set(e.tick, list)
    }
  }
  for (const [tick, jobs] of jobsByTick) {
    if (!isTick(tick)) violate(jobs[0]!.jobId, `a job for ${tick}, not an instant the schedule fires at`, jobs)
    if (jobs.length > 1) violate(jobs[1]!.jobId, `${jobs.length} jobs for the tick at ${tick}`, jobs)
    if (span === null) continue
    const job = jobs[0]!
    const made = lists.some((read) => read.t >= tick && read.t - tick <= span && read.t <= job.createdAt)
    if (!made) violate(job.jobId, `the tick at ${tick} made a job although no pass read it within ${span} ms`, [job])
  }
  if (span === null) return violations
  for (const advance of advances) {
    if (!advance.ok) continue
    // The ticks of (from, to] the pass made: at most `span` old at its read.
    const first = Math.floor(advance.from / periodMs) * periodMs + periodMs
    for (let tick = first; tick <= advance.to; tick += periodMs) {
      if (tick <= advance.from || !isTick(tick) || advance.passNow - tick > span) continue
      const job = (jobsByTick.get(tick) ?? []).find((j) => j.createdAt <= advance.t)
      if (job === undefined) {
        violate(null, `the tick at ${tick} is due (${advance.passNow - tick} ms old at the pass) but has no job`, [
          advance
        ])
      }
    }
  }
  return violations
}
