/**
 * The one key builder of the adapter. Every key of a queue starts with `<prefix>:{<queue>}:` so all of them share
 * the queue's hash tag and live in one Cluster slot: each script touches that slot only. The Lua scripts get the
 * same layout from here (`luaKeys`, spliced into every script at load time), so the names exist once.
 *
 * Layout (`Q` = `<prefix>:{<queue>}:`, `enc(s)` = `<length>:<s>`, so a tenant or type in a name is never ambiguous):
 * - `Q m`: the queue's meta hash (insertion counter); the first declared key of every queue script.
 * - `Q j:<id>`: the job record (a hash of short fields, `jobFields`); `Q d:<id>`: its input and result (the part
 *   that expires after the retention); `Q a:<id>`: attempt rows by token; `Q c:<id>`: ledger rows by call id.
 * - Sorted sets over members `<12-digit insertion counter><id>` (equal scores keep insertion order):
 *   `x:s:<state>` and `x:ts:<state>:enc(tenant)` by createdAt (a listing of every state merges the five);
 *   `x:r:<priority>` (queued jobs by runAfter) with `x:p` (the priorities that have queued jobs), and per tenant
 *   `x:tr:<priority>:enc(tenant)` with `x:tp:enc(tenant)`; `x:v:<priority>` (queued jobs by the time a transport
 *   may deliver them); `x:l` (running jobs by lease end); `x:dq` (queued jobs by deadline); `x:tt` (queued jobs by
 *   last touch); `x:dl` and `x:tdl:enc(tenant)` (failed jobs by updatedAt); `x:fa` and `x:tfa:enc(tenant)`
 *   (failed jobs by the time they became failed); `x:k:enc(requestKey)` (the jobs submitted under a request key,
 *   every state, by createdAt); `x:wq:<version>:<type>` and `x:twq:enc(tenant)<version>:<type>` (queued jobs of one
 *   type and version by runAfter) with the sets `x:w` and `x:tw:enc(tenant)` of the `<version>:<type>` pairs that
 *   have queued jobs; `x:c` and `x:tc:enc(tenant)` (ledger rows, members `enc(jobId)<callId>`, by the time the
 *   call started).
 * - Hashes of sums: `g`, `g:t:enc(tenant)`, `g:y:enc(type)`, `g:ty:enc(tenant)enc(type)` (dead-letter groups:
 *   count and cost per error class and input hash); `e`, `e:t:enc(tenant)` (count and cost per error class).
 * - `Q rk`: request keys (tenant and key to job id); `Q ev`: the sharded pub/sub channel of the queue's writes.
 *
 * Global keys, each in a slot of its own: `<prefix>:queues` (every queue ever submitted to) and
 * `<prefix>:r:{<bucket>}` (64 hashes from job id to queue: how a verb that names only job ids finds their slot).
 *
 * @internal
 */

/**
 * The suffixes after a queue's prefix, by name. The Lua scripts read them as the table `K`.
 *
 * @internal
 */
export const suffix = {
  meta: "m",
  job: "j:",
  data: "d:",
  attempts: "a:",
  charges: "c:",
  state: "x:s:",
  tenantState: "x:ts:",
  ready: "x:r:",
  prios: "x:p",
  tenantReady: "x:tr:",
  tenantPrios: "x:tp:",
  visible: "x:v:",
  lease: "x:l",
  deadline: "x:dq",
  touch: "x:tt",
  dead: "x:dl",
  tenantDead: "x:tdl:",
  failed: "x:fa",
  tenantFailed: "x:tfa:",
  groups: "g",
  tenantGroups: "g:t:",
  typeGroups: "g:y:",
  tenantTypeGroups: "g:ty:",
  costs: "e",
  tenantCosts: "e:t:",
  keyed: "x:k:",
  waitingTypes: "x:w",
  waiting: "x:wq:",
  tenantWaitingTypes: "x:tw:",
  tenantWaiting: "x:twq:",
  ledger: "x:c",
  tenantLedger: "x:tc:",
  requestKeys: "rk",
  events: "ev"
} as const

/**
 * How a job record is stored: the record's field, the hash field that holds it, and whether it is a number. `seq`,
 * `failedAt`, `republishedAt`, `visibleAt` and `receiveCount` are the store's own marks, not part of the record.
 * An absent hash field is null.
 *
 * @internal
 */
export const jobFields = [
  ["tenant", "tn", "s"],
  ["type", "ty", "s"],
  ["version", "v", "n"],
  ["requestKey", "rk", "s"],
  ["inputHash", "ih", "s"],
  ["inputRef", "ir", "s"],
  ["fingerprint", "fp", "s"],
  ["state", "st", "s"],
  ["abandonReason", "ar", "s"],
  ["attempts", "at", "n"],
  ["attemptsBase", "ab", "n"],
  ["maxAttempts", "ma", "n"],
  ["leaseToken", "tk", "n"],
  ["leaseOwner", "lo", "s"],
  ["leaseUntil", "lu", "n"],
  ["runAfter", "ra", "n"],
  ["priority", "pr", "n"],
  ["deadlineAt", "da", "n"],
  ["budgetCents", "bc", "n"],
  ["costCents", "cc", "n"],
  ["errorClass", "ec", "s"],
  ["lastError", "le", "s"],
  ["progress", "pg", "n"],
  ["cancelRequestedAt", "ca", "n"],
  ["traceId", "tr", "s"],
  ["createdAt", "cr", "n"],
  ["updatedAt", "up", "n"],
  ["seq", "sq", "n"],
  ["failedAt", "fa", "n"],
  ["republishedAt", "rp", "n"],
  ["visibleAt", "vi", "n"],
  ["receiveCount", "rc", "n"]
] as const

