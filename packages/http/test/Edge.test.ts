/**
 * The edge's options, each on its own live server over the memory backend: the Host allow-list, tokens by hash,
 * handlers the server knows, the queue's bound, SSE that survives the path, bodies over the limit without a length,
 * and a store refusal that must not tell clients to retry.
 */
import { Buffer } from "node:buffer"
import { request as httpRequest } from "node:http"
import { afterEach, describe, expect, it } from "@effect/vitest"
import { StoreError } from "@slowcall/core/Errors"
import * as Handler from "@slowcall/core/Handler"
import type { JobId } from "@slowcall/core/Job"
import * as Limiter from "@slowcall/core/Limiter"
import { Query } from "@slowcall/core/Query"
import * as StoreModule from "@slowcall/core/Store"
import { Store } from "@slowcall/core/Store"
import * as TransportModule from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Either, Layer, Schema } from "effect"
import * as Auth from "../src/Auth.js"
import { claim, post, settle } from "./contract.js"
import { type Running, start } from "./harness.js"

const memory = () =>
  Layer.mergeAll(StoreModule.layerMemory, TransportModule.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)

const countJobs = (server: Running) =>
  server.run(Effect.flatMap(Query, (query) => Effect.map(query.list({ limit: null }), (jobs) => jobs.length)))

/** A raw HTTP/1.1 request with any Host header (fetch always sends the URL's). */
const withHost = (url: string, path: string, host: string | undefined) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const target = new URL(url)
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path,
        method: "GET",
        setHost: false,
        headers: host === undefined ? {} : { host }
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
      }
    )
    req.on("error", reject)
    req.end()
  })

