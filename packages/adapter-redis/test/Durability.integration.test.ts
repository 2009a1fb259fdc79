/**
 * Durability, stated and tested: each test starts its own `redis-server` on a free port in a temporary folder,
 * runs submits, claims, charges and settlements against it, SIGKILLs it in the middle of the run, starts it again on
 * the same folder, and compares what the server kept with every write the adapter acknowledged.
 *
 * - `appendfsync always`: the server fsyncs the append-only file before it replies, so no acknowledged job,
 *   attempt or charge is lost, whatever crashes.
 * - `appendfsync everysec`: the server writes the file before it replies and fsyncs it once a second, so a crash of
 *   the Redis process (this SIGKILL) loses nothing acknowledged either; what a crash of the machine could lose is
 *   the last second of acknowledged writes, which the test counts (a SIGKILL cannot drop the OS's page cache).
 * - no persistence (`appendonly no`, no snapshots): a restart loses everything; the adapter warns about such a
 *   server at start.
 */
import { expect, it } from "@effect/vitest"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId } from "@slowcall/core/Job"
import { Context, Effect, Fiber, Layer } from "effect"
import { describe } from "vitest"
import * as RedisStore from "../src/RedisStore.js"
import { type LocalServer, startAofServer, startPlainServer } from "./servers.js"

/** What the adapter acknowledged, with the client time of each reply. */
interface Acked {
  readonly submitted: Array<{ readonly id: JobId; readonly at: number }>
  readonly claimed: Array<{ readonly id: JobId; readonly token: number; readonly at: number }>
  readonly charged: Array<{ readonly id: JobId; readonly callId: string; readonly at: number }>
  readonly completed: Array<{ readonly id: JobId; readonly at: number }>
}

const storeOn = (url: string) =>
  Effect.map(
    Layer.build(RedisStore.layer({ url, prefix: "durable", commandTimeoutMs: 1_000, checkServer: false })),
    (context) => Context.get(context, RedisStore.RedisStore)
  )

/** Runs rounds of submit -> claim -> charge -> complete (5 jobs a round) until a write fails (the kill). */
const workload = (store: RedisStore.RedisStoreService, acked: Acked) =>
  Effect.gen(function* () {
    for (let round = 0; round < 10_000; round++) {
      const ids = yield* Effect.all(Array.from({ length: 5 }, () => makeJobId))
      yield* store.submit({
        items: ids.map((id) => ({
          id,
          queue: "durable",
          type: "d",
          version: 1,
          inputHash: `h-${id}`,
          input: { round },
          maxAttempts: 3
        }))
      })
      for (const id of ids) acked.submitted.push({ id, at: Date.now() })
      const claimed = yield* store.claim({ items: ids.map((jobId) => ({ jobId, owner: "w", leaseMs: 60_000 })) })
      const tokens = claimed.results.map((r) => (r._tag === "Claimed" ? r.job.leaseToken : -1))
      ids.forEach((id, i) => {
        acked.claimed.push({ id, token: tokens[i]!, at: Date.now() })
      })
      yield* store.charge({
        items: ids.map((jobId, i) => ({
          jobId,
          callId: `call-${jobId}`,
          token: tokens[i]!,
          amountCents: 2,
          settled: true
        }))
      })
      for (const id of ids) acked.charged.push({ id, callId: `call-${id}`, at: Date.now() })
      yield* store.settle({
        items: ids.map((jobId, i) => ({ jobId, token: tokens[i]!, outcome: { _tag: "Complete", result: { ok: 1 } } }))
      })
      for (const id of ids) acked.completed.push({ id, at: Date.now() })
    }
  }).pipe(Effect.ignore)

/** Runs the workload, SIGKILLs the server after `killAfterMs`, starts it again; returns the acknowledged writes. */
const crashRun = (server: LocalServer, killAfterMs: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* storeOn(server.url)
      const acked: Acked = { submitted: [], claimed: [], charged: [], completed: [] }
      const running = yield* Effect.fork(workload(store, acked))
      yield* Effect.sleep(killAfterMs)
      const killedAt = Date.now()
      server.kill()
      yield* Fiber.join(running)
      yield* Effect.promise(() => server.start())
      return { acked, killedAt }
    })
  )

/** What the restarted server holds of the acknowledged writes. */
const survivors = (url: string, acked: Acked) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* storeOn(url)
      const lost = { submitted: 0, claimed: 0, charged: 0, completed: 0 }
      for (const { id } of acked.submitted) {
        const found = yield* store.get({ jobId: id }).pipe(Effect.option)
        if (found._tag === "None") lost.submitted++
      }
      for (const { id, token } of acked.claimed) {
        const attempts = yield* store.attempts({ jobId: id })
        if (!attempts.some((a) => a.token === token)) lost.claimed++
      }
      for (const { callId, id } of acked.charged) {
        const charges = yield* store.charges({ jobId: id })
        if (!charges.some((c) => c.callId === callId && c.amountCents === 2)) lost.charged++
      }
      for (const { id } of acked.completed) {
        const job = yield* store.get({ jobId: id }).pipe(Effect.option)
        if (job._tag === "None" || job.value.state !== "succeeded") lost.completed++
      }
      return lost
    })
  )

describe("durability across a SIGKILL of the server", () => {
  it.live(
    "appendfsync always: no acknowledged job, attempt, charge or result is lost",
    () =>
      Effect.acquireUseRelease(
        Effect.promise(() => startAofServer("always")),
        (server) =>
          Effect.gen(function* () {
            const { acked } = yield* crashRun(server, 600)
            const lost = yield* survivors(server.url, acked)

            expect(acked.completed.length).toBeGreaterThan(10)
            expect(lost).toEqual({ submitted: 0, claimed: 0, charged: 0, completed: 0 })
          }),
        (server) => Effect.sync(() => server.stop())
      ),
    60_000
  )

  it.live(
    "appendfsync everysec: a process crash loses nothing acknowledged; a machine crash could lose the last second",
    () =>
      Effect.acquireUseRelease(
        Effect.promise(() => startAofServer("everysec")),
        (server) =>
          Effect.gen(function* () {
            const { acked, killedAt } = yield* crashRun(server, 1_500)
            const lost = yield* survivors(server.url, acked)
            const atRisk = acked.submitted.filter((write) => write.at >= killedAt - 1_000).length

            console.info(
              `[durability everysec] ${acked.submitted.length} jobs acknowledged, ${atRisk} in the last second ` +
                "before the kill (what an OS crash or power loss could take)"
            )
            expect(lost).toEqual({ submitted: 0, claimed: 0, charged: 0, completed: 0 })
            expect(atRisk).toBeGreaterThan(0)
          }),
        (server) => Effect.sync(() => server.stop())
      ),
    60_000
  )

  it.live(
    "no persistence: the restarted server has lost every acknowledged job, and the adapter says so at start",
    () =>
      Effect.acquireUseRelease(
        Effect.promise(() => startPlainServer()),
        (server) =>
          Effect.gen(function* () {
            const warnings = yield* Effect.scoped(
              Effect.flatMap(storeOn(server.url), (store) => store.checkServer)
            ).pipe(Effect.map((check) => check.warnings))
            const { acked } = yield* crashRun(server, 400)
            const lost = yield* survivors(server.url, acked)

            expect(warnings.some((w) => w.includes("keeps nothing on disk"))).toBe(true)
            expect(acked.submitted.length).toBeGreaterThan(0)
            expect(lost.submitted).toBe(acked.submitted.length)
          }),
        (server) => Effect.sync(() => server.stop())
      ),
    60_000
  )
})
