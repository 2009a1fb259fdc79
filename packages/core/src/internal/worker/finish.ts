/**
 * The end of an attempt whose handler has returned or failed: how it ended (`ending.ts`), the pure decision
 * (`outcome.ts`), and what the decision writes: nothing (the job is handed off), its settlement, or a retry after its
 * delay, each through the one persist step.
 *
 * @internal
 */
import { Effect, Either, type Exit } from "effect"
import { policy as classPolicy } from "../../ErrorClass.js"
import type * as Handler from "../../Handler.js"
import * as Metrics from "../../Metrics.js"
import type { Outcome } from "../../Protocol.js"
import * as Retry from "../../Retry.js"
import { countThen } from "../steps.js"
import { endedOf, estimateEither, evidenceOf } from "./ending.js"
import { type Env, logFor } from "./env.js"
import type { Held } from "./held.js"
import { type Decision, decide } from "./outcome.js"
import { handOff, persist, settleWith } from "./persist.js"

/**
 * Decide and persist the outcome of an attempt whose handler has ended.
 *
 * @internal
 */
export const finish = <R>(
  env: Env<R>,
  held: Held,
  handler: Handler.Handler<any, any, R>,
  input: unknown,
  exit: Exit.Exit<unknown, unknown>
): Effect.Effect<void> =>
  Effect.suspend(() =>
    endedOf(handler, exit, (ended) => {
      const { control, job } = held
      const spentCents = control.knownCostCents
      // The next attempt's estimate: the handler's, else what this attempt spent (the claim applies the full fallback).
      const declared = Either.getOrUndefined(estimateEither(handler, input))
      const decision = decide({
        job,
        ended,
        stop: control.stopReason,
        throttled: control.throttled,
        spentCents,
        nextEstimateCents: declared ?? Math.max(0, spentCents - job.costCents)
      })
      const written = write(env, held, decision)
      if (env.tracer === undefined) return written
      return Effect.zipRight(
        Effect.annotateCurrentSpan({
          "slowcall.decision": decision._tag,
          "slowcall.ended": ended._tag,
          "slowcall.cost_cents": spentCents
        }),
        written
      )
    })
  )

/** What a decision writes: nothing (hand off), its settlement, or a retry after its delay. */
const write = <R>(env: Env<R>, held: Held, decision: Decision): Effect.Effect<void> => {
  switch (decision._tag) {
    case "HandOff":
      return decision.selfFenced
        ? Effect.zipRight(
            logFor(
              env,
              held,
              Effect.logWarning("lease could not be renewed in time; attempt interrupted, nothing committed")
            ),
            handOff(env, held)
          )
        : handOff(env, held)
    case "Settle":
      return persist(env, held, settleWith(env, held, decision.outcome, evidenceOf))
    case "Retry": {
      const { normalized } = decision
      const { job } = held
      return Effect.flatMap(
        Retry.delayFor(normalized, job.attempts - job.attemptsBase, {
          ...classPolicy(normalized.errorClass),
          ...(env.retry?.baseMs !== undefined ? { baseMs: env.retry.baseMs } : {}),
          ...(env.retry?.capMs !== undefined ? { capMs: env.retry.capMs } : {})
        }),
        (delayMs) => {
          const outcome: Outcome = {
            _tag: "Retry",
            delayMs,
            errorClass: normalized.errorClass,
            error: normalized.evidence
          }
          return countThen(Metrics.retries, 1, persist(env, held, settleWith(env, held, outcome, evidenceOf)))
        }
      )
    }
  }
}
