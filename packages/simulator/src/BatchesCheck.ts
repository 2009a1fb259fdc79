/**
 * The batch invariants, pure functions over one run's history (the events `Batches.ts` records):
 *
 * - **I30 counts kept.** At every quiescent point (between two writes the store applies) a batch's kept counts equal
 *   its items' states, and its kept cost their ledgers' sum.
 * - **I31 callbacks once.** At every quiescent point a batch is finished exactly when its items have all landed and
 *   are all terminal, and it names a callback job only once that callback has been due (`onComplete` once every item
 *   was terminal, `onSuccess` once every item had succeeded), the same job from then on. At the end the store holds
 *   exactly one job under each callback the batch names and has been due at some point of the run, none under the
 *   others: a replay that re-opens a finished batch leaves the callbacks it had in place, and its next finish adds none
 *   of them again. Never two jobs under one callback's key.
 * - **I32 cancel stops starts.** No item of a batch is claimed (granted a lease) after the batch's cancel was
 *   acknowledged to the operator.
 * - **I33 batch budget at the claim.** No item is claimed once the batch's spend (its items' ledgers, reservations
 *   included) has reached its budget.
 * - **I35 batch budget at every call.** Between any two writes the store applies, a batch's spend is within its
 *   budget once what its calls were billed above their estimates is left out (each settled ledger row counted at no
 *   more than its call's estimate): every call of every item reserved its estimate against the batch's budget, items
 *   running at once included, so the budget is passed only by what the provider billed beyond an estimate. With calls
 *   billed at their estimates, the spend never passes the budget at all.
 *
 * @since 0.8.0
 */
import type { BatchEvent, Event } from "./History.js"
import type { Plan } from "./Plan.js"

/**
 * One broken batch invariant (the shape of `Checkers.Violation`).
 *
 * @since 0.8.0
 * @category models
 */
export interface BatchViolation {
  readonly invariant: "I30" | "I31" | "I32" | "I33" | "I35"
  readonly jobId: string | null
  readonly message: string
  readonly witness: ReadonlyArray<Event>
}

type BState = Extract<BatchEvent, { k: "bstate" }>

const same = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): boolean =>
  a.length === b.length && a.every((n, i) => n === b[i])

/** Whether every item of the batch has landed and none is queued or running, by its items' own states. */
const isComplete = (state: BState): boolean => {
  const [queued = 0, running = 0] = state.actual
  const landed = state.actual.reduce((sum, n) => sum + n, 0)
  return landed === state.size && state.added === state.size && queued === 0 && running === 0
}

/** Whether no item of the batch has failed or been abandoned. */
const allSucceeded = (state: BState): boolean => {
  const [, , , failed = 0, abandoned = 0] = state.actual
  return failed === 0 && abandoned === 0
}

/**
 * Checks I30 to I33 and I35 on one run's history.
 *
 * @since 0.8.0
 * @category combinators
 */
export const check = (events: ReadonlyArray<Event>, plan: Plan): ReadonlyArray<BatchViolation> => {
  const violations: Array<BatchViolation> = []
  if ((plan.batches ?? []).length === 0) return violations
  const lastState = new Map<string, BState>()
  /** The batches that were complete at some checkpoint, and those complete with every item succeeded. */
  const everComplete = new Set<string>()
  const everSucceeded = new Set<string>()
  const cancelled = new Map<string, Event>()
  for (const e of events) {
    switch (e.k) {
      case "bstate": {
        const before = lastState.get(e.batchId)
        lastState.set(e.batchId, e)
        const complete = isComplete(e)
        if (complete) {
          everComplete.add(e.batchId)
          if (allSucceeded(e)) everSucceeded.add(e.batchId)
        }
        const problem = (message: string) =>
          violations.push({
            invariant: "I31",
            jobId: null,
            message: `batch ${e.batchId} at ${e.t}: ${message}`,
            witness: before === undefined ? [e] : [before, e]
          })
        if (complete !== e.finished) problem(complete ? "every item terminal, not finished" : "finished early")
        for (const kind of ["onComplete", "onSuccess"] as const) {
          const named = before?.[kind] ?? null
          const due = (kind === "onComplete" ? everComplete : everSucceeded).has(e.batchId)
          if (named === null && e[kind] !== null && !due) problem(`${kind} job ${e[kind]} enqueued before it was due`)
          if (named !== null && e[kind] !== named) problem(`${kind} job ${named} replaced by ${e[kind]}`)
        }
        if (!same(e.counts, e.actual) || Math.abs(e.cost - e.actualCost) > 1e-9) {
          violations.push({
            invariant: "I30",
            jobId: null,
            message: `batch ${e.batchId} keeps counts [${e.counts.join(",")}] and cost ${e.cost}, its items say [${e.actual.join(",")}] and ${e.actualCost}`,
            witness: [e]
          })
        }
        break
      }
      case "batch":
        if (e.what === "cancel" && e.ok && !cancelled.has(e.batchId)) cancelled.set(e.batchId, e)
        break
      case "bclaim": {
        const cancel = cancelled.get(e.batchId)
        if (cancel !== undefined) {
          violations.push({
            invariant: "I32",
            jobId: e.jobId,
            message: `item ${e.jobId} of batch ${e.batchId} claimed at ${e.t} after the cancel was acknowledged at ${cancel.t}`,
            witness: [cancel, e]
          })
        }
        if (e.budget !== null && e.spent >= e.budget) {
          violations.push({
            invariant: "I33",
            jobId: e.jobId,
            message: `item ${e.jobId} of batch ${e.batchId} claimed with ${e.spent}c spent of a ${e.budget}c budget`,
            witness: [e]
          })
        }
        break
      }
      case "bspend":
        if (e.reserved > e.budget + 1e-9) {
          violations.push({
            invariant: "I35",
            jobId: null,
            message: `batch ${e.batchId} has ${e.reserved}c reserved or spent within its calls' estimates (${e.spent}c in all) against a ${e.budget}c budget`,
            witness: [e]
          })
        }
        break
      case "bfinal": {
        const state = lastState.get(e.batchId)
        const witness: Array<Event> = state === undefined ? [e] : [state, e]
        const problem = (message: string) =>
          violations.push({ invariant: "I31", jobId: null, message: `batch ${e.batchId}: ${message}`, witness })
        if (e.onCompleteJobs > 1 || e.onSuccessJobs > 1) {
          problem(`${e.onCompleteJobs} onComplete and ${e.onSuccessJobs} onSuccess jobs`)
          break
        }
        if (state === undefined) break
        const wantComplete = everComplete.has(e.batchId) && e.names.includes("onComplete") ? 1 : 0
        const wantSuccess = everSucceeded.has(e.batchId) && e.names.includes("onSuccess") ? 1 : 0
        if (e.onCompleteJobs !== wantComplete) problem(`${e.onCompleteJobs} onComplete jobs, ${wantComplete} due`)
        if (e.onSuccessJobs !== wantSuccess) problem(`${e.onSuccessJobs} onSuccess jobs, ${wantSuccess} due`)
        break
      }
    }
  }
  return violations
}
