/**
 * The recorded history of one simulated run: ground truth written by the world (store proxies, transport
 * proxies, the simulated model, the run's driver), never by the code under test. Events carry virtual time only
 * (no fiber ids, no wall-clock times), so the same plan always yields the same serialized history.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import type { AbandonReason, Job, JobState } from "@slowcall/core/Models"

/**
 * What the history keeps of a job record around a write.
 *
 * @since 0.1.0
 * @category models
 */
export interface Snap {
  readonly state: JobState
  readonly token: number
  readonly attempts: number
  readonly attemptsBase: number
  readonly maxAttempts: number
  readonly leaseOwner: string | null
  readonly leaseUntil: number | null
  readonly runAfter: number
  readonly updatedAt: number
  readonly costCents: number
  readonly budgetCents: number | null
  readonly abandonReason: AbandonReason | null
}

/**
 * The snapshot of a job record.
 *
 * @since 0.1.0
 * @category constructors
 */
export const snap = (job: Job): Snap => ({
  state: job.state,
  token: job.leaseToken,
  attempts: job.attempts,
  attemptsBase: job.attemptsBase,
  maxAttempts: job.maxAttempts,
  leaseOwner: job.leaseOwner,
  leaseUntil: job.leaseUntil,
  runAfter: job.runAfter,
  updatedAt: job.updatedAt,
  costCents: job.costCents,
  budgetCents: job.budgetCents,
  abandonReason: job.abandonReason
})

/**
 * Store verbs the proxies record.
 *
 * @since 0.1.0
 * @category models
 */
export type WriteOp = "claim" | "heartbeat" | "charge" | "complete" | "fail" | "retry" | "abandon" | "release"

/**
 * One event of a run. `t` is true virtual time in ms; `who` names a worker incarnation (`w1.2`: slot 1, second
 * start), `client`, `sweeper` or `operator`.
 *
 * @since 0.1.0
 * @category models
 */
export type Event =
  | {
      readonly k: "submit"
      readonly t: number
      readonly key: string
      readonly hash: string
      readonly ok: boolean
      readonly jobId: string | null
      readonly created: boolean | null
      readonly error: string | null
    }
  | {
      readonly k: "write"
      readonly t: number
      /** When the caller issued the write (before any injected delay). */
      readonly start: number
      readonly op: WriteOp
      readonly who: string
      readonly jobId: string
      readonly token: number | null
      readonly ok: boolean
      /** Claim result tag, or the error tag of a rejected write. */
      readonly res: string
      readonly takeover: boolean
      readonly before: Snap | null
      readonly after: Snap | null
      /** Charge details. */
      readonly callId: string | null
      readonly amount: number | null
      readonly settled: boolean | null
      /** The committed result's claim token (complete only). */
      readonly resultToken: number | null
    }
  | {
      readonly k: "call"
      readonly t: number
      readonly end: number
      readonly who: string
      readonly jobId: string
      readonly token: number
      readonly callId: string
      /** What the provider billed for this call (ground truth). */
      readonly cents: number
      readonly outcome: "ok" | "retryable" | "permanent" | "rate_limited" | "timeout_billed"
      /** Spend and budget of the job in the store when the call started. */
      readonly spentAtStart: number
      readonly budget: number | null
      readonly attemptsAtStart: number
      readonly maxAttempts: number
    }
  | {
      readonly k: "msg"
      readonly t: number
      readonly op: "publish" | "receive" | "ack" | "extend" | "defer"
      readonly who: string
      readonly jobId: string
      readonly receipt: string | null
      readonly count: number | null
      /** The job at that moment (ack: what I9 checks). */
      readonly state: JobState | null
      readonly owner: string | null
    }
  | { readonly k: "fault"; readonly t: number; readonly id: string; readonly who: string; readonly point: string }
  | {
      readonly k: "life"
      readonly t: number
      readonly who: string
      readonly what: "start" | "crash" | "pause" | "shutdown" | "heal"
      readonly ms: number | null
    }
  | {
      readonly k: "op"
      readonly t: number
      readonly what: "cancel" | "replay"
      readonly jobId: string
      readonly ok: boolean
      readonly before: JobState | null
    }
  | { readonly k: "phase"; readonly t: number; readonly name: "heal" | "replay" | "final" }
  | { readonly k: "final"; readonly t: number; readonly jobId: string; readonly snap: Snap; readonly ledger: number }

/**
 * An append-only event log. Invariant: events are appended in the order the run performed them.
 *
 * @since 0.1.0
 * @category models
 */
export class History {
  readonly events: Array<Event> = []
  push(event: Event): void {
    this.events.push(event)
  }
}

/**
 * A stable 64-bit hash of a history, as 16 hex characters: every event's fields in order, with their names, types
 * and values (numbers by their exact bits), so equal histories hash equal and any difference in any field changes the
 * hash with overwhelming likelihood. Not a cryptographic digest: it detects divergence between replays, cheaply (it
 * runs once per simulated run and builds no string of the history).
 *
 * @since 0.1.0
 * @category combinators
 */
export const hashEvents = (events: ReadonlyArray<Event>): string => {
  const hasher = new Hasher()
  hasher.int(events.length)
  for (const event of events) hasher.value(event)
  return hasher.digest()
}

const float = new Float64Array(1)
const floatBits = new Int32Array(float.buffer)
const keyCodes = new Map<string, number>()

/** Two 32-bit multiply-xor lanes with different constants, mixed at the end (murmur3's finaliser). */
class Hasher {
  private a = 0x811c9dc5 | 0
  private b = 0x3c6ef372 | 0

  int(n: number): void {
    this.a = Math.imul(this.a ^ n, 0x01000193)
    this.b = Math.imul(this.b ^ n, 0x5bd1e995)
    this.b ^= this.b >>> 13
  }

  string(text: string): void {
    this.int(text.length)
    for (let i = 0; i < text.length; i++) this.int(text.charCodeAt(i))
  }

  key(name: string): void {
    let code = keyCodes.get(name)
    if (code === undefined) {
      const lane = new Hasher()
      lane.string(name)
      code = lane.a ^ lane.b
      keyCodes.set(name, code)
    }
    this.int(code)
  }

  value(value: unknown): void {
    switch (typeof value) {
      case "number":
        float[0] = value
        this.int(0x4e)
        this.int(floatBits[0]!)
        this.int(floatBits[1]!)
        return
      case "string":
        this.int(0x53)
        this.string(value)
        return
      case "boolean":
        this.int(value ? 0x54 : 0x46)
        return
      case "undefined":
        this.int(0x55)
        return
      case "object":
        if (value === null) {
          this.int(0x4c)
        } else if (Array.isArray(value)) {
          this.int(0x41)
          this.int(value.length)
          for (const item of value) this.value(item)
        } else {
          this.int(0x4f)
          const record = value as Record<string, unknown>
          for (const name in record) {
            this.key(name)
            this.value(record[name])
          }
          this.int(0x7d)
        }
        return
      default:
        this.int(0x3f)
        this.string(String(value))
    }
  }

  digest(): string {
    const hex = (lane: number) => (fmix(lane) >>> 0).toString(16).padStart(8, "0")
    return hex(this.a ^ this.b) + hex(this.b)
  }
}

const fmix = (h0: number): number => {
  let h = h0
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  return h ^ (h >>> 16)
}

/**
 * Folds per-run hashes into the hash of a run set.
 *
 * @since 0.1.0
 * @category combinators
 */
export const hashAll = (hashes: ReadonlyArray<string>): string =>
  createHash("sha256").update(hashes.join("\n")).digest("hex").slice(0, 16)
