/**
 * SimStore: a proxy around a real Store (the in-memory one) that records every accepted and rejected write with
 * its token and the job record before and after, and injects faults at named points: a clean failure before the
 * write (F5), an applied write whose reply is lost (F6 ambiguous, F15 partition), a slow call (F7), a crash of the
 * calling process after a write (F8, F10, F18), and targeted heartbeat failures (F1). Production code has no
 * switch for any of this: the proxy is the only place faults exist.
 *
 * @since 0.1.0
 */

import { StoreError } from "@slowcall/core/Errors"
import type { Job, JobId } from "@slowcall/core/Models"
import type { Store } from "@slowcall/core/Store"
import { Effect, Random } from "effect"
import { type History, type Snap, snap, type WriteOp } from "./History.js"
import { type Actor, type Faults, type Incarnation, passGate } from "./internal/world.js"
import type { FaultKind } from "./Plan.js"
import type { VirtualClock } from "./SimClock.js"

/**
 * What a proxy needs from its world.
 *
 * @since 0.1.0
 * @category models
 */
export interface SimStoreEnv {
  readonly actor: Actor
  readonly history: History
  readonly faults: Faults
  readonly clock: VirtualClock
  /** Crash the actor's incarnation; `restartAfterMs` null means it stays down until the heal phase. */
  readonly crash: (incarnation: Incarnation, restartAfterMs: number | null) => void
  /** The job record in the world's store right now (ground truth, read without an effect). */
  readonly peek: (jobId: JobId) => Job | undefined
}

const preFaults: ReadonlyArray<FaultKind> = ["F5", "F6", "F7", "F15"]
const crashAfter: Partial<Record<WriteOp, ReadonlyArray<FaultKind>>> = {
  claim: ["F10", "F18"],
  heartbeat: ["F10"],
  complete: ["F8", "F18"],
  fail: ["F8"],
  retry: ["F8"],
  abandon: ["F8"],
  release: ["F8"]
}
const pointKinds = new Map<WriteOp, ReadonlyArray<FaultKind>>(
  (["claim", "heartbeat", "charge", "complete", "fail", "retry", "abandon", "release"] as const).map((op) => [
    op,
    [...preFaults, ...(crashAfter[op] ?? [])]
  ])
)

/**
 * An injected store failure. Its fields are constants of this module, so the schema check the error class runs on
 * construction is skipped: it would cost more than the rest of the fault point.
 */
const injected = (reason: StoreError["reason"], operation: string, detail: string): StoreError =>
  new StoreError({ reason, operation, detail }, { disableValidation: true })

