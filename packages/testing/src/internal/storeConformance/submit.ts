/**
 * Store conformance, submit and idempotency: a submit inserts a queued record exactly as `Protocol.newJob` builds
 * it, a request key names one job per (queue, tenant) and a repeat of it writes nothing, the repeat is the same
 * request only when its fingerprint is the same (`Protocol.submitVerdict`), and a job id that exists already is a
 * caller bug that fails the call and writes nothing.
 *
 * @internal
 */
import { describe, expect } from "@effect/vitest"
import { Effect } from "effect"
import { type Area, expectTag, only } from "./fixture.js"

/** Registers the submit and idempotency tests. @internal */
export const submitTests = ({ it, fixture }: Area): void => {
  describe("submit and idempotency", () => {
    it.effect("submit inserts a queued job with the documented defaults, at the reply's store time", () =>
      Effect.gen(function* () {
        const { store, query, queue, tenant, now, item } = yield* fixture
        const at = yield* now
        const submitted = yield* item({ requestKey: null })

        const reply = yield* store.submit({ items: [submitted], now: at })

        expect(reply.now).toBe(at)
        const job = expectTag(only(reply), "Created").job
        expect(job).toMatchObject({
          id: submitted.id,
          queue,
          tenant,
          state: "queued",
          abandonReason: null,
          attempts: 0,
          attemptsBase: 0,
          leaseToken: 0,
          leaseOwner: null,
          leaseUntil: null,
          costCents: 0,
          progress: 0,
          result: null,
          errorClass: null,
          lastError: null,
          cancelRequestedAt: null,
          runAfter: at,
          priority: 0,
          deadlineAt: null,
          budgetCents: null,
          inputRef: null,
          fingerprint: submitted.fingerprint,
          traceId: null,
          requestKey: null,
          createdAt: at,
          updatedAt: at,
          maxAttempts: 3,
          type: "conformance.echo",
          version: 1,
          inputHash: submitted.inputHash,
          input: submitted.input
        })
        expect(yield* query.get({ jobId: job.id })).toEqual(job)
      })
    )

    it.effect("submit stores every given field; delayMs is measured from store time", () =>
      Effect.gen(function* () {
        const { now, submit, get } = yield* fixture
        const at = yield* now

        const job = yield* submit({
          input: { prompt: "hello", n: [1, 2.5, null, true] },
          inputRef: "s3://bucket/key",
          priority: 7,
          delayMs: 5_000,
          deadlineAt: at + 60_000,
          budgetCents: 125.5,
          maxAttempts: 5,
          traceId: "trace-1",
          requestKey: "every-field",
          type: "summarise",
          version: 2,
          fingerprint: "f1:every-field"
        })

        const read = yield* get(job.id)
        expect(read).toEqual(job)
        expect(read).toMatchObject({
          input: { prompt: "hello", n: [1, 2.5, null, true] },
          inputRef: "s3://bucket/key",
          priority: 7,
          runAfter: at + 5_000,
          deadlineAt: at + 60_000,
          budgetCents: 125.5,
          maxAttempts: 5,
          traceId: "trace-1",
          requestKey: "every-field",
          type: "summarise",
          version: 2,
          fingerprint: "f1:every-field"
        })
      })
    )

    it.effect("a used request key with the same input returns the existing job and writes nothing", () =>
      Effect.gen(function* () {
        const { query, queue, advance, submit, item, submitOne } = yield* fixture
        const first = yield* submit({ requestKey: "key-1", input: { a: 1, b: [1, 2] } })
        yield* advance(1_000)
        // The same input with its keys in another order: the canonical hash is the same.
        const again = yield* item({ requestKey: "key-1", input: { b: [1, 2], a: 1 } })

        const outcome = yield* submitOne(again)

        expect(outcome).toEqual({ _tag: "Existing", job: first })
        expect(yield* query.list({ queue })).toEqual([first])
        expect(yield* Effect.flip(query.get({ jobId: again.id }))).toMatchObject({ _tag: "JobNotFound" })
      })
    )

    it.effect("a used request key with other input is KeyReused, naming the existing job, and writes nothing", () =>
      Effect.gen(function* () {
        const { query, queue, submit, item, submitOne } = yield* fixture
        const first = yield* submit({ requestKey: "key-2", input: { a: 1 } })
        const other = yield* item({ requestKey: "key-2", input: { a: 2 } })

        const outcome = yield* submitOne(other)

        expect(outcome).toEqual({ _tag: "KeyReused", requestKey: "key-2", existingJobId: first.id })
        expect(yield* query.list({ queue })).toEqual([first])
        expect(yield* Effect.flip(query.get({ jobId: other.id }))).toMatchObject({ _tag: "JobNotFound" })
      })
    )

    it.effect("a used request key with the same input but another fingerprint is KeyReused and writes nothing", () =>
      Effect.gen(function* () {
        const { query, queue, submit, item, submitOne } = yield* fixture
        const input = { prompt: "same input" }
        const first = yield* submit({ requestKey: "key-fp", input, budgetCents: 10 })
        expect(first.fingerprint).toMatch(/^f1:[0-9a-f]{64}$/)

        // Each of these differs from the first request in one option the key vouches for; the input is the same.
        const others = [
          { type: "conformance.other" },
          { version: 2 },
          { budgetCents: 11 },
          { maxAttempts: 4 },
          { priority: 1 },
          { delayMs: 1_000 }
        ]
        for (const spec of others) {
          const outcome = yield* submitOne(yield* item({ requestKey: "key-fp", input, budgetCents: 10, ...spec }))
          expect(outcome, JSON.stringify(spec)).toEqual({
            _tag: "KeyReused",
            requestKey: "key-fp",
            existingJobId: first.id
          })
        }
        const same = yield* submitOne(yield* item({ requestKey: "key-fp", input, budgetCents: 10 }))

        expect(same).toEqual({ _tag: "Existing", job: first })
        expect(yield* query.list({ queue })).toEqual([first])
      })
    )

    it.effect("without a fingerprint on either side, the input hash alone decides", () =>
      Effect.gen(function* () {
        const { submit, item, submitOne, get } = yield* fixture
        const legacy = yield* submit({ requestKey: "key-legacy", input: { a: 1 }, fingerprint: null })
        expect(yield* get(legacy.id)).toMatchObject({ fingerprint: null })

        const sameInput = yield* submitOne(yield* item({ requestKey: "key-legacy", input: { a: 1 }, priority: 5 }))
        const otherInput = yield* submitOne(yield* item({ requestKey: "key-legacy", input: { a: 2 } }))

        expect(sameInput).toEqual({ _tag: "Existing", job: legacy })
        expect(otherInput).toEqual({ _tag: "KeyReused", requestKey: "key-legacy", existingJobId: legacy.id })
      })
    )

    it.effect("request keys are unique per (queue, tenant) only", () =>
      Effect.gen(function* () {
        const { queue, tenant, submit, get } = yield* fixture

        const first = yield* submit({ requestKey: "shared", input: { a: 1 } })
        const otherTenant = yield* submit({ requestKey: "shared", input: { a: 2 }, tenant: `${tenant}-other` })
        const otherQueue = yield* submit({ requestKey: "shared", input: { a: 3 }, queue: `${queue}-other` })
        const noTenant = yield* submit({ requestKey: "shared", input: { a: 4 }, tenant: null })

        const ids = new Set([first.id, otherTenant.id, otherQueue.id, noTenant.id])
        expect(ids.size).toBe(4)
        expect(yield* get(noTenant.id)).toMatchObject({ tenant: null, requestKey: "shared" })
      })
    )

    it.effect("a request key without a tenant is unique per queue among jobs without a tenant", () =>
      Effect.gen(function* () {
        const { submit, item, submitOne } = yield* fixture
        const first = yield* submit({ requestKey: "untenanted", tenant: null, input: { a: 1 } })

        const same = yield* submitOne(yield* item({ requestKey: "untenanted", tenant: null, input: { a: 1 } }))
        const other = yield* submitOne(yield* item({ requestKey: "untenanted", tenant: null, input: { a: 9 } }))

        expect(same).toEqual({ _tag: "Existing", job: first })
        expect(other).toEqual({ _tag: "KeyReused", requestKey: "untenanted", existingJobId: first.id })
      })
    )

    it.effect("a job id that exists already fails the whole call with StoreError Constraint, writing nothing", () =>
      Effect.gen(function* () {
        const { store, query, queue, now, submit, item } = yield* fixture
        const existing = yield* submit()
        const fresh = yield* item()
        const duplicate = { ...(yield* item()), id: existing.id }

        const error = yield* Effect.flip(store.submit({ items: [fresh, duplicate], now: yield* now }))

        expect(error).toMatchObject({ _tag: "StoreError", reason: "Constraint" })
        expect(yield* query.list({ queue })).toEqual([existing])
        expect(yield* Effect.flip(query.get({ jobId: fresh.id }))).toMatchObject({ _tag: "JobNotFound" })
      })
    )
  })
}
