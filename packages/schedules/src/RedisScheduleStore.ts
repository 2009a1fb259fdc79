/**
 * The ScheduleStore on Redis (a single server or a Cluster, through `@slowcall/adapter-redis`'s `RedisConnection`):
 * one hash per schedule and a set of ids, every key under the `{%schedules}` hash tag so each verb is one Lua script
 * (`lua/schedules.lua`, an atomic version of `ScheduleStore.Rules`) in one slot. Store time is the server's `TIME`,
 * or the caller's `now`. Scripts run by SHA, and on `NOSCRIPT` (a restarted server, a failover) with their source.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { RedisConnection } from "@slowcall/adapter-redis/RedisConnection"
import { StoreError } from "@slowcall/core/Errors"
import { Effect, Either, Layer } from "effect"
import * as Schedule from "./Schedule.js"
import type { AdvanceResult, RecordResult, ScheduleRecord, ScheduleStoreService } from "./ScheduleStore.js"
import { byId, ScheduleStore } from "./ScheduleStore.js"

const SOURCE = readFileSync(new URL("./lua/schedules.lua", import.meta.url), "utf8")
const SHA = createHash("sha1").update(SOURCE).digest("hex")

type Raw = string | number | null | ReadonlyArray<Raw>

const recordOf = (raw: Raw): ScheduleRecord => {
  const [id, definition, paused, cursor, lastJobId, createdAt] = raw as ReadonlyArray<string | null>
  const schedule = Schedule.decode(JSON.parse(definition!))
  if (Either.isLeft(schedule)) {
    throw new StoreError({
      reason: "Unknown",
      operation: "schedules",
      detail: `stored schedule ${id}: ${schedule.left.message}`
    })
  }
  return {
    schedule: schedule.right,
    paused: paused === "1",
    cursor: Number(cursor),
    lastJobId: lastJobId ?? null,
    createdAt: Number(createdAt)
  }
}

const errorOf = (operation: string, error: unknown, write: boolean): StoreError => {
  if (error instanceof StoreError) return error
  const message = error instanceof Error ? error.message : String(error)
  const detail = message.slice(0, 500)
  const op = `schedules.${operation}`
  if (/timed? ?out/i.test(message))
    return new StoreError({ reason: write ? "Ambiguous" : "Timeout", operation: op, detail })
  if (/closed|ECONN|EPIPE|reset|not connected|writeable/i.test(message)) {
    return new StoreError({ reason: write ? "Ambiguous" : "Connection", operation: op, detail })
  }
  return new StoreError({ reason: "Unknown", operation: op, detail })
}

/**
 * The ScheduleStore over a connection, its keys under the connection's prefix.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (connection: RedisConnection["Type"]): ScheduleStoreService => {
  const keys = [`${connection.prefix}:{%schedules}:ids`, `${connection.prefix}:{%schedules}:s:`]
  const run = <A>(
    verb: string,
    now: number | undefined,
    args: ReadonlyArray<string>,
    write: boolean,
    read: (reply: ReadonlyArray<Raw>) => A
  ) =>
    Effect.tryPromise({
      try: async () => {
        const argv = [verb, now === undefined ? "" : String(now), ...args]
        let reply: unknown
        try {
          reply = await connection.client.evalsha(SHA, keys.length, ...keys, ...argv)
        } catch (error) {
          if (!(error instanceof Error && error.message.startsWith("NOSCRIPT"))) throw error
          reply = await connection.client.eval(SOURCE, keys.length, ...keys, ...argv)
        }
        return read(reply as ReadonlyArray<Raw>)
      },
      catch: (error) => errorOf(verb, error, write)
    })
  const recordResult =
    (scheduleId: string) =>
    (reply: ReadonlyArray<Raw>): { now: number; result: RecordResult } => ({
      now: Number(reply[0]),
      result: reply[1] ? { _tag: "Found", record: recordOf(reply[1]) } : { _tag: "NotFound", scheduleId }
    })
  return {
    upsert: (schedules, o) =>
      run(
        "upsert",
        o?.now,
        schedules.flatMap((schedule) => [schedule.id, JSON.stringify(schedule)]),
        true,
        (reply) => ({ now: Number(reply[0]), result: reply.slice(1).map(recordOf) })
      ),
    list: (o) =>
      run("list", o?.now, [], false, (reply) => ({
        now: Number(reply[0]),
        result: byId(reply.slice(1).map(recordOf))
      })),
    get: (scheduleId, o) => run("get", o?.now, [scheduleId], false, recordResult(scheduleId)),
    pause: (scheduleId, o) => run("pause", o?.now, [scheduleId], true, recordResult(scheduleId)),
    resume: (scheduleId, o) => run("resume", o?.now, [scheduleId], true, recordResult(scheduleId)),
    advance: (scheduleId, to, lastJobId, o) =>
      run("advance", o?.now, [scheduleId, String(to), lastJobId ?? ""], true, (reply) => {
        const result: AdvanceResult = reply[1]
          ? { _tag: reply[2] === "1" ? "Advanced" : "Stale", record: recordOf(reply[1]) }
          : { _tag: "NotFound", scheduleId }
        return { now: Number(reply[0]), result }
      }),
    remove: (scheduleId, o) =>
      run("remove", o?.now, [scheduleId], true, (reply) => ({ now: Number(reply[0]), result: Number(reply[1]) > 0 }))
  }
}

/**
 * The ScheduleStore on the `RedisConnection` of the process (the one `RedisStore`'s layers use).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<ScheduleStore, never, RedisConnection> = Layer.effect(
  ScheduleStore,
  Effect.map(RedisConnection, make)
)
