/**
 * The HTTP contract of issue 5, as one suite run against every backend (memory, PGlite, Postgres server).
 * Each test arranges state through the API or directly through the Store (claim, charge, settle), acts over HTTP
 * against a live server, and asserts on the responses and on the records the Query reads.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Client from "@slowcall/core/Client"
import type { Job, JobId, Json } from "@slowcall/core/Job"
import type { Outcome } from "@slowcall/core/Protocol"
import { Query } from "@slowcall/core/Query"
import { Store } from "@slowcall/core/Store"
import { Effect, Layer, Option } from "effect"
import { type Backend, type Running, start } from "./harness.js"

export interface ContractOptions {
  readonly name: string
  /** A fresh backend; each server of the suite gets its own queue so backends may be shared. */
  readonly backend: () => Layer.Layer<Backend, unknown>
}

let counter = 0
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${counter++}`

export const post = (base: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

/** Reads an SSE response into events until the stream ends or `max` events arrived. */
export const readEvents = async (response: Response, max = Number.POSITIVE_INFINITY, onEvent?: () => unknown) => {
  const events: Array<{ id: number; data: any }> = []
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  while (events.length < max) {
    const { value, done } = await reader.read()
    if (done) return { events, ended: true }
    buffer += decoder.decode(value, { stream: true })
    let index = buffer.indexOf("\n\n")
    while (index >= 0) {
      const block = buffer.slice(0, index)
      buffer = buffer.slice(index + 2)
      const lines = block.split("\n")
      const id = lines.find((line) => line.startsWith("id: "))
      const data = lines.find((line) => line.startsWith("data: "))
      if (id && data) {
        events.push({ id: Number(id.slice(4)), data: JSON.parse(data.slice(6)) })
        await onEvent?.()
      }
      index = buffer.indexOf("\n\n")
    }
  }
  await reader.cancel()
  return { events, ended: false }
}

export const claim = (jobId: string) =>
  Effect.gen(function* () {
    const store = yield* Store
    const reply = yield* store.claim({ items: [{ jobId: jobId as JobId, owner: "test-worker", leaseMs: 60_000 }] })
    const result = reply.results[0]!
    if (result._tag !== "Claimed") return yield* Effect.die(`expected a claim, got ${result._tag}`)
    return result.job
  })

/** Settles the job the holder of `job.leaseToken` runs; a missed fence is a failed test. */
export const settle = (job: Job, outcome: Outcome) =>
  Effect.gen(function* () {
    const store = yield* Store
    const reply = yield* store.settle({ items: [{ jobId: job.id, token: job.leaseToken, outcome }] })
    const result = reply.results[0]!
    if (result._tag !== "Settled") return yield* Effect.die(`expected a settle, got ${result._tag}`)
    return result.job
  })

export const charge = (job: Job, amountCents: number) =>
  Effect.flatMap(Store, (store) =>
    store.charge({
      items: [
        { jobId: job.id, callId: `${job.id}:${job.leaseToken}:1`, token: job.leaseToken, amountCents, settled: true }
      ]
    })
  )

export const failJob = (jobId: string, errorClass: "rate_limited" | "auth" = "auth", cost = 2) =>
  Effect.gen(function* () {
    const job = yield* claim(jobId)
    yield* charge(job, cost)
    return yield* settle(job, {
      _tag: "Fail",
      errorClass,
      error: "HTTP 401 from provider, Authorization: Bearer sk-secretsecretsecret"
    })
  })

export const completeJob = (jobId: string, result: Json = { ok: true }) =>
  Effect.flatMap(claim(jobId), (job) => settle(job, { _tag: "Complete", result }))

const countJobs = (queue: string) =>
  Effect.gen(function* () {
    const query = yield* Query
    return (yield* query.list({ queue, limit: null })).length
  })

const getJob = (jobId: string) => Effect.flatMap(Query, (query) => query.get({ jobId: jobId as JobId }))

/** A submit through `Client` in code, over the same backend as the server. */
const submitInCode = (options: Client.SubmitOptions) => Effect.flatMap(Client.make, (client) => client.submit(options))

/**
 * A record with what only its own submit can know left out (the id, the trace id derived from it, the times) and
 * its due time as a delay after creation.
 */
const comparable = (job: Job) => {
  const { id: _id, traceId: _traceId, createdAt: _createdAt, updatedAt: _updatedAt, runAfter, ...rest } = job
  return { ...rest, delayMs: Math.round(runAfter - job.createdAt) }
}

const expectSameRecord = (overHttp: Job, inCode: Job) => {
  expect(comparable(overHttp)).toEqual(comparable(inCode))
  for (const job of [overHttp, inCode]) expect(job.traceId).toBe(job.id.replace(/-/g, ""))
}

export const contractSuite = (options: ContractOptions) => {
  describe(`HTTP contract on ${options.name}`, () => {
    let server: Running
    let base: string
    const queue = unique("http")
    const submit = async (body: Record<string, unknown> = {}, headers: Record<string, string> = {}) => {
      const response = await post(base, "/v1/jobs", { type: "test.work", input: { n: counter++ }, ...body }, headers)
      return { response, body: (await response.json()) as any }
    }

    beforeAll(async () => {
      server = await start(options.backend(), { queue, maxBodyBytes: 64 * 1024 })
      base = server.url
    })
    afterAll(async () => {
      await server?.close()
    })

    it("POST /v1/jobs answers 202 with Location and the job view", async () => {
      const { response, body } = await submit({ priority: 3, budgetCents: 50, maxAttempts: 2 })
      expect(response.status).toBe(202)
      expect(response.headers.get("location")).toBe(`/v1/jobs/${body.id}`)
      expect(Object.keys(body).sort()).toEqual(
        [
          "id",
          "type",
          "version",
          "state",
          "abandonReason",
          "attempts",
          "runAttempts",
          "maxAttempts",
          "progress",
          "costCents",
          "budgetCents",
          "errorClass",
          "lastError",
          "result",
          "createdAt",
          "updatedAt",
          "runAfter",
          "deadline",
          "leaseUntil",
          "throttled",
          "input",
          "inputPreview",
          "inputTruncated",
          "inputRef"
        ].sort()
      )
      expect(body).toMatchObject({ type: "test.work", version: 1, state: "queued", maxAttempts: 2, budgetCents: 50 })
      expect(new Date(body.createdAt).toISOString()).toBe(body.createdAt)
    })

    it("an HTTP submit and Client.submit with the same options store equal records", async () => {
      const deadlineAt = Date.now() + 3_600_000
      const input = { text: "same in both", n: [1, 2] }
      const options = { priority: 4, budgetCents: 25, maxAttempts: 4, delayMs: 30_000 }
      const overHttp = await submit({ input, ...options, deadline: new Date(deadlineAt).toISOString() })
      expect(overHttp.response.status).toBe(202)
      const inCode = await server.run(submitInCode({ queue, type: "test.work", input, ...options, deadlineAt }))
      const stored = await server.run(getJob(overHttp.body.id))
      expectSameRecord(stored, inCode.job)
      expect(comparable(stored)).toMatchObject({ ...options, deadlineAt, input, tenant: null, state: "queued" })

      // Nothing but the type: both take the one set of defaults.
      const plain = await post(base, "/v1/jobs", { type: "test.work" })
      expect(plain.status).toBe(202)
      const plainInCode = await server.run(submitInCode({ queue, type: "test.work" }))
      const plainStored = await server.run(getJob(((await plain.json()) as any).id))
      expectSameRecord(plainStored, plainInCode.job)
      expect(plainStored).toMatchObject({ ...Client.defaults, input: null, deadlineAt: null, budgetCents: null })
      expect(plainStored.runAfter).toBe(plainStored.createdAt)
    })

    it("GET /v1/jobs/{id} gives the view with an ETag, 304 on If-None-Match and a Retry-After hint", async () => {
      const { body: created } = await submit()
      const first = await fetch(`${base}/v1/jobs/${created.id}`)
      expect(first.status).toBe(200)
      const tag = first.headers.get("etag")!
      expect(tag).toMatch(/^".+"$/)
      expect(Number(first.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      expect(((await first.json()) as any).id).toBe(created.id)

      const cached = await fetch(`${base}/v1/jobs/${created.id}`, { headers: { "if-none-match": tag } })
      expect(cached.status).toBe(304)

      await server.run(completeJob(created.id, { echo: "done" }))
      const changed = await fetch(`${base}/v1/jobs/${created.id}`, { headers: { "if-none-match": tag } })
      expect(changed.status).toBe(200)
      expect(changed.headers.get("etag")).not.toBe(tag)
      expect(changed.headers.get("retry-after")).toBeNull()
      expect(await changed.json()).toMatchObject({ state: "succeeded", result: { echo: "done" }, progress: 1 })
    })

    it("unknown and malformed ids answer 404 not_found", async () => {
      const unknown = await fetch(`${base}/v1/jobs/01900000-0000-7000-8000-000000000000`)
      expect(unknown.status).toBe(404)
      expect(await unknown.json()).toEqual({ error: "not_found" })
      const malformed = await fetch(`${base}/v1/jobs/not-an-id`)
      expect(malformed.status).toBe(404)
      const cancel = await post(base, "/v1/jobs/01900000-0000-7000-8000-000000000000/cancel", {})
      expect(cancel.status).toBe(404)
    })

    it("Idempotency-Key: same input replays the job (200), other input is 422 and writes nothing", async () => {
      const key = unique("key")
      const input = { text: "same", nested: { a: 1, b: [1, 2] } }
      const first = await submit({ input }, { "idempotency-key": key })
      expect(first.response.status).toBe(202)
      const before = await server.run(countJobs(queue))
      // Same input, keys in another order: canonical JSON makes it the same input.
      const again = await submit({ input: { nested: { b: [1, 2], a: 1 }, text: "same" } }, { "idempotency-key": key })
      expect(again.response.status).toBe(200)
      expect(again.response.headers.get("idempotent-replayed")).toBe("true")
      expect(again.body.id).toBe(first.body.id)
      const reused = await submit({ input: { text: "other" } }, { "idempotency-key": key })
      expect(reused.response.status).toBe(422)
      expect(reused.body).toEqual({ error: "idempotency_key_reused" })
      expect(await server.run(countJobs(queue))).toBe(before)
    })

    it("Idempotency-Key vouches for the whole request: any other option is 422, an exact retry is 200", async () => {
      const key = unique("whole")
      const request = {
        input: { text: "same" },
        budgetCents: 10,
        priority: 2,
        maxAttempts: 2,
        runAfter: new Date(Date.now() + 60_000).toISOString()
      }
      const first = await submit(request, { "idempotency-key": key })
      expect(first.response.status).toBe(202)
      const before = await server.run(countJobs(queue))
      const others: ReadonlyArray<Record<string, unknown>> = [
        { type: "demo.echo" },
        { version: 2 },
        { budgetCents: 11 },
        { priority: 3 },
        { maxAttempts: 3 },
        { runAfter: new Date(Date.now() + 120_000).toISOString() },
        { deadline: new Date(Date.now() + 3_600_000).toISOString() }
      ]
      for (const other of others) {
        const reused = await submit({ ...request, ...other }, { "idempotency-key": key })
        expect(reused.response.status, JSON.stringify(other)).toBe(422)
        expect(reused.body).toEqual({ error: "idempotency_key_reused" })
      }
      // A client retrying after a timeout sends the same body again (a new trace id does not matter).
      const retry = await submit({ ...request, traceId: "retry-1" }, { "idempotency-key": key })
      expect(retry.response.status).toBe(200)
      expect(retry.body.id).toBe(first.body.id)
      expect(await server.run(countJobs(queue))).toBe(before)
    })

    it("invalid bodies, unknown types and bad keys answer 400 invalid_request with issues and write nothing", async () => {
      const before = await server.run(countJobs(queue))
      const cases: Array<[unknown, Record<string, string>, string]> = [
        ["{not json", {}, ""],
        [{ type: 42 }, {}, "type"],
        [{ type: "test.work", priority: 1.5 }, {}, "priority"],
        [{ type: "test.work", runAfter: "yesterday" }, {}, "runAfter"],
        [{ type: "test.work", budgetCents: -1 }, {}, "budgetCents"],
        [{ type: "test.work", surprise: true }, {}, "surprise"],
        [{ type: "no.such.type", input: {} }, {}, "type"],
        [{ type: "test.work" }, { "idempotency-key": "k".repeat(256) }, "Idempotency-Key"]
      ]
      for (const [body, headers, field] of cases) {
        const response = await post(base, "/v1/jobs", body, headers)
        expect(response.status, JSON.stringify(body)).toBe(400)
        const json = (await response.json()) as any
        expect(json.error).toBe("invalid_request")
        expect(json.issues.length).toBeGreaterThan(0)
        for (const issue of json.issues) expect(typeof issue.message).toBe("string")
        if (field !== "") expect(json.issues.map((issue: any) => issue.path[0])).toContain(field)
      }
      expect(await server.run(countJobs(queue))).toBe(before)
    })

    it("every bad input is a 400 with issues, never a 5xx, and writes nothing", async () => {
      const before = await server.run(countJobs(queue))
      const nested = (depth: number) => `${"[".repeat(depth)}1${"]".repeat(depth)}`
      const cases: Array<[string, string]> = [
        // Nesting: just over the input's limit, then a 16 KB body of 8,000 levels (the stack overflowed before).
        [`{"type":"test.work","input":${nested(65)}}`, "input"],
        [`{"type":"test.work","input":${nested(8_000)}}`, ""],
        [`{"type":"test.work","input":{"a":${nested(70)}}}`, ""],
        // Numbers outside what every store can hold.
        ['{"type":"test.work","priority":2147483648}', "priority"],
        ['{"type":"test.work","priority":-2147483649}', "priority"],
        ['{"type":"test.work","version":2147483648}', "version"],
        ['{"type":"test.work","maxAttempts":1e300}', "maxAttempts"],
        ['{"type":"test.work","delayMs":1e20}', "delayMs"],
        ['{"type":"test.work","budgetCents":1e400}', "budgetCents"],
        // Dates outside 1970 to the end of 9999, or not dates at all.
        ['{"type":"test.work","runAfter":"+275760-09-13T00:00:00.000Z"}', "runAfter"],
        ['{"type":"test.work","deadline":"10000-01-01T00:00:00Z"}', "deadline"],
        ['{"type":"test.work","deadline":"1969-12-31T23:59:59Z"}', "deadline"],
        // Strings no store can keep: a lone surrogate, U+0000.
        ['{"type":"test.work","input":{"text":"\\ud800"}}', "input"],
        ['{"type":"test.work","input":{"\\udc00key":1}}', "input"],
        ['{"type":"test.work","input":"nul \\u0000"}', "input"],
        ['{"type":"test.work","traceId":"t\\u0000"}', "traceId"],
        ['{"type":"test.work","traceId":"\\udfff"}', "traceId"],
        ['{"type":"test.work","inputRef":"s3://x/\\u0000"}', "inputRef"],
        ['{"type":"test.work","inputRef":"s3://\\ud83d"}', "inputRef"]
      ]
      for (const [body, field] of cases) {
        const response = await post(base, "/v1/jobs", body)
        const json = (await response.json()) as any
        expect(response.status, body.slice(0, 120)).toBe(400)
        expect(json.error).toBe("invalid_request")
        expect(json.issues.length).toBeGreaterThan(0)
        if (field !== "")
          expect(
            json.issues.map((issue: any) => issue.path[0]),
            body.slice(0, 120)
          ).toContain(field)
      }
      // Filters and names outside a submit are held to the same rule: a 400, never a store error.
      for (const path of [
        "/v1/dead-letters?type=%00",
        "/v1/jobs?type=a%00b",
        "/v1/jobs?tenant=%00",
        "/v1/jobs?requestKey=%00",
        "/v1/jobs?after=%00"
      ]) {
        const response = await fetch(base + path)
        expect(response.status, path).toBe(400)
        expect(((await response.json()) as any).error).toBe("invalid_request")
      }
      const replay = await post(base, "/v1/dead-letters/replay", '{"type":"\\u0000"}')
      expect(replay.status).toBe(400)
      // Unknown keys named like Object.prototype's members are unknown keys like any other.
      for (const key of ["toString", "__proto__", "constructor", "valueOf", "hasOwnProperty"]) {
        for (const path of ["/v1/jobs", "/v1/dead-letters/replay"]) {
          const response = await post(base, path, `{"type":"test.work","${key}":1}`)
          expect(response.status, `${path} ${key}`).toBe(400)
          expect(((await response.json()) as any).issues[0].path).toEqual([key])
        }
      }
      expect(await server.run(countJobs(queue))).toBe(before)
    })

    it("state-changing requests take only application/json (415) and never from another site (403)", async () => {
      const before = await server.run(countJobs(queue))
      const { body: job } = await submit()
      const body = JSON.stringify({ type: "test.work", input: { text: "x" } })
      const contentTypes = [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        undefined
      ]
      for (const path of ["/v1/jobs", "/v1/dead-letters/replay", `/v1/jobs/${job.id}/cancel`]) {
        for (const contentType of contentTypes) {
          const response = await fetch(base + path, {
            method: "POST",
            headers: contentType === undefined ? {} : { "content-type": contentType },
            body: path === "/v1/jobs" ? body : "{}"
          })
          expect(response.status, `${path} ${contentType}`).toBe(415)
          expect(await response.json()).toEqual({ error: "unsupported_media_type" })
        }
        const sites: Array<Record<string, string>> = [
          { origin: "https://evil.example" },
          { origin: "null" },
          { origin: `http://localhost:1` },
          { "sec-fetch-site": "cross-site" },
          { "sec-fetch-site": "same-site" }
        ]
        for (const headers of sites) {
          const response = await post(base, path, path === "/v1/jobs" ? body : {}, headers)
          expect(response.status, `${path} ${JSON.stringify(headers)}`).toBe(403)
          expect(await response.json()).toEqual({ error: "cross_site_request" })
        }
      }
      expect(await server.run(countJobs(queue))).toBe(before + 1)
      expect((await server.run(getJob(job.id))).state).toBe("queued")
      // The same origin, and fetch metadata that says so, are the dashboard's own requests.
      const own = new URL(base)
      const same = await post(base, "/v1/jobs", body, { origin: own.origin, "sec-fetch-site": "same-origin" })
      expect(same.status).toBe(202)
      expect((await post(base, "/v1/jobs", body, { "content-type": "application/json; charset=UTF-8" })).status).toBe(
        202
      )
    })

    it("a body over the limit answers 413 and writes nothing", async () => {
      const before = await server.run(countJobs(queue))
      const response = await post(base, "/v1/jobs", { type: "test.work", input: { blob: "x".repeat(70 * 1024) } })
      expect(response.status).toBe(413)
      expect(((await response.json()) as any).error).toBe("payload_too_large")
      expect(await server.run(countJobs(queue))).toBe(before)
    })

    it("cancel: queued is abandoned at once, running gets a cancel request, terminal is 409", async () => {
      const { body: queued } = await submit()
      const cancelled = await post(base, `/v1/jobs/${queued.id}/cancel`, {})
      expect(cancelled.status).toBe(202)
      expect(await cancelled.json()).toMatchObject({ state: "abandoned", abandonReason: "cancelled" })
      const again = await post(base, `/v1/jobs/${queued.id}/cancel`, {})
      expect(again.status).toBe(409)
      expect(await again.json()).toEqual({ error: "already_terminal" })

      const { body: running } = await submit()
      const claimed = await server.run(claim(running.id))
      const requested = await post(base, `/v1/jobs/${running.id}/cancel`, {})
      expect(requested.status).toBe(202)
      expect(await requested.json()).toMatchObject({ state: "running" })
      const heartbeat = await server.run(
        Effect.flatMap(Store, (store) =>
          store.heartbeat({ items: [{ jobId: claimed.id, token: claimed.leaseToken, leaseMs: 60_000 }] })
        )
      )
      expect(heartbeat.results[0]).toMatchObject({ _tag: "Renewed", cancelRequested: true })
    })

    it("GET /v1/jobs/{id}/events streams the view, then each change with increasing ids, and ends at terminal", async () => {
      const { body: created } = await submit()
      const response = await fetch(`${base}/v1/jobs/${created.id}/events`)
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toContain("text/event-stream")
      let step = 0
      const { events, ended } = await readEvents(response, 20, async () => {
        // Drive the job forward once each event has been seen, so every change is observed.
        step++
        if (step === 1) await server.run(claim(created.id))
        if (step === 2) {
          await server.run(
            Effect.flatMap(getJob(created.id), (job) => settle(job, { _tag: "Complete", result: { echo: "x" } }))
          )
        }
      })
      expect(ended).toBe(true)
      expect(events.map((event) => event.data.state)).toEqual(["queued", "running", "succeeded"])
      for (let i = 1; i < events.length; i++) expect(events[i]!.id).toBeGreaterThan(events[i - 1]!.id)

      // Resume after the first event: the stream starts at the next change.
      const resumed = await readEvents(
        await fetch(`${base}/v1/jobs/${created.id}/events`, { headers: { "last-event-id": String(events[0]!.id) } })
      )
      expect(resumed.ended).toBe(true)
      expect(resumed.events.map((event) => event.data.state)).toEqual(["succeeded"])
      expect(resumed.events[0]!.id).toBe(events[2]!.id)
      // Resume after the terminal event: nothing more to say.
      const done = await readEvents(
        await fetch(`${base}/v1/jobs/${created.id}/events`, { headers: { "last-event-id": String(events[2]!.id) } })
      )
      expect(done).toEqual({ events: [], ended: true })
      const missing = await fetch(`${base}/v1/jobs/01900000-0000-7000-8000-000000000000/events`)
      expect(missing.status).toBe(404)
    })

    it("dead letters: groups with cost, arrival rate, filters, and replay that never re-runs a succeeded job", async () => {
      const input = { text: "poison" }
      const a = await submit({ input })
      const b = await submit({ input })
      const ok = await submit()
      await server.run(failJob(a.body.id, "auth", 2))
      await server.run(failJob(b.body.id, "auth", 3))
      await server.run(completeJob(ok.body.id))

      const response = await fetch(`${base}/v1/dead-letters?errorClass=auth&type=test.work&limit=10`)
      expect(response.status).toBe(200)
      const body = (await response.json()) as any
      expect(body.jobs.map((job: any) => job.id).sort()).toEqual([a.body.id, b.body.id].sort())
      const group = body.groups.find((g: any) => g.count === 2)
      expect(group).toMatchObject({ errorClass: "auth", count: 2, costCents: 5, collapsed: false })
      expect(group.jobIds).toEqual([b.body.id, a.body.id])
      expect(group.sampleInput).toBe('{"text":"poison"}')
      expect(group.lastError).toBe("HTTP 401 from provider, Authorization: [redacted]")
      expect(body.arrivalsPerMinute).toBeGreaterThan(0)
      expect(body.jobs[0].lastError).not.toContain("sk-secret")

      const other = (await (await fetch(`${base}/v1/dead-letters?errorClass=rate_limited`)).json()) as any
      expect(other.jobs.map((job: any) => job.id)).not.toContain(a.body.id)
      expect((await fetch(`${base}/v1/dead-letters?errorClass=bogus`)).status).toBe(400)
      expect((await fetch(`${base}/v1/dead-letters?limit=0`)).status).toBe(400)

      const replay = await post(base, "/v1/dead-letters/replay", { ids: [a.body.id, ok.body.id, "nope"] })
      expect(replay.status).toBe(200)
      expect(await replay.json()).toEqual({ matched: 1, replayed: 1, skipped: 2, estimatedCents: 2, capped: false })
      const replayedJob = (await (await fetch(`${base}/v1/jobs/${a.body.id}`)).json()) as any
      expect(replayedJob).toMatchObject({ state: "queued", costCents: 2 })
      const succeeded = (await (await fetch(`${base}/v1/jobs/${ok.body.id}`)).json()) as any
      expect(succeeded.state).toBe("succeeded")

      const byFilter = await post(base, "/v1/dead-letters/replay", { errorClass: "auth" })
      expect(await byFilter.json()).toMatchObject({ replayed: 1 })
      const again = await post(base, "/v1/dead-letters/replay", { ids: [a.body.id, b.body.id] })
      expect(await again.json()).toEqual({ matched: 0, replayed: 0, skipped: 2, estimatedCents: 0, capped: false })
      expect((await post(base, "/v1/dead-letters/replay", { ids: "x" })).status).toBe(400)
      expect((await post(base, "/v1/dead-letters/replay", { errorClass: "bogus" })).status).toBe(400)
    })

    /**
     * A second server over the suite's backend with a queue of its own: the suite's other dead letters stay out of
     * its groups.
     */
    const ownServer = async <A>(use: (own: Running) => Promise<A>): Promise<A> => {
      const services = await server.run(Effect.context<Backend>())
      const own = await start(Layer.succeedContext(services), { queue: unique("dlq") })
      try {
        return await use(own)
      } finally {
        await own.close()
      }
    }

    it("dead-letter groups: singletons collapse per class, sorted by cost, paged by cursor, with totals", () =>
      ownServer(async (own) => {
        const failed = async (input: unknown, errorClass: "auth" | "rate_limited", cents: number) => {
          const response = await post(own.url, "/v1/jobs", { type: "test.work", input })
          const id = ((await response.json()) as any).id as string
          await own.run(failJob(id, errorClass, cents))
          return id
        }
        const r1 = await failed({ prompt: "x", api_key: "sk-abcdefghijklmnop0123" }, "rate_limited", 1)
        const r2 = await failed({ prompt: "x", api_key: "sk-abcdefghijklmnop0123" }, "rate_limited", 1)
        const lone1 = await failed({ prompt: "y" }, "rate_limited", 3)
        const lone2 = await failed({ prompt: "z" }, "rate_limited", 4)
        const authLone = await failed({ prompt: "w" }, "auth", 20)
        const page = async (query: string) => {
          const response = await fetch(`${own.url}/v1/dead-letters?type=test.work${query}`)
          expect(response.status).toBe(200)
          return (await response.json()) as any
        }

        const first = await page("&limit=2")
        const second = await page(`&limit=2&cursor=${encodeURIComponent(first.next)}`)

        expect(first.groups.map((g: any) => [g.errorClass, g.inputHash === null, g.count, g.costCents])).toEqual([
          ["auth", true, 1, 20],
          ["rate_limited", true, 2, 7]
        ])
        expect(first.groups[1]).toMatchObject({
          collapsed: true,
          jobIds: [lone2, lone1],
          sampleInput: '{"prompt":"z"}'
        })
        expect(first).toMatchObject({ totalGroups: 3, totalJobs: 5, totalCostCents: 29 })
        expect(second.groups).toHaveLength(1)
        expect(second.groups[0]).toMatchObject({
          errorClass: "rate_limited",
          count: 2,
          costCents: 2,
          jobIds: [r2, r1],
          collapsed: false
        })
        expect(JSON.parse(second.groups[0].sampleInput)).toEqual({ prompt: "x", api_key: "[redacted]" })
        expect(second.groups[0].inputHash).toMatch(/^[0-9a-f]{64}$/)
        expect(second.groups[0].lastFailedAt).toBeGreaterThanOrEqual(first.groups[1].lastFailedAt - 60_000)
        expect(second.next).toBeNull()
        expect((await page("&sort=count")).groups.map((g: any) => g.count)).toEqual([2, 2, 1])
        expect((await page("&sort=recent")).groups[0].jobIds).toEqual([authLone])
        expect(JSON.stringify(await page(""))).not.toContain("abcdefghijklmnop0123")
        for (const bad of ["&cursor=nonsense", "&sort=cheapest", "&limit=1001"]) {
          const response = await fetch(`${own.url}/v1/dead-letters?type=test.work${bad}`)
          expect(response.status, bad).toBe(400)
        }
      }))

    it("replay: names what it replays, one call over every match, a dry run first, the estimate from the ledger", () =>
      ownServer(async (own) => {
        const base = own.url
        const type = "test.work"
        const ids: Array<string> = []
        for (const [i, cents] of [1, 2, 4].entries()) {
          const response = await post(base, "/v1/jobs", { type, input: { shared: i < 2 } })
          const id = ((await response.json()) as any).id as string
          await own.run(failJob(id, "rate_limited", cents))
          ids.push(id)
        }
        const states = async () =>
          Promise.all(ids.map(async (id) => ((await (await fetch(`${base}/v1/jobs/${id}`)).json()) as any).state))

        // Nothing named: 400, and nothing moves.
        for (const body of [{}, { all: false }, { dryRun: true }]) {
          const refused = await post(base, "/v1/dead-letters/replay", body)
          expect(refused.status).toBe(400)
          expect(JSON.stringify(await refused.json())).toContain("name what to replay")
        }
        expect(await states()).toEqual(["failed", "failed", "failed"])

        const dry = await post(base, "/v1/dead-letters/replay", { type, dryRun: true })
        expect(await dry.json()).toEqual({ matched: 3, replayed: 0, skipped: 0, estimatedCents: 7, capped: false })
        expect(await states()).toEqual(["failed", "failed", "failed"])

        const { inputHash } = await own.run(getJob(ids[0]!))
        const byInput = await post(base, "/v1/dead-letters/replay", { type, inputHash })
        expect(await byInput.json()).toEqual({ matched: 2, replayed: 2, skipped: 0, estimatedCents: 3, capped: false })
        expect(await states()).toEqual(["queued", "queued", "failed"])

        const all = await post(base, "/v1/dead-letters/replay", { all: true, dryRun: true })
        expect(await all.json()).toEqual({ matched: 1, replayed: 0, skipped: 0, estimatedCents: 4, capped: false })
        const everything = await post(base, "/v1/dead-letters/replay", { all: true })
        expect(await everything.json()).toEqual({
          matched: 1,
          replayed: 1,
          skipped: 0,
          estimatedCents: 4,
          capped: false
        })
        expect(await states()).toEqual(["queued", "queued", "queued"])
        const dead = (await (await fetch(`${base}/v1/dead-letters`)).json()) as any
        expect(dead).toMatchObject({ groups: [], totalGroups: 0, totalJobs: 0, next: null })
      }))

    it("the input is shown on every job view: redacted, cut to a preview, withheld when large, or its reference", async () => {
      const secretInput = { prompt: "hello", headers: { authorization: "Bearer abcdefghijkl0123" }, apiKey: 123 }
      const small = await submit({ input: secretInput })
      const large = await submit({ input: { text: "é".repeat(5_000) } })
      const byRef = await submit({ input: undefined, inputRef: "s3://bucket/in.json?X-Signature=abc&sig=s3cr3tsig" })

      const view = (await (await fetch(`${base}/v1/jobs/${small.body.id}`)).json()) as any
      const shown = { prompt: "hello", headers: { authorization: "[redacted]" }, apiKey: "[redacted]" }
      expect(view).toMatchObject({ input: shown, inputTruncated: false, inputRef: null })
      // Compact JSON of the same value (a jsonb column may keep the keys in an order of its own).
      expect(JSON.parse(view.inputPreview)).toEqual(shown)
      expect(view.inputPreview).toBe(JSON.stringify(view.input))
      const detail = (await (await fetch(`${base}/v1/jobs/${small.body.id}/detail`)).json()) as any
      expect(detail.job.input).toEqual(view.input)
      const listed = (await (await fetch(`${base}/v1/jobs?limit=5`)).json()) as any
      expect(listed.jobs.find((job: any) => job.id === small.body.id).inputPreview).toBe(view.inputPreview)
      expect(small.body.input).toEqual(view.input)

      // 5,000 two-byte characters: over 8 KB of JSON, so only the preview.
      const big = (await (await fetch(`${base}/v1/jobs/${large.body.id}`)).json()) as any
      expect(big).toMatchObject({ input: null, inputTruncated: true, inputRef: null })
      expect([...big.inputPreview]).toHaveLength(300)
      expect(big.inputPreview.endsWith("…")).toBe(true)

      const ref = (await (await fetch(`${base}/v1/jobs/${byRef.body.id}`)).json()) as any
      expect(ref).toMatchObject({ input: null, inputPreview: null, inputTruncated: false })
      expect(ref.inputRef).toBe("s3://bucket/in.json?X-Signature=[redacted]&sig=[redacted]")
      for (const body of [view, detail, listed, ref])
        expect(JSON.stringify(body)).not.toMatch(/abcdefghijkl0123|s3cr3tsig/)
    })

    it("GET /v1/stats, /metrics and /healthz", async () => {
      const { body: waiting } = await submit({ priority: 7 })
      const failed = await submit()
      await server.run(failJob(failed.body.id, "rate_limited", 4))
      const stats = (await (await fetch(`${base}/v1/stats`)).json()) as any
      expect(Object.keys(stats.byState).sort()).toEqual(["abandoned", "failed", "queued", "running", "succeeded"])
      expect(stats.byState.queued).toBeGreaterThanOrEqual(1)
      expect(stats.byState.failed).toBeGreaterThanOrEqual(1)
      expect(stats.oldestQueuedAgeSeconds["7"]).toBeGreaterThanOrEqual(0)
      expect(stats.deadLetterArrivalsPerMinute).toBeGreaterThan(0)
      expect(stats.costCentsByErrorClass.rate_limited).toBeGreaterThanOrEqual(4)
      expect(stats.deadLetterArrivals.at(-1).count).toBeGreaterThanOrEqual(1)
      expect(waiting.state).toBe("queued")

      const metrics = await fetch(`${base}/metrics`)
      expect(metrics.status).toBe(200)
      expect(metrics.headers.get("content-type")).toContain("text/plain")
      const text = await metrics.text()
      expect(text).toMatch(/^# TYPE slowcall_jobs gauge$/m)
      expect(text).toMatch(/^slowcall_jobs\{state="failed"\} [1-9]/m)
      expect(text).toMatch(/^# TYPE slowcall_spend_cents gauge$/m)
      expect(text).toMatch(/^slowcall_spend_cents\{[^}]*state="failed"[^}]*\} [1-9]/m)
      const openapi = (await (await fetch(`${base}/openapi.json`)).json()) as any
      expect(Object.keys(openapi.paths)).toEqual(
        expect.arrayContaining(["/v1/jobs", "/v1/jobs/{id}", "/v1/jobs/{id}/events", "/v1/dead-letters/replay"])
      )
      const health = await fetch(`${base}/healthz`)
      expect(health.status).toBe(200)
      expect(await health.json()).toEqual({ ok: true })
    })

    it("GET /v1/stats: spend over the window per queue, tenant, type and state, succeeded against failed", async () => {
      const read = async (query = "") => {
        const response = await fetch(`${base}/v1/stats${query}`)
        expect(response.status).toBe(200)
        return ((await response.json()) as any).spend
      }
      const before = await read()
      const ok = await submit()
      const bad = await submit({}, {})
      const job = await server.run(claim(ok.body.id))
      await server.run(charge(job, 3))
      await server.run(settle(job, { _tag: "Complete", result: null }))
      await server.run(failJob(bad.body.id, "auth", 2))

      const after = await read("?spendWindowMinutes=5")
      expect(after.windowMinutes).toBe(5)
      expect(after.succeededCents - before.succeededCents).toBe(3)
      expect(after.failedCents - before.failedCents).toBe(2)
      expect(after.totalCents - before.totalCents).toBeGreaterThanOrEqual(5)
      const group = (state: string) =>
        after.groups.find((g: any) => g.state === state && g.type === "test.work" && g.queue === queue)
      expect(group("succeeded")).toMatchObject({
        tenant: null,
        costCents: expect.any(Number),
        jobs: expect.any(Number)
      })
      expect(group("failed").costCents).toBeGreaterThanOrEqual(2)
      for (const window of ["0", "43201", "x"]) {
        expect((await fetch(`${base}/v1/stats?spendWindowMinutes=${window}`)).status).toBe(400)
      }
    })

    it("GET / serves the dashboard with no external assets; GET /v1/jobs lists recent jobs", async () => {
      const page = await fetch(`${base}/`)
      expect(page.status).toBe(200)
      expect(page.headers.get("content-type")).toContain("text/html")
      const html = await page.text()
      expect(html).toContain("<title>slowcall</title>")
      expect(html).not.toMatch(/(src|href)="https?:/)
      const { body: created } = await submit()
      const listed = (await (await fetch(`${base}/v1/jobs?limit=5`)).json()) as any
      expect(listed.jobs[0].id).toBe(created.id)
      expect((await fetch(`${base}/v1/jobs?state=bogus`)).status).toBe(400)
    })
  })

  describe(`listing on ${options.name}`, () => {
    let server: Running
    let base: string
    const queue = unique("list")
    beforeAll(async () => {
      server = await start(options.backend(), { queue })
      base = server.url
    })
    afterAll(async () => {
      await server?.close()
    })
    const list = async (query: string) => {
      const response = await fetch(`${base}/v1/jobs?${query}`)
      expect(response.status, query).toBe(200)
      return (await response.json()) as { jobs: Array<any>; next: string | null }
    }

    it("GET /v1/jobs pages with next and filters by state, type, error class and request key", async () => {
      const made: Array<string> = []
      for (let i = 0; i < 5; i++) {
        const response = await post(
          base,
          "/v1/jobs",
          { type: i % 2 === 0 ? "test.work" : "demo.echo", input: i },
          {
            "idempotency-key": `list-${i}`
          }
        )
        made.push(((await response.json()) as any).id)
      }
      await server.run(failJob(made[1]!, "auth", 1))

      const seen: Array<string> = []
      let page = await list("limit=2")
      for (let pages = 0; pages < 5; pages++) {
        seen.push(...page.jobs.map((job) => job.id))
        if (page.next === null) break
        page = await list(`limit=2&after=${page.next}`)
      }
      expect(seen).toEqual([...made].reverse())
      expect((await list("type=demo.echo")).jobs.map((job) => job.id)).toEqual([made[3], made[1]])
      expect((await list("errorClass=auth")).jobs.map((job) => job.id)).toEqual([made[1]])
      expect((await list("state=failed&type=demo.echo")).jobs.map((job) => job.id)).toEqual([made[1]])
      expect((await list("requestKey=list-2")).jobs.map((job) => job.id)).toEqual([made[2]])
      expect((await list("after=not-a-job")).jobs).toEqual([])
      const failed = (await list("errorClass=auth")).jobs[0]
      expect(failed).toMatchObject({ attempts: 1, runAttempts: 1, maxAttempts: 3 })
      // After a replay, the run starts again: one attempt in all, none in this run.
      await post(base, "/v1/dead-letters/replay", { ids: [made[1]] })
      expect((await list("requestKey=list-1")).jobs[0]).toMatchObject({ attempts: 1, runAttempts: 0, state: "queued" })
      expect((await fetch(`${base}/v1/jobs?errorClass=bogus`)).status).toBe(400)
    })

    it("GET /v1/jobs counts what its filters select, lists oldest first on request and pages back from a page", async () => {
      const at = async (query: string) => (await (await fetch(`${base}/v1/jobs?${query}`)).json()) as any
      const filters = ["", "type=demo.echo", "state=failed", "state=queued&type=test.work"]
      const before = await Promise.all(filters.map(async (filter) => (await at(filter)).total as number))
      const sentinel = ((await (await post(base, "/v1/jobs", { type: "test.work" })).json()) as any).id
      const made: Array<string> = []
      for (let i = 0; i < 7; i++) {
        const type = i % 3 === 0 ? "demo.echo" : "test.work"
        made.push(((await (await post(base, "/v1/jobs", { type, input: { i } })).json()) as any).id)
      }
      await server.run(failJob(made[2]!, "auth", 1))

      const first = await at("limit=3")
      expect(first.totalCapped).toBe(false)
      expect(Date.parse(first.now)).toBeGreaterThan(0)
      const after = await Promise.all(filters.map(async (filter) => (await at(filter)).total as number))
      expect(after.map((total, i) => total - before[i]!)).toEqual([8, 3, 1, 4])
      // Oldest first from a cursor, and paging back (newer) from a page: a listing oldest first after its first job.
      const oldest = await at(`limit=3&order=oldest&after=${sentinel}`)
      expect(oldest.jobs.map((job: any) => job.id)).toEqual(made.slice(0, 3))
      const second = await at(`limit=3&after=${first.next}`)
      expect(second.jobs.map((job: any) => job.id)).toEqual([made[3], made[2], made[1]])
      const back = await at(`limit=3&order=oldest&after=${second.jobs[0].id}`)
      expect(back.jobs.map((job: any) => job.id).reverse()).toEqual(first.jobs.map((job: any) => job.id))
      expect((await fetch(`${base}/v1/jobs?order=sideways`)).status).toBe(400)
    })

    it("a running job's view carries its lease's end; the detail carries the store's time", async () => {
      const { body: job } = await post(base, "/v1/jobs", { type: "test.work" }).then(async (response) => ({
        body: (await response.json()) as any
      }))
      expect(job.leaseUntil).toBeNull()
      const claimed = await server.run(claim(job.id))
      const view = (await (await fetch(`${base}/v1/jobs/${job.id}`)).json()) as any
      expect(view.leaseUntil).toBe(new Date(Math.floor(claimed.leaseUntil!)).toISOString())
      const detail = (await (await fetch(`${base}/v1/jobs/${job.id}/detail`)).json()) as any
      expect(Date.parse(detail.now)).toBeGreaterThanOrEqual(Date.parse(view.updatedAt))
      await server.run(settle(claimed, { _tag: "Complete", result: null }))
      expect(((await (await fetch(`${base}/v1/jobs/${job.id}`)).json()) as any).leaseUntil).toBeNull()
    })
  })

  describe(`tenant isolation on ${options.name}`, () => {
    let server: Running
    let base: string
    const queue = unique("tenants")
    beforeAll(async () => {
      server = await start(options.backend(), {
        queue,
        authenticate: (header) =>
          Effect.succeed(
            header === "Bearer token-a"
              ? Option.some("tenant-a")
              : header === "Bearer token-b"
                ? Option.some("tenant-b")
                : Option.none()
          )
      })
      base = server.url
    })
    afterAll(async () => {
      await server?.close()
    })
    const asA = { authorization: "Bearer token-a" }
    const asB = { authorization: "Bearer token-b" }

    it("requests without valid credentials get 401 and write nothing", async () => {
      const before = await server.run(countJobs(queue))
      for (const headers of [{}, { authorization: "Bearer wrong" }]) {
        const response = await post(base, "/v1/jobs", { type: "test.work" }, headers)
        expect(response.status).toBe(401)
        expect(await response.json()).toEqual({ error: "unauthorized" })
        expect((await fetch(`${base}/v1/stats`, { headers })).status).toBe(401)
        expect((await fetch(`${base}/v1/dead-letters`, { headers })).status).toBe(401)
      }
      expect(await server.run(countJobs(queue))).toBe(before)
    })

    it("an HTTP submit and Client.submit store equal records for a tenant, an inputRef and a trace id", async () => {
      const options = { type: "test.work", inputRef: "s3://bucket/in.json", version: 2, traceId: "trace-1" }
      const overHttp = await post(base, "/v1/jobs", options, asA)
      expect(overHttp.status).toBe(202)
      const inCode = await server.run(submitInCode({ queue, tenant: "tenant-a", ...options }))
      const stored = await server.run(getJob(((await overHttp.json()) as any).id))
      expect(comparable(stored)).toEqual(comparable(inCode.job))
      expect(stored).toMatchObject({ tenant: "tenant-a", input: null, inputRef: options.inputRef, traceId: "trace-1" })
    })

    it("a job is visible only to its tenant; others get 404", async () => {
      const created = await post(base, "/v1/jobs", { type: "test.work", input: { t: "a" } }, asA)
      expect(created.status).toBe(202)
      const job = (await created.json()) as any
      expect((await fetch(`${base}/v1/jobs/${job.id}`, { headers: asA })).status).toBe(200)
      expect((await fetch(`${base}/v1/jobs/${job.id}`, { headers: asB })).status).toBe(404)
      expect((await fetch(`${base}/v1/jobs/${job.id}/events`, { headers: asB })).status).toBe(404)
      expect((await fetch(`${base}/v1/jobs/${job.id}/detail`, { headers: asB })).status).toBe(404)
      expect((await post(base, `/v1/jobs/${job.id}/cancel`, {}, asB)).status).toBe(404)
      const listB = (await (await fetch(`${base}/v1/jobs`, { headers: asB })).json()) as any
      expect(listB.jobs.map((j: any) => j.id)).not.toContain(job.id)
      const statsB = (await (await fetch(`${base}/v1/stats`, { headers: asB })).json()) as any
      expect(statsB.byState.queued).toBe(0)

      // The same idempotency key in two tenants names two jobs.
      const keyed = { "idempotency-key": unique("shared") }
      const inA = (await (await post(base, "/v1/jobs", { type: "test.work" }, { ...asA, ...keyed })).json()) as any
      const inB = await post(base, "/v1/jobs", { type: "test.work" }, { ...asB, ...keyed })
      expect(inB.status).toBe(202)
      expect(((await inB.json()) as any).id).not.toBe(inA.id)

      // B can neither see nor replay A's dead letter.
      await server.run(failJob(job.id))
      const dlB = (await (await fetch(`${base}/v1/dead-letters`, { headers: asB })).json()) as any
      expect(dlB.jobs).toEqual([])
      const replayB = await post(base, "/v1/dead-letters/replay", { ids: [job.id] }, asB)
      expect(await replayB.json()).toEqual({ matched: 0, replayed: 0, skipped: 1, estimatedCents: 0, capped: false })
      const replayAllB = await post(base, "/v1/dead-letters/replay", { all: true }, asB)
      expect(await replayAllB.json()).toEqual({ matched: 0, replayed: 0, skipped: 0, estimatedCents: 0, capped: false })
      const stillFailed = (await (await fetch(`${base}/v1/jobs/${job.id}`, { headers: asA })).json()) as any
      expect(stillFailed.state).toBe("failed")
      const replayA = await post(base, "/v1/dead-letters/replay", { ids: [job.id] }, asA)
      expect(await replayA.json()).toEqual({ matched: 1, replayed: 1, skipped: 0, estimatedCents: 2, capped: false })
    })
  })
}
