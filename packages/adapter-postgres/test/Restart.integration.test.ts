/**
 * The server restarts while workers run (every connection dies, in-flight statements are lost, the LISTEN
 * connection drops). Outcome: no job lost, no second model call while a lease lives, no lease stuck longer than one
 * lease period, and the transport's wake-ups come back. The server is always running again when the file ends.
 */
import { execFile, execFileSync } from "node:child_process"
import { readdirSync } from "node:fs"
import { expect, it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import { Effect, Fiber } from "effect"
import { afterAll, describe } from "vitest"
import * as PgStore from "../src/PgStore.js"
import * as PgTransport from "../src/PgTransport.js"
import { runJobs } from "./faultHarness.js"
import { DATABASE_URL, dropSchema, holdServer, submitOne, uniqueSchema } from "./support.js"

holdServer("exclusive")

const schema = uniqueSchema("restart")
const LEASE_MS = 2_000
const version = readdirSync("/etc/postgresql")[0] ?? "15"

const start = () =>
  execFileSync("pg_ctlcluster", ["--skip-systemctl-redirect", version, "main", "start"], { stdio: "ignore" })

const isReady = (): boolean => {
  try {
    execFileSync("pg_isready", ["-h", "127.0.0.1", "-p", "5432"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

const ensureUp = async (): Promise<void> => {
  for (let i = 0; i < 50 && !isReady(); i++) {
    if (i % 10 === 0) {
      try {
        start()
      } catch {
        // already starting
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

afterAll(async () => {
  await ensureUp()
  await dropSchema(schema)
})

describe("server restart during a run", () => {
  it.live(
    "every job completes exactly as if nothing happened, apart from the wait",
    () =>
      Effect.gen(function* () {
        const store = yield* PgStore.PgStore
        const ids: Array<JobId> = []
        for (let i = 0; i < 160; i++) {
          const id = yield* makeJobId
          yield* submitOne(store, {
            id,
            queue: "restart",
            type: "r",
            version: 1,
            inputHash: `h${i}`,
            input: i,
            maxAttempts: 10
          })
          ids.push(id)
        }
        const restarter = yield* Effect.fork(
          Effect.gen(function* () {
            yield* Effect.sleep("300 millis")
            // Asynchronously: the workers keep running (and failing) while the server goes down and comes back.
            yield* Effect.promise(
              () =>
                new Promise<void>((resolve) =>
                  execFile("pg_ctlcluster", ["--skip-systemctl-redirect", version, "main", "restart"], () => resolve())
                )
            )
          })
        )
        const report = yield* runJobs(store, ids, { workers: 4, leaseMs: LEASE_MS, callMs: 50 })
        yield* restarter.await
        expect(report.storeErrors).toBeGreaterThan(0)
        for (const id of ids) {
          const job = yield* store.get({ jobId: id })
          expect(job.state).toBe("succeeded")
          const attempts = yield* store.attempts({ jobId: id })
          const calls = report.calls.filter((call) => call.jobId === id)
          expect(new Set(calls.map((call) => call.token)).size).toBe(calls.length)
          for (let i = 1; i < attempts.length; i++) {
            const gap = attempts[i]!.startedAt - attempts[i - 1]!.startedAt
            expect(gap).toBeGreaterThanOrEqual(LEASE_MS)
            expect(gap).toBeLessThanOrEqual(LEASE_MS + 3_000)
          }
        }
        // The transport's LISTEN connection came back: with polling set far out, only a notification can wake a
        // waiting receive within seconds.
        const transport = yield* PgTransport.PgTransport
        const waiting = yield* Effect.fork(
          transport.receive({ queue: "after-restart", max: 1, visibilityMs: 5_000, waitMs: 20_000 })
        )
        yield* Effect.sleep("300 millis")
        const late = yield* makeJobId
        const startedAt = Date.now()
        yield* submitOne(store, {
          id: late,
          queue: "after-restart",
          type: "r",
          version: 1,
          inputHash: "x",
          input: 1,
          maxAttempts: 1
        })
        const deliveries = yield* Fiber.join(waiting)
        expect(deliveries.map((delivery) => delivery.jobId)).toEqual([late])
        expect(Date.now() - startedAt).toBeLessThan(5_000)
      }).pipe(
        Effect.provide(
          PgStore.layer({
            connectionString: DATABASE_URL,
            schema,
            queryTimeoutMs: 2_000,
            connectionTimeoutMs: 2_000,
            pollMs: 60_000
          })
        )
      ),
    60_000
  )
})
