/**
 * The hostile-input fuzzer: fast-check drives a live server with random and malformed requests (JSON that is
 * random, malformed, deep or huge, invalid UTF-8, wrong and missing content types, strange keys, ids, paths, hosts
 * and headers, SQL and Lua metacharacters in every string field, out-of-range numbers and dates, cross-site
 * requests, wrong and missing credentials) and holds it to three rules: no response is a 5xx, no connection is cut
 * without an answer, and nothing a rejected request sent is written (the jobs in the server's queue are exactly those
 * its `202` answers created, and only its accepted cancels changed any; a resource has a record only if an accepted
 * limits, pause or resume request named it, and a schedule is kept only if an accepted `PUT` defined it). The server
 * must still answer `/healthz` at
 * the end. The counts are printed.
 */
import { Buffer } from "node:buffer"
import { Agent, request as httpRequest } from "node:http"
import { BatchStore } from "@slowcall/core/Batch"
import type { Job } from "@slowcall/core/Job"
import { Limiter } from "@slowcall/core/Limiter"
import { Query } from "@slowcall/core/Query"
import { ScheduleStore } from "@slowcall/schedules/ScheduleStore"
import { Effect, Option } from "effect"
import fc from "fast-check"
import type { Running } from "./harness.js"

/** One request as data. */
export interface FuzzRequest {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Buffer | undefined
  /** Read only the status line and headers, then hang up (an event stream that would not end). */
  readonly stream: boolean
}

/** What a fuzzing run saw. */
export interface FuzzCounts {
  tried: number
  byStatus: Record<string, number>
  fiveHundreds: number
  created: Set<string>
  cancelled: Set<string>
  /** Batch ids a `POST /v1/batches` answered `202` for. */
  batches: Set<string>
  replayedByFuzz: number
  /** Resource ids a limits, pause or resume request answered `200` for: the only ones a record may exist for. */
  resourcesWritten: Set<string>
  /** Schedule ids a `PUT` answered `200` for: the only ones the store may keep. */
  schedulesWritten: Set<string>
}

const metacharacters = [
  "'; DROP TABLE jobs; --",
  "' OR '1'='1",
  '" OR 1=1 --',
  "$1::text",
  "\\",
  "%_%",
  "E'\\x00'",
  "redis.call('FLUSHALL')",
  "]]--[[",
  "{queue}",
  "\u0000",
  "\ud800",
  "\udfff\ud800",
  "$" + "{jndi:ldap://x}",
  "<script>alert(1)</script>",
  "../../etc/passwd",
  "%00",
  "\r\n",
  "\u202e",
  "😀"
]

const weirdString: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 3, arbitrary: fc.constantFrom(...metacharacters) },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 30 }) },
  { weight: 1, arbitrary: fc.string({ minLength: 201, maxLength: 300 }) },
  {
    weight: 2,
    arbitrary: fc.tuple(fc.string({ maxLength: 10 }), fc.constantFrom(...metacharacters)).map(([a, b]) => a + b)
  }
)

const weirdNumber: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(),
  fc.constantFrom(
    0,
    -0,
    1,
    -1,
    2 ** 31,
    2 ** 31 - 1,
    -(2 ** 31),
    -(2 ** 31) - 1,
    2 ** 53,
    1e21,
    1e300,
    -1e300,
    0.5,
    Number.MAX_SAFE_INTEGER,
    8.64e15,
    253_402_300_800_000
  ),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  weirdString,
  fc.constant(null),
  fc.boolean(),
  fc.constant([]),
  fc.constant({})
)

const weirdDate: fc.Arbitrary<unknown> = fc.oneof(
  fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
  fc.constantFrom(
    "+275760-09-13T00:00:00.000Z",
    "-271821-04-20T00:00:00.000Z",
    "10000-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "9999-12-31T23:59:59.999Z",
    "2026-02-30T00:00:00Z",
    "yesterday",
    "2020",
    "",
    "Tue, 01 Jan 2030 00:00:00 GMT"
  ),
  weirdNumber
)

