/**
 * `slowcall resources list|get|set|pause|resume`: the provider limits the fleet keeps, on a running server over its
 * HTTP API (`/v1/resources`). A resource id (`openai:gpt-4.1:key-a`) is given as it is; the command encodes it for
 * the path. `set` replaces a resource's limits whole, as the API does; `pause` is an operator's pause (until a time,
 * for a while, or until `resume`); `resume` also lifts a 429's or a spend cap's pause. With `--json` each prints the
 * API's response body unchanged.
 *
 * @since 0.4.0
 */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { CliError } from "./CliError.js"
import { clip, table } from "./internal/format.js"
import { request } from "./internal/http.js"
import { json, url } from "./Jobs.js"

const resource = Args.text({ name: "resource" }).pipe(
  Args.withDescription("the resource id, such as openai:gpt-4.1:key-a (as `resources list` prints it)")
)

const pathOf = (id: string, rest = "") => `v1/resources/${encodeURIComponent(id)}${rest}`

/** A number as a person reads it: at most two decimals, thousands grouped. */
const amount = (value: number): string =>
  (Math.round(value * 100) / 100).toLocaleString("en-US", { maximumFractionDigits: 2 })

/** A bucket as `level/capacity (perMinute/min)`, `-` without a limit. */
const bucketText = (bucket: any): string =>
  bucket === null ? "-" : `${amount(bucket.level)}/${amount(bucket.capacity)} (${amount(bucket.perMinute)}/min)`

/** The pause in force on one line: its kind and end, `-` when there is none; `half-open` after a timed one. */
const pauseText = (view: any): string => {
  if (view.pause === null) return view.halfOpen ? "half-open (one probe call at a time)" : "-"
  return `${view.pause.kind} ${view.pause.until === null ? "until resumed" : `until ${view.pause.until}`}`
}

const permitsText = (view: any): string =>
  `${view.permitsInUse}${view.maxConcurrent === null ? "" : `/${view.maxConcurrent}`}`

/**
 * The concurrency cap the fleet learned from the provider's 429s, `-` when none: kept only while below the declared
 * cap (or with none declared), so when there is one it is the cap in force.
 */
const learnedText = (view: any): string => (view.learnedConcurrent === null ? "-" : String(view.learnedConcurrent))

/** The 429s the fleet reported: the pauses a rate limit or a spend cap set. */
const seen429 = (view: any): number => view.counters.pauses.rate_limited + view.counters.pauses.quota_exhausted

const waits = (view: any): number =>
  Object.values(view.counters.waits as Record<string, number>).reduce((total, n) => total + n, 0)

const limitsText = (limits: any): string => {
  const parts = [
    limits.maxConcurrent === undefined ? undefined : `max ${limits.maxConcurrent} at once`,
    limits.requestsPerMinute === undefined ? undefined : `${amount(limits.requestsPerMinute)} requests/min`,
    limits.inputTokensPerMinute === undefined ? undefined : `${amount(limits.inputTokensPerMinute)} input tokens/min`,
    limits.outputTokensPerMinute === undefined
      ? undefined
      : `${amount(limits.outputTokensPerMinute)} output tokens/min`,
    limits.burstSeconds === undefined ? undefined : `burst ${amount(limits.burstSeconds)} s`,
    limits.priorityShare === undefined
      ? undefined
      : `${amount(limits.priorityShare.share * 100)}% kept for priority >= ${limits.priorityShare.minPriority}`
  ].filter((part) => part !== undefined)
  return parts.length === 0 ? "none (unlimited)" : parts.join(", ")
}

/** One resource over several labelled lines: what `get`, `set`, `pause` and `resume` print. */
const resourceLines = (view: any): string => {
  const waitsBy = Object.entries(view.counters.waits as Record<string, number>)
    .filter(([, n]) => n > 0)
    .map(([reason, n]) => `${reason} ${n}`)
  const lines = [
    ["resource", view.resource],
    ["limits", limitsText(view.limits)],
    ["permits", `${permitsText(view)} in use`],
    [
      "learned cap",
      view.learnedConcurrent === null ? "-" : `${view.learnedConcurrent} at once, learned from 429s (in force)`
    ],
    ["requests", bucketText(view.buckets.requests)],
    ["input tok", bucketText(view.buckets.inputTokens)],
    ["output tok", bucketText(view.buckets.outputTokens)],
    ["pause", pauseText(view)],
    ...(view.pause === null
      ? []
      : [
          ["  reason", clip(view.pause.reason, 100)],
          ["  since", view.pause.since]
        ]),
    ["grants", String(view.counters.grants)],
    ["waits", waitsBy.length === 0 ? "0" : waitsBy.join(", ")],
    ["refused", `${view.counters.paused} while paused`],
    [
      "pauses",
      `${view.counters.pauses.rate_limited} rate limited, ${view.counters.pauses.quota_exhausted} spend cap, ${view.counters.pauses.manual} manual`
    ]
  ]
  const out = lines.map(([label, text]) => `${label!.padEnd(13)}${text}`)
  if (view.permits.length > 0) {
    out.push(
      "",
      table(
        ["CALL", "JOB", "TENANT", "PRIORITY", "UNTIL", "PROBE"],
        view.permits.map((permit: any) => [
          clip(permit.callId, 40),
          permit.jobId,
          permit.tenant ?? "-",
          String(permit.priority),
          permit.permitUntil,
          permit.probe ? "yes" : ""
        ])
      )
    )
  }
  return out.join("\n")
}

