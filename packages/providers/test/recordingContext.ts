/**
 * A `ModelCallContext` that records what a wrapper asked of it: each call's reservation, how it settled (success,
 * error or interrupt) and the amount, and the signal it handed to `fn`. Settles as a job context does: the handler's
 * amount, or the estimate when the handler gave none.
 */
import type { ModelCallContext } from "../src/ModelCall.js"

export interface CallRecord {
  readonly estimateCents: number
  signal?: AbortSignal
  outcome?: "success" | "error" | "interrupt"
  settledCents?: number
  error?: unknown
  /** What the call's span would carry, read as a tracing context reads it once the call returned. */
  span?: {
    readonly system: string
    readonly model: string
    readonly inputTokens: number
    readonly outputTokens: number
  }
}

export interface RecordingContext extends ModelCallContext {
  readonly calls: ReadonlyArray<CallRecord>
  /** Aborts the job's signal (cancellation or lease loss). */
  abort(): void
  /** Resolves when every started call settled. */
  idle(): Promise<void>
}

export const recordingContext = (): RecordingContext => {
  const job = new AbortController()
  const calls: Array<CallRecord> = []
  const pending = new Set<Promise<unknown>>()
  return {
    signal: job.signal,
    calls,
    abort: () => job.abort(new Error("job cancelled")),
    idle: async () => {
      while (pending.size > 0) await Promise.allSettled([...pending])
    },
    call: (fn, opts) => {
      const record: CallRecord = { estimateCents: opts.estimateCents }
      calls.push(record)
      const own = new AbortController()
      const signal = AbortSignal.any([job.signal, own.signal])
      record.signal = signal
      const run = (async () => {
        try {
          const r = await fn(signal)
          record.outcome = "success"
          record.settledCents = opts.cost ? opts.cost(r) : opts.estimateCents
          if (opts.span) record.span = { system: opts.span.system, model: opts.span.model, ...opts.span.usage(r) }
          return r
        } catch (e) {
          record.error = e
          if (job.signal.aborted) {
            record.outcome = "interrupt"
            record.settledCents = opts.costOnInterrupt?.() ?? opts.estimateCents
          } else {
            record.outcome = "error"
            record.settledCents = opts.costOnError?.(e) ?? opts.estimateCents
          }
          throw e
        }
      })()
      pending.add(run)
      run.then(
        () => pending.delete(run),
        () => pending.delete(run)
      )
      return run
    }
  }
}
