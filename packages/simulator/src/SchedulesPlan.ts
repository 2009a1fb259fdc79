/**
 * The schedule part of a plan: one schedule that every worker process declares and runs with the real Scheduler of
 * `@slowcall/schedules`, its catch-up policy, and an outage of every process (all paused, or all crashed and
 * restarted) during which its ticks come due. Plain JSON, generated and shrunk by fast-check.
 *
 * @since 0.8.0
 */
import * as fc from "fast-check"

/**
 * The catch-up policy of a planned schedule: as `Schedule.CatchUp`, with the window of `all` in ms.
 *
 * @since 0.8.0
 * @category models
 */
export type PlannedCatchUp =
  | { readonly _tag: "skip" }
  | { readonly _tag: "latest" }
  | { readonly _tag: "all"; readonly windowMs: number }

/**
 * A planned schedule: a tick every `everySeconds` seconds (a six-field cron), missed ticks after `graceMs` follow
 * `catchUp`, each process's Scheduler looks every `pollMs` (on its own clock), and at `outage.at` every worker process
 * is paused (`pause`) or crashed and restarted (`crash`) for `outage.ms` (plans with faults only).
 *
 * @since 0.8.0
 * @category models
 */
export interface SchedulePlan {
  readonly everySeconds: number
  readonly catchUp: PlannedCatchUp
  readonly graceMs: number
  readonly pollMs: number
  readonly outage: { readonly at: number; readonly ms: number; readonly kind: "pause" | "crash" } | null
}

/**
 * A schedule; shrinks toward a tick a second, `skip`, no outage.
 *
 * @since 0.8.0
 * @category constructors
 */
export const schedulePlan: fc.Arbitrary<SchedulePlan> = fc.record({
  everySeconds: fc.integer({ min: 1, max: 3 }),
  catchUp: fc.oneof(
    fc.constant<PlannedCatchUp>({ _tag: "skip" }),
    fc.constant<PlannedCatchUp>({ _tag: "latest" }),
    fc.record({ _tag: fc.constant("all" as const), windowMs: fc.integer({ min: 1_000, max: 12_000 }) })
  ),
  graceMs: fc.integer({ min: 300, max: 3_000 }),
  pollMs: fc.integer({ min: 500, max: 2_000 }),
  outage: fc.option(
    fc.record({
      at: fc.integer({ min: 1_000, max: 15_000 }),
      ms: fc.integer({ min: 1_000, max: 12_000 }),
      kind: fc.constantFrom<"pause" | "crash">("pause", "crash")
    }),
    { nil: null, freq: 3 }
  )
})