const list = Command.make("list", { url, json }, ({ json, url }) =>
  Effect.gen(function* () {
    const body = yield* request(url, "GET", "v1/resources")
    if (json) return yield* Console.log(JSON.stringify(body, null, 2))
    if (body.resources.length === 0) {
      return yield* Console.log("no resources: set limits with `slowcall resources set`, or make calls that name one")
    }
    yield* Console.log(
      table(
        ["RESOURCE", "PERMITS", "LEARNED", "REQUESTS", "INPUT TOKENS", "OUTPUT TOKENS", "PAUSE", "429S", "WAITS"],
        body.resources.map((view: any) => [
          view.resource,
          permitsText(view),
          learnedText(view),
          bucketText(view.buckets.requests),
          bucketText(view.buckets.inputTokens),
          bucketText(view.buckets.outputTokens),
          pauseText(view),
          String(seen429(view)),
          String(waits(view))
        ])
      )
    )
  })
).pipe(
  Command.withDescription(
    "every resource: permits in use against the cap, the cap learned from 429s, each bucket as level/capacity, the pause, 429s seen and waits"
  )
)

const get = Command.make("get", { resource, url, json }, ({ json, resource, url }) =>
  Effect.gen(function* () {
    const body = yield* request(url, "GET", pathOf(resource))
    yield* Console.log(json ? JSON.stringify(body, null, 2) : resourceLines(body.resource))
  })
).pipe(
  Command.withDescription(
    "one resource: its limits, the cap learned from 429s, buckets, pause, counters and the live permits"
  )
)

/** `MIN-PRIORITY:SHARE`, such as `1:0.25`; undefined when it is not that. */
const parseShare = (text: string): { readonly minPriority: number; readonly share: number } | undefined => {
  const at = text.lastIndexOf(":")
  if (at <= 0) return undefined
  const minPriority = Number(text.slice(0, at))
  const share = Number(text.slice(at + 1))
  return Number.isInteger(minPriority) && Number.isFinite(share) && text.slice(at + 1).trim() !== ""
    ? { minPriority, share }
    : undefined
}

const perMinute = (name: string, what: string) =>
  Options.float(name).pipe(Options.withPseudoName("N"), Options.optional, Options.withDescription(what))

const set = Command.make(
  "set",
  {
    resource,
    maxConcurrent: Options.integer("max-concurrent").pipe(
      Options.withPseudoName("N"),
      Options.optional,
      Options.withDescription("calls holding a permit at once, across every worker (an integer >= 1)")
    ),
    requestsPerMinute: perMinute("requests-per-minute", "a token bucket of requests per minute (> 0)"),
    inputTokensPerMinute: perMinute("input-tokens-per-minute", "a token bucket of input tokens per minute (> 0)"),
    outputTokensPerMinute: perMinute("output-tokens-per-minute", "a token bucket of output tokens per minute (> 0)"),
    burstSeconds: Options.float("burst-seconds").pipe(
      Options.withPseudoName("S"),
      Options.optional,
      Options.withDescription("how many seconds' worth of each per-minute limit a bucket holds (default 1)")
    ),
    priorityShare: Options.text("priority-share").pipe(
      Options.withPseudoName("MIN:SHARE"),
      Options.optional,
      Options.withDescription("keep SHARE (0 to <1) of every limit for jobs of priority >= MIN, such as 1:0.25")
    ),
    unlimited: Options.boolean("unlimited").pipe(
      Options.withDescription("remove every limit of the resource (a set with no limit option must say this)")
    ),
    url,
    json
  },
  (options) =>
    Effect.gen(function* () {
      const share = Option.map(options.priorityShare, (text) => ({ text, parsed: parseShare(text) }))
      if (Option.isSome(share) && share.value.parsed === undefined) {
        return yield* new CliError({
          message: `--priority-share ${share.value.text}: give MIN-PRIORITY:SHARE, such as 1:0.25`
        })
      }
      const limits = {
        ...Option.match(options.maxConcurrent, { onNone: () => ({}), onSome: (maxConcurrent) => ({ maxConcurrent }) }),
        ...Option.match(options.requestsPerMinute, { onNone: () => ({}), onSome: (n) => ({ requestsPerMinute: n }) }),
        ...Option.match(options.inputTokensPerMinute, {
          onNone: () => ({}),
          onSome: (n) => ({ inputTokensPerMinute: n })
        }),
        ...Option.match(options.outputTokensPerMinute, {
          onNone: () => ({}),
          onSome: (n) => ({ outputTokensPerMinute: n })
        }),
        ...Option.match(options.burstSeconds, { onNone: () => ({}), onSome: (n) => ({ burstSeconds: n }) }),
        ...(Option.isSome(share) ? { priorityShare: share.value.parsed } : {})
      }
      const given = Object.keys(limits).length > 0
      if (given && options.unlimited) {
        return yield* new CliError({ message: "--unlimited removes every limit: give it alone, without limit options" })
      }
      if (!given && !options.unlimited) {
        return yield* new CliError({
          message:
            "give the limits to set (--max-concurrent, --requests-per-minute, --input-tokens-per-minute, " +
            "--output-tokens-per-minute, --burst-seconds, --priority-share), or --unlimited to remove them all"
        })
      }
      const body = yield* request(options.url, "PUT", pathOf(options.resource, "/limits"), limits)
      yield* Console.log(options.json ? JSON.stringify(body, null, 2) : resourceLines(body.resource))
    })
).pipe(
  Command.withDescription(
    "set a resource's limits for the whole fleet, replacing the old ones whole (a limit not given is removed)"
  )
)

