/**
 * The chaos harness's verdict: what the client was told, what the Store says, what the model server billed and which
 * faults were injected, set against each other. Pure data in, one report out, so the checks are tested on their own
 * (`test/ChaosCheck.test.ts`) with ledgers that must turn them red.
 *
 * - lost: a job the client was acknowledged (a 200/202 with its id) that the Store no longer has.
 * - stuck: an acknowledged job not in a terminal state when the run ends.
 * - double generation: a second (third, ...) billed model call of one job. It is excused only when a fault that can
 *   end the lease of the earlier call's holder (a SIGKILL or a pause of that process, a cut, black-holed or stalled
 *   connection of that process, the database down) began between that call's start (less `slackMs`, for a renewal
 *   already in flight) and the next call's start, or when its holder itself reported that attempt cut short
 *   (`cutShort`: its lease not renewed in time, or its call timed out, on a machine too busy to keep up); otherwise
 *   the Store let two holders generate: unexcused.
 * - under-counted: a job whose spend in the Store is below what the model server billed for it.
 * - duplicates: the jobs beyond the first that share one idempotency key.
 * - stale settlements: a succeeded job whose result was written under a lease token older than the last one the
 *   model billed for it: a holder whose lease had been taken over settled anyway (the settle was not fenced).
 * - acked before stored: a job whose message the transport saw acknowledged (deleted) before the job's outcome was
 *   stored (its terminal attempt's end, store time, more than `ackSlackMs` later): a worker acked before persisting.
 *   Only a transport that delivers messages (SQS) acks; a correct worker acks a message only for a job already
 *   settled (its own write, or a duplicate delivery of a settled job).
 */

/** One call the model server received and billed. */
export interface LedgerEntry {
  readonly jobId: string
  readonly token: number
  readonly pid: number
  readonly costCents: number
  /** Harness clock, ms. */
  readonly startedAt: number
}

/** A fault as injected. `pid` undefined: every process was hit (the database or the emulator was down). */
export interface FaultRecord {
  readonly kind: FaultKind
  readonly pid?: number | undefined
  readonly at: number
  readonly until?: number | undefined
}

/** The faults the harness injects. */
export type FaultKind =
  | "kill"
  | "term"
  | "pause"
  | "db-outage"
  | "sqs-restart"
  | "connection-reset"
  | "blackhole"
  | "stall"

/** The faults that can end a lease holder's lease before it settles. */
export const leaseEnding: ReadonlySet<FaultKind> = new Set([
  "kill",
  "pause",
  "connection-reset",
  "blackhole",
  "db-outage",
  "stall"
])

/** One idempotency key as the client saw it. */
export interface Submission {
  readonly key: string
  /** Every job id a 200/202 carried for this key (one, when the server keeps its promise). */
  readonly acknowledgedIds: ReadonlyArray<string>
}

/** One job as the Store reports it at the end. */
export interface StoredJob {
  readonly id: string
  readonly state: string
  readonly costCents: number
  /** The lease token the stored result says it was made under, when the job type records it. */
  readonly resultToken?: number | undefined
  /** When the attempt that ended the job ended (store time on the harness clock, ms), when it is known. */
  readonly terminalAt?: number | undefined
}

/** A message the transport saw acknowledged (deleted), at harness clock ms. */
export interface Ack {
  readonly jobId: string
  readonly at: number
}

/** Everything the checks read. */
export interface Observations {
  readonly backend: string
  readonly seed: number
  readonly submissions: ReadonlyArray<Submission>
  /** The Store's jobs per idempotency key (from `GET /v1/jobs?requestKey=`). */
  readonly jobsByKey: ReadonlyMap<string, ReadonlyArray<StoredJob>>
  /** Acknowledged job ids the Store answered 404 for. */
  readonly missingIds: ReadonlySet<string>
  readonly ledger: ReadonlyArray<LedgerEntry>
  readonly faults: ReadonlyArray<FaultRecord>
  /** ms: how far before a call a lease-ending fault may begin and still excuse it. */
  readonly slackMs?: number | undefined
  /** The longest a model call may take (the handler's timeout), ms: a call killed within it is in flight. */
  readonly callMaxMs?: number | undefined
  /**
   * The attempts (`jobId:token`) their holder reported cut short in its log: the lease could not be renewed in time,
   * or the model call timed out. The job's next call is then a retry or a takeover the holder knew of.
   */
  readonly cutShort?: ReadonlySet<string> | undefined
  /** Every message the transport saw acknowledged (none when the Store is the transport). */
  readonly acks?: ReadonlyArray<Ack> | undefined
  /** ms: how much earlier than its job's outcome an ack may be seen and still count as after it (clock reads). */
  readonly ackSlackMs?: number | undefined
}

