/**
 * The Client: how an application submits jobs and follows them. The Store is the truth; the Transport only wakes
 * workers, so a publish that fails after a successful submit loses nothing (the sweeper republishes queued jobs
 * that have no message in flight).
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Either, Layer, Schedule, Stream } from "effect"
import * as Canonical from "./Canonical.js"
import type { AlreadyTerminal, InvalidInput, JobNotFound, StoreError } from "./Errors.js"
import * as Ids from "./Ids.js"
import { isTerminal, type Job, type JobId } from "./Models.js"
import {
  type DeadLetterOptions,
  type DeadLetters,
  type ListOptions,
  type ReplayOptions,
  type ReplayResult,
  Store,
  type SubmitError,
  type SubmitResult
} from "./Store.js"
import { type Message, Transport } from "./Transport.js"

/**
 * What a caller submits. `input` may be any value: anything that is not plain JSON is rejected with
 * `InvalidInput` before anything is written. Defaults: `version` 1, `maxAttempts` 3, `priority` 0, due now, no
 * deadline, no budget, the trace id derived from the job id.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubmitOptions {
  readonly queue: string
  readonly type: string
  readonly version?: number | undefined
  readonly input: unknown
  /** Idempotency key, unique per (queue, tenant). */
  readonly requestKey?: string | undefined
  readonly tenant?: string | undefined
  readonly priority?: number | undefined
  /** Delay before the job becomes due, in ms of store time. */
  readonly delayMs?: number | undefined
  /** Absolute deadline, store-time epoch ms. */
  readonly deadlineAt?: number | undefined
  readonly budgetCents?: number | undefined
  readonly maxAttempts?: number | undefined
  readonly traceId?: string | undefined
}

/**
 * Options of `watch`: how often the job is read (default 1 s).
 *
 * @since 0.1.0
 * @category models
 */
export interface WatchOptions {
  readonly intervalMs?: number | undefined
  readonly tenant?: string | undefined
}

/**
 * The client operations.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClientService {
  /**
   * Validate, hash and store a job, then publish it when it was created (an idempotent repeat publishes nothing).
   * A failed publish is logged and the job is still accepted.
   */
  readonly submit: (options: SubmitOptions) => Effect.Effect<SubmitResult, SubmitError>
  readonly get: (
    jobId: JobId,
    options?: { readonly tenant?: string | undefined }
  ) => Effect.Effect<Job, JobNotFound | StoreError>
  /** Cancel: queued -> abandoned(cancelled) at once; running -> flagged, the worker stops at its next heartbeat. */
  readonly cancel: (
    jobId: JobId,
    options?: { readonly tenant?: string | undefined }
  ) => Effect.Effect<Job, JobNotFound | AlreadyTerminal | StoreError>
  readonly list: (options?: ListOptions) => Effect.Effect<ReadonlyArray<Job>, StoreError>
  readonly deadLetters: (options?: DeadLetterOptions) => Effect.Effect<DeadLetters, StoreError>
  /** Move dead letters back to queued (never a succeeded job) and publish each replayed job. */
  readonly replay: (options: ReplayOptions) => Effect.Effect<ReplayResult, StoreError>
  /** The current job, then every change (by `updatedAt`); ends after the first terminal state it emits. */
  readonly watch: (jobId: JobId, options?: WatchOptions) => Stream.Stream<Job, JobNotFound | StoreError>
}

/**
 * The Client service.
 *
 * @since 0.1.0
 * @category services
 */
export class Client extends Context.Tag("@slowcall/core/Client")<Client, ClientService>() {}

const messageOf = (job: Job): Message => ({
  jobId: job.id,
  type: job.type,
  version: job.version,
  priority: job.priority
})

/**
 * Build a client over the Store and Transport in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<ClientService, never, Store | Transport> = Effect.gen(function* () {
  const store = yield* Store
  const transport = yield* Transport

  const publish = (job: Job) =>
    transport
      .publish({
        queue: job.queue,
        message: messageOf(job),
        delayMs: Math.max(0, job.runAfter - job.updatedAt)
      })
      .pipe(
        Effect.catchAll((error) =>
          Effect.logWarning("publish failed; the sweeper will republish the job", error).pipe(
            Effect.annotateLogs({ jobId: job.id })
          )
        )
      )

  const submit = (options: SubmitOptions): Effect.Effect<SubmitResult, SubmitError> =>
    Effect.gen(function* () {
      const valid = Canonical.validateJson(options.input)
      if (Either.isLeft(valid)) return yield* Effect.fail<InvalidInput>(valid.left)
      const inputHash = yield* Canonical.inputHash(valid.right)
      const id = yield* Ids.makeJobId
      const delayMs = options.delayMs ?? 0
      const now = delayMs > 0 ? yield* store.now : undefined
      const result = yield* store.submit({
        id,
        queue: options.queue,
        tenant: options.tenant ?? null,
        type: options.type,
        version: options.version ?? 1,
        requestKey: options.requestKey ?? null,
        inputHash,
        input: valid.right,
        priority: options.priority ?? 0,
        runAfter: now === undefined ? undefined : now + delayMs,
        deadlineAt: options.deadlineAt ?? null,
        budgetCents: options.budgetCents ?? null,
        maxAttempts: options.maxAttempts ?? 3,
        traceId: options.traceId ?? id.replace(/-/g, "")
      })
      if (result.created) yield* publish(result.job)
      return result
    })

  const replay = (options: ReplayOptions): Effect.Effect<ReplayResult, StoreError> =>
    Effect.gen(function* () {
      const result = yield* store.replay(options)
      for (const jobId of result.replayed) {
        const job = yield* store.get({ jobId }).pipe(Effect.catchTag("JobNotFound", () => Effect.succeed(undefined)))
        if (job !== undefined) yield* publish(job)
      }
      return result
    })

  const watch = (jobId: JobId, options: WatchOptions = {}): Stream.Stream<Job, JobNotFound | StoreError> =>
    Stream.repeatEffectWithSchedule(
      store.get({ jobId, tenant: options.tenant }),
      Schedule.spaced(Duration.millis(options.intervalMs ?? 1_000))
    ).pipe(
      Stream.changesWith((a, b) => a.updatedAt === b.updatedAt),
      Stream.takeUntil((job) => isTerminal(job.state))
    )

  return {
    submit,
    get: (jobId, options) => store.get({ jobId, tenant: options?.tenant }),
    cancel: (jobId, options) => store.cancel({ jobId, tenant: options?.tenant }),
    list: (options) => store.list(options ?? {}),
    deadLetters: (options) => store.deadLetters(options ?? {}),
    replay,
    watch
  }
})

/**
 * A layer providing `Client` over the Store and Transport in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Client, never, Store | Transport> = Layer.effect(Client, make)