/**
 * Wrap `inner` for one actor. Invariant: every write that reaches `inner` is recorded exactly once, in the order
 * `inner` applied it; a crashed actor's later calls never reach `inner` and never return.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (inner: Store["Type"], env: SimStoreEnv): Store["Type"] => {
  const { actor, clock, faults, history } = env
  const peek = (jobId: JobId): Snap | null => {
    const job = env.peek(jobId)
    return job === undefined ? null : snap(job)
  }
  const gated = passGate(actor)

  const write = <A, E>(
    op: WriteOp,
    jobId: JobId,
    token: number | null,
    effect: Effect.Effect<A, E>,
    describe: (a: A) => { res: string; takeover?: boolean; resultToken?: number | null },
    extra: { callId?: string; amount?: number; settled?: boolean } = {}
  ): Effect.Effect<A, E | StoreError> =>
    Effect.suspend(() => {
      const start = clock.now
      const record = (ok: boolean, res: string, before: Snap | null, after: Snap | null, more: object = {}) =>
        history.push({
          k: "write",
          t: clock.now,
          start,
          op,
          who: actor.id,
          jobId,
          token,
          ok,
          res,
          takeover: false,
          before,
          after,
          callId: extra.callId ?? null,
          amount: extra.amount ?? null,
          settled: extra.settled ?? null,
          resultToken: null,
          ...more
        })
      return gated((): Effect.Effect<A, E | StoreError> => {
        const incarnation = actor.incarnation
        let fault: FaultKind | undefined
        if (incarnation !== null) {
          const left = faults.enabled ? (faults.heartbeatFailures.get(incarnation.slot) ?? 0) : 0
          if (op === "heartbeat" && left > 0) {
            faults.heartbeatFailures.set(incarnation.slot, left - 1)
            faults.note("F1", actor.id, "heartbeat fails (targeted)")
            return Effect.fail(injected("Connection", op, "injected: heartbeat fails"))
          }
          fault = faults.roll(pointKinds.get(op)!, actor.id, `store.${op}`)
        }
        if (fault === "F5") {
          const before = peek(jobId)
          record(false, "StoreError", before, before)
          return Effect.fail(injected("Connection", op, "injected: write not applied"))
        }
        const apply = (): Effect.Effect<A, E | StoreError> => {
          const before = peek(jobId)
          /** After the write: crash the caller if the plan says so, then answer it (or lose the answer). */
          const reply = (answer: () => Effect.Effect<A, E | StoreError>): Effect.Effect<A, E | StoreError> => {
            if (incarnation !== null && (fault === "F8" || fault === "F10" || fault === "F18")) {
              env.crash(incarnation, fault === "F18" ? 500 : null)
            }
            return gated((): Effect.Effect<A, E | StoreError> => {
              if (fault === "F6" || fault === "F15") {
                const lost = injected(
                  fault === "F6" ? "Ambiguous" : "Timeout",
                  op,
                  "injected: the write applied but the reply was lost"
                )
                return fault === "F15"
                  ? Effect.zipRight(
                      clock.sleepMillis(1_000),
                      Effect.suspend(() => gated(() => Effect.fail(lost)))
                    )
                  : Effect.fail(lost)
              }
              return answer()
            })
          }
          return Effect.matchEffect(effect, {
            onSuccess: (value) => {
              const d = describe(value)
              record(true, d.res, before, peek(jobId), {
                takeover: d.takeover ?? false,
                resultToken: d.resultToken ?? null
              })
              return reply(() => Effect.succeed(value))
            },
            onFailure: (error) => {
              record(false, (error as { _tag?: string })._tag ?? "error", before, peek(jobId))
              return reply(() => Effect.fail(error))
            }
          })
        }
        return fault === "F7"
          ? Effect.flatMap(Random.nextIntBetween(100, 2_000), (ms) =>
              Effect.zipRight(
                clock.sleepMillis(ms),
                Effect.suspend(() => gated(apply))
              )
            )
          : apply()
      })
    })

  const fencedOutcome = <A extends { readonly state: string }, E>(
    op: WriteOp,
    options: { readonly jobId: JobId; readonly token: number },
    effect: Effect.Effect<A, E>
  ) => write(op, options.jobId, options.token, effect, (job) => ({ res: job.state }))

  return {
    ...inner,
    claim: (options) =>
      write("claim", options.jobId, null, inner.claim(options), (r) => ({
        res: r._tag,
        takeover: r._tag === "Claimed" && r.takeover
      })),
    heartbeat: (options) =>
      write("heartbeat", options.jobId, options.token, inner.heartbeat(options), (r) => ({
        res: r.cancelRequested ? "cancel" : "ok"
      })),
    charge: (options) =>
      write("charge", options.jobId, options.token, inner.charge(options), () => ({ res: "ok" }), {
        callId: options.callId,
        amount: options.amountCents,
        settled: options.settled
      }),
    complete: (options) =>
      write("complete", options.jobId, options.token, inner.complete(options), (job) => ({
        res: job.state,
        resultToken: resultToken(options.result)
      })),
    fail: (options) => fencedOutcome("fail", options, inner.fail(options)),
    retry: (options) => fencedOutcome("retry", options, inner.retry(options)),
    abandon: (options) => fencedOutcome("abandon", options, inner.abandon(options)),
    release: (options) => fencedOutcome("release", options, inner.release(options))
  }
}

const resultToken = (result: unknown): number | null =>
  typeof result === "object" && result !== null && typeof (result as { token?: unknown }).token === "number"
    ? (result as { token: number }).token
    : null
