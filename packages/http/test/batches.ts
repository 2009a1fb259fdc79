/**
 * The batch endpoints as one suite run against every backend (memory, PGlite, the Postgres server): submit with an
 * idempotency key, read with `ETag` / `304` / `Retry-After`, list items by state and page, cancel and replay; bad
 * input refused with nothing written; another tenant's batch answered as an unknown one.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Either, type Layer } from "effect"
import * as Auth from "../src/Auth.js"
import { type Backend, type Running, start } from "./harness.js"

export interface BatchSuiteOptions {
  readonly name: string
  readonly backend: () => Layer.Layer<Backend, unknown>
}

const send = (url: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(url + path, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
  })

let counter = 0
const freshKey = () => `import-${Date.now().toString(36)}-${counter++}`

const items = (n: number, tag: string) =>
  Array.from({ length: n }, (_, i) => ({ type: "test.work", input: { doc: `${tag}-${i}` } }))

/** How many jobs the server holds (every state), read over the API. */
const totalJobs = async (url: string, headers: Record<string, string> = {}) =>
  ((await (await fetch(`${url}/v1/jobs?limit=1`, { headers })).json()) as any).total as number

export const batchSuite = (options: BatchSuiteOptions) =>
  describe(`batches over HTTP on ${options.name}`, () => {
    let server: Running

    beforeAll(async () => {
      server = await start(options.backend())
    })
    afterAll(() => server?.close())

    it("submits a batch, answers the same batch for the same key and 422 for other items under it", async () => {
      const key = freshKey()
      const body = { items: items(3, key), budgetCents: 500, onComplete: { type: "test.work", input: { done: 1 } } }
      const first = await send(server.url, "POST", "/v1/batches", body, { "idempotency-key": key })
      expect(first.status).toBe(202)
      const batch = (await first.json()) as any
      expect(first.headers.get("location")).toBe(`/v1/batches/${batch.id}`)
      expect(batch).toMatchObject({
        requestKey: key,
        size: 3,
        added: 3,
        counts: { queued: 3, running: 0, succeeded: 0, failed: 0, abandoned: 0 },
        costCents: 0,
        budgetCents: 500,
        onComplete: { type: "test.work", jobId: null },
        onSuccess: null,
        finished: false,
        finishedAt: null
      })

      const again = await send(server.url, "POST", "/v1/batches", body, { "idempotency-key": key })
      expect(again.status).toBe(200)
      expect(again.headers.get("idempotent-replayed")).toBe("true")
      expect(((await again.json()) as any).id).toBe(batch.id)

      const before = await totalJobs(server.url)
      const other = await send(
        server.url,
        "POST",
        "/v1/batches",
        { ...body, items: items(3, `${key}-other`) },
        { "idempotency-key": key }
      )
      expect(other.status).toBe(422)
      expect(await other.json()).toEqual({ error: "idempotency_key_reused" })
      expect(await totalJobs(server.url)).toBe(before)
    })

    it("refuses bad input with 400, naming the item, and writes nothing", async () => {
      const before = await totalJobs(server.url)
      const cases: ReadonlyArray<readonly [unknown, ReadonlyArray<unknown>]> = [
        [{ items: [] }, ["items"]],
        [{ items: [{ type: "test.work" }, { type: "no.such.type" }] }, ["items", 1, "type"]],
        [{ items: [{ type: "test.work", priority: 1.5 }] }, ["items", 0, "priority"]],
        [{ items: items(1, "x"), onSuccess: { type: "nope" } }, ["onSuccess", "type"]],
        [{ items: items(1, "x"), budgetCents: -1 }, ["budgetCents"]],
        [{ items: items(1, "x"), extra: true }, ["extra"]]
      ]
      for (const [body, path] of cases) {
        const answer = await send(server.url, "POST", "/v1/batches", body, { "idempotency-key": freshKey() })
        expect(answer.status, JSON.stringify(body)).toBe(400)
        const refused = (await answer.json()) as any
        expect(refused.error).toBe("invalid_request")
        expect(refused.issues.map((issue: any) => issue.path)).toContainEqual(path)
      }
      expect(await totalJobs(server.url)).toBe(before)
    })

    it("reads a batch with an ETag, 304 when unchanged, Retry-After while unfinished; 404 for unknown ids", async () => {
      const created = (await (
        await send(server.url, "POST", "/v1/batches", { items: items(2, "read") }, { "idempotency-key": freshKey() })
      ).json()) as any
      const read = await fetch(`${server.url}/v1/batches/${created.id}`)
      expect(read.status).toBe(200)
      const tag = read.headers.get("etag")
      expect(tag).toMatch(new RegExp(`^"${created.id}\\.\\d+"$`))
      expect(read.headers.get("retry-after")).toBe("1")
      expect(((await read.json()) as any).counts.queued).toBe(2)

      const unchanged = await fetch(`${server.url}/v1/batches/${created.id}`, { headers: { "if-none-match": tag! } })
      expect(unchanged.status).toBe(304)

      // The cancel moves the batch: the old tag no longer matches, and a finished batch has no polling hint.
      expect((await send(server.url, "POST", `/v1/batches/${created.id}/cancel`)).status).toBe(202)
      const changed = await fetch(`${server.url}/v1/batches/${created.id}`, { headers: { "if-none-match": tag! } })
      expect(changed.status).toBe(200)
      expect(changed.headers.get("etag")).not.toBe(tag)
      expect(changed.headers.get("retry-after")).toBeNull()

      for (const id of ["not-a-uuid", "0190a5b8-7c3d-7e4f-8a1b-2c3d4e5f6a7b"]) {
        const missing = await fetch(`${server.url}/v1/batches/${id}`)
        expect(missing.status).toBe(404)
        expect(await missing.json()).toEqual({ error: "not_found" })
      }
    })

    it("lists a batch's items in order, paged and filtered by state", async () => {
      const created = (await (
        await send(server.url, "POST", "/v1/batches", { items: items(5, "page") }, { "idempotency-key": freshKey() })
      ).json()) as any
      const first = (await (await fetch(`${server.url}/v1/batches/${created.id}/jobs?limit=2`)).json()) as any
      expect(first.jobs.map((job: any) => job.input)).toEqual([{ doc: "page-0" }, { doc: "page-1" }])
      expect(first.next).toBe(first.jobs[1].id)
      const rest = (await (
        await fetch(`${server.url}/v1/batches/${created.id}/jobs?limit=10&after=${first.next}`)
      ).json()) as any
      expect(rest.jobs.map((job: any) => job.input.doc)).toEqual(["page-2", "page-3", "page-4"])
      expect(rest.next).toBeNull()

      const queued = (await (await fetch(`${server.url}/v1/batches/${created.id}/jobs?state=queued`)).json()) as any
      expect(queued.jobs).toHaveLength(5)
      const failed = (await (await fetch(`${server.url}/v1/batches/${created.id}/jobs?state=failed`)).json()) as any
      expect(failed.jobs).toHaveLength(0)
      const bad = await fetch(`${server.url}/v1/batches/${created.id}/jobs?limit=0`)
      expect(bad.status).toBe(400)
    })

    it("cancels a batch: its queued items abandoned at once, the batch finished; replay moves no succeeded item", async () => {
      const created = (await (
        await send(server.url, "POST", "/v1/batches", { items: items(3, "cancel") }, { "idempotency-key": freshKey() })
      ).json()) as any
      const cancelled = await send(server.url, "POST", `/v1/batches/${created.id}/cancel`)
      expect(cancelled.status).toBe(202)
      const batch = (await cancelled.json()) as any
      expect(batch.counts).toEqual({ queued: 0, running: 0, succeeded: 0, failed: 0, abandoned: 3 })
      expect(batch.finished).toBe(true)
      expect(batch.cancelRequestedAt).not.toBeNull()
      const abandoned = (await (
        await fetch(`${server.url}/v1/batches/${created.id}/jobs?state=abandoned`)
      ).json()) as any
      expect(abandoned.jobs).toHaveLength(3)

      // Abandoned items are not dead letters: the replay moves none of them.
      const replay = await send(server.url, "POST", `/v1/batches/${created.id}/replay`)
      expect(replay.status).toBe(200)
      const replayed = (await replay.json()) as any
      expect(replayed.replayed).toBe(0)
      expect(replayed.batch.counts.abandoned).toBe(3)

      expect((await send(server.url, "POST", "/v1/batches/not-a-uuid/cancel")).status).toBe(404)
      expect((await send(server.url, "POST", "/v1/batches/not-a-uuid/replay")).status).toBe(404)
    })

    it("follows a batch as server-sent events until it finishes, and resumes after Last-Event-ID", async () => {
      const created = (await (
        await send(server.url, "POST", "/v1/batches", { items: items(2, "sse") }, { "idempotency-key": freshKey() })
      ).json()) as any
      const stream = await fetch(`${server.url}/v1/batches/${created.id}/events`)
      expect(stream.status).toBe(200)
      expect(stream.headers.get("content-type")).toMatch(/^text\/event-stream/)
      const reader = stream.body!.getReader()
      const decoder = new TextDecoder()
      let text = ""
      while (!text.includes("\n\n")) text += decoder.decode((await reader.read()).value)
      // The first event is the batch as it is now; the cancel then finishes it, and the stream ends.
      expect((await send(server.url, "POST", `/v1/batches/${created.id}/cancel`)).status).toBe(202)
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
        text += decoder.decode(chunk.value)
      const events = text
        .split("\n\n")
        .filter((block) => block.startsWith("id: "))
        .map((block) => {
          const [id, event, data] = block.split("\n")
          return { id: Number(id!.slice(4)), event: event!.slice(7), data: JSON.parse(data!.slice(6)) }
        })
      expect(events[0]!.data.counts.queued).toBe(2)
      expect(events.at(-1)!.data).toMatchObject({ finished: true, counts: { abandoned: 2 } })
      expect(events.every((event) => event.event === "batch")).toBe(true)
      const ids = events.map((event) => event.id)
      expect([...ids].sort((a, b) => a - b)).toEqual(ids)
      expect(new Set(ids).size).toBe(ids.length)

      // Resumed after the last event: nothing new, and the stream ends at once (the batch has finished).
      const resumed = await fetch(`${server.url}/v1/batches/${created.id}/events`, {
        headers: { "last-event-id": String(ids.at(-1)) }
      })
      expect(await resumed.text()).not.toMatch(/^id: /m)
      // Resumed after the first: the finished batch only.
      const fromFirst = await fetch(`${server.url}/v1/batches/${created.id}/events`, {
        headers: { "last-event-id": String(ids[0]) }
      })
      const rest = (await fromFirst.text()).split("\n\n").filter((block) => block.startsWith("id: "))
      expect(rest).toHaveLength(1)
      expect(rest[0]).toContain(`id: ${ids.at(-1)}`)
      expect((await fetch(`${server.url}/v1/batches/0190a5b8-7c3d-7e4f-8a1b-2c3d4e5f6a7b/events`)).status).toBe(404)
    })

    it("with tokens: a tenant's batch is its own; another tenant gets 404 on every route", async () => {
      const acme = Auth.makeToken()
      const globex = Auth.makeToken()
      const tokens = Either.getOrThrow(
        Auth.parseTokens(`acme ${Auth.hashToken(acme)}\nglobex ${Auth.hashToken(globex)}`)
      )
      const secured = await start(options.backend(), { tokens })
      try {
        const as = (token: string) => ({ authorization: `Bearer ${token}` })
        const created = await send(
          secured.url,
          "POST",
          "/v1/batches",
          { items: items(2, "tenant") },
          {
            ...as(acme),
            "idempotency-key": freshKey()
          }
        )
        expect(created.status).toBe(202)
        const batch = (await created.json()) as any
        expect(batch.tenant).toBe("acme")
        expect((await fetch(`${secured.url}/v1/batches/${batch.id}`, { headers: as(acme) })).status).toBe(200)
        expect((await fetch(`${secured.url}/v1/batches/${batch.id}`)).status).toBe(401)
        for (const [method, rest] of [
          ["GET", ""],
          ["GET", "/jobs"],
          ["GET", "/events"],
          ["POST", "/cancel"],
          ["POST", "/replay"]
        ] as const) {
          const answer = await send(secured.url, method, `/v1/batches/${batch.id}${rest}`, undefined, as(globex))
          expect(answer.status, `${method} ${rest}`).toBe(404)
        }
        // The other tenant's cancel changed nothing.
        const still = (await (
          await fetch(`${secured.url}/v1/batches/${batch.id}`, { headers: as(acme) })
        ).json()) as any
        expect(still.counts.queued).toBe(2)
        expect(still.cancelRequestedAt).toBeNull()
      } finally {
        await secured.close()
      }
    })
  })
