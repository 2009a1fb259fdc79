/**
 * The resource endpoints as one suite run against every backend (memory, PGlite, the Postgres server): limits set,
 * read, paused and resumed over HTTP, checked against what the backend's own `Limiter` then answers a worker; ids
 * with `:` and `/` in a path; bad input refused with nothing written; operators only, with authentication.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Limiter } from "@slowcall/core/Limiter"
import { Effect, Either, type Layer } from "effect"
import * as Auth from "../src/Auth.js"
import { type Backend, type Running, start } from "./harness.js"

export interface ResourceSuiteOptions {
  readonly name: string
  readonly backend: () => Layer.Layer<Backend, unknown>
}

let counter = 0
/** A fresh resource id with the characters a path must carry: `:` between the parts, `/` in the credential. */
const fresh = (prefix = "openai:gpt-4.1") => `${prefix}:org/key-${Date.now().toString(36)}-${counter++}`

export const resourcePath = (resource: string, rest = "") => `/v1/resources/${encodeURIComponent(resource)}${rest}`

const send = (url: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(url + path, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
  })

const acquire = (resource: string, jobId: string, tenant: string | null = null) =>
  Effect.flatMap(Limiter, (limiter) =>
    limiter.apply({
      items: [{ _tag: "Acquire", resource, callId: `${jobId}:1`, holder: { jobId, token: 1 }, leaseMs: 60_000, tenant }]
    })
  ).pipe(Effect.map((reply) => reply.results[0]!))

/** Every resource id the backend keeps a record of. */
const recorded = Effect.flatMap(Limiter, (limiter) => limiter.read({})).pipe(
  Effect.map((read) => read.resources.map((state) => state.resource))
)

