/**
 * `slowcall schedules` as a user runs it (`packages/cli/bin/slowcall.mjs`) against a live server on the memory store:
 * set, list, get, pause, resume and delete, with `--json` printing the API's body unchanged, an id with `/` and a
 * space, and every refusal one line with nothing written.
 */
import { execFile } from "node:child_process"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Limiter from "@slowcall/core/Limiter"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Effect, Layer } from "effect"
import { type Running, start } from "../../http/test/harness.js"

const bin = new URL("../bin/slowcall.mjs", import.meta.url).pathname

const slowcall = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { ...process.env, NO_COLOR: "1" }, timeout: 60_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr })
      }
    )
  })

/** Every schedule the store keeps, by id. */
const stored = Effect.flatMap(ScheduleStore.ScheduleStore, (store) => store.list()).pipe(
  Effect.map((reply) => reply.result)
)

describe("slowcall schedules against a running server", () => {
  let server: Running
  const id = "reports/nightly summary"

  beforeAll(async () => {
    server = await start(
      Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory)
    )
  })
  afterAll(() => server?.close())

  it("set defines a schedule with every option; list and get show it with its next tick; --json is the API's body", async () => {
    const set = await slowcall([
      "schedules",
      "set",
      id,
      "--cron",
      "0 2 * * *",
      "--timezone",
      "Europe/Berlin",
      "--type",
      "report.summary",
      "--queue",
      "reports",
      "--input",
      '{"scope":"yesterday"}',
      "--tenant",
      "acme",
      "--priority",
      "3",
      "--max-attempts",
      "2",
      "--budget-cents",
      "50",
      "--deadline",
      "2h",
      "--overlap",
      "cancelPrevious",
      "--catch-up",
      "all:6h",
      "--grace",
      "90s",
      "--url",
      server.url
    ])
    expect(set.code, set.stderr).toBe(0)
    expect(set.stdout).toMatch(/^schedule {4}reports\/nightly summary$/m)
    expect(set.stdout).toMatch(/^cron {8}0 2 \* \* \* \(Europe\/Berlin\)$/m)
    expect(set.stdout).toMatch(/^job {9}report\.summary on queue reports for acme$/m)
    expect(set.stdout).toMatch(/^catch-up {4}all within 21600000 ms$/m)
    expect(set.stdout).toMatch(/^state {7}running$/m)
    expect(set.stdout).toMatch(/^next tick {3}\S+Z$/m)
    const [record] = await server.run(stored)
    expect(record!.schedule).toEqual({
      id,
      cron: "0 2 * * *",
      timezone: "Europe/Berlin",
      job: {
        queue: "reports",
        type: "report.summary",
        input: { scope: "yesterday" },
        tenant: "acme",
        priority: 3,
        maxAttempts: 2,
        budgetCents: 50,
        deadlineMs: 7_200_000
      },
      overlap: "cancelPrevious",
      catchUp: { all: 21_600_000 },
      graceMs: 90_000
    })

    const list = await slowcall(["schedules", "list", "--url", server.url])
    expect(list.code, list.stderr).toBe(0)
    const [header, row] = list.stdout.trimEnd().split("\n")
    expect(header).toMatch(/^SCHEDULE\s+CRON\s+TIMEZONE\s+JOB TYPE\s+STATE\s+LAST TICK\s+LAST JOB\s+NEXT TICK$/)
    expect(row).toMatch(
      /^reports\/nightly summary\s+0 2 \* \* \*\s+Europe\/Berlin\s+report\.summary\s+running\s+-\s+-\s+\S+Z$/
    )

    const json = await slowcall(["schedules", "get", id, "--json", "--url", server.url])
    const api = (await (await fetch(`${server.url}/v1/schedules/${encodeURIComponent(id)}`)).json()) as any
    const printed = JSON.parse(json.stdout)
    expect(Object.keys(printed).sort()).toEqual(["now", "schedule"])
    expect(printed.schedule).toEqual(api.schedule)
    const listed = JSON.parse((await slowcall(["schedules", "list", "--json", "--url", server.url])).stdout)
    expect(listed.schedules.map((s: any) => s.id)).toEqual([id])
  })

  it("pause and resume for the whole fleet, then delete", async () => {
    const paused = await slowcall(["schedules", "pause", id, "--url", server.url])
    expect(paused.code, paused.stderr).toBe(0)
    expect(paused.stdout).toMatch(/^paused reports\/nightly summary: no scheduler makes a job for it/m)
    expect(paused.stdout).toMatch(/^state {7}paused$/m)
    expect(paused.stdout).toMatch(/^next tick {3}- \(paused\)$/m)
    expect((await server.run(stored))[0]!.paused).toBe(true)

    const resumed = await slowcall(["schedules", "resume", id, "--json", "--url", server.url])
    expect(JSON.parse(resumed.stdout).schedule.paused).toBe(false)
    expect((await server.run(stored))[0]!.paused).toBe(false)

    const removed = await slowcall(["schedules", "delete", id, "--url", server.url])
    expect(removed.code, removed.stderr).toBe(0)
    expect(removed.stdout).toMatch(/^deleted reports\/nightly summary/m)
    expect(await server.run(stored)).toEqual([])
  })

  it("refuses with one line and writes nothing: a bad cron, timezone, input, policy or duration, an unknown id", async () => {
    const other = "other"
    const base = ["schedules", "set", other, "--type", "t"]
    const cases: ReadonlyArray<[ReadonlyArray<string>, RegExp]> = [
      [[...base, "--cron", "61 * * * *"], /^slowcall: PUT \/v1\/schedules\/other failed: invalid_request: cron /],
      [
        [...base, "--cron", "* * * * *", "--timezone", "Mars/Olympus"],
        /failed: invalid_request: timezone must be an IANA timezone name/
      ],
      [[...base, "--cron", "* * * * *", "--input", "{oops"], /^slowcall: --input: not JSON/],
      [[...base, "--cron", "* * * * *", "--catch-up", "sometimes"], /^slowcall: --catch-up sometimes: give skip/],
      [[...base, "--cron", "* * * * *", "--grace", "soon"], /^slowcall: --grace soon: give a duration/],
      [[...base, "--cron", "* * * * *", "--max-attempts", "0"], /failed: invalid_request: job\.maxAttempts /],
      [["schedules", "get", "missing"], /^slowcall: GET \/v1\/schedules\/missing failed: not_found$/],
      [["schedules", "pause", "missing"], /failed: not_found$/],
      [["schedules", "delete", "missing"], /failed: not_found$/]
    ]
    for (const [args, message] of cases) {
      const result = await slowcall([...args, "--url", server.url])
      expect(result.code, args.join(" ")).toBe(1)
      expect(result.stderr.trim(), args.join(" ")).toMatch(message)
    }
    expect(await server.run(stored)).toEqual([])
  })
})