/** A JSON value with strange strings and keys, sometimes deep. */
const weirdJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  {
    weight: 2,
    arbitrary: fc.dictionary(
      fc.oneof(weirdString, fc.constantFrom("__proto__", "constructor", "", "prototype", "toString")),
      fc.oneof(weirdString, weirdNumber),
      { maxKeys: 5 }
    )
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 60, max: 70 }).map((depth) => {
      let value: unknown = "leaf"
      for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value] : { k: value }
      return value
    })
  }
)

/** The resource ids the fuzzer names besides random strings. */
const goodResources = ["openai:gpt-4.1:key-a", "anthropic:sonnet:org/key-b", `p:${"m/".repeat(98)}kk`]

/** The schedule ids the fuzzer names besides random strings: with a `/`, a space, the longest there is. */
const goodSchedules = ["nightly", "imports/poll every minute", "s".repeat(200)]

/** Percent-encoding of any string: a lone surrogate becomes the (invalid) UTF-8 bytes a careless encoder writes. */
const encode = (text: string): string => {
  try {
    return encodeURIComponent(text)
  } catch {
    return `${encodeURIComponent(text.replace(/[\ud800-\udfff]/g, ""))}%ED%A0%80`
  }
}

const optionalField = <A>(name: string, value: fc.Arbitrary<A>) =>
  fc.option(
    value.map((v) => [name, v] as const),
    { nil: undefined, freq: 2 }
  )

/** A submit body: mostly the real fields with strange values, sometimes keys no body has. */
const submitBody: fc.Arbitrary<Record<string, unknown>> = fc
  .tuple(
    fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom("test.work", "demo.echo") },
      { weight: 2, arbitrary: weirdString },
      { weight: 1, arbitrary: weirdNumber }
    ),
    fc.array(
      fc.oneof(
        optionalField("input", weirdJson),
        optionalField("inputRef", fc.oneof(weirdString, weirdNumber)),
        optionalField("version", weirdNumber),
        optionalField("priority", weirdNumber),
        optionalField("delayMs", weirdNumber),
        optionalField("runAfter", weirdDate),
        optionalField("deadline", weirdDate),
        optionalField("budgetCents", weirdNumber),
        optionalField("maxAttempts", weirdNumber),
        optionalField("traceId", fc.oneof(weirdString, weirdNumber)),
        optionalField(
          "surprise",
          fc.constant(1).chain(() => weirdString)
        )
      ),
      { maxLength: 6 }
    )
  )
  .map(([type, fields]) => {
    const body: Record<string, unknown> = { type }
    for (const field of fields) if (field !== undefined) body[field[0]] = field[1]
    return body
  })

/** A submit body as a client would send it, with values in range: most of what the server should accept. */
const cleanBody: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    type: fc.constantFrom("test.work", "demo.echo"),
    input: fc.oneof(
      fc.jsonValue({ maxDepth: 3 }),
      fc.record({ text: fc.oneof(fc.string(), fc.constantFrom(...metacharacters)) })
    ),
    priority: fc.integer({ min: -5, max: 5 }),
    maxAttempts: fc.integer({ min: 1, max: 5 }),
    budgetCents: fc.integer({ min: 0, max: 100 }),
    delayMs: fc.integer({ min: 0, max: 60_000 }),
    traceId: fc.constantFrom("t-1", "'; DROP TABLE jobs; --", "redis.call('DEL', KEYS[1])", "]]--[[")
  },
  { requiredKeys: ["type"] }
)

/** A body as bytes: JSON of a value, text that is not quite JSON, invalid UTF-8, deep text, or too large. */
const bodyBytes = (json: fc.Arbitrary<unknown>, maxBodyBytes: number): fc.Arbitrary<Buffer | undefined> =>
  fc.oneof(
    { weight: 12, arbitrary: json.map((value) => Buffer.from(JSON.stringify(value) ?? "null", "utf8")) },
    {
      weight: 2,
      arbitrary: json.map((value) => {
        const text = JSON.stringify(value) ?? "null"
        return Buffer.from(text.slice(0, Math.max(0, text.length - 1)), "utf8")
      })
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 60 }).map((text) => Buffer.from(text, "utf8")) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 80 }).map((bytes) => Buffer.from(bytes)) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.integer({ min: 100, max: 6_000 }), fc.constantFrom("[", '{"a":'))
        .map(([depth, open]) => Buffer.from(`{"type":"test.work","input":${open.repeat(depth)}`, "utf8"))
    },
    {
      weight: 1,
      arbitrary: fc
        .integer({ min: maxBodyBytes + 1, max: maxBodyBytes * 3 })
        .map((size) => Buffer.from(`{"type":"test.work","input":"${"x".repeat(size)}"}`, "utf8"))
    },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) }
  )