/** The harness's one-line result. */
export interface Report {
  readonly backend: string
  readonly seed: number
  readonly submitted: number
  readonly acknowledged: number
  readonly terminal: number
  readonly lost: number
  readonly stuck: number
  readonly modelCalls: number
  readonly doubleGenerations: { readonly excused: number; readonly unexcused: number }
  readonly storeSpendCents: number
  readonly providerLedgerCents: number
  readonly underCounted: number
  readonly duplicateJobsPerKey: number
  readonly staleSettlements: number
  readonly ackedBeforeStored: number
  readonly recovery: { readonly p50Ms: number | null; readonly maxMs: number | null; readonly samples: number }
  readonly faults: Readonly<Record<string, number>>
}

const terminalStates = new Set(["succeeded", "failed", "abandoned"])

const percentile = (sorted: ReadonlyArray<number>, p: number): number | null =>
  sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!

/** Whether a lease-ending fault hit `pid` (or every process) in `[from, to]`. */
const hitBetween = (faults: ReadonlyArray<FaultRecord>, pid: number, from: number, to: number): boolean =>
  faults.some(
    (fault) =>
      leaseEnding.has(fault.kind) &&
      (fault.pid === undefined || fault.pid === pid) &&
      fault.at <= to &&
      (fault.until ?? fault.at) >= from
  )

/** The calls of the ledger grouped by job, each group in start order. */
const callsByJob = (ledger: ReadonlyArray<LedgerEntry>): Map<string, Array<LedgerEntry>> => {
  const out = new Map<string, Array<LedgerEntry>>()
  for (const entry of ledger) {
    const calls = out.get(entry.jobId) ?? []
    calls.push(entry)
    out.set(entry.jobId, calls)
  }
  for (const calls of out.values()) calls.sort((a, b) => a.startedAt - b.startedAt)
  return out
}

/**
 * Recovery after each SIGKILL: for every job whose call was in flight in the killed process (started at most
 * `callMaxMs` before the kill), the time from the kill to that job's next call by another process.
 */
export const recoveries = (
  ledger: ReadonlyArray<LedgerEntry>,
  faults: ReadonlyArray<FaultRecord>,
  callMaxMs: number
): Array<number> => {
  const byJob = callsByJob(ledger)
  const out: Array<number> = []
  for (const kill of faults) {
    if (kill.kind !== "kill" || kill.pid === undefined) continue
    for (const calls of byJob.values()) {
      let index = -1
      while (index + 1 < calls.length && calls[index + 1]!.startedAt <= kill.at) index += 1
      const held = calls[index]
      if (held === undefined || held.pid !== kill.pid || held.startedAt < kill.at - callMaxMs) continue
      const next = calls[index + 1]
      if (next !== undefined) out.push(next.startedAt - kill.at)
    }
  }
  return out.sort((a, b) => a - b)
}

