/**
 * The log of a `slowcall` process, run as a user runs it: one logger, every line redacted and written once to stderr,
 * an error shown by its message; `serve` says what happens to its jobs (a line per failed attempt and dead letter,
 * one per sweep that recovered expired leases), logs requests only at `--log-level debug`, and writes JSON lines with
 * `--log-format json`.
 */
import { execFile } from "node:child_process"
import { afterAll, describe, expect, it } from "@effect/vitest"
import type { JobId } from "@slowcall/core/Job"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import * as PgStore from "../../adapter-postgres/src/PgStore.js"
import { DATABASE_URL, dropSchema, only, submitOptions, uniqueSchema } from "../../adapter-postgres/test/support.js"
import { repoRoot, serve, stopAll, waitFor } from "./processes.js"

afterAll(stopAll)

const fixture = new URL("./fixtures/logs-a-secret.ts", import.meta.url).pathname
const runFixture = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", fixture, ...args],
      { cwd: repoRoot, env: { ...process.env, NO_COLOR: "1" }, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? 1 : 0, stdout, stderr })
    )
  })

const key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
const bearer = "eyzzAbCdEf0123456789token"

const submit = async (url: string, body: unknown) =>
  (await (
    await fetch(`${url}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    })
  ).json()) as { id: string }

describe("one logger, always redacting", () => {
  it("each line is written once, without the secrets, and an error by its message and its cause's", async () => {
    const { code, stderr, stdout } = await runFixture([])
    expect(code).toBe(0)
    expect(stdout).toBe("")
    const lines = stderr.trim().split("\n")
    expect(lines).toHaveLength(3)
    expect(new Set(lines).size).toBe(3)
    expect(stderr).not.toContain(key.slice("sk-ant-".length))
    expect(stderr).not.toContain(bearer)
    expect(stderr).not.toContain("{}")
    expect(lines[0]).toMatch(
      /^\S+ WARN {2}calling the model failed: upstream refused the request made with sk-ant-\[redacted\]; cause: the proxy sent Authorization: \[redacted\]$/
    )
    expect(lines[1]).toMatch(/^\S+ ERROR upstream refused the request made with sk-ant-\[redacted\]; cause: /)
    expect(lines[2]).toMatch(/^\S+ INFO {2}retrying (apiKey=\[redacted\] attempt=2|attempt=2 apiKey=\[redacted\])$/)
  })

  it("with the JSON format, each line is one JSON object, redacted the same way", async () => {
    const { code, stderr } = await runFixture(["--json"])
    expect(code).toBe(0)
    const entries = stderr
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line))
    expect(entries).toHaveLength(3)
    expect(stderr).not.toContain(key.slice("sk-ant-".length))
    expect(stderr).not.toContain(bearer)
    expect(entries[0]).toMatchObject({
      level: "warn",
      message:
        "calling the model failed: upstream refused the request made with sk-ant-[redacted]; cause: the proxy sent Authorization: [redacted]"
    })
    expect(entries[1]).toMatchObject({ level: "error", error: expect.stringContaining("upstream refused the request") })
    expect(entries[2]).toEqual({
      time: expect.any(String),
      level: "info",
      message: "retrying",
      apiKey: "[redacted]",
      attempt: 2
    })
  })
})

describe("serve's log", () => {
  it("a line per failed attempt and dead letter, written once; no request lines at the default level", async () => {
    const server = await serve(["--demo", "--memory", "--port", "0"])
    const job = await submit(server.url, {
      type: "demo.echo",
      maxAttempts: 2,
      input: { text: "x", latencyMs: 1, failWith: "server_error" }
    })
    await waitFor(server, ({ stderr }) => stderr.includes(`job ${job.id} (demo.echo) failed`), "the dead letter line")
    const lines = server
      .stderr()
      .split("\n")
      .filter((line) => line.includes(job.id))
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(
          `^\\S+ WARN {2}job ${job.id} \\(demo\\.echo\\) attempt 1 of 2 failed: server_error; retry in [\\d.]+ m?s: .*simulated server_error.*`
        )
      ),
      expect.stringMatching(
        new RegExp(
          `^\\S+ ERROR job ${job.id} \\(demo\\.echo\\) failed: server_error on attempt 2 of 2; kept as a dead letter: .*`
        )
      )
    ])
    expect(server.stderr()).not.toMatch(/ (GET|POST) \//)
    expect(server.stdout()).toContain("slowcall is serving")
    expect(await server.stop()).toBe(0)
  })

  it("--log-level debug adds a line per request", async () => {
    const server = await serve(["--demo", "--memory", "--port", "0", "--log-level", "debug"])
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    await waitFor(server, ({ stderr }) => /DEBUG GET \/healthz 200 \d+ ms/.test(stderr), "the request line")
    await server.stop()
  })

  it("--log-level error keeps the dead letter's line and drops the retried attempt's", async () => {
    const server = await serve(["--demo", "--memory", "--port", "0", "--log-level", "error"])
    const job = await submit(server.url, {
      type: "demo.echo",
      maxAttempts: 2,
      input: { text: "x", latencyMs: 1, failWith: "server_error" }
    })
    await waitFor(server, ({ stderr }) => stderr.includes(`job ${job.id} (demo.echo) failed`), "the dead letter line")
    const lines = server
      .stderr()
      .split("\n")
      .filter((line) => line.includes(job.id))
    expect(lines).toEqual([
      expect.stringMatching(/ ERROR job \S+ \(demo\.echo\) failed: server_error on attempt 2 of 2/)
    ])
    await server.stop()
  })

  it("--log-format json: the start and every line are JSON objects on stderr, nothing on stdout", async () => {
    const server = await serve(["--demo", "--memory", "--port", "0", "--log-format", "json"])
    const job = await submit(server.url, {
      type: "demo.echo",
      maxAttempts: 1,
      input: { text: "x", latencyMs: 1, failWith: "auth" }
    })
    await waitFor(server, ({ stderr }) => stderr.includes(`"jobId":"${job.id}"`), "the dead letter line")
    expect(await server.stop()).toBe(0)
    expect(server.stdout()).toBe("")
    const entries = server
      .stderr()
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line))
    expect(entries[0]).toMatchObject({
      level: "info",
      url: server.url,
      message: `slowcall is serving ${server.url}/ on in-memory store (nothing is kept)`
    })
    expect(entries.filter((entry) => entry.jobId === job.id)).toEqual([
      expect.objectContaining({ level: "error", type: "demo.echo", errorClass: "auth", attempt: 1 })
    ])
  })

  it("a line when the sweeper recovers the expired lease of a worker that died", async () => {
    const schema = uniqueSchema("clilog")
    const queue = `q_${schema}`
    const server = await serve([
      "--demo",
      "--port",
      "0",
      "--database-url",
      DATABASE_URL,
      "--schema",
      schema,
      "--queue",
      queue
    ])
    const scope = Effect.runSync(Scope.make())
    try {
      // A worker elsewhere claims a job with a short lease and dies: nothing renews it.
      const context = await Effect.runPromise(
        Layer.buildWithScope(PgStore.layer({ connectionString: DATABASE_URL, schema }), scope)
      )
      const store = Context.get(context, PgStore.PgStore)
      const id = "01900000-0000-7000-8000-00000000d1ed" as JobId
      await Effect.runPromise(store.submit({ items: [submitOptions(queue, id, { type: "elsewhere.work" })] }))
      const claimed = only(
        await Effect.runPromise(store.claim({ items: [{ jobId: id, owner: "worker-that-died", leaseMs: 200 }] }))
      )
      expect(claimed._tag).toBe("Claimed")
      await waitFor(
        server,
        ({ stderr }) =>
          /WARN {2}recovered 1 expired lease \(their workers stopped renewing\): 1 job queued again/.test(stderr),
        "the recovery line"
      )
    } finally {
      await server.stop()
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await dropSchema(schema)
    }
  })
})
