/**
 * `slowcall serve --schedules` as a user runs it: a schedule defined over HTTP on embedded PGlite makes a job each
 * second, which the schedule's view then names as its last job; a server started without `--schedules` serves the
 * same schedules and makes no job.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { serve, stopAll } from "./processes.js"

const dir = mkdtempSync(join(tmpdir(), "slowcall-serve-schedules-"))

afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
})

const define = (url: string, id: string) =>
  fetch(`${url}/v1/schedules/${id}`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    // No worker runs the jobs: `allow` makes each tick's job though the previous one is still queued.
    body: JSON.stringify({ cron: "* * * * * *", overlap: "allow", job: { queue: "default", type: "tick.work" } })
  })

const tickJobs = async (url: string) =>
  ((await (await fetch(`${url}/v1/jobs?type=tick.work`)).json()) as any).jobs as ReadonlyArray<any>

describe("slowcall serve --schedules", () => {
  it("turns due ticks into jobs, one per tick, and the schedule's view names the last", async () => {
    const server = await serve(["--schedules", "--port", "0", "--data-dir", join(dir, "data")])
    expect((await define(server.url, "every-second")).status).toBe(200)
    const until = Date.now() + 30_000
    let jobs: ReadonlyArray<any> = []
    while (Date.now() < until && jobs.length < 3) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      jobs = await tickJobs(server.url)
    }
    expect(jobs.length).toBeGreaterThanOrEqual(3)
    // One job per tick: each names a distinct whole second.
    const ticks = jobs.map((job) => job.input.tick)
    expect(new Set(ticks).size).toBe(ticks.length)
    for (const job of jobs) {
      expect(job.input.schedule).toBe("every-second")
      expect(job.input.tick).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/)
    }
    const view = ((await (await fetch(`${server.url}/v1/schedules/every-second`)).json()) as any).schedule
    expect(view.lastTick).not.toBeNull()
    const newest = await tickJobs(server.url)
    expect(newest.map((job) => job.id)).toContain(view.lastJobId)

    // Paused over HTTP: the scheduler makes no more jobs.
    expect(
      (
        await fetch(`${server.url}/v1/schedules/every-second/pause`, {
          method: "POST",
          headers: { "content-type": "application/json" }
        })
      ).status
    ).toBe(200)
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    const atPause = (await tickJobs(server.url)).length
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    expect((await tickJobs(server.url)).length).toBe(atPause)
    await server.stop()
  })

  it("without --schedules, the schedules are served and no job is made", async () => {
    const server = await serve(["--memory", "--port", "0"])
    expect((await define(server.url, "every-second")).status).toBe(200)
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    expect(await tickJobs(server.url)).toEqual([])
    const view = ((await (await fetch(`${server.url}/v1/schedules/every-second`)).json()) as any).schedule
    expect(view.lastTick).toBeNull()
    expect(view.lastJobId).toBeNull()
    await server.stop()
  })
})