/** `90s`, `15m`, `2h`, `1d` in milliseconds; undefined when it is not a duration. */
const parseDuration = (text: string): number | undefined => {
  const match = /^(\d+(?:\.\d+)?)(s|m|h|d)$/.exec(text.trim())
  if (match === null) return undefined
  const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as "s" | "m" | "h" | "d"]
  const ms = Number(match[1]) * unit
  return ms > 0 ? ms : undefined
}

const pause = Command.make(
  "pause",
  {
    resource,
    until: Options.text("until").pipe(
      Options.withPseudoName("TIME"),
      Options.optional,
      Options.withDescription("end the pause at this ISO-8601 time, such as 2026-05-01T12:00:00Z")
    ),
    for: Options.text("for").pipe(
      Options.withPseudoName("DURATION"),
      Options.optional,
      Options.withDescription("end the pause after this long: 90s, 15m, 2h or 1d; without it or --until, until resumed")
    ),
    reason: Options.text("reason").pipe(
      Options.optional,
      Options.withDescription("why, shown to operators in the API and the dashboard")
    ),
    url,
    json
  },
  (options) =>
    Effect.gen(function* () {
      if (Option.isSome(options.until) && Option.isSome(options.for)) {
        return yield* new CliError({ message: "give --until or --for, not both" })
      }
      let until: string | undefined = Option.getOrUndefined(options.until)
      if (Option.isSome(options.for)) {
        const ms = parseDuration(options.for.value)
        if (ms === undefined) {
          return yield* new CliError({
            message: `--for ${options.for.value}: give a duration such as 90s, 15m, 2h or 1d`
          })
        }
        until = new Date(Date.now() + ms).toISOString()
      }
      const body = yield* request(options.url, "POST", pathOf(options.resource, "/pause"), {
        ...(until === undefined ? {} : { until }),
        ...(Option.isSome(options.reason) ? { reason: options.reason.value } : {})
      })
      if (options.json) return yield* Console.log(JSON.stringify(body, null, 2))
      yield* Console.log(`paused ${options.resource}: no worker starts a call on it ${pauseEnd(body.resource)}`)
      yield* Console.log(resourceLines(body.resource))
    })
).pipe(
  Command.withDescription(
    "pause a resource for every worker, until a time or until `resources resume` (a pause ending later stays)"
  )
)

const pauseEnd = (view: any): string =>
  view.pause?.until == null ? "until it is resumed" : `until ${view.pause.until}`

const resume = Command.make("resume", { resource, url, json }, ({ json, resource, url }) =>
  Effect.gen(function* () {
    const body = yield* request(url, "POST", pathOf(resource, "/resume"), {})
    if (json) return yield* Console.log(JSON.stringify(body, null, 2))
    yield* Console.log(body.wasPaused ? `resumed ${resource}` : `${resource} was not paused; nothing changed`)
    yield* Console.log(resourceLines(body.resource))
  })
).pipe(
  Command.withDescription("lift any pause of a resource (a 429's, a spend cap's or an operator's) for every worker")
)

/**
 * `slowcall resources`.
 *
 * @since 0.4.0
 * @category commands
 */
export const resourcesCommand = Command.make("resources").pipe(
  Command.withDescription("provider limits the fleet keeps: list, read, set, pause and resume resources"),
  Command.withSubcommands([list, get, set, pause, resume])
)
