/**
 * The Limiter on Redis (a single server or a Cluster): each verb is one script (`lua/limit*.lua`, the rules of
 * `lua/includes/limits.lua`, a line-for-line version of `@slowcall/core/Limits`) over keys that all share the
 * `{%limits}` hash tag, so a call over any resources is one script in one slot: one round trip. This file checks
 * the input (`Limits.check*`, before anything is sent), shapes the arguments and reads the replies; the views and
 * the descriptions of `read` come from `Limits.viewOf` and `Limits.describe` over the state the scripts return.
 *
 * @internal
 */
import type {
  Counters,
  DefineResult,
  Dimension,
  Limiter,
  LimitItem,
  LimitResult,
  Limits as LimitsType,
  PauseKind,
  ResumeResult,
  WaitReason
} from "@slowcall/core/Limiter"
import * as Limits from "@slowcall/core/Limits"
import { Effect } from "effect"
import type { Context } from "./context.js"
import { attempt } from "./context.js"
import { limitSuffix, limitsBase } from "./keys.js"
import { run, type ScriptName } from "./scripts.js"

/** A raw script reply value. */
type Raw = string | null | ReadonlyArray<Raw>

const opt = (value: number | undefined): string => (value === undefined ? "" : String(value))

/** A state hash as HGETALL returns it (flat) into a map of fields. */
const fieldsOf = (flat: Raw): Map<string, string> => {
  const list = flat as ReadonlyArray<string>
  const fields = new Map<string, string>()
  for (let i = 0; i + 1 < list.length; i += 2) fields.set(list[i]!, list[i + 1]!)
  return fields
}

const numberOf = (fields: Map<string, string>, name: string): number | undefined => {
  const value = fields.get(name)
  return value === undefined ? undefined : Number(value)
}

const LEVELS: ReadonlyArray<readonly [Dimension, string, string]> = [
  ["requests", "rl", "ra"],
  ["inputTokens", "il", "ia"],
  ["outputTokens", "ol", "oa"]
]

/** The stored state's parts a view and a description need, from the state hash. */
const stateOf = (fields: Map<string, string>): Omit<Limits.LimitState, "permits"> => {
  const limits: { -readonly [K in keyof LimitsType]: LimitsType[K] } = {}
  const set = (
    key: "maxConcurrent" | "requestsPerMinute" | "inputTokensPerMinute" | "outputTokensPerMinute" | "burstSeconds",
    field: string
  ) => {
    const value = numberOf(fields, field)
    if (value !== undefined) limits[key] = value
  }
  set("maxConcurrent", "mc")
  set("requestsPerMinute", "rpm")
  set("inputTokensPerMinute", "ipm")
  set("outputTokensPerMinute", "opm")
  set("burstSeconds", "bs")
  const minPriority = numberOf(fields, "smp")
  const share = numberOf(fields, "ssh")
  if (minPriority !== undefined && share !== undefined) limits.priorityShare = { minPriority, share }
  const bucket = (level: string, at: string) => {
    const l = numberOf(fields, level)
    const a = numberOf(fields, at)
    return l === undefined || a === undefined ? null : { level: l, at: a }
  }
  const kind = fields.get("pk") as PauseKind | undefined
  const counter = (name: string) => numberOf(fields, name) ?? 0
  const counters: Counters = {
    grants: counter("n.g"),
    waits: {
      concurrency: counter("n.wc"),
      requests: counter("n.wr"),
      inputTokens: counter("n.wi"),
      outputTokens: counter("n.wo"),
      probe: counter("n.wp")
    },
    paused: counter("n.pa"),
    pauses: { rate_limited: counter("n.prl"), quota_exhausted: counter("n.pqe"), manual: counter("n.pma") }
  }
  const [requests, inputTokens, outputTokens] = LEVELS.map(([, level, at]) => bucket(level, at))
  return {
    limits,
    buckets: { requests: requests!, inputTokens: inputTokens!, outputTokens: outputTokens! },
    pause:
      kind === undefined
        ? null
        : {
            kind,
            until: numberOf(fields, "pu") ?? null,
            reason: fields.get("pr") ?? "",
            since: numberOf(fields, "ps") ?? 0
          },
    halfOpen: fields.get("ho") === "1",
    learned: learnedOf(fields),
    counters
  }
}

