/**
 * A small claim -> model call -> settle loop over the Store, for fault tests that need to see every model call
 * and every store failure. It follows the protocol the core Worker follows (claim before call, fenced settle,
 * retry on store errors, wait out a live lease) without transports, heartbeats or handlers, so the outcome of a
 * fault test is a property of the Store alone.
 */
import type { JobId } from "@slowcall/core/Job"
import type { Store } from "@slowcall/core/Store"
import { Duration, Effect, Queue, Ref } from "effect"

export interface ModelCall {
  readonly jobId: JobId
  readonly token: number
  readonly worker: string
  readonly start: number
  readonly end: number
}

export interface RunReport {
  readonly calls: ReadonlyArray<ModelCall>
  readonly storeErrors: number
  readonly fencedRejections: number
}

const clamp = (ms: number, low: number, high: number) => Math.min(high, Math.max(low, ms))

/** Runs `workers` loops until every job is settled; each model call takes `callMs`. */
export const runJobs = (
  store: Store["Type"],
  jobIds: ReadonlyArray<JobId>,
  options: { readonly workers: number; readonly leaseMs: number; readonly callMs: number }
): Effect.Effect<RunReport> =>
  Effect.gen(function* () {
    const queue = yield* Queue.unbounded<JobId>()
    yield* Queue.offerAll(queue, jobIds)
    const remaining = yield* Ref.make(jobIds.length)
    const calls: Array<ModelCall> = []
    let storeErrors = 0
    let fencedRejections = 0

    const later = (id: JobId, ms: number) =>
      Effect.forkDaemon(Effect.sleep(Duration.millis(ms)).pipe(Effect.zipRight(Queue.offer(queue, id))))

    const completeWithRetry = (worker: string, id: JobId, token: number): Effect.Effect<"done" | "lost"> =>
      Effect.gen(function* () {
        while (true) {
          const reply = yield* Effect.either(
            store.settle({ items: [{ jobId: id, token, outcome: { _tag: "Complete", result: { by: worker } } }] })
          )
          if (reply._tag === "Left") {
            storeErrors++
            yield* Effect.sleep(Duration.millis(100))
            continue
          }
          const result = reply.right.results[0]
          if (result?._tag === "Settled") return "done" as const
          // A reply lost after the commit looks like a lost lease on the next try: the row tells.
          if (result?.state === "succeeded" && result.currentToken === token) return "done" as const
          fencedRejections++
          return "lost" as const
        }
      })

    const processOne = (worker: string, id: JobId): Effect.Effect<void> =>
      Effect.gen(function* () {
        const claim = yield* Effect.either(
          store.claim({ items: [{ jobId: id, owner: worker, leaseMs: options.leaseMs }] })
        )
        if (claim._tag === "Left") {
          storeErrors++
          yield* later(id, 100)
          return
        }
        const outcome = claim.right.results[0]!
        switch (outcome._tag) {
          case "Settled":
          case "NotFound":
            yield* Ref.update(remaining, (n) => n - 1)
            return
          case "Busy":
            yield* later(id, clamp(outcome.until - Date.now() + 20, 20, options.leaseMs))
            return
          case "NotDue":
            yield* later(id, clamp(outcome.until - Date.now() + 20, 20, options.leaseMs))
            return
          case "Claimed": {
            const token = outcome.job.leaseToken
            const start = Date.now()
            yield* Effect.sleep(Duration.millis(options.callMs))
            calls.push({ jobId: id, token, worker, start, end: Date.now() })
            const done = yield* completeWithRetry(worker, id, token)
            if (done === "done") yield* Ref.update(remaining, (n) => n - 1)
            else yield* later(id, 20)
          }
        }
      })

    const loop = (worker: string) =>
      Effect.gen(function* () {
        while ((yield* Ref.get(remaining)) > 0) {
          const next = yield* Queue.take(queue).pipe(Effect.timeout(Duration.millis(200)), Effect.option)
          if (next._tag === "Some") yield* processOne(worker, next.value)
        }
      })

    yield* Effect.all(
      Array.from({ length: options.workers }, (_, i) => loop(`worker-${i}`)),
      { concurrency: "unbounded" }
    )
    return { calls, storeErrors, fencedRejections }
  })
