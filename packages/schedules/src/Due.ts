/**
 * The one rule of which ticks are due: given store time, the schedule's cursor (every tick at or before it is
 * handled) and the ticks that came since, which of them get a job and how far the cursor moves. Plain code, written
 * once: every Scheduler of every process applies it to store time, so the fleet agrees on it, and the idempotency
 * key of each tick (`Schedule.requestKey`) makes the schedulers that race on the same tick make one job.
 *
 * The rule (ticks are the `Schedule.candidateTicks` in `(cursor, now]`, ascending; the newest is the last):
 * - a tick is *on time* while `now - tick <= graceMs`; an older one is *missed*: the fleet fell behind by more than
 *   the grace (an outage, a long deploy), not just by a slow pass;
 * - `skip` makes the ticks that are on time, never a missed one;
 * - `latest` makes every tick while none is missed (a slow pass loses nothing); once one is missed, it makes one job,
 *   for the newest tick, and the others collapse into it;
 * - `{ all: windowMs }` makes every tick with `now - tick <= windowMs`, and every tick on time;
 * - the cursor moves to the newest tick whatever was made, so a tick is decided once.
 *
 * @since 0.1.0
 */
import type { CatchUp } from "./Schedule.js"

/**
 * What the rule reads.
 *
 * @since 0.1.0
 * @category models
 */
export interface DueInput {
  readonly now: number
  readonly cursor: number
  readonly catchUp: CatchUp
  readonly graceMs: number
  /** Ticks after `cursor` and at or before `now`, ascending (`Schedule.candidateTicks`). */
  readonly ticks: ReadonlyArray<number>
}

/**
 * What the rule decides: the ticks to make a job for (ascending) and the new cursor (null: no tick came, the cursor
 * stays).
 *
 * @since 0.1.0
 * @category models
 */
export interface DueResult {
  readonly make: ReadonlyArray<number>
  readonly advanceTo: number | null
}

/**
 * Applies the rule (see the module). Ticks outside `(cursor, now]` are ignored, so a caller's enumeration that
 * overlaps the cursor cannot make a tick twice.
 *
 * @since 0.1.0
 * @category rules
 */
export const due = (input: DueInput): DueResult => {
  const { now, cursor, catchUp, graceMs } = input
  const ticks = input.ticks.filter((tick) => tick > cursor && tick <= now)
  const newest = ticks[ticks.length - 1]
  if (newest === undefined) return { make: [], advanceTo: null }
  const onTime = (tick: number) => now - tick <= graceMs
  if (catchUp === "skip") return { make: ticks.filter(onTime), advanceTo: newest }
  if (catchUp === "latest") return { make: ticks.every(onTime) ? ticks : [newest], advanceTo: newest }
  return { make: ticks.filter((tick) => onTime(tick) || now - tick <= catchUp.all), advanceTo: newest }
}
