/**
 * The Redis ScheduleStore's keys: every key it writes, whatever the schedule ids hold (braces included), hashes to
 * one Cluster slot, so each verb is one script on one node of a Cluster.
 */
import { describe, expect, it } from "@effect/vitest"
import * as RedisConnection from "@slowcall/adapter-redis/RedisConnection"
import calculateSlot from "cluster-key-slot"
import { Effect, Either } from "effect"
import * as Schedule from "../src/Schedule.js"
import { ScheduleStore } from "../src/ScheduleStore.js"
import { redisLayer, uniqueName } from "./support.js"

const prefix = `sctest:${uniqueName("schedkeys")}`

describe("RedisScheduleStore keys", () => {
  it.live("all fall in one hash slot", () =>
    Effect.gen(function* () {
      const store = yield* ScheduleStore
      const ids = ["nightly", "{other}", "a}b{c", "ünïcødé", "x".repeat(200)]
      const schedules = ids.map((id) =>
        Either.getOrThrow(Schedule.make({ id, cron: "0 2 * * *", job: { queue: "q", type: "t" } }))
      )
      yield* store.upsert(schedules)
      yield* store.advance("{other}", Date.now() + 60_000, "job-1")
      const { client } = yield* RedisConnection.RedisConnection
      const keys = yield* Effect.promise(async () => {
        const found: Array<string> = []
        let cursor = "0"
        do {
          const [next, batch] = await client.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000)
          cursor = next
          found.push(...batch)
        } while (cursor !== "0")
        return found
      })
      expect(keys.length).toBe(ids.length + 1)
      expect(new Set(keys.map((key) => calculateSlot(key))).size).toBe(1)
      const listed = yield* store.list()
      expect(listed.result.map((record) => record.schedule.id)).toEqual([...ids].sort())
    }).pipe(Effect.provide(redisLayer(prefix)))
  )
})
