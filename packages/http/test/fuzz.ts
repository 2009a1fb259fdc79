/**
 * The hostile-input fuzzer: fast-check drives a live server with random and malformed requests (JSON that is
 * random, malformed, deep or huge, invalid UTF-8, wrong and missing content types, strange keys, ids, paths, hosts
 * and headers, SQL and Lua metacharacters in every string field, out-of-range numbers and dates, cross-site
 * requests, wrong and missing credentials) and holds it to three rules: no response is a 5xx, no connection is cut
 * without an answer, and nothing a rejected request sent is written (the jobs in the server's queue are exactly those
 * its `202` answers created, and only its accepted cancels changed any). The server must still answer `/healthz` at
 * the end. The counts are printed.
 */
import { Buffer } from "node:buffer"
import { Agent, request as httpRequest } from "node:http"
import type { Job } from "@slowcall/core/Job"
import { Query } from "@slowcall/core/Query"
import { Effect } from "effect"
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
  replayedByFuzz: number
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
    replayedByFuzz: 0
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
      const cancel = /^\/v1\/jobs\/([^/]+)\/cancel$/.exec(req.path)
      if (req.method === "POST" && cancel !== null && answer.status === 202) counts.cancelled.add(cancel[1]!)
      if (req.path === "/v1/dead-letters/replay" && answer.status === 200) {
        counts.replayedByFuzz += (JSON.parse(answer.body) as { replayed: number }).replayed
      }
    }),
    { numRuns: options.numRuns, seed: options.seed, endOnFailure: true }
  )
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
