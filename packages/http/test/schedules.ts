/**
 * The schedule endpoints as one suite run against every backend (memory, PGlite, the Postgres server): schedules
 * defined, read, paused, resumed and deleted over HTTP, checked against what the backend's own `ScheduleStore` then
 * holds (what every Scheduler of the fleet reads); bad definitions refused with nothing written; operators only,
 * with authentication.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Schedule from "@slowcall/schedules/Schedule"
import { ScheduleStore } from "@slowcall/schedules/ScheduleStore"
import { Effect, Either, type Layer } from "effect"
import * as Auth from "../src/Auth.js"
import { type Backend, type Running, start } from "./harness.js"

export interface ScheduleSuiteOptions {
  readonly name: string
  readonly backend: () => Layer.Layer<Backend, unknown>
}

let counter = 0
/** A fresh schedule id with a `/` and a space, which a path must carry encoded. */
const fresh = () => `nightly/summary ${Date.now().toString(36)}-${counter++}`

export const schedulePath = (id: string, rest = "") => `/v1/schedules/${encodeURIComponent(id)}${rest}`

const send = (url: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(url + path, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
  })

const nightly = {
  cron: "0 2 * * *",
  timezone: "Europe/Berlin",
  job: { queue: "default", type: "report.summary", input: { scope: "yesterday" } },
  catchUp: "latest"
}

/** The stored record of a schedule, as the store holds it (null: none). */
const stored = (id: string) =>
  Effect.flatMap(ScheduleStore, (store) => store.get(id)).pipe(
    Effect.map((reply) => (reply.result._tag === "Found" ? reply.result.record : null))
  )