/** The checks over one run's observations. */
export const check = (observations: Observations): Report => {
  const slackMs = observations.slackMs ?? 2_000
  const acknowledged = observations.submissions.filter((s) => s.acknowledgedIds.length > 0)
  const storedById = new Map<string, StoredJob>()
  let duplicateJobsPerKey = 0
  for (const [key, jobs] of observations.jobsByKey) {
    for (const job of jobs) storedById.set(job.id, job)
    duplicateJobsPerKey += Math.max(0, jobs.length - 1)
    const submission = observations.submissions.find((s) => s.key === key)
    // Two different ids acknowledged for one key is a duplicate even when the Store kept only one of them.
    if (submission !== undefined) {
      const extra = new Set(submission.acknowledgedIds).size - 1 - Math.max(0, jobs.length - 1)
      duplicateJobsPerKey += Math.max(0, extra)
    }
  }
  let lost = 0
  let stuck = 0
  let terminal = 0
  for (const submission of acknowledged) {
    for (const id of new Set(submission.acknowledgedIds)) {
      const job = storedById.get(id)
      if (job === undefined || observations.missingIds.has(id)) lost += 1
      else if (terminalStates.has(job.state)) terminal += 1
      else stuck += 1
    }
  }
  const byJob = callsByJob(observations.ledger)
  let excused = 0
  let unexcused = 0
  let underCounted = 0
  let staleSettlements = 0
  for (const [jobId, calls] of byJob) {
    for (let i = 1; i < calls.length; i++) {
      const earlier = calls[i - 1]!
      if (
        observations.cutShort?.has(`${jobId}:${earlier.token}`) === true ||
        hitBetween(observations.faults, earlier.pid, earlier.startedAt - slackMs, calls[i]!.startedAt)
      ) {
        excused += 1
      } else unexcused += 1
    }
    const billed = calls.reduce((sum, call) => sum + call.costCents, 0)
    const stored = storedById.get(jobId)
    if (stored === undefined || stored.costCents < billed) underCounted += 1
    const lastToken = Math.max(...calls.map((call) => call.token))
    if (stored?.state === "succeeded" && stored.resultToken !== undefined && stored.resultToken < lastToken) {
      staleSettlements += 1
    }
  }
  const ackSlackMs = observations.ackSlackMs ?? 1_000
  const ackedEarly = new Set<string>()
  for (const ack of observations.acks ?? []) {
    const terminalAt = storedById.get(ack.jobId)?.terminalAt
    if (terminalAt !== undefined && ack.at + ackSlackMs < terminalAt) ackedEarly.add(ack.jobId)
  }
  const faults: Record<string, number> = {}
  for (const fault of observations.faults) faults[fault.kind] = (faults[fault.kind] ?? 0) + 1
  const recovered = recoveries(observations.ledger, observations.faults, observations.callMaxMs ?? 5_000)
  return {
    backend: observations.backend,
    seed: observations.seed,
    submitted: observations.submissions.length,
    acknowledged: acknowledged.length,
    terminal,
    lost,
    stuck,
    modelCalls: observations.ledger.length,
    doubleGenerations: { excused, unexcused },
    storeSpendCents: [...storedById.values()].reduce((sum, job) => sum + job.costCents, 0),
    providerLedgerCents: observations.ledger.reduce((sum, call) => sum + call.costCents, 0),
    underCounted,
    duplicateJobsPerKey,
    staleSettlements,
    ackedBeforeStored: ackedEarly.size,
    recovery: { p50Ms: percentile(recovered, 0.5), maxMs: recovered.at(-1) ?? null, samples: recovered.length },
    faults
  }
}

/** What turns a run red, one line each; empty when it is green. */
export const failures = (report: Report): Array<string> => {
  const out: Array<string> = []
  if (report.lost > 0) out.push(`${report.lost} acknowledged job(s) lost`)
  if (report.stuck > 0) out.push(`${report.stuck} job(s) stuck outside a terminal state`)
  if (report.doubleGenerations.unexcused > 0) {
    out.push(`${report.doubleGenerations.unexcused} double generation(s) no fault excuses`)
  }
  if (report.underCounted > 0) out.push(`${report.underCounted} job(s) whose Store spend is below the model's bill`)
  if (report.duplicateJobsPerKey > 0) out.push(`${report.duplicateJobsPerKey} duplicate job(s) for one key`)
  if (report.staleSettlements > 0) {
    out.push(`${report.staleSettlements} job(s) settled by a holder whose lease had been taken over`)
  }
  if (report.ackedBeforeStored > 0) {
    out.push(`${report.ackedBeforeStored} job(s) whose message was acked before their outcome was stored`)
  }
  return out
}