const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 12, arbitrary: fc.constant("application/json") },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      undefined,
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/json; charset=latin1",
      "APPLICATION/JSON; charset=UTF-8",
      "application/jsonx",
      "application/json, text/plain",
      ""
    )
  }
)

/** Header values Node's client accepts (no control characters); anything else a header may carry. */
const headerValue: fc.Arbitrary<string> = fc.oneof(
  fc.stringMatching(/^[\t\x20-\x7e\x80-\xff]{0,80}$/),
  fc.constantFrom("'; DROP TABLE jobs; --", "redis.call('KEYS','*')", "\u00e9\u00ff", "*", 'W/"x"')
)

/**
 * The request arbitrary for one server. `ids` are the jobs the run made (requests aim at them), `tokens` the valid
 * credentials (others are tried too), `host` the server's own `Host`.
 */
export const requests = (options: {
  readonly host: string
  readonly tokens: ReadonlyArray<string>
  readonly ids: () => ReadonlyArray<string>
  readonly maxBodyBytes: number
}): fc.Arbitrary<FuzzRequest> => {
  const jobId = fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .integer({ min: 0, max: 1_000_000 })
        .map((n) => options.ids()[n % Math.max(1, options.ids().length)] ?? "01900000-0000-7000-8000-000000000000")
    },
    { weight: 1, arbitrary: fc.uuid({ version: 7 }) },
    { weight: 1, arbitrary: fc.uuid() },
    { weight: 2, arbitrary: weirdString.map((s) => encode(s)) },
    { weight: 1, arbitrary: fc.constantFrom("..%2F..%2Fetc", "%00", "%", "%zz", "a".repeat(3000)) }
  )
  const query = fc
    .dictionary(
      fc.constantFrom(
        "state",
        "type",
        "errorClass",
        "limit",
        "after",
        "tenant",
        "requestKey",
        "spendWindowMinutes",
        "x"
      ),
      fc.oneof(weirdString, weirdNumber.map(String)),
      { maxKeys: 3 }
    )
    .map((params) => {
      const entries = Object.entries(params)
      return entries.length === 0 ? "" : `?${entries.map(([k, v]) => `${k}=${encode(v)}`).join("&")}`
    })
  // Resource ids as a path carries them: good ones (with `:` and `/`, the longest there is), and anything at all.
  const resource = fc
    .oneof({ weight: 3, arbitrary: fc.constantFrom(...goodResources) }, { weight: 2, arbitrary: weirdString })
    .map((id) => `/v1/resources/${encode(id)}`)
  // Schedule ids as a path carries them: good ones, and anything at all.
  const schedule = fc
    .oneof({ weight: 3, arbitrary: fc.constantFrom(...goodSchedules) }, { weight: 2, arbitrary: weirdString })
    .map((id) => `/v1/schedules/${encode(id)}`)
  const route = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.constant({ method: "POST", path: "/v1/jobs", json: submitBody as fc.Arbitrary<unknown> })
    },
    {
      weight: 6,
      arbitrary: fc.constant({ method: "POST", path: "/v1/jobs", json: cleanBody as fc.Arbitrary<unknown> })
    },
    { weight: 3, arbitrary: query.map((q) => ({ method: "GET", path: `/v1/jobs${q}`, json: undefined })) },
    { weight: 3, arbitrary: jobId.map((id) => ({ method: "GET", path: `/v1/jobs/${id}`, json: undefined })) },
    { weight: 1, arbitrary: jobId.map((id) => ({ method: "GET", path: `/v1/jobs/${id}/detail`, json: undefined })) },
    { weight: 2, arbitrary: jobId.map((id) => ({ method: "GET", path: `/v1/jobs/${id}/events`, json: undefined })) },
    {
      weight: 3,
      arbitrary: jobId.map((id) => ({
        method: "POST",
        path: `/v1/jobs/${id}/cancel`,
        json: fc.constant({}) as fc.Arbitrary<unknown>
      }))
    },
    {
      weight: 3,
      arbitrary: fc.constant({
        method: "POST",
        path: "/v1/batches",
        json: fc.oneof(
          fc.record(
            {
              items: fc.array(fc.oneof(cleanBody, submitBody), { minLength: 0, maxLength: 3 }),
              budgetCents: weirdNumber,
              deadline: weirdString,
              onComplete: fc.oneof(cleanBody, submitBody)
            },
            { requiredKeys: ["items"] }
          ),
          submitBody
        ) as fc.Arbitrary<unknown>
      })
    },
    { weight: 2, arbitrary: jobId.map((id) => ({ method: "GET", path: `/v1/batches/${id}`, json: undefined })) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(jobId, query)
        .map(([id, q]) => ({ method: "GET", path: `/v1/batches/${id}/jobs${q}`, json: undefined }))
    },
    {
      weight: 2,
      arbitrary: fc.tuple(jobId, fc.constantFrom("cancel", "replay")).map(([id, verb]) => ({
        method: "POST",
        path: `/v1/batches/${id}/${verb}`,
        json: fc.constant({}) as fc.Arbitrary<unknown>
      }))
    },
    { weight: 2, arbitrary: query.map((q) => ({ method: "GET", path: `/v1/dead-letters${q}`, json: undefined })) },
    {
      weight: 3,
      arbitrary: fc.constant({
        method: "POST",
        path: "/v1/dead-letters/replay",
        json: fc.record(
          {
            ids: fc.oneof(fc.array(fc.oneof(jobId, weirdString), { maxLength: 5 }), weirdNumber),
            errorClass: fc.oneof(fc.constantFrom("auth", "rate_limited", "bogus"), weirdString),
            type: weirdString,
            limit: weirdNumber
          },
          { requiredKeys: [] }
        ) as fc.Arbitrary<unknown>
      })
    },
    { weight: 2, arbitrary: query.map((q) => ({ method: "GET", path: `/v1/stats${q}`, json: undefined })) },
    { weight: 1, arbitrary: fc.constant({ method: "GET", path: "/v1/resources", json: undefined }) },
    { weight: 1, arbitrary: resource.map((path) => ({ method: "GET", path, json: undefined })) },
    {
      weight: 2,
      arbitrary: resource.map((path) => ({
        method: "PUT",
        path: `${path}/limits`,
        json: fc.oneof(
          fc.record(
            {
              maxConcurrent: fc.oneof(fc.integer({ min: 1, max: 50 }), weirdNumber),
              requestsPerMinute: fc.oneof(fc.double({ min: 1, max: 10_000, noNaN: true }), weirdNumber),
              inputTokensPerMinute: weirdNumber,
              outputTokensPerMinute: weirdNumber,
              burstSeconds: weirdNumber,
              priorityShare: fc.oneof(
                fc.record({ minPriority: fc.integer({ min: -5, max: 5 }), share: fc.double({ min: 0, max: 0.99 }) }),
                fc.record({ minPriority: weirdNumber, share: weirdNumber }, { requiredKeys: [] }),
                weirdNumber
              )
            },
            { requiredKeys: [] }
          ),
          weirdJson
        ) as fc.Arbitrary<unknown>
      }))
    },
    {
      weight: 2,
      arbitrary: resource.map((path) => ({
        method: "POST",
        path: `${path}/pause`,
        json: fc.record({ until: weirdDate, reason: weirdString }, { requiredKeys: [] }) as fc.Arbitrary<unknown>
      }))
    },
    {
      weight: 1,
      arbitrary: resource.map((path) => ({
        method: "POST",
        path: `${path}/resume`,
        json: fc.constant({}) as fc.Arbitrary<unknown>
      }))
    },
    { weight: 1, arbitrary: fc.constant({ method: "GET", path: "/v1/schedules", json: undefined }) },
    { weight: 1, arbitrary: schedule.map((path) => ({ method: "GET", path, json: undefined })) },
    {
      weight: 3,
      arbitrary: schedule.map((path) => ({
        method: "PUT",
        path,
        json: fc.oneof(
          // Definitions that are valid, so that accepted writes (and then pause, resume, delete) happen too.
          fc.record({
            cron: fc.constantFrom("* * * * *", "0 2 * * *", "*/5 * * * * *"),
            timezone: fc.constantFrom("UTC", "Europe/Berlin"),
            job: fc.record({ queue: fc.constant("default"), type: fc.constant("test.work"), input: weirdJson }),
            catchUp: fc.constantFrom("skip", "latest")
          }),
          fc.record(
            {
              cron: fc.oneof(
                fc.constantFrom("* * * * *", "0 2 * * *", "*/5 * * * * *", "0 0 31 2 *", "61 * * * *", "@daily"),
                weirdString
              ),
              timezone: fc.oneof(
                fc.constantFrom("UTC", "Europe/Berlin", "America/New_York", "Mars/Olympus"),
                weirdString
              ),
              job: fc.oneof(
                fc.record(
                  {
                    queue: fc.oneof(fc.constant("default"), weirdString),
                    type: fc.oneof(fc.constant("test.work"), weirdString),
                    input: weirdJson,
                    maxAttempts: weirdNumber,
                    priority: weirdNumber,
                    budgetCents: weirdNumber,
                    deadlineMs: weirdNumber,
                    tenant: weirdString
                  },
                  { requiredKeys: ["queue", "type"] }
                ),
                weirdJson
              ),
              overlap: fc.oneof(fc.constantFrom("allow", "skip", "cancelPrevious"), weirdString),
              catchUp: fc.oneof(
                fc.constantFrom("skip", "latest"),
                fc.record({ all: fc.oneof(fc.integer({ min: 1, max: 3_600_000 }), weirdNumber) }),
                weirdJson
              ),
              graceMs: weirdNumber
            },
            { requiredKeys: ["cron", "job"] }
          ),
          weirdJson
        ) as fc.Arbitrary<unknown>
      }))
    },
    {
      weight: 1,
      arbitrary: fc.tuple(schedule, fc.constantFrom("/pause", "/resume")).map(([path, verb]) => ({
        method: "POST",
        path: `${path}${verb}`,
        json: fc.constant({}) as fc.Arbitrary<unknown>
      }))
    },
    {
      weight: 1,
      arbitrary: schedule.map((path) => ({ method: "DELETE", path, json: fc.constant({}) as fc.Arbitrary<unknown> }))
    },
    {
      weight: 2,
      arbitrary: fc
        .constantFrom("/metrics", "/healthz", "/", "/openapi.json")
        .map((path) => ({ method: "GET", path, json: undefined }))
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(
          fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"),
          fc.oneof(
            fc.constantFrom(
              "/v1/jobs",
              "/v1/stats",
              "/v1/dead-letters/replay",
              "/v1",
              "/nope",
              "//v1/jobs",
              "/v1/jobs/"
            ),
            weirdString.map((s) => `/${encode(s)}`)
          )
        )
        .map(([method, path]) => ({ method, path, json: weirdJson }))
    }
  )
  const credentials = fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...options.tokens).map((t) => `Bearer ${t}`) },
    { weight: 1, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.oneof(
        headerValue,
        headerValue.map((v) => `Bearer ${v}`)
      )
    }
  )
  const host = fc.oneof(
    { weight: 12, arbitrary: fc.constant(options.host) },
    { weight: 1, arbitrary: fc.constantFrom("evil.example", "localhost.evil", "127.0.0.1:1", "[::1]", "") }
  )
  const site = fc.oneof(
    { weight: 10, arbitrary: fc.constant({}) },
    {
      weight: 2,
      arbitrary: fc.constantFrom<Record<string, string>>(
        { origin: "https://evil.example" },
        { origin: "null" },
        { origin: `http://${options.host}` },
        { "sec-fetch-site": "cross-site" },
        { "sec-fetch-site": "same-site" },
        { "sec-fetch-site": "same-origin" }
      )
    }
  )
  const extra = fc
    .tuple(
      fc.dictionary(
        fc.constantFrom("idempotency-key", "if-none-match", "last-event-id", "x-forwarded-host", "accept", "cookie"),
        headerValue,
        { maxKeys: 3 }
      ),
      // A few keys used again and again, so that repeats (200) and reuses for other requests (422) happen.
      fc.option(fc.constantFrom("key-1", "key-2", "key-3", "key-4"), { nil: undefined, freq: 2 })
    )
    .map(([headers, key]) => (key === undefined ? headers : { ...headers, "idempotency-key": key }))
  return fc
    .tuple(route, credentials, host, site, extra, contentType)
    .chain(([r, authorization, hostHeader, siteHeaders, extraHeaders, type]) =>
      (r.json === undefined ? fc.constant(undefined) : bodyBytes(r.json, options.maxBodyBytes)).map(
        (body): FuzzRequest => ({
          method: r.method,
          path: r.path,
          // The API's own GETs go without a body; the other methods' routes carry one, GETs among them.
          body: r.json === undefined ? undefined : body,
          stream: r.path.endsWith("/events"),
          headers: {
            ...extraHeaders,
            ...siteHeaders,
            host: hostHeader,
            ...(authorization === undefined ? {} : { authorization }),
            ...(type === undefined ? {} : { "content-type": type })
          }
        })
      )
    )
}

