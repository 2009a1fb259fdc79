/**
 * A demo population for the dashboard's browser tests: `count` jobs of the demo job types of `slowcall serve --demo`
 * (`demo.echo`, `demo.summarize`, `demo.embed`, their inputs shaped as in packages/cli/src/Demo.ts) in every state,
 * written through the Store at store times spread over the last hours, as a few hours of a busy queue leave them:
 * successes (some after a retry, billed or not), dead letters of several classes with repeated inputs, abandoned
 * jobs, queued and delayed jobs, running jobs with long worker ids, some of whose leases have lapsed. Deterministic
 * for a given `seed` (the ids apart).
 */
import * as Canonical from "@slowcall/core/Canonical"
import type { ErrorClass } from "@slowcall/core/ErrorClass"
import * as Ids from "@slowcall/core/Ids"
import type { JobId, Json } from "@slowcall/core/Job"
import type { Outcome } from "@slowcall/core/Protocol"
import { Store } from "@slowcall/core/Store"
import { Effect } from "effect"

/** The demo types the seeded jobs have: the server under test must accept them. */
export const demoTypes = ["demo.echo", "demo.summarize", "demo.embed"] as const

/** What was seeded: the ids by what they are, for tests to find a job of each kind. */
export interface Seeded {
  readonly queued: ReadonlyArray<JobId>
  readonly running: ReadonlyArray<JobId>
  readonly lapsed: ReadonlyArray<JobId>
  readonly succeeded: ReadonlyArray<JobId>
  readonly failed: ReadonlyArray<JobId>
  readonly abandoned: ReadonlyArray<JobId>
}

/** mulberry32: a small seeded generator, so the population is the same on every run. */
const generator = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const words =
  "the quarterly report shows revenue up in every region while support tickets fell after the new onboarding flow shipped and churn held steady".split(
    " "
  )
const tenants = [null, null, null, "acme-corporation-eu-west-production", "globex"] as const
const workers = [
  "worker-ip-10-0-12-34.eu-west-1.compute.internal-pid-48213",
  "worker-ip-10-0-7-201.eu-west-1.compute.internal-pid-1177",
  "w-local-3"
] as const
/** Inputs that keep failing: dead letters share them, so their groups hold several jobs. */
const poison: ReadonlyArray<{ readonly errorClass: ErrorClass; readonly retries: boolean; readonly billed: boolean }> =
  [
    { errorClass: "rate_limited", retries: true, billed: false },
    { errorClass: "timeout", retries: true, billed: true },
    { errorClass: "content_filtered", retries: false, billed: true },
    { errorClass: "context_length", retries: false, billed: false },
    { errorClass: "server_error", retries: true, billed: false },
    { errorClass: "auth", retries: false, billed: false },
    { errorClass: "invalid_input", retries: false, billed: false }
  ]

/**
 * Writes the population into the Store in context, on `queue`, the newest job created at about `now`.
 */
