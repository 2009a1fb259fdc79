/**
 * The HTTP contract and the batch, schedule and resource endpoints against the Redis adapter (REDIS_URL, default
 * redis://127.0.0.1:6379/2) and its ScheduleStore, each suite under a key prefix of its own: the same suites the
 * Postgres adapter runs, so the edge answers alike on both.
 */
import { afterAll } from "@effect/vitest"
import * as RedisStore from "@slowcall/adapter-redis/RedisStore"
import * as RedisScheduleStore from "@slowcall/schedules/RedisScheduleStore"
import { Layer } from "effect"
import { dropPrefix, REDIS_URL, uniquePrefix } from "../../adapter-redis/test/support.js"
import { batchSuite } from "./batches.js"
import { contractSuite } from "./contract.js"
import type { Backend } from "./harness.js"
import { resourceSuite } from "./resources.js"
import { scheduleSuite } from "./schedules.js"

const prefixes: Array<string> = []

const redis = (name: string) => (): Layer.Layer<Backend, unknown> => {
  const prefix = uniquePrefix(`http_${name}`)
  prefixes.push(prefix)
  return RedisScheduleStore.layer.pipe(Layer.provideMerge(RedisStore.layer({ url: REDIS_URL, prefix })))
}

contractSuite({ name: "Redis", backend: redis("contract") })
batchSuite({ name: "Redis", backend: redis("batches") })
scheduleSuite({ name: "Redis", backend: redis("schedules") })
resourceSuite({ name: "Redis", backend: redis("resources") })

afterAll(async () => {
  for (const prefix of prefixes) await dropPrefix(REDIS_URL, prefix)
})