const agent = new Agent({ keepAlive: true, maxSockets: 4 })

/** Sends one request over a raw HTTP/1.1 connection; the status and body, or the status alone for a stream. */
export const send = (url: string, req: FuzzRequest): Promise<{ status: number; body: string }> =>
  new Promise((resolve, reject) => {
    const target = new URL(url)
    const outgoing = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.path,
        // A body always has its length: Node's client frames no body of a GET, OPTIONS or DELETE by itself, and
        // unframed bytes are a broken request, not the hostile input this is about.
        headers: req.body === undefined ? req.headers : { ...req.headers, "content-length": String(req.body.length) },
        setHost: false,
        agent,
        timeout: 15_000
      },
      (res) => {
        if (req.stream && res.statusCode === 200) {
          res.destroy()
          return resolve({ status: 200, body: "" })
        }
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
        res.on("error", reject)
      }
    )
    outgoing.on("timeout", () => outgoing.destroy(new Error(`no answer within 15 s to ${req.method} ${req.path}`)))
    outgoing.on("error", reject)
    outgoing.end(req.body)
  })

/** A read of the backend's batch verbs, or `none` when it has none. */
const withBatches = <A>(
  server: Running,
  read: (batches: BatchStore["Type"]) => Effect.Effect<A, unknown>,
  none: A
): Promise<A> =>
  server.run(
    Effect.flatMap(Effect.serviceOption(BatchStore), (batches) =>
      Option.isSome(batches) ? read(batches.value) : Effect.succeed(none)
    )
  )

