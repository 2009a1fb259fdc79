/**
 * Fixtures shared by core's unit tests: submit items with a matching input hash, one-item views of the batch verbs
 * for tests that act as another process, a clock a fixed distance from the one in scope, and a harness with a
 * memory Store, Query and Transport, a worker starter and waits that advance the TestClock.
 */
import { Clock, Effect, TestClock } from "effect"
import { inputHash } from "../src/Canonical.js"
import { makeJobId } from "../src/Ids.js"
import type { Job, JobId, JobState, Json } from "../src/Job.js"
import type { Outcome, SubmitItem } from "../src/Protocol.js"
import * as StoreModule from "../src/Store.js"
import { Store } from "../src/Store.js"
import * as TransportModule from "../src/Transport.js"
import { Transport } from "../src/Transport.js"
import * as Worker from "../src/Worker.js"

/** What a test may set on a submit item; id, input hash and input are filled in. */
export type Spec = Partial<Omit<SubmitItem, "id" | "inputHash" | "input">> & { readonly input?: Json | null }

/** A submit item: queue `q`, type `t`, version 1, three attempts, trace id from the job id, unless `spec` says so. */
export const submitItem = (spec: Spec = {}): Effect.Effect<SubmitItem> =>
  Effect.gen(function* () {
    const id = yield* makeJobId
    const input: Json | null = spec.input === undefined ? null : spec.input
    return {
      queue: "q",
      type: "t",
      version: 1,
      maxAttempts: 3,
      traceId: id.replace(/-/g, ""),
      ...spec,
      id,
      input,
      inputHash: yield* Effect.orDie(inputHash(input))
    }
  })

/** Submit one item and return the created job; any other outcome is a broken test. */
export const submitOne = (store: Store["Type"], spec: Spec = {}, now?: number): Effect.Effect<Job> =>
  Effect.gen(function* () {
    const item = yield* submitItem(spec)
    const reply = yield* Effect.orDie(store.submit({ items: [item], now }))
    const result = reply.results[0]
    if (result?._tag !== "Created") return yield* Effect.dieMessage(`submit did not create: ${result?._tag}`)
    return result.job
  })

/** One claim as another process would make it. */
export const claimOne = (store: Store["Type"], jobId: JobId, owner: string, leaseMs: number, now?: number) =>
  Effect.map(Effect.orDie(store.claim({ items: [{ jobId, owner, leaseMs }], now })), (reply) => reply.results[0]!)

/** One settlement as another process would write it; the job as it was left, or the fenced miss. */
export const settleOne = (store: Store["Type"], jobId: JobId, token: number, outcome: Outcome, now?: number) =>
  Effect.map(Effect.orDie(store.settle({ items: [{ jobId, token, outcome }], now })), (reply) => reply.results[0]!)

/** A clock `offsetMs` away from the one in scope; it sleeps on the clock in scope. */
export const offsetClock = (offsetMs: number) =>
  Effect.map(
    Effect.clock,
    (base): Clock.Clock => ({
      [Clock.ClockTypeId]: Clock.ClockTypeId,
      unsafeCurrentTimeMillis: () => base.unsafeCurrentTimeMillis() + offsetMs,
      currentTimeMillis: Effect.sync(() => base.unsafeCurrentTimeMillis() + offsetMs),
      unsafeCurrentTimeNanos: () => base.unsafeCurrentTimeNanos() + BigInt(offsetMs) * 1_000_000n,
      currentTimeNanos: Effect.sync(() => base.unsafeCurrentTimeNanos() + BigInt(offsetMs) * 1_000_000n),
      sleep: (duration) => base.sleep(duration)
    })
  )

/**
 * A memory Store, Query and Transport for worker tests. `wrap` gives the Store view workers get (faults, counters);
 * the test itself reads and writes the unwrapped store. `submit` stores a job with the given defaults and publishes
 * it, as a client would.
 */
export const harness = (
  options: {
    readonly wrap?: ((store: Store["Type"]) => Store["Type"]) | undefined
    readonly defaults?: Spec | undefined
  } = {}
) =>
  Effect.gen(function* () {
    const { store: inner, query, peek } = yield* StoreModule.makeMemory
    const transport = yield* TransportModule.makeMemory()
    const store = options.wrap === undefined ? inner : options.wrap(inner)
    const start = <R>(
      workerOptions: Worker.WorkerOptions<R>,
      view: Store["Type"] = store,
      transportView: Transport["Type"] = transport
    ) =>
      Worker.make(workerOptions).pipe(
        Effect.provideService(Store, view),
        Effect.provideService(Transport, transportView)
      )
    const submit = (spec: Spec = {}): Effect.Effect<JobId> =>
      Effect.gen(function* () {
        const job = yield* submitOne(inner, { ...options.defaults, ...spec })
        yield* transport.publish({
          queue: job.queue,
          items: [{ message: { jobId: job.id, type: job.type, version: job.version, priority: job.priority } }]
        })
        return job.id
      })
    const job = (jobId: JobId): Effect.Effect<Job> => Effect.orDie(query.get({ jobId }))
    const stateOf = (jobId: JobId) => Effect.map(job(jobId), (j) => j.state)
    /** Store time, read by the test (never by a worker). */
    const now = Effect.orDie(inner.now)
    /** Advance the TestClock in steps of `stepMs` until `check` holds; dies after `maxMs`. */
    const advanceUntil = (check: Effect.Effect<boolean, unknown>, maxMs = 120_000, stepMs = 50) =>
      Effect.gen(function* () {
        for (let elapsed = 0; elapsed <= maxMs; elapsed += stepMs) {
          yield* Effect.yieldNow()
          if (yield* Effect.orDie(check)) return
          yield* TestClock.adjust(stepMs)
        }
        return yield* Effect.dieMessage(`condition not reached within ${maxMs} ms`)
      })
    /** Advance until the job is in one of `states`; returns it. */
    const reaches = (jobId: JobId, states: ReadonlyArray<JobState>, maxMs = 120_000) =>
      Effect.zipRight(
        advanceUntil(
          Effect.map(stateOf(jobId), (s) => states.includes(s)),
          maxMs
        ),
        job(jobId)
      )
    return { inner, store, query, peek, transport, start, submit, job, stateOf, now, advanceUntil, reaches }
  })

/** The terminal states. */
export const terminal: ReadonlyArray<JobState> = ["succeeded", "failed", "abandoned"]
