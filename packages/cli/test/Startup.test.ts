/**
 * What a server that cannot start says (`internal/startup.ts`): one line naming what failed and what to do, for a
 * busy port (with the process that holds it), a refused bind, a locked data directory, an unreachable Postgres or
 * Redis (their URLs without the password), and a PGlite directory that cannot be opened.
 */
import { createServer } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { StoreError } from "@slowcall/core/Errors"
import * as Startup from "../src/internal/startup.js"

const target: Startup.Target = { port: 8787, host: "127.0.0.1", dataDir: "./.slowcall" }

/** An error shaped like Node's for a failed `listen`, wrapped as the platform's server error wraps it. */
const listenError = (code: string) => {
  const cause = Object.assign(new Error(`listen ${code}: 127.0.0.1:8787`), { code, syscall: "listen", port: 8787 })
  return Object.assign(new Error(""), { _tag: "ServeError", cause })
}

describe("startup failures", () => {
  it("a busy port names the process listening on it, and how to pick another", () => {
    const error = Startup.describe(listenError("EADDRINUSE"), target, () => ({ pid: 4242, command: "node other.js" }))
    expect(error.message).toBe(
      "cannot listen on 127.0.0.1:8787: the port is in use by process 4242 (node other.js); " +
        "stop that process, or pick another port with --port (0 picks a free one)"
    )
    expect(Startup.describe(listenError("EADDRINUSE"), target, () => undefined).message).toBe(
      "cannot listen on 127.0.0.1:8787: the port is in use; stop that process, or pick another port with --port (0 picks a free one)"
    )
    expect(Startup.describe(listenError("EACCES"), target).message).toMatch(/permission denied/)
    expect(Startup.describe(listenError("EADDRNOTAVAIL"), target).message).toMatch(/check --host$/)
  })

  it("finds the pid listening on a port of this machine (Linux), and nothing on a free one", async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as { port: number }).port
    try {
      const holder = Startup.portHolder(port)
      expect(holder?.pid).toBe(process.pid)
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
    expect(Startup.portHolder(port)).toBeUndefined()
  })

  it("a locked data directory says whose it is", () => {
    const locked = Object.assign(new Error("data directory /d is in use by process 7 (see /d/slowcall.lock)"), {
      _tag: "DataDirLocked"
    })
    expect(Startup.describe(locked, target).message).toBe(
      "data directory /d is in use by process 7 (see /d/slowcall.lock): stop that process first, or give this one another --data-dir"
    )
  })

  it("an unreachable Postgres or Redis is named by its URL without the password", () => {
    const refused = new StoreError({ reason: "Connection", operation: "migrate", detail: "connect ECONNREFUSED" })
    const postgres = Startup.describe(refused, { ...target, databaseUrl: "postgres://alice:pw0rd@db:5432/jobs" })
    expect(postgres.message).toBe(
      "cannot reach Postgres at postgres://alice:***@db:5432/jobs: connect ECONNREFUSED; " +
        "is it running, and is --database-url (DATABASE_URL) right?"
    )
    expect(postgres.message).not.toContain("pw0rd")
    const redis = Startup.describe(refused, { ...target, redisUrl: "redis://:pw0rd@cache:6379" })
    expect(redis.message).toBe(
      "cannot reach Redis at redis://:***@cache:6379: connect ECONNREFUSED; is it running, and is --redis-url right?"
    )
    const denied = new StoreError({ reason: "Unknown", operation: "migrate", detail: "permission denied for schema x" })
    expect(Startup.describe(denied, { ...target, databaseUrl: "postgres://db/jobs" }).message).toBe(
      "Postgres at postgres://db/jobs failed at start: permission denied for schema x"
    )
    expect(Startup.describe(denied, target).message).toBe(
      "cannot open the PGlite data directory ./.slowcall: permission denied for schema x"
    )
    const readOnly = Object.assign(new Error("EACCES: permission denied, mkdir '/srv/data'"), {
      code: "EACCES",
      syscall: "mkdir"
    })
    expect(Startup.describe(readOnly, { ...target, dataDir: "/srv/data" }).message).toBe(
      "cannot open the PGlite data directory /srv/data: EACCES: permission denied, mkdir '/srv/data'"
    )
  })

  it("anything else is said by its message, redacted, never as an empty line", () => {
    const error = Startup.describe(new Error("boom with Authorization: Bearer abcdefgh1234"), target)
    expect(error.message).toBe("could not start: boom with Authorization: [redacted]")
    expect(Startup.describe(Object.assign(new Error(""), { _tag: "ServeError" }), target).message).toBe(
      "could not start: ServeError"
    )
  })
})