export const seedDemo = (options: {
  readonly queue: string
  readonly count: number
  readonly seed: number
  readonly now: number
}) =>
  Effect.gen(function* () {
    const store = yield* Store
    const random = generator(options.seed)
    const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]!
    const text = (n: number) => Array.from({ length: n }, () => pick(words)).join(" ")
    const seeded = { queued: [], running: [], lapsed: [], succeeded: [], failed: [], abandoned: [] } as {
      [K in keyof Seeded]: Array<JobId>
    }
    const spacingMs = 25_000
    for (let i = 0; i < options.count; i++) {
      const created = options.now - (options.count - i) * spacingMs
      const type = pick(demoTypes)
      // The newest jobs include running ones for sure: one a minute ago (its lease lapsed), two just now.
      const forced = options.count - i === 3 || options.count - i === 2 || options.count - i === 1
      const roll = forced ? 0.95 : random()
      const failing = roll >= 0.56 && roll < 0.7 ? pick(poison) : undefined
      const input: Json =
        failing !== undefined
          ? {
              text: `poison input ${1 + Math.floor(random() * 3)} for ${failing.errorClass}`,
              failWith: failing.errorClass
            }
          : type === "demo.embed"
            ? { texts: Array.from({ length: 1 + Math.floor(random() * 6) }, () => text(4)) }
            : type === "demo.summarize"
              ? { text: text(20 + Math.floor(random() * 60)), maxWords: 12 }
              : { text: text(5) }
      const id = yield* Ids.makeJobId
      const tenant = pick(tenants)
      const budgetCents = roll >= 0.7 && roll < 0.73 ? 4 : null
      yield* store.submit({
        now: created,
        items: [
          {
            id,
            queue: options.queue,
            tenant,
            type,
            version: 1,
            inputHash: yield* Effect.orDie(Canonical.inputHash(input)),
            input,
            maxAttempts: 3,
            budgetCents,
            delayMs: roll >= 0.76 && roll < 0.8 ? 3_600_000 : undefined,
            priority: roll >= 0.8 && roll < 0.83 ? 5 : 0
          }
        ]
      })
      const estimate = type === "demo.summarize" ? 3 : type === "demo.embed" ? 1 : 0.4
      let at = created + 150
      /** One attempt: a claim by a worker, a charge when billed, then how it ended (or nothing: still running). */
      const attempt = (outcome: Outcome | null, billedCents: number, owner = pick(workers), leaseMs = 60_000) =>
        Effect.gen(function* () {
          const claimed = yield* store.claim({ now: at, items: [{ jobId: id, owner, leaseMs }] })
          const result = claimed.results[0]!
          if (result._tag !== "Claimed") return yield* Effect.die(`seed: expected a claim of ${id}, got ${result._tag}`)
          const token = result.job.leaseToken
          at += 400 + Math.floor(random() * 4_000)
          if (billedCents > 0) {
            yield* store.charge({
              now: at,
              items: [
                {
                  jobId: id,
                  callId: `call-${id}-${token}-a1b2c3d4e5f6`,
                  token,
                  amountCents: billedCents,
                  settled: true
                }
              ]
            })
          }
          if (outcome === null) {
            yield* store.heartbeat({ now: at, items: [{ jobId: id, token, leaseMs, progress: random() }] })
            return
          }
          yield* store.settle({ now: at, items: [{ jobId: id, token, outcome }] })
          at += 1_000
        })
      if (failing !== undefined) {
        // A dead letter: retried to its cap for a retryable class, failed at once for a permanent one.
        const billed = failing.billed ? estimate : 0
        if (failing.retries) {
          for (let n = 1; n < 3; n++) {
            yield* attempt(
              { _tag: "Retry", delayMs: 0, errorClass: failing.errorClass, error: `simulated ${failing.errorClass}` },
              billed
            )
          }
        }
        yield* attempt(
          {
            _tag: "Fail",
            errorClass: failing.errorClass,
            error: `HTTP error from provider: simulated ${failing.errorClass}`
          },
          billed
        )
        seeded.failed.push(id)
      } else if (roll < 0.56) {
        // A success, sometimes after a 429 (not billed) or a billed timeout.
        const before = random()
        if (before < 0.12) yield* attempt({ _tag: "Retry", delayMs: 0, errorClass: "rate_limited", error: "429" }, 0)
        else if (before < 0.18)
          yield* attempt({ _tag: "Retry", delayMs: 0, errorClass: "timeout", error: "timed out" }, estimate)
        yield* attempt(
          { _tag: "Complete", result: type === "demo.embed" ? { dimensions: 8 } : { summary: text(8) } },
          estimate
        )
        seeded.succeeded.push(id)
      } else if (roll < 0.76) {
        // Abandoned: over budget after billed attempts, or cancelled while queued.
        if (budgetCents !== null) {
          // A billed timeout, then a claim the budget no longer covers: the claim abandons the job.
          yield* attempt({ _tag: "Retry", delayMs: 0, errorClass: "timeout", error: "timed out" }, 3)
          yield* store.claim({
            now: at,
            items: [{ jobId: id, owner: pick(workers), leaseMs: 60_000, estimateCents: 3 }]
          })
        } else {
          yield* store.cancel({ now: at, items: [{ jobId: id }] })
        }
        seeded.abandoned.push(id)
      } else if (roll < 0.9 || i < options.count - 60) {
        // Queued: due, delayed, or of a higher priority. Older "running" picks stay queued: a worker would have
        // finished them by now.
        seeded.queued.push(id)
      } else {
        // Running, with a long worker id. Some claims are as old as their job and their lease (a minute) has
        // lapsed: the worker stopped renewing it. The others were made a little before now under a long lease.
        const gone = options.count - i === 3 || (!forced && random() < 0.5)
        if (!gone) at = options.now - 15_000 + Math.floor(random() * 10_000)
        yield* attempt(null, random() < 0.5 ? estimate : 0, workers[0], gone ? 60_000 : 600_000)
        if (gone) seeded.lapsed.push(id)
        else seeded.running.push(id)
      }
    }
    return seeded as Seeded
  })
