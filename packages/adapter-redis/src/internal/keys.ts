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
 *   `x:s:<state>` and `x:ts:<state>:enc(tenant)` by createdAt, for every state but running (a running job is in
 *   the lease set `x:l` alone, so a claim and its settle move one set; its readers sort the lease set's jobs by
 *   createdAt; a listing of every state merges the five);
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
 *   count and cost per error class and input hash); `ea`, `ea:t:enc(tenant)` (per error class, the number of attempts
 *   that ended with it and the sum of their ledger rows; named apart from the job-level `e` sums of earlier
 *   versions, which they replace).
 * - Beside each dead-letter group's sum, the group's failed jobs by the time they became failed (a sorted set per
 *   group field, same members as above): `x:gj:<field>`, `x:gjt:enc(tenant)<field>`, `x:gjy:enc(type)<field>`,
 *   `x:gjty:enc(tenant)enc(type)<field>`, where `<field>` is the group's field in the sums (`c<class>:<input hash>` or
 *   `n:<input hash>`): a group's latest failure and most recent job ids without a walk over the dead letters.
 * - Batches (`lua/includes/records.lua`): `Q b:<batchId>` (the batch record, `batchFields`), `Q bi:<batchId>` (a list
 *   of its items' job ids in the order they landed) and `Q bk` (batch request keys: tenant and key to batch id). A
 *   batch lives in the slot of its items' queue, which all its items and callbacks share (the queue is given when
 *   the batch is opened), so every script that writes an item writes its batch too; an item's record holds its
 *   batch id (`bt`). A batch id has a route like a job id.
 * - `Q n`: job counts per (state, type), kept by every script that creates, moves or deletes a job (`Query.count`
 *   with a type reads them instead of walking the records): `<state>:enc(type)` (every tenant), and the cells of
 *   that total, `<state>:enc(type)n` (no tenant) and `<state>:enc(type)t enc(tenant)` (no space). A field at 0 is
 *   deleted. The meta hash's field `nc` says the counts cover the whole queue (set by the first insert of a new
 *   queue, or by the Sweeper's recount of a queue stored before they were kept); each sweep checks them against
 *   the state sets and recounts a state whose counts disagree (`lua/sweep.lua`).
 * - `Q rk`: request keys (tenant and key to job id); `Q ev`: the sharded pub/sub channel of the queue's writes.
 * - Fair claims (`includes/fairness.lua`), kept only in a queue whose meta hash has the field `fx` (set by its first
 *   fair claim, which builds them from `x:s:queued`): `x:ft`, the set of tenant codes with queued jobs (`n` for no
 *   tenant, `t<tenant>` otherwise); `x:nr:<priority>` and `x:np`, the no-tenant counterparts of `x:tr:` and `x:tp:`;
 *   `fs`, each tenant code's attained service as `<service>|<store time written>`.
 *
 * Global keys, each in a slot of its own: `<prefix>:queues` (every queue ever submitted to) and
 * `<prefix>:r:{<bucket>}` (64 hashes from job id to queue: how a verb that names only job ids finds their slot).
 *
 * The Limiter's keys all start with `<prefix>:{%limits}:` (one hash tag, one slot, so one script serves a call over
 * any resources; no queue's tag can be `%limits`, since a queue's `%` is escaped): `all` (the set of resources with
 * a record), `r:enc(resource)` (the state hash), `p:enc(resource)` (permits by name) and `e:enc(resource)` (permit
 * names by end). `lua/includes/limits.lua` describes their fields.
 *
 * @internal
 */
import * as Limits from "@slowcall/core/Limits"

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
  groupJobs: "x:gj:",
  tenantGroupJobs: "x:gjt:",
  typeGroupJobs: "x:gjy:",
  tenantTypeGroupJobs: "x:gjty:",
  costs: "ea",
  tenantCosts: "ea:t:",
  keyed: "x:k:",
  waitingTypes: "x:w",
  waiting: "x:wq:",
  tenantWaitingTypes: "x:tw:",
  tenantWaiting: "x:twq:",
  ledger: "x:c",
  tenantLedger: "x:tc:",
  requestKeys: "rk",
  events: "ev",
  fairTenants: "x:ft",
  noTenantReady: "x:nr:",
  noTenantPrios: "x:np",
  fairService: "fs",
  batch: "b:",
  batchItems: "bi:",
  batchKeys: "bk",
  counts: "n"
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
  ["receiveCount", "rc", "n"],
  ["batchId", "bt", "s"]
] as const

/**
 * How a batch record is stored (`Q b:<id>`, a hash): the record's field, the hash field and whether it is a number;
 * the counts are fields named after the states. The callbacks are JSON text (`Callback` with its input as JSON
 * text). A script returns a batch as its id then these fields in this order (false for null).
 *
 * @internal
 */
export const batchFields = [
  ["tenant", "tn", "s"],
  ["requestKey", "rk", "s"],
  ["fingerprint", "fp", "s"],
  ["size", "sz", "n"],
  ["added", "ad", "n"],
  ["queued", "q", "n"],
  ["running", "r", "n"],
  ["succeeded", "s", "n"],
  ["failed", "f", "n"],
  ["abandoned", "a", "n"],
  ["costCents", "co", "n"],
  ["budgetCents", "bu", "n"],
  ["deadlineAt", "dl", "n"],
  ["onComplete", "oc", "s"],
  ["onSuccess", "os", "s"],
  ["onCompleteJobId", "oci", "s"],
  ["onSuccessJobId", "osi", "s"],
  ["parentJobId", "pj", "s"],
  ["cancelRequestedAt", "cx", "n"],
  ["createdAt", "cr", "n"],
  ["updatedAt", "up", "n"],
  ["finishedAt", "fi", "n"]
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

/**
 * The suffixes of the Limiter's keys after `limitsBase`. The Lua scripts read them as the table `LK`.
 *
 * @internal
 */
export const limitSuffix = { all: "all", state: "r:", permits: "p:", ends: "e:" } as const

/**
 * The start of every key of the Limiter: one hash tag for all resources.
 *
 * @internal
 */
export const limitsBase = (prefix: string): string => `${prefix}:{%limits}:`

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
    "-- Generated from src/internal/keys.ts: the key layout, the record's hash fields and the Limiter's keys and",
    "-- defaults (flat tables: a script builds them on every call).",
    `local K = { ${k} }`,
    `local FIELD_NAMES = ${list(jobFields.map(([name]) => name))}`,
    `local FIELD_SHORTS = ${list(jobFields.map(([, short]) => short))}`,
    `local NAME_OF = { ${byShort} }`,
    `local NUMERIC = { ${numeric} }`,
    `local REPLY = ${list(replyFields)}`,
    `local BATCH_NAMES = ${list(batchFields.map(([name]) => name))}`,
    `local BATCH_SHORTS = ${list(batchFields.map(([, short]) => short))}`,
    `local BATCH_NAME_OF = { ${batchFields.map(([name, short]) => `${short} = ${luaString(name)}`).join(", ")} }`,
    `local BATCH_NUMERIC = { ${batchFields.flatMap(([, short, kind]) => (kind === "n" ? [`${short} = true`] : [])).join(", ")} }`,
    `local LK = { ${Object.entries(limitSuffix)
      .map(([name, value]) => `${name} = ${luaString(value)}`)
      .join(", ")} }`,
    `local LIMIT_BURST_SECONDS = ${Limits.defaults.burstSeconds}`,
    `local LIMIT_RETENTION_MS = ${Limits.defaults.permitRetentionMs}`,
    `local LIMIT_RAISE_AFTER = ${Limits.defaults.raiseAfter}`,
    ""
  ].join("\n")
}
