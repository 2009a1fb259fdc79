/**
 * Builds submit items for tests: a fresh job id every time, plain JSON input with its canonical hash, and defaults
 * that any Store accepts. Ids are unique across runs, so suites can run against a database that keeps rows between
 * runs.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import { inputHash } from "@slowcall/core/Canonical"
import { makeJobId } from "@slowcall/core/Ids"
import type { JobId, Json } from "@slowcall/core/Job"
import { fingerprint, type SubmitItem } from "@slowcall/core/Protocol"
import { Effect, Random } from "effect"

/**
 * What a test may set on a job; everything else gets a default. `queue` is required so that every test isolates
 * itself by its own queue name.
 *
 * @since 0.1.0
 * @category models
 */
export type JobSpec = Partial<Omit<SubmitItem, "id" | "inputHash" | "input">> & {
  readonly queue: string
  readonly input?: Json | null | undefined
}

/**
 * A factory of submit items. Every call gives a new job id (UUID v7 from the `Clock` in scope and a per-factory
 * seeded `Random`, so two factories never repeat an id); `inputHash` always matches `input`, and `fingerprint` is
 * the item's own `Protocol.fingerprint` (with a delay as its schedule) unless the spec sets one (null: none).
 *
 * @since 0.1.0
 * @category testing
 */
export interface JobFactory {
  /** One `Store.submit` item: type `conformance.echo`, version 1, three attempts unless `spec` says otherwise. */
  readonly submitItem: (spec: JobSpec) => Effect.Effect<SubmitItem>
  /** A job id no factory has returned or will return: for items and for ids that name no job at all. */
  readonly jobId: Effect.Effect<JobId>
  /** A name no other factory (in this run or another) returns: for queues, tenants and request keys. */
  readonly uniqueName: (prefix: string) => string
}

/**
 * A new job factory with its own random seed.
 *
 * @since 0.1.0
 * @category testing
 */
export const makeJobFactory = (): JobFactory => {
  const nonce = randomUUID().slice(0, 8)
  const random = Random.make(randomUUID())
  let counter = 0
  const jobId = Effect.withRandom(makeJobId, random)
  return {
    jobId,
    uniqueName: (prefix) => `${prefix}-${nonce}-${++counter}`,
    submitItem: (spec) =>
      Effect.gen(function* () {
        const id = yield* jobId
        const input: Json | null = spec.input === undefined ? { n: ++counter } : spec.input
        const hash = yield* Effect.orDie(inputHash(input))
        const base = { type: "conformance.echo", version: 1, maxAttempts: 3, ...spec, id, input, inputHash: hash }
        const item: SubmitItem = {
          ...base,
          fingerprint:
            spec.fingerprint !== undefined
              ? spec.fingerprint
              : fingerprint({
                  type: base.type,
                  version: base.version,
                  inputHash: hash,
                  maxAttempts: base.maxAttempts,
                  priority: base.priority ?? 0,
                  budgetCents: base.budgetCents ?? null,
                  deadlineAt: base.deadlineAt ?? null,
                  schedule: { delayMs: base.delayMs ?? 0 }
                })
        }
        return item
      })
  }
}
