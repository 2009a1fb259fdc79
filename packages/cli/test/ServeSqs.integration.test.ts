/**
 * `slowcall serve --demo --sqs-queue-url`: the Store on Postgres (a fresh schema, dropped afterwards) or on Redis (a
 * key prefix of this test's own, deleted afterwards), the Transport on SQS (fauxqs, started by this test on
 * 127.0.0.1, with fake static credentials). A demo.echo submitted over HTTP reaches `succeeded` through SQS, and the
 * process says at start where its messages go.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type FauxqsServer, startFauxqs } from "fauxqs"
import pg from "pg"
import { dropPrefix } from "../../adapter-redis/test/support.js"

const bin = new URL("../bin/slowcall.mjs", import.meta.url).pathname
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379/2"
const suffix = randomBytes(4).toString("hex")
const schema = `sqs_serve_${suffix}`
const prefix = `sctest:sqsserve:${suffix}`

let sqs: FauxqsServer

beforeAll(async () => {
  sqs = await startFauxqs({ port: 0, logger: false, host: "127.0.0.1" })
})

afterAll(async () => {
  await sqs?.stop()
  const client = new pg.Client({ connectionString: DATABASE_URL })
  client.on("error", () => {})
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  await client.end()
  await dropPrefix(REDIS_URL, prefix)
})

/** Starts `serve` with `store` arguments and the SQS queue `queue`; resolves with its URL once it serves. */
const serve = async (store: ReadonlyArray<string>, queue: string) => {
  const queueUrl = sqs.createQueue(queue).queueUrl
  let output = ""
  const child: ChildProcess = spawn(
    process.execPath,
    [
      bin,
      "serve",
      "--demo",
      "--port",
      "0",
      ...store,
      "--sqs-queue-url",
      queueUrl,
      "--sqs-endpoint",
      `http://127.0.0.1:${sqs.port}`
    ],
    {
      env: {
        ...process.env,
        NO_COLOR: "1",
        AWS_REGION: "us-east-1",
        AWS_ACCESS_KEY_ID: "test",
        AWS_SECRET_ACCESS_KEY: "test",
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true"
      },
      stdio: ["ignore", "pipe", "pipe"]
    }
  )
  child.stderr!.on("data", (chunk) => {
    output += chunk
  })
  const url = await new Promise<string>((resolve, reject) => {
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
  const stop = async () => {
    if (child.exitCode !== null) return
    const exited = new Promise((resolve) => child.once("exit", resolve))
    child.kill("SIGINT")
    const forced = setTimeout(() => child.kill("SIGKILL"), 20_000)
    await exited
    clearTimeout(forced)
  }
  return { url, queue, queueUrl, output: () => output, stop }
}

const echoThrough = async (url: string, text: string) => {
  const response = await fetch(`${url}/v1/jobs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ type: "demo.echo", input: { text, latencyMs: 20, costCents: 2 } })
  })
  expect(response.status).toBe(202)
  const job = (await response.json()) as { id: string }
  let last: any
  for (let i = 0; i < 150; i++) {
    last = await (await fetch(`${url}/v1/jobs/${job.id}`)).json()
    if (last.state === "succeeded") break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return last
}

describe("slowcall serve --demo --sqs-queue-url", () => {
  it("with the Postgres Store: a demo.echo goes through SQS to succeeded", async () => {
    const server = await serve(["--database-url", DATABASE_URL, "--schema", schema], `serve-pg-${suffix}`)
    try {
      expect(server.output()).toContain(`messages on SQS ${server.queueUrl}`)
      const job = await echoThrough(server.url, "via sqs")
      expect(job).toMatchObject({ state: "succeeded", result: { echo: "via sqs" }, costCents: 2 })
      // Every message (the Client's and the outbox relay's) is acked once the outcome is stored: none is left.
      let left = Number.POSITIVE_INFINITY
      for (let i = 0; i < 100 && left > 0; i++) {
        const messages = sqs.inspectQueue(server.queue)!.messages
        left = messages.ready.length + messages.delayed.length + messages.inflight.length
        if (left > 0) await new Promise((resolve) => setTimeout(resolve, 100))
      }
      expect(left).toBe(0)
    } finally {
      await server.stop()
    }
  }, 120_000)

  it("with the Redis Store: a demo.echo goes through SQS to succeeded", async () => {
    const server = await serve(["--redis-url", REDIS_URL, "--schema", prefix], `serve-redis-${suffix}`)
    try {
      expect(server.output()).toContain("on Redis at redis://127.0.0.1:6379/2, messages on SQS")
      const job = await echoThrough(server.url, "redis via sqs")
      expect(job).toMatchObject({ state: "succeeded", result: { echo: "redis via sqs" }, costCents: 2 })
    } finally {
      await server.stop()
    }
  }, 120_000)
})
