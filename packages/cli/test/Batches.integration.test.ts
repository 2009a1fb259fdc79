/**
 * `slowcall batches` as a user runs it (`packages/cli/bin/slowcall.mjs`) against a live server on the memory store:
 * get, jobs (paged, by state), cancel and replay, with `--json` printing the API's body unchanged, and an unknown
 * batch one line naming the refusal.
 */
import { execFile } from "node:child_process"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Limiter from "@slowcall/core/Limiter"
import * as Store from "@slowcall/core/Store"
import * as Transport from "@slowcall/core/Transport"
import * as ScheduleStore from "@slowcall/schedules/ScheduleStore"
import { Layer } from "effect"
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

describe("slowcall batches against a running server", () => {
  let server: Running
  let batchId = ""

  beforeAll(async () => {
    server = await start(
      Layer.mergeAll(Store.layerMemory, Transport.layerMemory(), Limiter.layerMemory, ScheduleStore.layerMemory),
      {
        queue: "cli-batches"
      }
    )
    const answer = await fetch(`${server.url}/v1/batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        items: Array.from({ length: 3 }, (_, i) => ({ type: "test.work", input: { doc: i } })),
        budgetCents: 250,
        onComplete: { type: "test.work" }
      })
    })
    batchId = ((await answer.json()) as any).id
  })
  afterAll(() => server?.close())

  it("get shows progress, counts, budget and callbacks; --json is the API's body", async () => {
    const text = await slowcall(["batches", "get", batchId, "--url", server.url])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toMatch(new RegExp(`^batch +${batchId}$`, "m"))
    expect(text.stdout).toMatch(/^progress +0\/3 ended$/m)
    expect(text.stdout).toMatch(/^counts +queued 3, running 0, succeeded 0, failed 0, abandoned 0$/m)
    expect(text.stdout).toMatch(/^onComplete +test\.work \(not enqueued yet\)$/m)
    const json = await slowcall(["batches", "get", batchId, "--json", "--url", server.url])
    expect(JSON.parse(json.stdout)).toEqual(await (await fetch(`${server.url}/v1/batches/${batchId}`)).json())
  })

  it("jobs lists the items in order, pages with --after and filters with --state", async () => {
    const page = await slowcall(["batches", "jobs", batchId, "--limit", "2", "--json", "--url", server.url])
    expect(page.code, page.stderr).toBe(0)
    const body = JSON.parse(page.stdout)
    expect(body.jobs.map((job: any) => job.input)).toEqual([{ doc: 0 }, { doc: 1 }])
    const text = await slowcall(["batches", "jobs", batchId, "--limit", "2", "--url", server.url])
    expect(text.stdout).toContain(`next page: --after ${body.next}`)
    const rest = await slowcall(["batches", "jobs", batchId, "--after", body.next, "--json", "--url", server.url])
    expect(JSON.parse(rest.stdout).jobs.map((job: any) => job.input)).toEqual([{ doc: 2 }])
    const failed = await slowcall(["batches", "jobs", batchId, "--state", "failed", "--url", server.url])
    expect(failed.stdout.trim()).toBe("no jobs")
  })

  it("cancel abandons the queued items and finishes the batch; replay then moves none", async () => {
    const cancel = await slowcall(["batches", "cancel", batchId, "--url", server.url])
    expect(cancel.code, cancel.stderr).toBe(0)
    expect(cancel.stdout.trim()).toBe(`cancelled ${batchId}: 3 abandoned, 0 running asked to stop`)
    const read = (await (await fetch(`${server.url}/v1/batches/${batchId}`)).json()) as any
    expect(read.finished).toBe(true)
    expect(read.counts.abandoned).toBe(3)
    const replay = await slowcall(["batches", "replay", batchId, "--json", "--url", server.url])
    expect(JSON.parse(replay.stdout)).toMatchObject({ replayed: 0, batch: { id: batchId } })
  })

  it("an unknown batch is one line naming the refusal, exit code non-zero", async () => {
    const missing = await slowcall(["batches", "get", "0190a5b8-7c3d-7e4f-8a1b-2c3d4e5f6a7b", "--url", server.url])
    expect(missing.code).not.toBe(0)
    expect(missing.stderr).toMatch(/not_found/)
    expect(missing.stdout).toBe("")
  })
})