export const scheduleSuite = (options: ScheduleSuiteOptions) =>
  describe(`schedules over HTTP on ${options.name}`, () => {
    let server: Running

    beforeAll(async () => {
      server = await start(options.backend())
    })
    afterAll(() => server?.close())

    it("defines a schedule, reads it back by its encoded path with its next tick in store time, and lists it", async () => {
      const id = fresh()
      const put = await send(server.url, "PUT", schedulePath(id), nightly)
      expect(put.status).toBe(200)
      const written = (await put.json()) as any
      expect(written.schedule).toMatchObject({
        id,
        cron: "0 2 * * *",
        timezone: "Europe/Berlin",
        job: { queue: "default", type: "report.summary", input: { scope: "yesterday" } },
        overlap: "skip",
        catchUp: "latest",
        graceMs: 60_000,
        paused: false,
        lastTick: null,
        lastJobId: null,
        decidedThrough: written.now
      })
      const now = Date.parse(written.now)
      const next = Date.parse(written.schedule.nextTick)
      // The first 02:00 in Berlin after the store's time: within a day, and 02:00 on Berlin's wall clock.
      expect(next).toBeGreaterThan(now)
      expect(next - now).toBeLessThanOrEqual(25 * 3_600_000)
      expect(next).toBe(Schedule.nextTick((await server.run(stored(id)))!.schedule, now))
      expect(
        new Intl.DateTimeFormat("en-GB", { timeZone: "Europe/Berlin", hour: "2-digit", minute: "2-digit" }).format(next)
      ).toBe("02:00")

      const record = await server.run(stored(id))
      expect(record?.schedule).toEqual(
        Either.getOrThrow(Schedule.make({ id, ...(nightly as Omit<Schedule.MakeOptions, "id">) }))
      )
      const got = await fetch(server.url + schedulePath(id))
      expect(got.status).toBe(200)
      expect(((await got.json()) as any).schedule.id).toBe(id)
      const list = (await (await fetch(`${server.url}/v1/schedules`)).json()) as any
      expect(list.schedules.map((s: any) => s.id)).toContain(id)
    })

    it("replacing a definition keeps the paused flag, the last tick and the last job", async () => {
      const id = fresh()
      expect((await send(server.url, "PUT", schedulePath(id), { ...nightly, cron: "* * * * *" })).status).toBe(200)
      const record = (await server.run(stored(id)))!
      const tick = Schedule.nextTick(record.schedule, record.cursor)!
      await server.run(Effect.flatMap(ScheduleStore, (store) => store.advance(id, tick, "job-of-the-tick")))
      expect((await send(server.url, "POST", schedulePath(id, "/pause"))).status).toBe(200)
      const replaced = (await (
        await send(server.url, "PUT", schedulePath(id), { ...nightly, cron: "* * * * *", catchUp: "skip" })
      ).json()) as any
      expect(replaced.schedule).toMatchObject({
        catchUp: "skip",
        decidedThrough: new Date(tick).toISOString(),
        paused: true,
        nextTick: null,
        lastTick: new Date(tick).toISOString(),
        lastJobId: "job-of-the-tick"
      })
    })

    it("refuses a bad definition with a 400 naming the field, and writes nothing", async () => {
      const cases: ReadonlyArray<readonly [unknown, ReadonlyArray<string>]> = [
        [{ ...nightly, cron: "61 * * * *" }, ["cron"]],
        [{ ...nightly, timezone: "Mars/Olympus" }, ["timezone"]],
        [{ ...nightly, catchUp: { all: 0 } }, ["catchUp", "all"]],
        [{ ...nightly, job: { queue: "default", type: "" } }, ["job", "type"]],
        [{ ...nightly, job: { ...nightly.job, maxAttempts: 0 } }, ["job", "maxAttempts"]],
        [{ ...nightly, overlap: "sometimes" }, ["overlap"]],
        [{ ...nightly, cronn: "0 2 * * *" }, ["cronn"]],
        [{ ...nightly, id: "another" }, ["id"]]
      ]
      for (const [body, path] of cases) {
        const id = fresh()
        const response = await send(server.url, "PUT", schedulePath(id), body)
        expect(response.status, JSON.stringify(body)).toBe(400)
        const refused = (await response.json()) as any
        expect(refused.error).toBe("invalid_request")
        expect(
          refused.issues.map((issue: any) => issue.path),
          JSON.stringify(body)
        ).toContainEqual(path)
        expect(await server.run(stored(id))).toBeNull()
      }
      const id = fresh()
      expect((await send(server.url, "PUT", schedulePath(id), "{not json")).status).toBe(400)
      expect(
        (await fetch(server.url + schedulePath(id), { method: "PUT", body: JSON.stringify(nightly) })).status
      ).toBe(415)
      expect(await server.run(stored(id))).toBeNull()
    })

    it("pauses and resumes for the whole fleet: the store's record says so, and resume skips the paused ticks", async () => {
      const id = fresh()
      await send(server.url, "PUT", schedulePath(id), { ...nightly, cron: "* * * * * *" })
      const paused = (await (await send(server.url, "POST", schedulePath(id, "/pause"))).json()) as any
      expect(paused.schedule.paused).toBe(true)
      expect(paused.schedule.nextTick).toBeNull()
      expect((await server.run(stored(id)))?.paused).toBe(true)
      const again = await send(server.url, "POST", schedulePath(id, "/pause"))
      expect(again.status).toBe(200)

      const resumed = (await (await send(server.url, "POST", schedulePath(id, "/resume"))).json()) as any
      expect(resumed.schedule.paused).toBe(false)
      const record = (await server.run(stored(id)))!
      expect(record.paused).toBe(false)
      // The cursor moved to the store time of the resume: the ticks of the pause never run.
      expect(Math.floor(record.cursor)).toBe(Date.parse(resumed.now))
      expect(Date.parse(resumed.schedule.nextTick)).toBeGreaterThan(Date.parse(resumed.now))
    })

    it("an id no store can keep (a NUL) is a 400 for every verb, never a 500, and nothing is written", async () => {
      for (const [method, rest, body] of [
        ["GET", "", undefined],
        ["PUT", "", nightly],
        ["POST", "/pause", undefined],
        ["POST", "/resume", undefined],
        ["DELETE", "", undefined]
      ] as const) {
        const response = await send(server.url, method, `/v1/schedules/a%00b${rest}`, body)
        expect(response.status, `${method} ${rest}`).toBe(400)
        expect(((await response.json()) as any).error).toBe("invalid_request")
      }
      const list = (await (await fetch(`${server.url}/v1/schedules`)).json()) as any
      expect(list.schedules.map((s: any) => s.id)).not.toContain("a\u0000b")
    })

    it("deletes a schedule; an unknown one is a 404 for every verb", async () => {
      const id = fresh()
      await send(server.url, "PUT", schedulePath(id), nightly)
      const removed = await send(server.url, "DELETE", schedulePath(id))
      expect(removed.status).toBe(204)
      expect(await server.run(stored(id))).toBeNull()
      for (const [method, rest] of [
        ["GET", ""],
        ["DELETE", ""],
        ["POST", "/pause"],
        ["POST", "/resume"]
      ] as const) {
        const response =
          method === "GET"
            ? await fetch(server.url + schedulePath(id))
            : await send(server.url, method, schedulePath(id, rest))
        expect(response.status, `${method} ${rest}`).toBe(404)
        expect(await response.json()).toEqual({ error: "not_found" })
      }
      expect(await server.run(stored(id))).toBeNull()
    })

    it("with tokens: only an operator writes; a tenant sees the schedules whose jobs are its own", async () => {
      const operatorToken = Auth.makeToken()
      const tenantToken = Auth.makeToken()
      const tokens = Either.getOrThrow(
        Auth.parseTokens(`ops ${Auth.hashToken(operatorToken)}\nacme ${Auth.hashToken(tenantToken)}`)
      )
      const secured = await start(options.backend(), { tokens, operators: ["ops"] })
      try {
        const as = (token: string) => ({ authorization: `Bearer ${token}` })
        const mine = fresh()
        const theirs = fresh()
        expect((await send(secured.url, "PUT", schedulePath(mine), nightly)).status).toBe(401)
        for (const [method, rest, body] of [
          ["PUT", "", { ...nightly, job: { ...nightly.job, tenant: "acme" } }],
          ["POST", "/pause", undefined],
          ["POST", "/resume", undefined],
          ["DELETE", "", undefined]
        ] as const) {
          const refused = await send(secured.url, method, schedulePath(mine, rest), body, as(tenantToken))
          expect(refused.status, `${method} ${rest}`).toBe(403)
          expect(await refused.json()).toEqual({ error: "operator_required" })
        }
        expect(await secured.run(stored(mine))).toBeNull()
        const define = (id: string, tenant: string) =>
          send(secured.url, "PUT", schedulePath(id), { ...nightly, job: { ...nightly.job, tenant } }, as(operatorToken))
        expect((await define(mine, "acme")).status).toBe(200)
        expect((await define(theirs, "beta")).status).toBe(200)

        const listed = (await (await fetch(`${secured.url}/v1/schedules`, { headers: as(tenantToken) })).json()) as any
        const ids = listed.schedules.map((s: any) => s.id)
        expect(ids).toContain(mine)
        expect(ids).not.toContain(theirs)
        expect((await fetch(secured.url + schedulePath(theirs), { headers: as(tenantToken) })).status).toBe(404)
        expect((await fetch(secured.url + schedulePath(mine), { headers: as(tenantToken) })).status).toBe(200)
        const all = (await (await fetch(`${secured.url}/v1/schedules`, { headers: as(operatorToken) })).json()) as any
        expect(all.schedules.map((s: any) => s.id)).toEqual(expect.arrayContaining([mine, theirs]))
      } finally {
        await secured.close()
      }
    })
  })
