/**
 * The Worker's own cost per job, without any store's: a worker on `claimsFromStore` runs N no-op jobs against a store
 * whose claims pop prepared records and whose settlements succeed at once, so what is measured is the worker (intake,
 * dispatch, attempt, decision, group-committed persist) and the Effect runtime under it.
 *
 *   node scripts/bundled.mjs bench/worker-overhead.ts [N]     (N = 20000)
 *   COUNT=1 node scripts/bundled.mjs bench/worker-overhead.ts  (also: Effect operations and fibers per job, by kind)
 *
 * Prints jobs/s and CPU ms per job (the process's own user + system time over the run). Used by the benchmarks page
 * to split a Postgres worker's CPU between the worker and the adapter.
 */
import { Deferred, Effect, Exit, Schema, Scope } from "effect"
import * as Handler from "../packages/core/src/Handler.js"
import * as Ids from "../packages/core/src/Ids.js"
import type { Job } from "../packages/core/src/Job.js"
import * as Protocol from "../packages/core/src/Protocol.js"
import * as Store from "../packages/core/src/Store.js"
import * as Transport from "../packages/core/src/Transport.js"
import * as Worker from "../packages/core/src/Worker.js"
import { OpCount, watch } from "./opCount.js"

const N = Number(process.argv[2] ?? 20_000)

/** A transport whose messages are the store's own records: the worker claims with `claimNext`. */
const wakeups: Transport.Transport["Type"] = {
  capabilities: {
    defer: true,
    maxReceiveCount: null,
    ackRemoves: false,
    visibilityFollowsLease: true,
    maxBatch: 1000,
    maxDelayMs: null,
    priority: true,
    claimsFromStore: true
  },
  publish: () => Effect.void,
  receive: () => Effect.succeed([]),
  extend: () => Effect.void,
  defer: () => Effect.void,
  ack: () => Effect.void,
  awaitWork: () => Effect.sleep(1)
}

const program = Effect.gen(function* () {
  const { store: memory } = yield* Store.makeMemory
  const jobs: Array<Job> = []
  for (let i = 0; i < N; i++) {
    const id = yield* Ids.makeJobId
    const queued = Protocol.newJob(
      { id, queue: "q", type: "t", version: 1, inputHash: "h", input: { i }, maxAttempts: 3 },
      0
    )
    jobs.push({ ...queued, state: "running", attempts: 1, leaseToken: 1, leaseOwner: "w", leaseUntil: 1e15 })
  }
  const store: Store.Store["Type"] = {
    ...memory,
    claimNext: (options) =>
      Effect.sync(() => ({
        now: 0,
        results: jobs.splice(0, options.max).map((job) => ({ _tag: "Claimed" as const, job, takeover: false }))
      })),
    settle: (options) =>
      Effect.sync(() => ({
        now: 0,
        results: options.items.map((item) => ({
          _tag: "Settled" as const,
          job: { ...jobs[0]!, id: item.jobId, state: "succeeded" as const }
        }))
      }))
  }
  let done = 0
  const all = yield* Deferred.make<void>()
  const handler = Handler.make({
    type: "t",
    version: 1,
    input: Schema.Unknown,
    result: Schema.Null,
    attempt: { timeoutMs: 30_000 },
    run: () =>
      Effect.sync(() => {
        if (++done === N) Deferred.unsafeDone(all, Exit.void)
        return null
      })
  })
  const count = new OpCount()
  const scope = yield* Scope.make()
  const started = performance.now()
  const cpu0 = process.cpuUsage()
  const worker = Worker.make({ queue: "q", concurrency: 16, prefetch: 64, handlers: [handler] }).pipe(
    Scope.extend(scope),
    Effect.provideService(Store.Store, store),
    Effect.provideService(Transport.Transport, wakeups)
  )
  yield* process.env.COUNT ? watch(worker, count) : worker
  yield* Deferred.await(all)
  const cpu = process.cpuUsage(cpu0)
  const seconds = (performance.now() - started) / 1000
  console.log(
    `worker only: ${N} jobs, ${(N / seconds).toFixed(0)} jobs/s, cpu ms/job ${((cpu.user + cpu.system) / 1000 / N).toFixed(4)}`
  )
  if (process.env.COUNT) {
    console.log(
      `effect operations per job ${(count.ops / N).toFixed(1)}, fibers per job ${(count.fibers / N).toFixed(2)}`
    )
    for (const [kind, n] of [...count.byKind].sort((a, b) => b[1] - a[1]))
      console.log(`  ${(n / N).toFixed(2)} ${kind}`)
  }
  yield* Scope.close(scope, Exit.void)
})

Effect.runPromise(program)
