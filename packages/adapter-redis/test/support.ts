/**
 * Test support: the machine's Redis (db 2 by default, so a benchmark that flushes db 0 never meets the tests), a
 * unique key prefix per test file (its keys are deleted when the layer closes; nothing is ever flushed), and layers
 * per seam.
 */
import { randomBytes } from "node:crypto"
import { makeJobId } from "@slowcall/core/Ids"
import type { SubmitItem } from "@slowcall/core/Protocol"
import { Effect, Layer } from "effect"
import { Redis } from "ioredis"
import * as RedisConnection from "../src/RedisConnection.js"
import * as RedisStore from "../src/RedisStore.js"

export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379/2"

/** A submit item of `demo.echo` on `queue` with a fresh id, its input naming it; `extra` overrides any field. */
export const item = (queue: string, extra: Partial<SubmitItem> = {}) =>
  Effect.map(
    makeJobId,
    (id): SubmitItem => ({
      id,
      queue,
      type: "demo.echo",
      version: 1,
      inputHash: `hash-${id}`,
      input: { id },
      maxAttempts: 3,
      ...extra
    })
  )

/** A key prefix no other test file uses. */
export const uniquePrefix = (name: string): string => `sctest:${name}:${randomBytes(4).toString("hex")}`

/** Deletes every key under `prefix` (SCAN, then UNLINK in batches). */
export const dropPrefix = async (url: string, prefix: string): Promise<void> => {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  client.on("error", () => {})
  await client.connect()
  try {
    let cursor = "0"
    do {
      const [next, keys] = await client.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000)
      cursor = next
      if (keys.length > 0) await client.unlink(...keys)
    } while (cursor !== "0")
  } finally {
    client.disconnect()
  }
}

const dropOnRelease = (url: string, prefix: string) =>
  Layer.scopedDiscard(Effect.addFinalizer(() => Effect.promise(() => dropPrefix(url, prefix))))

/** RedisConnection, RedisStore, Store and Query on the machine's Redis under `prefix`, dropped afterwards. */
export const storeLayer = (
  prefix: string,
  options: RedisStore.StoreOptions & { readonly url?: string | undefined } = {}
) =>
  dropOnRelease(options.url ?? REDIS_URL, prefix).pipe(
    Layer.provideMerge(
      RedisStore.layerFromConnection({ checkServer: false, ...options }).pipe(
        Layer.provideMerge(RedisConnection.layer({ url: options.url ?? REDIS_URL, prefix }))
      )
    )
  )
