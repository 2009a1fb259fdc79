/**
 * `slowcall serve --demo --redis-url`: the dashboard, the API, the demo worker and the sweeper on the machine's Redis
 * (db 2, keys under a prefix of this test's own, deleted afterwards). A demo.echo submitted over HTTP reaches
 * `succeeded` with its charge, and the process says at start which Redis it serves and what that server keeps.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { dropPrefix } from "../../adapter-redis/test/support.js"

const bin = new URL("../bin/slowcall.mjs", import.meta.url).pathname
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379/2"
const prefix = `sctest:serve:${randomBytes(4).toString("hex")}`

describe("slowcall serve --demo --redis-url", () => {
  let child: ChildProcess
  let url: string
  let output = ""

  beforeAll(async () => {
    child = spawn(
      process.execPath,
      [bin, "serve", "--demo", "--port", "0", "--redis-url", REDIS_URL, "--schema", prefix],
      { env: { ...process.env, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] }
    )
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
      child.kill("SIGINT")
      const forced = setTimeout(() => child.kill("SIGKILL"), 20_000)
      await exited
      clearTimeout(forced)
    }
    await dropPrefix(REDIS_URL, prefix)
  })

  it("names the Redis it serves and warns that this one keeps nothing on disk", () => {
    expect(output).toContain("on Redis at redis://127.0.0.1:6379/2")
    expect(output).toContain("keeps nothing on disk")
  })

  it("serves the dashboard, and a demo.echo submitted over HTTP reaches succeeded with its echo and charge", async () => {
    expect((await fetch(`${url}/`)).status).toBe(200)
    const response = await fetch(`${url}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ type: "demo.echo", input: { text: "on redis", latencyMs: 20, costCents: 3 } })
    })
    expect(response.status).toBe(202)
    const job = (await response.json()) as { id: string }
    let last: any
    for (let i = 0; i < 100; i++) {
      last = await (await fetch(`${url}/v1/jobs/${job.id}`)).json()
      if (last.state === "succeeded") break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(last).toMatchObject({ state: "succeeded", result: { echo: "on redis" }, costCents: 3 })
  })
})
