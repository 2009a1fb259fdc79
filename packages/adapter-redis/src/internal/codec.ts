/**
 * Script arguments and replies. Numbers cross as text: JavaScript's `String(n)` on the way in (Lua's `tonumber`
 * reads it back exactly) and `%.17g` on the way out (`Number` reads that back exactly), so every time, amount and
 * progress is the same double on both sides. A job crosses as its id, the `replyFields` of `keys.ts` in order
 * (null for null) and its input and result as JSON text.
 *
 * @internal
 */
import type { ErrorClass } from "@slowcall/core/ErrorClass"
import type { AbandonReason, Attempt, AttemptOutcome, Charge, Job, JobId, JobState, Json } from "@slowcall/core/Job"
import type { SubmitItem } from "@slowcall/core/Protocol"
import { replyFields } from "./keys.js"

/** A raw script reply value (a Lua `true` arrives as the number 1; only `jobReply`'s result slot sends one). */
export type Raw = string | null | ReadonlyArray<Raw>

/** An optional string argument: "-" for null, "+" and the text otherwise. */
export const optString = (value: string | null | undefined): string => (value == null ? "-" : `+${value}`)

/** An optional number argument: "" for null. */
export const optNumber = (value: number | null | undefined): string => (value == null ? "" : String(value))

/** The `now` argument: "" lets the script read the server's clock. */
export const nowArg = (now: number | null | undefined): string => (now == null ? "" : String(now))

const nullableNumber = (value: Raw | undefined): number | null =>
  value === null || value === undefined ? null : Number(value as string)

const text = (value: Raw | undefined): string | null =>
  value === null || value === undefined ? null : (value as string)

const json = (value: Raw | undefined): Json | null =>
  value === null || value === undefined ? null : (JSON.parse(value as string) as Json)

const INDEX = Object.fromEntries(replyFields.map((name, i) => [name, i + 1])) as Record<
  (typeof replyFields)[number],
  number
>

/**
 * A job reply as a `Job` of `queue`. `sentResult` is the result the caller sent with the write that replied: a reply
 * whose result slot is 1 (`jobReply` in `lua/includes/base.lua`) carries that result, not its text.
 *
 * @internal
 */
export const toJob = (queue: string, raw: Raw, sentResult?: Json | null): Job => {
  const r = raw as ReadonlyArray<Raw>
  const at = (name: (typeof replyFields)[number]) => r[INDEX[name]]
  const num = (name: (typeof replyFields)[number]) => Number(at(name) as string)
  const opt = (name: (typeof replyFields)[number]) => nullableNumber(at(name))
  return {
    id: r[0] as JobId,
    queue,
    tenant: text(at("tenant")),
    type: at("type") as string,
    version: num("version"),
    requestKey: text(at("requestKey")),
    inputHash: at("inputHash") as string,
    input: json(r[replyFields.length + 1]),
    inputRef: text(at("inputRef")),
    fingerprint: text(at("fingerprint")),
    state: at("state") as JobState,
    abandonReason: text(at("abandonReason")) as AbandonReason | null,
    attempts: num("attempts"),
    attemptsBase: num("attemptsBase"),
    maxAttempts: num("maxAttempts"),
    leaseToken: num("leaseToken"),
    leaseOwner: text(at("leaseOwner")),
    leaseUntil: opt("leaseUntil"),
    runAfter: num("runAfter"),
    priority: num("priority"),
    deadlineAt: opt("deadlineAt"),
    budgetCents: opt("budgetCents"),
    costCents: num("costCents"),
    errorClass: text(at("errorClass")) as ErrorClass | null,
    lastError: text(at("lastError")),
    progress: num("progress"),
    result:
      sentResult !== undefined && (r[replyFields.length + 2] as unknown) === 1
        ? sentResult
        : json(r[replyFields.length + 2]),
    cancelRequestedAt: opt("cancelRequestedAt"),
    traceId: text(at("traceId")),
    createdAt: num("createdAt"),
    updatedAt: num("updatedAt")
  }
}

/**
 * The attempt rows of a job from its attempts hash (`HGETALL`), in token order.
 *
 * @internal
 */
export const toAttempts = (jobId: JobId, hash: Record<string, string>): ReadonlyArray<Attempt> =>
  Object.entries(hash)
    .map(([token, row]): Attempt => {
      const [worker, startedAt, endedAt, outcome, errorClass, evidence] = JSON.parse(row) as Array<string | null>
      return {
        jobId,
        token: Number(token),
        worker: worker!,
        startedAt: Number(startedAt),
        endedAt: nullableNumber(endedAt),
        outcome: outcome as AttemptOutcome,
        errorClass: (errorClass ?? null) as ErrorClass | null,
        evidence: evidence ?? null
      }
    })
    .sort((a, b) => a.token - b.token)

/**
 * The ledger rows of a job from its charges hash (`HGETALL`), in insertion order.
 *
 * @internal
 */
export const toCharges = (jobId: JobId, hash: Record<string, string>): ReadonlyArray<Charge> =>
  Object.entries(hash)
    .map(([callId, row]) => {
      const [seq, token, amountCents, settled, createdAt, updatedAt] = JSON.parse(row) as Array<string>
      return {
        seq: Number(seq),
        charge: {
          jobId,
          callId,
          token: Number(token),
          amountCents: Number(amountCents),
          settled: settled === "1",
          createdAt: Number(createdAt),
          updatedAt: Number(updatedAt)
        } satisfies Charge
      }
    })
    .sort((a, b) => a.seq - b.seq)
    .map((row) => row.charge)

/**
 * A "count|sum" cell of a sums hash.
 *
 * @internal
 */
export const toSum = (cell: string): { readonly count: number; readonly sum: number } => {
  const bar = cell.indexOf("|")
  return { count: Number(cell.slice(0, bar)), sum: Number(cell.slice(bar + 1)) }
}

/** One submitted item as the submit and batch scripts read it (`lua/includes` decodes the same fifteen fields in this order). */
export const itemArgs = (item: SubmitItem): ReadonlyArray<string> => [
  item.id,
  optString(item.tenant),
  item.type,
  String(item.version),
  optString(item.requestKey),
  item.inputHash,
  JSON.stringify(item.input),
  optString(item.inputRef),
  optNumber(item.priority),
  optNumber(item.delayMs),
  optNumber(item.deadlineAt),
  optNumber(item.budgetCents),
  String(item.maxAttempts),
  optString(item.traceId),
  optString(item.fingerprint)
]