describe("the edge's options", () => {
  let server: Running | undefined
  afterEach(async () => {
    await server?.close()
    server = undefined
  })

  it("answers only Host values on its allow-list (loopback names by default), whatever the path", async () => {
    server = await start(memory())
    const port = new URL(server.url).port
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, "localhost", `[::1]:${port}`]) {
      expect((await withHost(server.url, "/healthz", host)).status, host).toBe(200)
    }
    // (A request with no Host at all is refused by Node's parser itself, with 400.)
    for (const host of ["evil.example", `evil.example:${port}`, "127.0.0.1.evil.example", "[::1", ""]) {
      for (const path of ["/v1/jobs", "/", "/metrics", "/v1/stats"]) {
        const answer = await withHost(server.url, path, host)
        expect(answer.status, `${host} ${path}`).toBe(421)
        expect(JSON.parse(answer.body)).toEqual({ error: "host_not_allowed" })
      }
    }
    await server.close()

    server = await start(memory(), { allowedHosts: ["api.example.com"] })
    expect((await withHost(server.url, "/healthz", "api.example.com:443")).status).toBe(200)
    expect((await withHost(server.url, "/healthz", "localhost")).status).toBe(421)
  })

  it("tokens are kept as hashes: a bearer token resolves its tenant, anything else is 401, another tenant's job 404", async () => {
    const tokenA = Auth.makeToken()
    const tokenB = Auth.makeToken()
    const table = Either.getOrThrow(
      Auth.parseTokens(`# tenants\nacme ${Auth.hashToken(tokenA)}\n\nbeta ${Auth.hashToken(tokenB)}`)
    )
    expect(table.map((entry) => entry.tenant)).toEqual(["acme", "beta"])
    expect(JSON.stringify(table)).not.toContain(tokenA)
    server = await start(memory(), { tokens: table })
    const asA = { authorization: `Bearer ${tokenA}` }

    for (const headers of [
      {},
      { authorization: `Bearer ${tokenA}x` },
      { authorization: tokenA },
      { authorization: "Basic eA==" }
    ]) {
      expect((await post(server.url, "/v1/jobs", { type: "test.work" }, headers)).status).toBe(401)
      expect((await fetch(`${server.url}/metrics`, { headers })).status).toBe(401)
    }
    expect(await countJobs(server)).toBe(0)
    const created = (await (await post(server.url, "/v1/jobs", { type: "test.work" }, asA)).json()) as { id: string }
    const jobs = await server.run(Effect.flatMap(Query, (query) => query.list({})))
    expect(jobs.map((job) => job.tenant)).toEqual(["acme"])
    expect(
      (await fetch(`${server.url}/v1/jobs/${created.id}`, { headers: { authorization: `Bearer ${tokenB}` } })).status
    ).toBe(404)
    // A tenant's /metrics shows its own population only.
    const metrics = await (
      await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${tokenB}` } })
    ).text()
    expect(metrics).toMatch(/^slowcall_jobs\{state="queued"\} 0$/m)
    expect(metrics).not.toContain("slowcall_model_calls_total")
    const own = await (await fetch(`${server.url}/metrics`, { headers: asA })).text()
    expect(own).toMatch(/^slowcall_jobs\{state="queued"\} 1$/m)
  })

  it("rejects token files that are not tenant and sha-256 hash per entry", () => {
    expect(Either.isLeft(Auth.parseTokens("acme"))).toBe(true)
    expect(Either.isLeft(Auth.parseTokens("acme plaintext-token"))).toBe(true)
    const hash = Auth.hashToken("t")
    expect(Auth.parseTokens(`a ${hash}\nb ${hash}`)).toMatchObject({ _tag: "Left" })
    expect(Either.getOrThrow(Auth.parseTokens(`a=${hash},b=${Auth.hashToken("u")}`)).length).toBe(2)
  })

  it("with the handlers it knows, an unknown version and input the handler's schema refuses are 400", async () => {
    const echo = Handler.make({
      type: "test.echo",
      version: 1,
      input: Schema.Struct({ text: Schema.String.pipe(Schema.maxLength(10)) }),
      result: Schema.Struct({ echo: Schema.String }),
      attempt: { timeoutMs: 1_000 },
      run: (input) => Effect.succeed({ echo: input.text })
    })
    server = await start(memory(), { jobTypes: ["test.work"], handlers: [echo] })

    const unknownVersion = await post(server.url, "/v1/jobs", { type: "test.echo", version: 2, input: { text: "x" } })
    const badInput = await post(server.url, "/v1/jobs", {
      type: "test.echo",
      input: { text: 42, extra: "y".repeat(2_000) }
    })
    const tooLong = await post(server.url, "/v1/jobs", { type: "test.echo", input: { text: "far too long" } })

    expect(unknownVersion.status).toBe(400)
    expect(((await unknownVersion.json()) as any).issues).toEqual([
      { path: ["version"], message: "no handler for test.echo version 2 (known: 1)" }
    ])
    expect(badInput.status).toBe(400)
    const issues = ((await badInput.json()) as any).issues
    expect(issues[0].path).toEqual(["input", "text"])
    expect(JSON.stringify(issues).length).toBeLessThan(1_000)
    expect(tooLong.status).toBe(400)
    expect(await countJobs(server)).toBe(0)
    expect((await post(server.url, "/v1/jobs", { type: "test.echo", input: { text: "ok" } })).status).toBe(202)
    // A type the server only lists (its workers run elsewhere) takes any version: the stats show it waiting.
    expect((await post(server.url, "/v1/jobs", { type: "test.work", version: 7 })).status).toBe(202)
    const stats = (await (await fetch(`${server.url}/v1/stats`)).json()) as any
    expect(stats.waiting).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: "test.work", version: 7, count: 1, unclaimed: false })])
    )
  })

  it("a job no worker claims is flagged once it has waited past unclaimedAfterSeconds", async () => {
    server = await start(memory(), { unclaimedAfterSeconds: 0 })
    await post(server.url, "/v1/jobs", { type: "test.work", version: 3 })
    const stats = (await (await fetch(`${server.url}/v1/stats`)).json()) as any
    expect(stats.waiting).toEqual([expect.objectContaining({ type: "test.work", version: 3, unclaimed: true })])
  })

  it("over the queue's bound a submit is 429 with Retry-After and writes nothing; per tenant too", async () => {
    server = await start(memory(), { maxQueued: 2, queueFullRetryAfterSeconds: 7 })
    for (let i = 0; i < 2; i++)
      expect((await post(server.url, "/v1/jobs", { type: "test.work", input: i })).status).toBe(202)

    const full = await post(server.url, "/v1/jobs", { type: "test.work", input: 3 })

    expect(full.status).toBe(429)
    expect(full.headers.get("retry-after")).toBe("7")
    expect(await full.json()).toEqual({ error: "queue_full", retryAfterSeconds: 7 })
    expect(await countJobs(server)).toBe(2)
    // Once a job leaves the queue, there is room again.
    const [first] = await server.run(Effect.flatMap(Query, (query) => query.list({})))
    await server.run(claim(first!.id))
    expect((await post(server.url, "/v1/jobs", { type: "test.work", input: 4 })).status).toBe(202)
    await server.close()

    const table = Either.getOrThrow(Auth.parseTokens(`a ${Auth.hashToken("ta")}\nb ${Auth.hashToken("tb")}`))
    server = await start(memory(), { tokens: table, maxQueuedPerTenant: 1 })
    expect((await post(server.url, "/v1/jobs", { type: "test.work" }, { authorization: "Bearer ta" })).status).toBe(202)
    expect((await post(server.url, "/v1/jobs", { type: "test.work" }, { authorization: "Bearer ta" })).status).toBe(429)
    expect((await post(server.url, "/v1/jobs", { type: "test.work" }, { authorization: "Bearer tb" })).status).toBe(202)
    expect(await countJobs(server)).toBe(2)
  })

  it("SSE: an id ahead of the job resumes from the current state, a quiet stream gets keep-alives, and it ends", async () => {
    server = await start(memory(), { sseKeepAliveMs: 200 })
    const created = (await (await post(server.url, "/v1/jobs", { type: "test.work" })).json()) as { id: JobId }
    const started = Date.now()
    /** Reads a stream until `until` holds for what it sent, or it ends; the text and whether it ended. */
    const follow = (response: Response) => {
      const reader = response.body!.getReader()
      const decoder = new TextDecoder()
      let text = ""
      return async (until: (text: string) => boolean) => {
        while (!until(text) && Date.now() - started < 10_000) {
          const { value, done } = await reader.read()
          if (done) return { text, ended: true }
          text += decoder.decode(value)
        }
        return { text, ended: false }
      }
    }
    const ahead = follow(
      await fetch(`${server.url}/v1/jobs/${created.id}/events`, {
        headers: { "last-event-id": String(Number.MAX_SAFE_INTEGER) }
      })
    )
    const quiet = follow(await fetch(`${server.url}/v1/jobs/${created.id}/events`))

    expect((await ahead((text) => text.includes("event: job"))).text).toContain('"state":"queued"')
    const idle = await quiet((text) => text.includes(": keep-alive"))
    expect(idle.text).toContain("event: job")
    expect(idle.text).toContain(": keep-alive\n\n")
    const job = await server.run(claim(created.id))
    await server.run(settle(job, { _tag: "Complete", result: null }))

    for (const stream of [ahead, quiet]) {
      const end = await stream(() => false)
      expect(end.ended).toBe(true)
      expect(end.text).toContain('"state":"succeeded"')
    }
  })

  it("a body over the limit without a Content-Length is 413, read to its end, and the connection stays usable", async () => {
    server = await start(memory(), { maxBodyBytes: 1_000 })
    const chunk = new TextEncoder().encode(`"${"x".repeat(65_534)}"`.slice(0, 65_536))
    let sent = 0
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 4_000_000) return controller.close()
        sent += chunk.length
        controller.enqueue(chunk)
      }
    })
    const response = await fetch(`${server.url}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      duplex: "half"
    } as RequestInit)

    expect(response.status).toBe(413)
    expect(await response.json()).toEqual({ error: "payload_too_large", limitBytes: 1_000 })
    expect(await countJobs(server)).toBe(0)
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
  })

  it("a store refusal no retry can change is 500 without Retry-After; an unavailable store is 503 with it", async () => {
    const { query, store } = Effect.runSync(StoreModule.makeMemory)
    let reason: StoreError["reason"] = "Unknown"
    const failing: Store["Type"] = {
      ...store,
      submit: () => Effect.fail(new StoreError({ reason, operation: "submit", detail: "22P02: refused" }))
    }
    server = await start(
      Layer.mergeAll(
        Layer.succeed(Store, failing),
        Layer.succeed(Query, query),
        TransportModule.layerMemory(),
        Limiter.layerMemory,
        ScheduleStore.layerMemory
      )
    )

    const refused = await post(server.url, "/v1/jobs", { type: "test.work" })
    reason = "Connection"
    const unavailable = await post(server.url, "/v1/jobs", { type: "test.work" })

    expect(refused.status).toBe(500)
    expect(refused.headers.get("retry-after")).toBeNull()
    expect(await refused.json()).toEqual({ error: "internal_error" })
    expect(unavailable.status).toBe(503)
    expect(unavailable.headers.get("retry-after")).toBe("1")
  })
})
