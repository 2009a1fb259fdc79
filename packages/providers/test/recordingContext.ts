/**
 * A `ModelCallContext` that records what a wrapper asked of it: each call's reservation, how it settled (success,
 * error or interrupt) and the amount, and the signal it handed to `fn`. Settles as a job context does: the handler's
 * amount, or the estimate when the handler gave none.
 */
import type { CallTokens, CallUsage } from "@slowcall/core/Handler"
import type { RateLimitInfo } from "@slowcall/core/RateLimit"
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
  /** What the fleet limiter would read: the resource and reservation before the call, usage and limits after it. */
  readonly resource?: string | undefined
  readonly tokens?: CallTokens | undefined
  usage?: CallUsage | undefined
  rateLimit?: RateLimitInfo | undefined
}

export interface RecordingContext extends ModelCallContext {
  readonly calls: ReadonlyArray<CallRecord>
  /** Aborts the job's signal (cancellation or lease loss). */
  abort(): void
  /** Resolves when every started call settled. */
  idle(): Promise<void>
}

/**
 * `settleDelayMs`: how long recording a call's settlement takes after its function returned or threw, as a store
 * round trip does in a worker; a caller that reads the record without waiting for the call sees it unsettled.
 */
export const recordingContext = (options?: { readonly settleDelayMs?: number }): RecordingContext => {
  const settling = () => new Promise<void>((resolve) => setTimeout(resolve, options?.settleDelayMs ?? 0))
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
      const record: CallRecord = { estimateCents: opts.estimateCents, resource: opts.resource, tokens: opts.tokens }
      calls.push(record)
      const own = new AbortController()
      const signal = AbortSignal.any([job.signal, own.signal])
      record.signal = signal
      const run = (async () => {
        try {
          const r = await fn(signal)
          if (options?.settleDelayMs !== undefined) await settling()
          record.outcome = "success"
          record.settledCents = opts.cost ? opts.cost(r) : opts.estimateCents
          // As a context reads them: the span's own usage, else the call's.
          const spanUsage = opts.span?.usage ?? opts.usage
          if (opts.span && spanUsage) {
            const counts = spanUsage(r)
            record.span = {
              system: opts.span.system,
              model: opts.span.model,
              inputTokens: counts?.inputTokens ?? 0,
              outputTokens: counts?.outputTokens ?? 0
            }
          }
          record.usage = opts.usage?.(r)
          record.rateLimit = opts.rateLimit?.(r)
          return r
        } catch (e) {
          if (options?.settleDelayMs !== undefined) await settling()
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