/**
 * The record fields a script returns for a job, in this order, after the id and before the input and the result.
 *
 * @internal
 */
export const replyFields = [
  "tenant",
  "type",
  "version",
  "requestKey",
  "inputHash",
  "inputRef",
  "fingerprint",
  "state",
  "abandonReason",
  "attempts",
  "attemptsBase",
  "maxAttempts",
  "leaseToken",
  "leaseOwner",
  "leaseUntil",
  "runAfter",
  "priority",
  "deadlineAt",
  "budgetCents",
  "costCents",
  "errorClass",
  "lastError",
  "progress",
  "cancelRequestedAt",
  "traceId",
  "createdAt",
  "updatedAt"
] as const

/** A string embedded in a key name, length first, so that no two (tenant, type) pairs give one name. */
export const enc = (value: string): string => `${value.length}:${value}`

const PREFIX = /^[^{}]+$/

/**
 * Checks a key prefix: any non-empty string without braces (a brace would change the hash tag).
 *
 * @internal
 */
export const checkPrefix = (prefix: string): string => {
  if (!PREFIX.test(prefix)) throw new Error(`invalid Redis key prefix ${JSON.stringify(prefix)}: no braces allowed`)
  return prefix
}

/** The queue name inside its hash tag: braces and `%` escaped, so the tag is always exactly the queue. */
const tagOf = (queue: string): string =>
  queue.replace(/[{}%]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)

/** The number of route buckets. */
export const ROUTE_BUCKETS = 64

/** FNV-1a over the id's UTF-16 code units, to pick a route bucket. */
const bucketOf = (jobId: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < jobId.length; i++) {
    h ^= jobId.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h % ROUTE_BUCKETS
}

/**
 * The keys of one prefix.
 *
 * @internal
 */
export interface Keys {
  readonly prefix: string
  /** `<prefix>:{<queue>}:`, the start of every key of the queue. */
  readonly queueBase: (queue: string) => string
  /** The queue's meta hash: the first declared key of every queue script. */
  readonly meta: (queue: string) => string
  readonly job: (queue: string, jobId: string) => string
  readonly attempts: (queue: string, jobId: string) => string
  readonly charges: (queue: string, jobId: string) => string
  readonly data: (queue: string, jobId: string) => string
  readonly events: (queue: string) => string
  /** The set of every queue ever submitted to. */
  readonly queues: string
  /** The route bucket of a job id. */
  readonly route: (jobId: string) => string
}

/**
 * The key builder for `prefix`.
 *
 * @internal
 */
export const make = (prefix: string): Keys => {
  checkPrefix(prefix)
  const queueBase = (queue: string) => `${prefix}:{${tagOf(queue)}}:`
  return {
    prefix,
    queueBase,
    meta: (queue) => queueBase(queue) + suffix.meta,
    job: (queue, jobId) => queueBase(queue) + suffix.job + jobId,
    attempts: (queue, jobId) => queueBase(queue) + suffix.attempts + jobId,
    charges: (queue, jobId) => queueBase(queue) + suffix.charges + jobId,
    data: (queue, jobId) => queueBase(queue) + suffix.data + jobId,
    events: (queue) => queueBase(queue) + suffix.events,
    queues: `${prefix}:queues`,
    route: (jobId) => `${prefix}:r:{${bucketOf(jobId)}}`
  }
}

const luaString = (value: string): string => JSON.stringify(value)

/**
 * The Lua view of this module: the table `K` of suffixes, the record's hash fields (`FIELD_NAMES` and
 * `FIELD_SHORTS` in order, `NAME_OF` a short name's field, `NUMERIC` the numeric short names) and the reply order
 * (`REPLY`). Spliced into every script before its includes.
 *
 * @internal
 */
export const luaKeys = (): string => {
  const k = Object.entries(suffix)
    .map(([name, value]) => `${name} = ${luaString(value)}`)
    .join(", ")
  const list = (values: ReadonlyArray<string>) => `{ ${values.map(luaString).join(", ")} }`
  const byShort = jobFields.map(([name, short]) => `${short} = ${luaString(name)}`).join(", ")
  const numeric = jobFields.flatMap(([, short, kind]) => (kind === "n" ? [`${short} = true`] : [])).join(", ")
  return [
    "-- Generated from src/internal/keys.ts: the key layout and the record's hash fields (flat tables: a script",
    "-- builds them on every call).",
    `local K = { ${k} }`,
    `local FIELD_NAMES = ${list(jobFields.map(([name]) => name))}`,
    `local FIELD_SHORTS = ${list(jobFields.map(([, short]) => short))}`,
    `local NAME_OF = { ${byShort} }`,
    `local NUMERIC = { ${numeric} }`,
    `local REPLY = ${list(replyFields)}`,
    ""
  ].join("\n")
}
