/**
 * One 429 pauses the fleet. Four worker processes share one provider resource on the real Postgres (and on the real
 * Redis); the local fake provider answers the first call with a 429 and `retry-after: 2`, and every later call after
 * 1 s. Read from the fake provider's own records: no call reaches it from any worker for 2 s after the 429, then
 * exactly one (the half-open probe) alone until it answered, then the rest; every job succeeded on its one attempt
 * (`maxAttempts: 1`, so an attempt spent on the 429 or on a wait would have failed it).
 */
import { createRequire } from "node:module"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { Limiter } from "@slowcall/core/Limiter"
import { open, type Queue } from "@slowcall/promise"
import * as Backend from "@slowcall/promise/Backend"
import { Effect, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { DATABASE_URL, dropSchema, uniqueSchema } from "../../adapter-postgres/test/support.js"
import { dropPrefix, REDIS_URL, uniquePrefix } from "../../adapter-redis/test/support.js"
import { type FakeProvider, startFakeProvider } from "../../providers/test/fakeProvider.js"
import { type Running, repoRoot, start, stopAll, waitFor } from "./processes.js"

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href
const script = join(repoRoot, "packages/cli/test/fixtures/fleet-worker.ts")
const JOBS = 16

afterAll(stopAll)

/**
 * The fake provider's answers: the first request 429 with retry-after 2 s, every later one 200 after 1 s. A call
 * outlasts a worker's recheck (1 s), so once the pause is over the workers that did not make the probe still find
 * jobs left when they next look: with short calls, the probe's worker (4 slots) could run all 16 jobs before any
 * other worker looked again, and the test would no longer show the whole fleet held back.
 */
const scripted = (provider: FakeProvider): void =>
  provider.reply((_request, index) =>
    index === 0
      ? {
          kind: "json",
          status: 429,
          headers: { "retry-after": "2" },
          body: { error: { type: "rate_limit_error", message: "rate limited" } }
        }
      : { kind: "json", status: 200, body: { ok: true }, delayMs: 1_000 }
  )

const until = async (check: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000) => {
  const end = Date.now() + timeoutMs
  while (Date.now() < end) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`waited for ${what}`)
}

const fleet = (backend: { readonly url: string; readonly schema: string }) => async () => {
  const provider = await startFakeProvider()
  const workers: Array<Running> = []
  let queue: Queue | undefined
  try {
    scripted(provider)
    // The test's own queue migrates the schema before any worker starts.
    queue = await open({ url: backend.url, schema: backend.schema, queue: "fleet" })
    for (let i = 0; i < 4; i++) {
      workers.push(
        start(["--import", tsx, script], {
          FLEET_URL: backend.url,
          FLEET_SCHEMA: backend.schema,
          FLEET_PROVIDER_URL: provider.url,
          FLEET_WORKER_ID: `fleet-${i}`
        })
      )
    }
    for (const worker of workers) await waitFor(worker, ({ stdout }) => stdout.includes("ready"), "a worker to start")

    // The first job runs into the 429; the others are submitted once the pause it caused is in the store. (Submitted
    // as soon as the 429 was answered, a job could be admitted by another worker in the moment before the worker
    // that read the 429 had written the pause: a call the fleet could not yet know to hold.)
    const ids = [(await queue.submit("call", { n: 0 }, { maxAttempts: 1 })).id]
    await until(() => provider.requests[0]?.answeredAt !== undefined, "the 429")
    const store = ManagedRuntime.make(Backend.layer({ url: backend.url, schema: backend.schema, queue: "fleet" }))
    try {
      await until(async () => {
        const { resources } = await store.runPromise(
          Effect.flatMap(Limiter, (limiter) => limiter.read({ resources: ["fake:model:key-a"] }))
        )
        return resources[0]?.pause !== null
      }, "the pause in the store")
    } finally {
      await store.dispose()
    }
    for (let n = 1; n < JOBS; n++) ids.push((await queue.submit("call", { n }, { maxAttempts: 1 })).id)
    for (const id of ids) {
      const job = await queue.wait(id, { timeoutMs: 60_000 })
      expect(job.state).toBe("succeeded")
      // Its one attempt: neither the 429 nor any wait used one.
      expect(job.attempts - job.attemptsBase).toBe(1)
    }

    const [first, ...rest] = provider.requests
    expect(first!.status).toBe(429)
    // One call per job after the 429, each answered 200.
    expect(rest).toHaveLength(JOBS)
    expect(rest.every((r) => r.status === 200)).toBe(true)
    const after = [...rest].sort((a, b) => a.receivedAt - b.receivedAt)
    // Nothing for the pause (the worker measured retry-after from when it read the reply: a few ms later).
    expect(after[0]!.receivedAt - first!.answeredAt!).toBeGreaterThanOrEqual(1_990)
    // Then exactly one probe, alone until it answered, then the rest.
    expect(after[1]!.receivedAt).toBeGreaterThanOrEqual(after[0]!.answeredAt!)
    // The fleet took part: the jobs that waited were claimed by more than one worker process.
    expect(new Set(after.map((r) => r.headers["x-worker"])).size).toBeGreaterThan(1)
  } finally {
    await Promise.all(workers.map((worker) => worker.stop()))
    await queue?.close()
    await provider.close()
  }
}

describe("one 429 pauses the whole fleet", () => {
  const schema = uniqueSchema("fleet_limits")
  const prefix = uniquePrefix("fleet-limits")
  afterAll(async () => {
    await dropSchema(schema)
    await dropPrefix(REDIS_URL, prefix)
  })

  it(
    "four worker processes on Postgres: no call for 2 s after the 429, then one probe, then the rest",
    fleet({
      url: DATABASE_URL,
      schema
    }),
    120_000
  )

  it(
    "four worker processes on Redis: no call for 2 s after the 429, then one probe, then the rest",
    fleet({
      url: REDIS_URL,
      schema: prefix
    }),
    120_000
  )
})
