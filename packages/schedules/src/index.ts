/**
 * @since 0.1.0
 */

/**
 * The rule of which ticks are due, in store time, written once.
 *
 * @since 0.1.0
 */
export * as Due from "./Due.js"
/**
 * The ScheduleStore on Postgres or PGlite (migration 0012).
 *
 * @since 0.1.0
 */
export * as PgScheduleStore from "./PgScheduleStore.js"
/**
 * The ScheduleStore on Redis (one Lua script, one slot).
 *
 * @since 0.1.0
 */
export * as RedisScheduleStore from "./RedisScheduleStore.js"
/**
 * Schedules: cron, timezone, job, overlap and catch-up policies, validated.
 *
 * @since 0.1.0
 */
export * as Schedule from "./Schedule.js"
/**
 * The Scheduler that turns due ticks into jobs, one per tick across the fleet.
 *
 * @since 0.1.0
 */
export * as Scheduler from "./Scheduler.js"
/**
 * Where schedules are kept: the verbs, their pure rules and the memory store.
 *
 * @since 0.1.0
 */
export * as ScheduleStore from "./ScheduleStore.js"