/** The learned concurrency cap: `lc` (the cap) and `ls` (its successes), both absent when none. */
const learnedOf = (fields: Map<string, string>): Limits.Learned | null => {
  const maxConcurrent = numberOf(fields, "lc")
  return maxConcurrent === undefined ? null : { maxConcurrent, successes: numberOf(fields, "ls") ?? 0 }
}

/** A permit as the scripts store it (JSON whose numbers are text). */
const permitOf = (raw: string): Limits.Permit => {
  const p = JSON.parse(raw) as Record<string, string | undefined>
  return {
    callId: p.c!,
    holder: { jobId: p.j!, token: Number(p.t) },
    tenant: p.n ?? null,
    priority: Number(p.pr),
    until: Number(p.u),
    probe: p.pb === "1",
    taken: { requests: Number(p.q), inputTokens: Number(p.i), outputTokens: Number(p.o) }
  }
}

/** The view in a reply's snapshot: `{ state hash, live permits }`. */
const viewOf = (snapshot: Raw, now: number) => {
  const [flat, live] = snapshot as ReadonlyArray<Raw>
  return Limits.viewOf({ ...stateOf(fieldsOf(flat!)), livePermits: Number(live as string) }, now)
}

/** The script's arguments of one apply item (11 values, see `lua/limitApply.lua`). */
const itemArgs = (item: LimitItem): ReadonlyArray<string> => {
  const call = (i: {
    readonly callId: string
    readonly holder: { readonly jobId: string; readonly token: number }
  }) => [i.callId, i.holder.jobId, String(i.holder.token)]
  switch (item._tag) {
    case "Acquire": {
      const cost = Limits.costOf(item)
      return [
        "A",
        item.resource,
        ...call(item),
        String(item.leaseMs),
        String(item.priority ?? 0),
        String(cost.requests),
        String(cost.inputTokens),
        String(cost.outputTokens),
        item.tenant == null ? "-" : `+${item.tenant}`
      ]
    }
    case "Release":
      return [
        "R",
        item.resource,
        ...call(item),
        item.reached ? "1" : "0",
        opt(item.usage?.inputTokens),
        opt(item.usage?.outputTokens),
        item.rateLimited === true ? "1" : "0",
        "",
        ""
      ]
    case "Renew":
      return ["N", item.resource, ...call(item), String(item.leaseMs), "", "", "", "", ""]
    case "Pause":
      return [
        "P",
        item.resource,
        item.kind,
        item.until === null ? "" : String(item.until),
        item.reason,
        "",
        "",
        "",
        "",
        "",
        ""
      ]
  }
}

/** One apply result from its script reply. */
const resultOf = (raw: ReadonlyArray<Raw>, now: number): LimitResult => {
  const snapshot = raw[raw.length - 1]!
  const view = viewOf(snapshot, now)
  switch (raw[0] as LimitResult["_tag"]) {
    case "Granted":
      return { _tag: "Granted", permitUntil: Number(raw[1] as string), probe: raw[2] === "1", view }
    case "Wait":
      return { _tag: "Wait", until: Number(raw[1] as string), reason: raw[2] as WaitReason, view }
    case "Paused":
      return {
        _tag: "Paused",
        until: raw[1] == null ? null : Number(raw[1] as string),
        kind: raw[2] as PauseKind,
        view
      }
    case "Released":
      return { _tag: "Released", view }
    case "Renewed":
      return { _tag: "Renewed", permitUntil: Number(raw[1] as string), view }
    case "NotHeld":
      return { _tag: "NotHeld", view }
  }
}

