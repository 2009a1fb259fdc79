/**
 * One server per PGlite data directory, with two real `slowcall serve --demo` processes: the second one on the same
 * directory exits with status 1 and one line naming the directory and the first one's pid, and writes nothing; the
 * first one's lock goes away when it is stopped; a lock left by a process killed outright is taken over.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { serve, slowcall, stopAll } from "./processes.js"

const dir = mkdtempSync(join(tmpdir(), "slowcall-serve-lock-"))
const data = join(dir, "data")
const lock = join(data, "slowcall.lock")

afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
})

describe("serve on a PGlite data directory", () => {
  it("a second server on the same directory exits with 1 and one line naming the directory and the holder's pid", async () => {
    const first = await serve(["--demo", "--port", "0", "--data-dir", data])
    const holder = JSON.parse(readFileSync(lock, "utf8"))
    expect(holder.pid).toBe(first.child.pid)

    const second = await slowcall(["serve", "--demo", "--port", "0", "--data-dir", data])
    expect(second.code).toBe(1)
    expect(second.stdout).toBe("")
    const lines = second.stderr.trim().split("\n")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toBe(
      `slowcall: data directory ${data} is in use by process ${first.child.pid} (see ${lock}): ` +
        "stop that process first, or give this one another --data-dir"
    )
    // The first server is untouched and still holds the directory.
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200)
    expect(JSON.parse(readFileSync(lock, "utf8")).nonce).toBe(holder.nonce)

    expect(await first.stop("SIGTERM")).toBe(0)
    expect(existsSync(lock)).toBe(false)
  })

  it("a lock left by a server killed outright is stale: the next server takes the directory over", async () => {
    const killed = await serve(["--demo", "--port", "0", "--data-dir", data])
    await killed.stop("SIGKILL")
    expect(JSON.parse(readFileSync(lock, "utf8")).pid).toBe(killed.child.pid)

    const next = await serve(["--demo", "--port", "0", "--data-dir", data])
    expect(JSON.parse(readFileSync(lock, "utf8")).pid).toBe(next.child.pid)
    expect((await fetch(`${next.url}/healthz`)).status).toBe(200)
    expect(await next.stop("SIGINT")).toBe(0)
    expect(existsSync(lock)).toBe(false)
  })
})
