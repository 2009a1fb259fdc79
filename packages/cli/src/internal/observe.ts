/**
 * The lines a serving process logs about its jobs, read off the Store writes its worker and sweeper make: a failed
 * attempt, a dead letter, an abandoned job (one line each), and what a sweep recovered (expired leases of workers
 * that died, jobs past their deadline). The Store is wrapped, not changed: every write goes through as it was, and
 * its reply is looked at afterwards.
 *
 * @internal
 */
import type { Job } from "@slowcall/core/Job"
import type { Outcome } from "@slowcall/core/Protocol"
import { type SettleItem, type SettleResult, Store, type SweepResult } from "@slowcall/core/Store"
import { Effect, Layer } from "effect"

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`

/** The first line of an error's evidence, cut to a length that fits a log line. */
const brief = (error: string | null | undefined): string => {
  const line = (error ?? "").split("\n")[0]?.trim() ?? ""
  return line.length > 200 ? `${line.slice(0, 199)}…` : line
}

const seconds = (ms: number) => (ms < 1000 ? `${Math.round(ms)} ms` : `${Math.round(ms / 100) / 10} s`)

/** The log entry of one settled attempt, or none for the ones that need no line (successes log at debug). */
const settledLine = (job: Job, outcome: Outcome): Effect.Effect<void> => {
  const attempt = job.attempts - job.attemptsBase
  const who = `job ${job.id} (${job.type})`
  const fields = { jobId: job.id, type: job.type, attempt }
  switch (outcome._tag) {
    case "Complete":
      return Effect.logDebug(`${who} succeeded on attempt ${attempt}`).pipe(Effect.annotateLogs(fields))
    case "Retry":
      return Effect.logWarning(
        `${who} attempt ${attempt} of ${job.maxAttempts} failed: ${outcome.errorClass}; retry in ${seconds(outcome.delayMs)}`,
        brief(outcome.error)
      ).pipe(Effect.annotateLogs({ ...fields, errorClass: outcome.errorClass }))
    case "Fail":
      return Effect.logError(
        `${who} failed: ${outcome.errorClass} on attempt ${attempt} of ${job.maxAttempts}; kept as a dead letter`,
        brief(outcome.error)
      ).pipe(Effect.annotateLogs({ ...fields, errorClass: outcome.errorClass }))
    case "Abandon":
      return (outcome.reason === "cancelled" ? Effect.logInfo : Effect.logWarning)(
        `${who} abandoned: ${outcome.reason}`,
        brief(outcome.error)
      ).pipe(Effect.annotateLogs({ ...fields, reason: outcome.reason }))
    case "Release":
      return Effect.logDebug(`${who} handed back (attempt ${attempt} not counted)`).pipe(Effect.annotateLogs(fields))
    case "Throttle":
      return Effect.logInfo(
        `${who} waits for its provider limit (attempt ${attempt} not counted); runs again in ${seconds(outcome.delayMs)}`,
        brief(outcome.error)
      ).pipe(Effect.annotateLogs(fields))
  }
}

/** The log entries of one sweep: none when it found nothing to do. */
const sweptLines = (result: SweepResult): Effect.Effect<void> => {
  const lines: Array<Effect.Effect<void>> = []
  const expired = result.requeued.length + result.expiredFailed.length
  if (expired > 0) {
    const failed = result.expiredFailed.length
    lines.push(
      Effect.logWarning(
        `recovered ${plural(expired, "expired lease")} (their workers stopped renewing): ` +
          `${plural(result.requeued.length, "job")} queued again` +
          (failed === 0 ? "" : `, ${plural(failed, "job")} out of attempts kept as dead letters`)
      ).pipe(Effect.annotateLogs({ requeued: result.requeued.length, failed }))
    )
  }
  if (result.abandoned.length > 0) {
    lines.push(
      Effect.logWarning(`abandoned ${plural(result.abandoned.length, "queued job")} past their deadline`).pipe(
        Effect.annotateLogs({ abandoned: result.abandoned.length })
      )
    )
  }
  if (result.stale.length > 0) {
    lines.push(Effect.logDebug(`republished ${plural(result.stale.length, "waiting job")}`))
  }
  return Effect.all(lines, { discard: true })
}

/**
 * `store` with a log line after each settle that ended an attempt badly and each sweep that recovered something.
 *
 * @internal
 */
export const observe = (store: Store["Type"]): Store["Type"] => {
  const cycle = store.cycle
  return {
    ...store,
    settle: (options) => Effect.tap(store.settle(options), (reply) => settledLines(options.items, reply.results)),
    sweep: (options) => Effect.tap(store.sweep(options), sweptLines),
    // A cycle's settle part is logged as a settle call is.
    cycle:
      cycle === undefined
        ? undefined
        : (options) => Effect.tap(cycle(options), (reply) => settledLines(options.settle ?? [], reply.settle))
  }
}

/** The log entries of the settlements that ended an attempt badly, item by item. */
const settledLines = (items: ReadonlyArray<SettleItem>, results: ReadonlyArray<SettleResult>): Effect.Effect<void> =>
  Effect.forEach(
    results,
    (result, i) => {
      const item = items[i]
      return result._tag === "Settled" && item !== undefined ? settledLine(result.job, item.outcome) : Effect.void
    },
    { discard: true }
  )

/**
 * The Store of the context, observed: provide it to the worker and the sweeper of a serving process.
 *
 * @internal
 */
export const layer: Layer.Layer<Store, never, Store> = Layer.effect(Store, Effect.map(Store, observe))
