/**
 * `slowcall serve` that cannot start, run as a user runs it: each failure is one line on stderr that says what
 * failed and what to do, and the exit status is 1. A busy port names the process holding it (this test process, on
 * Linux); an unreachable Postgres or Redis is named by its URL without the password.
 */
import { createServer, type Server } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { slowcall } from "./processes.js"

describe("serve that cannot start", () => {
  let busy: Server
  let port: number
  beforeAll(async () => {
    busy = createServer()
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve))
    port = (busy.address() as { port: number }).port
  })
  afterAll(async () => {
    await new Promise((resolve) => busy.close(resolve))
  })

  it("a busy port: one line naming the port and the pid listening on it", async () => {
    const result = await slowcall(["serve", "--memory", "--port", String(port)])
    expect(result.code).toBe(1)
    expect(result.stdout).toBe("")
    const lines = result.stderr.trim().split("\n")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      new RegExp(
        `^slowcall: cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use by process ${process.pid} \\(.+\\); ` +
          "stop that process, or pick another port with --port \\(0 picks a free one\\)$"
      )
    )
  })

  it("an unreachable Postgres: its URL without the password", async () => {
    const result = await slowcall(["serve", "--port", "0", "--database-url", "postgres://alice:s3cret@127.0.0.1:1/db"])
    expect(result.code).toBe(1)
    expect(result.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(
        /^slowcall: cannot reach Postgres at postgres:\/\/alice:\*\*\*@127\.0\.0\.1:1\/db: .*ECONNREFUSED.*; is it running, and is --database-url \(DATABASE_URL\) right\?$/
      )
    ])
    expect(result.stderr).not.toContain("s3cret")
  })

  it("an unreachable Redis: its URL without the password", async () => {
    const result = await slowcall(["serve", "--port", "0", "--redis-url", "redis://:s3cret@127.0.0.1:1"])
    expect(result.code).toBe(1)
    expect(result.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(
        /^slowcall: cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1: .+; is it running, and is --redis-url right\?$/
      )
    ])
    expect(result.stderr).not.toContain("s3cret")
  })
})