/**
 * Runs `numRuns` requests against a live server and checks the rules of the module header; returns the counts.
 * `queue` is the server's queue, read at the end to compare what was written with what was accepted.
 */
export const fuzz = async (options: {
  readonly name: string
  readonly server: Running
  readonly queue: string
  readonly tokens: ReadonlyArray<string>
  readonly maxBodyBytes: number
  readonly numRuns: number
  readonly seed: number
}): Promise<FuzzCounts> => {
  const { server } = options
  const counts: FuzzCounts = {
    tried: 0,
    byStatus: {},
    fiveHundreds: 0,
    created: new Set(),
    cancelled: new Set(),
    batches: new Set(),
    replayedByFuzz: 0,
    resourcesWritten: new Set(),
    schedulesWritten: new Set()
  }
  const ids: Array<string> = []
  const arbitrary = requests({
    host: new URL(server.url).host,
    tokens: options.tokens,
    ids: () => ids,
    maxBodyBytes: options.maxBodyBytes
  })
  await fc.assert(
    fc.asyncProperty(arbitrary, async (req) => {
      counts.tried++
      const answer = await send(server.url, req)
      counts.byStatus[answer.status] = (counts.byStatus[answer.status] ?? 0) + 1
      if (answer.status >= 500) counts.fiveHundreds++
      if (answer.status >= 500) throw new Error(`${answer.status} for ${req.method} ${req.path}: ${answer.body}`)
      if (req.method === "POST" && req.path === "/v1/jobs" && answer.status === 202) {
        const id = (JSON.parse(answer.body) as { id: string }).id
        counts.created.add(id)
        ids.push(id)
      }
      // A batch's items are jobs an accepted request created; a batch's cancel abandons every one of them.
      const batchItems = (batchId: string) =>
        withBatches(server, (batches) => batches.jobs({ batchId: batchId as never, limit: 100_000 }), [])
      if (req.method === "POST" && req.path === "/v1/batches" && answer.status === 202) {
        const batchId = (JSON.parse(answer.body) as { id: string }).id
        ids.push(batchId)
        counts.batches.add(batchId)
        for (const job of await batchItems(batchId)) {
          counts.created.add(job.id)
          ids.push(job.id)
        }
      }
      const batchCancel = /^\/v1\/batches\/([^/]+)\/cancel$/.exec(req.path)
      if (req.method === "POST" && batchCancel !== null && answer.status === 202) {
        for (const job of await batchItems(batchCancel[1]!)) counts.cancelled.add(job.id)
      }
      if (/^\/v1\/batches\/[^/]+\/replay$/.test(req.path) && answer.status === 200) {
        counts.replayedByFuzz += (JSON.parse(answer.body) as { replayed: number }).replayed
      }
      const cancel = /^\/v1\/jobs\/([^/]+)\/cancel$/.exec(req.path)
      if (req.method === "POST" && cancel !== null && answer.status === 202) counts.cancelled.add(cancel[1]!)
      const resourceWrite = /^\/v1\/resources\/([^/]+)\/(limits|pause|resume)$/.exec(req.path)
      if (req.method !== "GET" && resourceWrite !== null && answer.status === 200) {
        counts.resourcesWritten.add(decodeURIComponent(resourceWrite[1]!))
      }
      const scheduleWrite = /^\/v1\/schedules\/([^/]+)$/.exec(req.path)
      if (req.method === "PUT" && scheduleWrite !== null && answer.status === 200) {
        counts.schedulesWritten.add((JSON.parse(answer.body) as { schedule: { id: string } }).schedule.id)
      }
      if (req.path === "/v1/dead-letters/replay" && answer.status === 200) {
        counts.replayedByFuzz += (JSON.parse(answer.body) as { replayed: number }).replayed
      }
    }),
    { numRuns: options.numRuns, seed: options.seed, endOnFailure: true }
  )
  // A batch that accepted requests finished (a batch cancel, or the cancel of its last queued item) has queued its
  // callbacks: jobs of those accepted requests. A rejected request that finished a batch shows in its items instead.
  for (const batchId of counts.batches) {
    const batch = await withBatches(server, (batches) => batches.get({ batchId: batchId as never }), undefined)
    for (const callback of [batch?.onCompleteJobId, batch?.onSuccessJobId]) {
      if (callback !== null && callback !== undefined) counts.created.add(callback)
    }
  }
  return counts
}