export const resourceSuite = (options: ResourceSuiteOptions) =>
  describe(`resources over HTTP on ${options.name}`, () => {
    let server: Running

    beforeAll(async () => {
      server = await start(options.backend())
    })
    afterAll(() => server?.close())

    it("sets limits on an id with `:` and `/`, reads it back by its encoded path, and lists it", async () => {
      const resource = fresh()
      const put = await send(server.url, "PUT", resourcePath(resource, "/limits"), {
        maxConcurrent: 2,
        requestsPerMinute: 600,
        outputTokensPerMinute: 60_000,
        burstSeconds: 2
      })
      expect(put.status).toBe(200)
      const written = (await put.json()) as any
      expect(written.resource.resource).toBe(resource)
      expect(written.resource.limits).toEqual({
        maxConcurrent: 2,
        requestsPerMinute: 600,
        outputTokensPerMinute: 60_000,
        burstSeconds: 2
      })
      expect(written.resource.maxConcurrent).toBe(2)
      // 600 a minute, two seconds' worth: a bucket of 20 requests, full.
      expect(written.resource.buckets.requests).toEqual({ level: 20, capacity: 20, perMinute: 600 })
      expect(written.resource.buckets.inputTokens).toBeNull()
      expect(written.resource.buckets.outputTokens.capacity).toBe(2_000)
      expect(Date.parse(written.now)).toBeGreaterThan(0)

      // `:` may stay as it is in a path; `/` must be `%2F`.
      const got = await fetch(`${server.url}/v1/resources/${resource.replaceAll("/", "%2F")}`)
      expect(got.status).toBe(200)
      expect(((await got.json()) as any).resource.limits.maxConcurrent).toBe(2)
      const list = (await (await fetch(`${server.url}/v1/resources`)).json()) as any
      expect(list.resources.map((r: any) => r.resource)).toContain(resource)
      const ids = list.resources.map((r: any) => r.resource)
      expect(ids).toEqual([...ids].sort())

      // What a worker's Limiter answers follows the limits set over HTTP: two permits, then a wait.
      expect((await server.run(acquire(resource, "job-a")))._tag).toBe("Granted")
      expect((await server.run(acquire(resource, "job-b")))._tag).toBe("Granted")
      const third = await server.run(acquire(resource, "job-c"))
      expect(third._tag).toBe("Wait")
      const after = (await (await fetch(server.url + resourcePath(resource))).json()) as any
      expect(after.resource.permitsInUse).toBe(2)
      expect(after.resource.permits.map((p: any) => p.jobId).sort()).toEqual(["job-a", "job-b"])
      expect(after.resource.counters.grants).toBe(2)
      expect(after.resource.counters.waits.concurrency).toBe(1)

      // `{}` removes every limit and keeps the permits in flight.
      const cleared = (await (await send(server.url, "PUT", resourcePath(resource, "/limits"), {})).json()) as any
      expect(cleared.resource.limits).toEqual({})
      expect(cleared.resource.maxConcurrent).toBeNull()
      expect(cleared.resource.permitsInUse).toBe(2)
      expect(cleared.resource.learnedConcurrent).toBeNull()

      // A call the provider refused with a 429 teaches the fleet its concurrency: the one call still in flight.
      await server.run(
        Effect.flatMap(Limiter, (limiter) =>
          limiter.apply({
            items: [
              {
                _tag: "Release",
                resource,
                callId: "job-b:1",
                holder: { jobId: "job-b", token: 1 },
                reached: true,
                rateLimited: true
              }
            ]
          })
        )
      )
      const learned = (await (await fetch(server.url + resourcePath(resource))).json()) as any
      expect(learned.resource.learnedConcurrent).toBe(1)
      expect(learned.resource.permitsInUse).toBe(1)
    })

    it("takes ids of 200 characters with slashes, and refuses an id outside the alphabet with nothing written", async () => {
      const long = `p:${"m/".repeat(98)}kk`
      expect(long).toHaveLength(200)
      const put = await send(server.url, "PUT", resourcePath(long, "/limits"), { requestsPerMinute: 60 })
      expect(put.status).toBe(200)
      expect(((await put.json()) as any).resource.resource).toBe(long)

      const before = await server.run(recorded)
      for (const bad of ["has space", `x${"y".repeat(200)}`, "naïve", "a%b", "a#b", "a?b"]) {
        const response = await send(server.url, "PUT", resourcePath(bad, "/limits"), { maxConcurrent: 1 })
        expect(response.status, bad).toBe(400)
        const body = (await response.json()) as any
        expect(body.error, bad).toBe("invalid_request")
        expect(body.issues[0].path, bad).toEqual(["resource"])
        const pause = await send(server.url, "POST", resourcePath(bad, "/pause"), {})
        expect(pause.status, bad).toBe(400)
        expect((await send(server.url, "POST", resourcePath(bad, "/resume"))).status, bad).toBe(400)
        expect((await fetch(server.url + resourcePath(bad))).status, bad).toBe(400)
      }
      expect(await server.run(recorded)).toEqual(before)
    })

    it("refuses a bad limits body with 400 and the field, and changes nothing", async () => {
      const resource = fresh()
      expect((await send(server.url, "PUT", resourcePath(resource, "/limits"), { maxConcurrent: 3 })).status).toBe(200)
      const bodies: ReadonlyArray<[unknown, ReadonlyArray<string>]> = [
        [{ maxConcurrent: 0 }, ["maxConcurrent"]],
        [{ maxConcurrent: 1.5 }, ["maxConcurrent"]],
        [{ requestsPerMinute: -1 }, ["requestsPerMinute"]],
        [{ inputTokensPerMinute: 0 }, ["inputTokensPerMinute"]],
        [{ outputTokensPerMinute: "many" }, ["outputTokensPerMinute"]],
        [{ burstSeconds: 0 }, ["burstSeconds"]],
        [{ priorityShare: { minPriority: 1, share: 1 } }, ["priorityShare", "share"]],
        [{ priorityShare: { minPriority: 1 } }, ["priorityShare", "share"]],
        [{ priorityShare: { minPriority: 1, share: 0.2, extra: true } }, ["priorityShare", "extra"]],
        [{ maxConcurent: 3 }, ["maxConcurent"]],
        [[], []]
      ]
      for (const [body, path] of bodies) {
        const response = await send(server.url, "PUT", resourcePath(resource, "/limits"), body)
        const what = JSON.stringify(body)
        expect(response.status, what).toBe(400)
        const answer = (await response.json()) as any
        expect(answer.error, what).toBe("invalid_request")
        expect(answer.issues[0].path, what).toEqual(path)
      }
      for (const text of ["", "not json", "{"]) {
        expect((await send(server.url, "PUT", resourcePath(resource, "/limits"), text)).status, text).toBe(400)
      }
      const after = (await (await fetch(server.url + resourcePath(resource))).json()) as any
      expect(after.resource.limits).toEqual({ maxConcurrent: 3 })
    })

    it("pauses by hand until resumed or until a time, refuses an end already past, and resumes", async () => {
      const resource = fresh("anthropic:sonnet")
      // A reason of up to 1000 characters is kept whole.
      const long = await send(server.url, "POST", resourcePath(resource, "/pause"), { reason: "r".repeat(1000) })
      expect(long.status).toBe(200)
      expect(((await long.json()) as any).resource.pause.reason).toHaveLength(1000)
      await send(server.url, "POST", resourcePath(resource, "/resume"))
      const paused = await send(server.url, "POST", resourcePath(resource, "/pause"), { reason: "card declined" })
      expect(paused.status).toBe(200)
      const body = (await paused.json()) as any
      expect(body.resource.pause).toMatchObject({ kind: "manual", until: null, reason: "card declined" })
      // Set by this request: its start is the store time of the pause, read again for the answer just after.
      expect(Date.parse(body.resource.pause.since)).toBeLessThanOrEqual(Date.parse(body.now))
      expect(Date.parse(body.now) - Date.parse(body.resource.pause.since)).toBeLessThan(5_000)
      expect(body.resource.counters.pauses.manual).toBe(2)
      // Every worker's Limiter now answers Paused.
      const refused = await server.run(acquire(resource, "job-p"))
      expect(refused).toMatchObject({ _tag: "Paused", kind: "manual", until: null })

      const resumed = await send(server.url, "POST", resourcePath(resource, "/resume"))
      expect(resumed.status).toBe(200)
      const after = (await resumed.json()) as any
      expect(after.wasPaused).toBe(true)
      expect(after.resource.pause).toBeNull()
      expect((await server.run(acquire(resource, "job-q")))._tag).toBe("Granted")
      const again = (await (await send(server.url, "POST", resourcePath(resource, "/resume"))).json()) as any
      expect(again.wasPaused).toBe(false)

      // A timed pause; and an end at or before the store's time is a 422 that writes nothing.
      const until = new Date(Date.now() + 60 * 60_000).toISOString()
      const timed = (await (await send(server.url, "POST", resourcePath(resource, "/pause"), { until })).json()) as any
      expect(timed.resource.pause).toMatchObject({ kind: "manual", until, reason: "paused by an operator" })
      await send(server.url, "POST", resourcePath(resource, "/resume"))
      const other = fresh("anthropic:haiku")
      const past = await send(server.url, "POST", resourcePath(other, "/pause"), { until: "2020-01-01T00:00:00Z" })
      expect(past.status).toBe(422)
      expect(await past.json()).toEqual({ error: "until_not_in_future" })
      expect(await server.run(recorded)).not.toContain(other)
      for (const [bad, path] of [
        [{ until: "tomorrow" }, ["until"]],
        [{ reason: "x".repeat(1001) }, ["reason"]],
        [{ reason: "a\u0000b" }, ["reason"]],
        [{ kind: "rate_limited" }, ["kind"]]
      ] as const) {
        const response = await send(server.url, "POST", resourcePath(other, "/pause"), bad)
        expect(response.status, JSON.stringify(bad)).toBe(400)
        expect(((await response.json()) as any).issues[0].path).toEqual(path)
      }
      expect(await server.run(recorded)).not.toContain(other)
    })

    it("refuses a write from another site or not in JSON, with nothing written", async () => {
      const resource = fresh()
      const crossSite = await send(
        server.url,
        "POST",
        resourcePath(resource, "/pause"),
        {},
        { origin: "https://evil.example" }
      )
      expect(crossSite.status).toBe(403)
      expect(await crossSite.json()).toEqual({ error: "cross_site_request" })
      const form = await fetch(server.url + resourcePath(resource, "/pause"), {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "until="
      })
      expect(form.status).toBe(415)
      const put = await fetch(server.url + resourcePath(resource, "/limits"), {
        method: "PUT",
        headers: { "content-type": "text/plain" },
        body: "{}"
      })
      expect(put.status).toBe(415)
      expect(await server.run(recorded)).not.toContain(resource)
    })

    it("with tokens: every tenant reads (its own permits listed; an operator sees all), only an operator writes", async () => {
      const operatorToken = Auth.makeToken()
      const tenantToken = Auth.makeToken()
      const tokens = Either.getOrThrow(
        Auth.parseTokens(`ops ${Auth.hashToken(operatorToken)}\nacme ${Auth.hashToken(tenantToken)}`)
      )
      const secured = await start(options.backend(), { tokens, operators: ["ops"] })
      try {
        const as = (token: string) => ({ authorization: `Bearer ${token}` })
        const resource = fresh()
        expect((await send(secured.url, "PUT", resourcePath(resource, "/limits"), { maxConcurrent: 5 })).status).toBe(
          401
        )
        for (const [method, rest, body] of [
          ["PUT", "/limits", { maxConcurrent: 1 }],
          ["POST", "/pause", {}],
          ["POST", "/resume", undefined]
        ] as const) {
          const refused = await send(secured.url, method, resourcePath(resource, rest), body, as(tenantToken))
          expect(refused.status, rest).toBe(403)
          expect(await refused.json()).toEqual({ error: "operator_required" })
        }
        expect(await secured.run(recorded)).not.toContain(resource)
        const put = await send(
          secured.url,
          "PUT",
          resourcePath(resource, "/limits"),
          { maxConcurrent: 5 },
          as(operatorToken)
        )
        expect(put.status).toBe(200)

        await secured.run(acquire(resource, "acme-job", "acme"))
        await secured.run(acquire(resource, "beta-job", "beta"))
        const seen = (await (
          await fetch(secured.url + resourcePath(resource), { headers: as(tenantToken) })
        ).json()) as any
        expect(seen.resource.permitsInUse).toBe(2)
        expect(seen.resource.permits.map((p: any) => p.jobId)).toEqual(["acme-job"])
        const listed = (await (
          await fetch(`${secured.url}/v1/resources`, { headers: as(operatorToken) })
        ).json()) as any
        const all = listed.resources.find((r: any) => r.resource === resource)
        expect(all.permits.map((p: any) => [p.jobId, p.tenant]).sort()).toEqual([
          ["acme-job", "acme"],
          ["beta-job", "beta"]
        ])
      } finally {
        await secured.close()
      }
    })
  })