/**
 * The Limiter over the adapter's context.
 *
 * @internal
 */
export const makeLimiter = (ctx: Context): Limiter["Type"] => {
  const all = limitsBase(ctx.keys.prefix) + limitSuffix.all
  const script = (operation: string, name: ScriptName, args: ReadonlyArray<string>, write: boolean) =>
    Effect.map(
      attempt(ctx.client, operation, write, () => run(ctx.client, name, [all], args)),
      (raw): { readonly now: number; readonly results: ReadonlyArray<Raw> } => {
        const list = raw as ReadonlyArray<Raw>
        return { now: Number(list[0] as string), results: list.slice(1) }
      }
    )
  const nowArg = (now: number | undefined) => (now === undefined ? "" : String(now))
  return {
    define: (options) => {
      const problem = Limits.checkDefine(options)
      if (problem !== undefined) return Effect.fail(problem)
      const args = options.items.flatMap((item) => {
        const limits = Limits.normalize(item.limits)
        return [
          item.resource,
          opt(limits.maxConcurrent),
          opt(limits.requestsPerMinute),
          opt(limits.inputTokensPerMinute),
          opt(limits.outputTokensPerMinute),
          opt(limits.burstSeconds),
          opt(limits.priorityShare?.minPriority),
          opt(limits.priorityShare?.share)
        ]
      })
      return Effect.map(
        script("limiter.define", "limitDefine", [nowArg(options.now), ...args], true),
        ({ now, results }) => ({
          now,
          results: results.map(
            (raw): DefineResult => ({ _tag: "Defined", view: viewOf((raw as ReadonlyArray<Raw>)[0]!, now) })
          )
        })
      )
    },
    apply: (options) => {
      const problem = Limits.checkApply(options)
      if (problem !== undefined) return Effect.fail(problem)
      return Effect.map(
        script("limiter.apply", "limitApply", [nowArg(options.now), ...options.items.flatMap(itemArgs)], true),
        ({ now, results }) => ({ now, results: results.map((raw) => resultOf(raw as ReadonlyArray<Raw>, now)) })
      )
    },
    resume: (options) => {
      const problem = Limits.checkResume(options)
      if (problem !== undefined) return Effect.fail(problem)
      return Effect.map(
        script(
          "limiter.resume",
          "limitResume",
          [nowArg(options.now), ...options.items.map((item) => item.resource)],
          true
        ),
        ({ now, results }) => ({
          now,
          results: results.map((raw): ResumeResult => {
            const [was, snapshot] = raw as ReadonlyArray<Raw>
            return { _tag: "Resumed", wasPaused: was === "1", view: viewOf(snapshot!, now) }
          })
        })
      )
    },
    read: (options) => {
      const problem = Limits.checkRead(options)
      if (problem !== undefined) return Effect.fail(problem)
      const named = options.resources
      // An empty list names no resource; the script reads every resource when it gets none, so it is not asked.
      if (named !== undefined && named.length === 0) {
        return Effect.map(script("limiter.read", "limitRead", [nowArg(options.now), ""], false), ({ now }) => ({
          now,
          resources: []
        }))
      }
      return Effect.map(
        script("limiter.read", "limitRead", [nowArg(options.now), ...(named ?? [])], false),
        ({ now, results }) => {
          const described = results.map((raw) => {
            const [resource, flat, permits] = raw as ReadonlyArray<Raw>
            const state: Limits.LimitState = {
              ...stateOf(fieldsOf(flat!)),
              permits: (permits as ReadonlyArray<string>).map(permitOf)
            }
            return Limits.describe(resource as string, state, now)
          })
          return {
            now,
            resources:
              named === undefined
                ? described.sort((a, b) => (a.resource < b.resource ? -1 : a.resource > b.resource ? 1 : 0))
                : described
          }
        }
      )
    }
  }
}