/**
 * What the rejected requests wrote: jobs in the queue no `202` created, jobs whose state no accepted cancel
 * explains, and jobs with attempts or spend (no worker runs here). 0 is the only right answer.
 */
export const writesByRejected = async (server: Running, queue: string, counts: FuzzCounts): Promise<number> => {
  const jobs: ReadonlyArray<Job> = await server.run(
    Effect.flatMap(Query, (query) => query.list({ queue, limit: null }))
  )
  let stray = 0
  for (const job of jobs) {
    const expected = counts.cancelled.has(job.id) ? "abandoned" : "queued"
    if (!counts.created.has(job.id) || job.state !== expected || job.attempts !== 0 || job.costCents !== 0) stray++
  }
  return stray + Math.max(0, counts.created.size - jobs.length) + counts.replayedByFuzz
}

/**
 * Resources the store keeps a record of that no accepted write named: a rejected limits, pause or resume request
 * (or a read) that wrote anyway. 0 is the only right answer.
 */
export const resourcesByRejected = async (server: Running, counts: FuzzCounts): Promise<number> => {
  const read = await server.run(Effect.flatMap(Limiter, (limiter) => limiter.read({})))
  return read.resources.filter((state) => !counts.resourcesWritten.has(state.resource)).length
}

/**
 * Schedules the store keeps that no accepted `PUT` defined: a rejected definition (or a pause, resume, delete or read)
 * that wrote anyway. 0 is the only right answer.
 */
export const schedulesByRejected = async (server: Running, counts: FuzzCounts): Promise<number> => {
  const { result } = await server.run(Effect.flatMap(ScheduleStore, (store) => store.list()))
  return result.filter((record) => !counts.schedulesWritten.has(record.schedule.id)).length
}
