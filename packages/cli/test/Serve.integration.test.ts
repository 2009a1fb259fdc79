/**
 * `slowcall serve --demo` as `npm start` runs it: embedded PGlite in a fresh data directory, the demo handlers
 * with an in-process worker and sweeper. A demo.echo submitted with curl-like requests reaches `succeeded`, a
 * failing one becomes a dead letter, and its replay (a fresh attempt budget) then succeeds.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"

const bin = new URL("../bin/slowcall.mjs", import.meta.url).pathname

const waitForState = async (url: string, id: string, states: ReadonlyArray<string>, timeoutMs = 20_000) => {
  const until = Date.now() + timeoutMs
  let last: any
  while (Date.now() < until) {
    last = await (await fetch(`${url}/v1/jobs/${id}`)).json()
    if (states.includes(last.state)) return last
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error(`job ${id} stayed ${last?.state}`)
}

describe("slowcall serve --demo", () => {
  const dir = mkdtempSync(join(tmpdir(), "slowcall-serve-"))
  let child: ChildProcess
  let url: string
  let output = ""

  beforeAll(async () => {
    child = spawn(process.execPath, [bin, "serve", "--demo", "--port", "0", "--data-dir", join(dir, "data")], {
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    child.stderr!.on("data", (chunk) => {
      output += chunk
    })
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`serve did not start:\n${output}`)), 50_000)
      child.stdout!.on("data", (chunk) => {
        output += chunk
        const match = /slowcall is serving (http:\/\/[^/\s]+)\//.exec(output)
        if (match) {
          clearTimeout(timer)
          resolve(match[1]!)
        }
      })
      child.on("exit", (code) => reject(new Error(`serve exited with ${code}:\n${output}`)))
    })
  })

  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve))
      // Ctrl-C: the worker hands back its leases and the server closes; a stuck shutdown is ended after 20 s.
      child.kill("SIGINT")
      const forced = setTimeout(() => child.kill("SIGKILL"), 20_000)
      await exited
      clearTimeout(forced)
    }
    rmSync(dir, { recursive: true, force: true })
  })

  it("prints the URL on PGlite and serves the dashboard", async () => {
    expect(output).toContain(`embedded PGlite in ${join(dir, "data")}`)
    const page = await fetch(`${url}/`)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain("<title>slowcall</title>")
    expect((await fetch(`${url}/healthz`)).status).toBe(200)
  })

  it("a demo.echo submitted over HTTP reaches succeeded with its echo and its charge", async () => {
    const response = await fetch(`${url}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ type: "demo.echo", input: { text: "hello", latencyMs: 50, costCents: 2 } })
    })
    expect(response.status).toBe(202)
    const job = (await response.json()) as any
    const done = await waitForState(url, job.id, ["succeeded", "failed", "abandoned"])
    expect(done).toMatchObject({ state: "succeeded", result: { echo: "hello" }, costCents: 2, progress: 1 })
  })

  it("a failing demo.echo becomes a dead letter, and its replay gets a fresh attempt budget and succeeds", async () => {
    const response = await fetch(`${url}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        type: "demo.echo",
        maxAttempts: 1,
        input: { text: "second time lucky", latencyMs: 10, failWith: "auth", failTimes: 1 }
      })
    })
    const job = (await response.json()) as any
    const failed = await waitForState(url, job.id, ["failed", "succeeded", "abandoned"])
    // A provider does not bill a request it refused for its credentials: the failed call settled at 0.
    expect(failed).toMatchObject({ state: "failed", errorClass: "auth", attempts: 1, costCents: 0 })
    const replay = await fetch(`${url}/v1/dead-letters/replay`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ids: [job.id] })
    })
    // The failed call was charged nothing, so re-running it once is estimated at nothing.
    expect(await replay.json()).toEqual({ matched: 1, replayed: 1, skipped: 0, estimatedCents: 0, capped: false })
    const done = await waitForState(url, job.id, ["succeeded", "abandoned"])
    expect(done).toMatchObject({ state: "succeeded", attempts: 2, costCents: 1, result: { echo: "second time lucky" } })
  })

  it("a budget that cannot cover the next call abandons the job before calling the model", async () => {
    const response = await fetch(`${url}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ type: "demo.echo", budgetCents: 1, input: { text: "too dear", costCents: 5 } })
    })
    const job = (await response.json()) as any
    const done = await waitForState(url, job.id, ["succeeded", "failed", "abandoned"])
    expect(done).toMatchObject({ state: "abandoned", abandonReason: "budget", costCents: 0 })
  })
})
